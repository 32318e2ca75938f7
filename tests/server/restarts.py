"""A `dfsql serve` process with a --state-dir, and the rows its continuous queries read
and write: what the restart tests share (tests/server/test_continuous_restart.py,
test_continuous_start.py, test_postgres_restart.py)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


T0 = datetime(2024, 1, 1)


#: Figure-free by design: every row is one second after the last, keys alternate, value
#: = the event's minute + 1, arrival = event + 5 s; so each (key, minute) window holds
#: 30 rows of value m + 1
QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} GROUP BY key "
         "WINDOW FIXED(1 MINUTE) ON event_time WATERMARK DELAY 10 SECONDS "
         "PROCESSING TIME arrival_time TRIGGER AT WATERMARK EARLY EVERY 10 ROWS "
         "EMIT ACCUMULATING")


COLUMNS = "key, total, n, window_start, window_end, pane_index, pane_timing, is_last, emit_time"


#: the sentinel's arrival: the stream's frontier
FRONTIER = T0 + timedelta(seconds=365, hours=1)


def _write(path: Path, rows: list[tuple]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    utc = pa.timestamp("us", tz="UTC")
    schema = pa.schema([("key", pa.string()), ("value", pa.int64()),
                        ("event_time", utc), ("arrival_time", utc)])
    cols = list(zip(*rows, strict=True))
    tz = [[None if t is None else t.replace(tzinfo=timezone.utc) for t in c]
          for c in cols[2:]]
    table = pa.table([list(cols[0]), list(cols[1]), *tz], schema=schema)
    tmp = path.with_name("." + path.name)  # the file source must never see half a file
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _events(lo: int, hi: int) -> list[tuple]:
    """The events at seconds lo … hi−1 after T0."""
    return [("ab"[i % 2], i // 60 + 1, T0 + timedelta(seconds=i),
             T0 + timedelta(seconds=i + 5)) for i in range(lo, hi)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, seconds: float) -> None:
    """Until the log at ``path`` says ``text`` (the process still alive), or fail."""
    deadline = time.time() + seconds
    while text not in path.read_text():
        assert proc.poll() is None, path.read_text()
        assert time.time() < deadline, path.read_text()
        time.sleep(0.25)


class Served:
    """``dfsql serve`` as a command in a process group of its own (its JVM and Python
    workers in it), so that one SIGKILL ends all of it, as a machine's OOM killer or a
    pod's eviction would."""

    def __init__(self, tmp: Path, life: int, *args: str, env: dict | None = None) -> None:
        self.log = tmp / f"serve-{life}.log"
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable,
                   DFSQL_WAREHOUSE=str(tmp / "warehouse"),
                   DFSQL_SPARK_LOG=str(tmp / f"spark-{life}.log"), **(env or {}))
        self.began = time.monotonic()
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dfsql.cli", "serve", "--port", "0",
                 "--auth", "NOSASL", "--data-root", str(tmp), *args],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                start_new_session=True)
        deadline = time.monotonic() + 300  # a JVM and the kept queries, on a loaded machine
        while "dfsql serving" not in self.text():
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < deadline, self.text()
            time.sleep(0.1)
        #: seconds from the command to the endpoint listening (its kept queries started)
        self.up = time.monotonic() - self.began
        # the port the server bound (0: its own choice, so no other process of the run
        # can take it between a look for a free one and the bind)
        self.port = int(re.search(r"dfsql serving HiveServer2 on [^:\s]+:(\d+)",
                                  self.text()).group(1))
        from pyhive import hive

        self.cursor = hive.connect(host="127.0.0.1", port=self.port, auth="NOSASL").cursor()

    def text(self) -> str:
        return self.log.read_text()

    def rows(self, statement: str) -> list[tuple]:
        self.cursor.execute(statement)
        return self.cursor.fetchall()

    def kill(self) -> None:
        """SIGKILL to every process of the group; back once none of them runs."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        deadline = time.monotonic() + 30
        while _group_alive(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _group_alive(self.proc.pid)


def _group_alive(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (zombies are dead)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append(int(entry.name))
    return alive


def _wait(what, want, seconds: float = 300, pause: float = 0.5):
    """``what()`` once it equals ``want``, else its last value after ``seconds``."""
    deadline = time.monotonic() + seconds
    got = what()
    while got != want and time.monotonic() < deadline:
        time.sleep(pause)  # each look is a Spark job, on the cores the stream needs
        got = what()
    return got


def _table(served: Served, name: str = "live_windows") -> set[tuple]:
    """The INTO TABLE view of the continuous query ``name``."""
    return set(served.rows(f"SELECT {COLUMNS} FROM global_temp.{name}"))


def at_once(served: Served, statements: list[str]) -> list:
    """Each statement sent on a connection of its own, all at the same time (each in a
    thread): their answers (rows, or the exception), once every one has answered. A kill
    right after is then "as soon as it answers" for all of them within the spread of
    their answers, not after the others' whole run."""
    import threading

    from pyhive import hive

    cursors = [hive.connect(host="127.0.0.1", port=served.port, auth="NOSASL").cursor()
               for _ in statements]
    answers: list = [None] * len(statements)

    def send(i: int) -> None:
        try:
            cursors[i].execute(statements[i])
            answers[i] = cursors[i].fetchall()
        except Exception as e:  # noqa: BLE001 (the answer)
            answers[i] = e

    threads = [threading.Thread(target=send, args=(i,), daemon=True)
               for i in range(len(statements))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def _show_rows(served: Served) -> list[tuple]:
    return served.rows("SHOW STREAMING QUERIES")


def _show(served: Served) -> list[tuple]:
    return [(r[0], r[2]) for r in _show_rows(served)]


def replayed_changelog(served: Served, src: Path, query: str, columns: tuple[str, ...]
                       ) -> list[tuple]:
    """The bounded replay of the files in ``src`` (``query`` over ``{t}``, run by the
    server): its changelog before the frontier (what an uninterrupted run emits), each
    row as ``columns``."""
    served.cursor.execute("CREATE OR REPLACE TEMPORARY VIEW bounded AS "
                          f"SELECT * FROM parquet.`{src}`")
    rows = served.rows(query.format(t="bounded"))
    names = [d[0] for d in served.cursor.description]
    at = names.index("emit_time")
    return [tuple(dict(zip(names, r, strict=True))[c] for c in columns)
            for r in rows if r[at] < FRONTIER]


def applied(changelog: list[tuple], columns: tuple[str, ...]) -> set[tuple]:
    """A changelog (rows as ``columns``, ``is_retraction`` among them) applied row by row
    in its order: a retraction removes its window's row (key, window_start, window_end),
    a pane replaces it; each row as ``columns`` without ``is_retraction``."""
    window = [columns.index(c) for c in ("key", "window_start", "window_end")]
    retraction = columns.index("is_retraction")
    table: dict[tuple, tuple] = {}
    for r in changelog:
        at = tuple(r[i] for i in window)
        if r[retraction]:
            table.pop(at, None)
        else:
            table[at] = r[:retraction] + r[retraction + 1:]
    return set(table.values())


def replayed_table(served: Served, src: Path, query: str, columns: tuple[str, ...]
                   ) -> set[tuple]:
    """The bounded replay's changelog before the frontier applied row by row: what an
    uninterrupted run's table holds, each row as ``columns``."""
    logged = (*columns, "is_retraction")
    return applied(replayed_changelog(served, src, query, logged), logged)
