"""The worked example of docs/guides/databases.md, run as its reader runs it: each
```sh block of the section "A worked example", in page order, by bash, against a real
PostgreSQL (tests/postgres.py) and a real ``dfsql serve``; the ```text block right after a
step is what the step prints (psql's table), compared with its padding ignored.

What the test changes in the page's steps, and nothing else:

* ``localhost:5432`` (the database in the server's ``--connection`` and in psql's URL) is
  the test's PostgreSQL, ``127.0.0.1:<its port>``; its database ``sales`` belongs to the
  role ``ada``, who logs in on TCP by password (scram-sha-256), the one the page writes to
  ``warehouse.pw``; psql gets it as ``PGPASSWORD`` (the page's "as for any libpq client"),
  the server only from its ``--connection-password-file``;
* ``--port 10000`` is ``--port 0`` (the server binds a free port and logs it), and
  ``localhost:10000`` (beeline's URL) is that port;
* the steps run in a directory of the test's own, so the page's relative ``incoming/``,
  ``state``, ``serve.log`` and the files are there; ``dfsql`` and ``psql`` are the venv's
  and the test PostgreSQL's programs (first on PATH).

Between steps the test waits, with a generous bound and no fixed sleep, for what a reader
waits for by looking: the server listening (its log's ``dfsql serving`` line), a killed
server's processes gone, and, before each psql step while the server runs, the query
caught up: ``SHOW STREAMING QUERIES``'s ``frontier`` at the latest ``arrival_time`` of
the files in ``incoming/`` (each file's heartbeat), and after an ``ALTER`` the database's
``dfsql_progress`` row past the batch it held before.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tests.postgres import Postgres
from tests.server.restarts import _group_alive

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGE = DOCS / "guides" / "databases.md"
SECTION = "## A worked example"
#: the role of the page's connection, its database, and the password the page writes
ROLE, DATABASE = "ada", "sales"
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
#: a loaded machine's JVM start, a micro-batch, a restart with its kept query
BOUND = 300.0


@dataclass(frozen=True)
class Step:
    """One ```sh block of the worked example and the ```text block right after it."""

    line: int
    script: str
    expected: str | None


def steps(page: Path = PAGE, section: str = SECTION) -> list[Step]:
    text = page.read_text(encoding="utf-8")
    start = text.index(section + "\n")
    end = text.find("\n## ", start + len(section))
    end = len(text) if end < 0 else end
    fences = [m for m in _FENCE.finditer(text) if start <= m.start() < end]
    found = []
    for i, m in enumerate(fences):
        if m.group(1).split()[:1] != ["sh"]:
            continue
        nxt = fences[i + 1] if i + 1 < len(fences) else None
        expected = None
        if nxt is not None and not text[m.end():nxt.start()].strip() and \
                nxt.group(1).split()[:1] == ["text"]:
            expected = nxt.group(2)
        found.append(Step(text.count("\n", 0, m.start()) + 1, m.group(2), expected))
    return found


def password(found: list[Step]) -> str:
    """The password the page's first step writes to ``warehouse.pw``."""
    [pw] = {m.group(1) for s in found
            for m in re.finditer(r"printf '%s\\n' '([^']+)' > warehouse\.pw", s.script)}
    return pw


def psql_normal(text: str) -> list[list[str] | str]:
    """psql's aligned output with its padding ignored: each table line as its cells, the
    rule under the header left out, other lines as they are (``(2 rows)``)."""
    out: list[list[str] | str] = []
    for line in text.strip().splitlines():
        if re.fullmatch(r"-+(\+-+)*", line.strip()):
            continue
        out.append([c.strip() for c in line.split("|")] if "|" in line else line.strip())
    return out


@contextlib.contextmanager
def warehouse() -> Iterator[Postgres]:
    """The test's PostgreSQL with the page's database: ``sales``, owned by ``ada``, who
    must give the page's password on TCP (the other users keep tests/postgres.py's trust)."""
    pw = password(steps())
    server = Postgres()
    hba = server.data / "pg_hba.conf"
    hba.write_text(f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    server.start()
    try:
        with server.connect() as c:
            c.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{pw}'")
            c.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        yield server
    finally:
        server.stop()
        server.remove()


def superuser(pg: Postgres):
    """A superuser's connection to the page's database (the test's own look, not a step)."""
    import psycopg

    return psycopg.connect(host="127.0.0.1", port=pg.port, user="dfsql", dbname=DATABASE,
                           autocommit=True)


def drop_tables(pg: Postgres, *tables: str) -> None:
    with superuser(pg) as c:
        for t in (*tables, "dfsql_progress"):
            c.execute(f"DROP TABLE IF EXISTS public.{t}")


def progress(pg: Postgres, target: str) -> int:
    with superuser(pg) as c:
        if c.execute("SELECT to_regclass('public.dfsql_progress')").fetchone() == (None,):
            return -1
        row = c.execute("SELECT batch_id FROM public.dfsql_progress WHERE target = %s",
                        (target,)).fetchone()
    return row[0] if row else -1


def _until(what, why: str, seconds: float = BOUND):
    deadline = time.monotonic() + seconds
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < deadline, why
        time.sleep(0.25)


class Walkthrough:
    """The worked example's shell: its directory, its environment, its server."""

    def __init__(self, tmp: Path, pg: Postgres) -> None:
        self.tmp, self.pg = tmp, pg
        self.pw = password(steps())
        self.port: int | None = None
        self.group: int | None = None  # the server's process group (the step's bash)
        self.lives = 0
        self.altered_from: int | None = None  # the progress id an ALTER found
        #: SHOW STREAMING QUERIES' row of the page's query, as last seen
        self.shown: dict = {}
        #: (page line, seconds) of each step, its waits included
        self.timings: list[tuple[int, float]] = []
        path = os.pathsep.join([str(Path(sys.executable).parent), str(pg.bin),
                                os.environ.get("PATH", "")])
        self.env = dict(os.environ, PATH=path, PYSPARK_PYTHON=sys.executable,
                        PYSPARK_DRIVER_PYTHON=sys.executable,
                        DFSQL_WAREHOUSE=str(tmp / "spark-warehouse"),
                        DFSQL_SPARK_LOG=str(tmp / "spark.log"))
        self.env.pop("PGPASSWORD", None)

    def local(self, script: str) -> str:
        script = script.replace("localhost:5432", f"127.0.0.1:{self.pg.port}")
        script = script.replace("--port 10000", "--port 0")
        if self.port is not None:
            script = script.replace("localhost:10000", f"127.0.0.1:{self.port}")
        return script

    def run(self, step: Step) -> str:
        """Run one step as the page says, and wait as a reader would (see the module)."""
        began = time.monotonic()
        try:
            return self._run(step)
        finally:
            self.timings.append((step.line, round(time.monotonic() - began, 1)))

    def _run(self, step: Step) -> str:
        script = self.local(step.script)
        if "psql" in script:
            self._caught_up()
        if "ALTER STREAMING QUERY" in script:
            self.altered_from = progress(self.pg, "user_sessions")
        env = dict(self.env, PGPASSWORD=self.pw) if "psql" in script else self.env
        proc = subprocess.Popen(["bash", "-c", script], cwd=self.tmp, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        out, err = proc.communicate(timeout=BOUND)
        assert proc.returncode == 0, f"line {step.line}: {script}\n{out}\n{err}"
        assert "Error" not in err, f"line {step.line}: {err}"  # beeline's, on a refusal
        if "dfsql serve" in script:
            self.group = proc.pid
            self._listening()
        if "kill -9" in script:
            self._dead()
        return out

    def _listening(self) -> None:
        self.lives += 1
        log = self.tmp / "serve.log"
        pattern = r"dfsql serving HiveServer2 on [^:\s]+:(\d+)"
        ports = _until(lambda: log.exists() and len(
            found := re.findall(pattern, log.read_text())) >= self.lives and found,
            f"no {self.lives}. 'dfsql serving' in serve.log")
        self.port = int(ports[-1])

    def _dead(self) -> None:
        """The page's ``kill -9`` of the server's process: its JVM and Python workers end
        with it (the JVM on its standard input's end); back once none of them runs."""
        assert self.group is not None
        _until(lambda: not _group_alive(self.group), "the killed server's processes run on",
               60)
        self.port = None

    def _caught_up(self) -> None:
        if self.port is None:
            return
        want = max(datetime.fromisoformat(json.loads(line)["arrival_time"])
                   for f in (self.tmp / "incoming").glob("*.json")
                   for line in f.read_text().splitlines() if line.strip())
        frontier = want.strftime("%Y-%m-%d %H:%M:%S")
        _until(lambda: self.show("frontier") == frontier,
               f"the query's frontier never reached {frontier}: {self.show('frontier')}")
        if self.altered_from is not None:
            before = self.altered_from
            _until(lambda: progress(self.pg, "user_sessions") > before,
                   "the ALTER's restatement was never committed")
            self.altered_from = None

    def show(self, column: str) -> str | None:
        """``SHOW STREAMING QUERIES``'s ``column`` of the page's query (PyHive)."""
        from pyhive import hive

        with contextlib.closing(hive.connect("127.0.0.1", self.port, username=ROLE)) as c:
            cur = c.cursor()
            cur.execute("SHOW STREAMING QUERIES")
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        self.shown = next((r for r in rows if r["name"] == "user_sessions"), {})
        return self.shown.get(column)

    def stop(self) -> None:
        """SIGKILL to whatever of the server still runs (the test's end, or a failure)."""
        if self.group is not None and _group_alive(self.group):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.group, signal.SIGKILL)
            _until(lambda: not _group_alive(self.group), "the server's processes run on", 60)

    def password_in(self) -> list[str]:
        """Every file the server wrote (state, checkpoints, logs) that holds the password."""
        return [str(p) for p in self.tmp.rglob("*") if p.is_file()
                and p.name != "warehouse.pw" and self.pw.encode() in p.read_bytes()]

