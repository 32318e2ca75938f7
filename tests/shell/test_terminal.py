"""The shell as a person uses it: a real ``dfsql`` process in a pseudo-terminal (pexpect),
typing queries over several lines, reading the panes it prints, a mistake and the caret,
Ctrl-C during a long query, history across a restart, \\load / \\d / \\plot / \\watch; and
``dfsql -f`` / ``-e`` without a terminal, over every paper example."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.conftest import paper_stream_dir

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "paper"
FIGURES = json.loads((EXAMPLES / "figures.json").read_text())["figures"]
FIG14 = next(f for f in FIGURES if f["name"] == "fig14_sessions_retracting")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\r")
PROMPT = "dfsql>"
#: Figure 14's panes and retractions in §7's order (the paper, §2.4): sign and total
FIG14_CHANGELOG = [("+", "5"), ("+", "7"), ("+", "10"), ("-", "7"), ("-", "10"), ("+", "25"),
                   ("-", "5"), ("-", "25"), ("+", "39"), ("+", "3"), ("-", "3"), ("+", "12")]

pytestmark = pytest.mark.slow


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DFSQL_SPARK_MASTER", "DFSQL_SPARK_REMOTE")}
    env.update(PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", COLUMNS="200", LINES="60",
               DFSQL_HISTORY=str(tmp_path / "history"), PYTHONPATH=str(ROOT))
    return env


class Terminal:
    """One ``dfsql`` shell in a pseudo-terminal. :meth:`until` reads what it printed,
    escape sequences removed (they cut words apart: colours, cursor moves)."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.child = pexpect.spawn(sys.executable, ["-m", "dfsql.cli", *args],
                                   env=_env(tmp_path), cwd=str(tmp_path), encoding="utf-8",
                                   dimensions=(60, 200), timeout=300)
        self.raw = ""
        self.pos = 0  # how much of the plain text the test has read
        self.until(PROMPT)

    def type(self, *lines: str) -> None:
        for line in lines:
            self.child.send(line + "\r")
            time.sleep(0.05)

    def until(self, pattern: str, timeout: float = 300) -> str:
        """The plain text printed since the last call, up to ``pattern`` (a regex)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            plain = ANSI.sub("", self.raw)
            m = rx.search(plain, self.pos)
            if m:
                out, self.pos = plain[self.pos:m.end()], m.end()
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not printed within {timeout} s; "
                                     f"printed:\n{plain[self.pos:][-3000:]}")
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=0.5)
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                raise AssertionError(f"the shell ended; printed:\n{plain[-3000:]}") from None

    def close(self) -> None:
        if self.child.isalive():
            self.child.sendintr()  # clears a half-typed line
            time.sleep(0.3)
            self.child.sendcontrol("d")
            try:
                self.child.expect(pexpect.EOF, timeout=60)
            except pexpect.TIMEOUT:
                self.child.terminate(force=True)
        self.child.close()


def _changelog(text: str) -> list[tuple[str, str]]:
    """(sign, total) of each row of a printed changelog table (``± key total ...``)."""
    rows = []
    for line in text.splitlines():
        cells = line.split()
        if len(cells) > 3 and cells[0] in "+-" and cells[1] == "k" and "2015-09-01" in line:
            rows.append((cells[0], cells[2]))
    return rows


@pytest.fixture
def terminal(tmp_path):
    made: list[Terminal] = []

    def start(*args: str) -> Terminal:
        made.append(Terminal(tmp_path, *args))
        return made[-1]

    yield start
    for t in made:
        t.close()


@pytest.fixture(scope="module")
def paper_shell(tmp_path_factory) -> Iterator[Terminal]:
    """One shell with the paper's tables for the two tests at its prompt below (one Spark
    start for both; each test reads only what it printed after the last one's output)."""
    sh = Terminal(tmp_path_factory.mktemp("shell"), "--paper-tables")
    yield sh
    sh.close()


def test_a_session_at_the_prompt(paper_shell, tmp_path) -> None:
    """Multi-line windowed query → the paper's panes; a mistake → caret, and the shell
    goes on; \\load, \\d, \\plot; Ctrl-C cancels a long query and frees Spark."""
    sh = paper_shell
    lines = FIG14["query"].splitlines()
    sh.type(*lines[:-1])
    assert "...>" in sh.until(r"\.\.\.>")  # no ';' yet: the statement goes on
    sh.type(lines[-1] + ";")
    out = sh.until(r"12 rows \(")
    assert _changelog(out) == FIG14_CHANGELOG
    assert "pane_timing" in out and "emit_time" in out and "is_retraction" in out
    sh.until(PROMPT)

    sh.type("SELECT key, COUNT(*) AS n FROM scores GROUP BY key",
            "WINDOW SESSIONS(GAPP 1 MINUTE) ON event_time;")
    out = sh.until(r"hint: did you mean GAP\?")
    assert "error: line 2, col 17: unknown keyword GAPP after SESSIONS(" in out
    assert "  WINDOW SESSIONS(GAPP 1 MINUTE) ON event_time\n" + " " * 18 + "^" in out
    assert "Traceback" not in out
    sh.until(PROMPT)
    sh.type("SELECT 40 + 2 AS answer;")
    assert re.search(r"\b42\b", sh.until(r"1 row \("))
    sh.until(PROMPT)

    sh.type(f"\\load events {EXAMPLES / 'events.csv'} EVENT TIME event_time "
            "PROCESSING TIME arrival_time")
    assert "events: view of" in sh.until(r"arrival_time timestamp\)")
    sh.until(PROMPT)
    sh.type("\\d")
    out = sh.until(r"scores\s+temp view")
    assert re.search(r"events\s+temp view\s+event_time\s+arrival_time", out)
    sh.until(PROMPT)
    sh.type("\\d events")
    assert re.search(r"value\s+int", sh.until(r"event_time\s+timestamp"))
    assert "registered with event time event_time, processing time arrival_time" in \
        sh.until("processing time arrival_time")
    sh.until(PROMPT)

    # a registered source: Figure 14 without ON and PROCESSING TIME (\load gave them)
    sh.type("SELECT key, SUM(value) AS total FROM events GROUP BY key",
            "WINDOW SESSIONS(GAP 1 MINUTE) WATERMARK FROM paper_watermarks",
            "ALLOWED LATENESS 10 MINUTES",
            "TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK",
            "EMIT ACCUMULATING AND RETRACTING;")
    assert _changelog(sh.until(r"12 rows \(")) == FIG14_CHANGELOG
    sh.until(PROMPT)
    sh.type(f"\\plot {tmp_path / 'panes.png'}")
    assert re.search(r"wrote .*panes\.png: \d+ panes, \d+ retractions, 10 input elements, "
                     r"the watermark", sh.until("the watermark"))
    sh.until(PROMPT)
    assert (tmp_path / "panes.png").read_bytes()[:4] == b"\x89PNG"

    # Ctrl-C: 400 tasks of 2 s on local[2] would take 400 s
    sh.type("SELECT COUNT(*) FROM (SELECT reflect('java.lang.Thread', 'sleep', "
            "CAST(2000 AS BIGINT)) AS r FROM range(0, 400, 1, 400)) WHERE r IS NULL;")
    assert "tasks" in sh.until(r"\d+/400 tasks", timeout=180)  # the progress bar
    time.sleep(1)
    sh.child.sendintr()
    out = sh.until(r"cancelled \(its Spark jobs were stopped\)", timeout=120)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out and "error:" not in out
    sh.until(PROMPT)
    t0 = time.monotonic()
    sh.type("SELECT 7 * 6 AS answer;")
    assert re.search(r"\b42\b", sh.until(r"1 row \(", timeout=180))
    # both cores are free again: the job was cancelled (its remaining tasks would hold
    # them for minutes; the bound is a third of that, generous for a loaded machine)
    assert time.monotonic() - t0 < 120
    sh.until(PROMPT)
    sh.type("\\nope")
    assert "error: line 1, col 1: unknown command \\nope" in sh.until("command .nope")


def test_history_survives_a_restart(terminal, tmp_path) -> None:
    first = terminal()
    first.type("SELECT 40 + 2 AS answer;")
    assert re.search(r"\b42\b", first.until(r"1 row \("))
    first.until(PROMPT)
    first.type("\\q")  # leaves the shell, with no error (issue #23)
    first.child.expect(pexpect.EOF, timeout=60)
    first.child.close()
    assert first.child.exitstatus == 0
    assert "error:" not in ANSI.sub("", first.raw + first.child.before)
    assert "SELECT 40 + 2 AS answer;" in (tmp_path / "history").read_text()
    second = terminal()
    second.child.send("\x1b[A")  # up arrow: the first shell's \q, then its statement
    time.sleep(0.3)
    second.child.send("\x1b[A")
    time.sleep(0.3)
    second.child.send("\r")
    assert re.search(r"\b42\b", second.until(r"1 row \("))


def test_watch_a_stream_until_ctrl_c(paper_shell, tmp_path) -> None:
    """\\watch over the paper's scores arriving as files: the live windows, retractions
    applied, are Figure 14's two last rows (39 and 12); Ctrl-C stops the query."""
    src = paper_stream_dir(tmp_path / "scores_live")
    sh = paper_shell
    sh.type(f"\\load live {src} STREAM")
    sh.until("live: streaming view of")
    sh.until(PROMPT)
    query = FIG14["query"].replace("FROM scores", "FROM live").replace(
        "WATERMARK FROM paper_watermarks", "WATERMARK DELAY 0 SECONDS")
    sh.type("SELECT key, SUM(value) AS total FROM live GROUP BY key "
            "WINDOW SESSIONS(GAP 1 MINUTE) ON event_time;")
    sh.until("this query reads a stream")
    sh.until(PROMPT)
    sh.type("\\watch " + " ".join(query.split()))
    out = sh.until(r"2 live windows", timeout=300)
    live = [ln.split() for ln in out.splitlines() if "2015-09-01" in ln]
    assert {(c[0], c[1]) for c in live[-2:]} == {("k", "39"), ("k", "12")}
    sh.child.sendintr()
    out = sh.until(r"stopped after \d+ micro-batches", timeout=180)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out and "error:" not in out
    sh.until(PROMPT)
    sh.type("SELECT 1 AS one;")
    sh.until(r"1 row \(")


def _tables(stdout: str) -> list[list[dict[str, str]]]:
    """Every ASCII result table in ``stdout``, as rows of column -> cell."""
    tables, header = [], None
    for line in stdout.splitlines():
        if not line.startswith("|") or set(line) <= set("|-+"):
            if header is not None and not line.startswith("|"):
                header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            tables.append([])
        else:
            tables[-1].append(dict(zip(header, cells, strict=True)))
    return tables


def _cell(v) -> str:
    return "NULL" if v is None else ("true" if v is True else "false" if v is False
                                     else str(v))


@pytest.fixture(scope="module")
def files_run(tmp_path_factory) -> subprocess.CompletedProcess[str]:
    """One ``dfsql`` process (one Spark start) for the two tests below: ``-e``, ``-f``,
    ``-e`` (the command-line order), then ``-f`` over each paper example."""
    tmp = tmp_path_factory.mktemp("files")
    middle = tmp / "middle.sql"
    middle.write_text("SELECT 2 AS second_one;")
    files = []
    for f in FIGURES:
        files += ["-f", str(EXAMPLES / f"{f['name']}.sql")]
    return subprocess.run([sys.executable, "-m", "dfsql.cli", "--paper-tables",
                           "-e", "SELECT 1 AS first_one;", "-f", str(middle),
                           "-e", "SELECT 3 AS third_one;", *files],
                          env=_env(tmp), cwd=tmp, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def test_every_paper_example_from_files(files_run) -> None:
    """``dfsql -f`` over each example file exits 0 and prints the figure's panes (in
    §7's order where they are a changelog; a batch result has no order), with +/- marks
    exactly when the query EMITs retractions."""
    proc = files_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    tables = _tables(proc.stdout)[3:]  # after the three of the order test below
    assert len(tables) == len(FIGURES)
    for fig, got in zip(FIGURES, tables, strict=True):
        want = [{k: _cell(v) for k, v in r.items()} for r in fig["expected"]]
        if "AND RETRACTING" in fig["query"].upper():
            assert [r.pop("+/-") for r in got] == [
                "-" if w["is_retraction"] == "true" else "+" for w in want], fig["name"]
        else:
            assert all("+/-" not in r for r in got), fig["name"]
        if all(w["emit_time"] == "NULL" for w in want):
            got, want = sorted(got, key=repr), sorted(want, key=repr)
        assert got == want, fig["name"]


def test_execute_and_files_run_in_command_line_order(files_run) -> None:
    """-e and -f interleave as given (so ``-f query.sql -e '\\plot'`` plots that query)."""
    proc = files_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [t[0] for t in _tables(proc.stdout)[:3]] == [
        {"first_one": "1"}, {"second_one": "2"}, {"third_one": "3"}]


def test_a_broken_file_exits_non_zero_with_the_position(tmp_path) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT 1 AS one;\n\n-- the mistake is on line 4\n"
                   "SELECT key, SUM(value) FROM scores GROUP BY key WINDOW FIXED(0 SECONDS) "
                   "ON event_time;\nSELECT 2 AS never_run;\n")
    proc = subprocess.run([sys.executable, "-m", "dfsql.cli", "-f", str(bad)],
                          env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert f"error: {bad}: line 4, col 62: window size must be positive" in proc.stderr
    assert "^" in proc.stderr and "hint:" in proc.stderr
    assert "never_run" not in proc.stdout  # nothing after the failed statement ran
    assert "Traceback" not in proc.stderr + proc.stdout


def test_execute_reports_spark_analysis_errors(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "dfsql.cli", "-e",
                           "SELECT k, COUNT(*) AS n FROM no_such_table GROUP BY k "
                           "WINDOW FIXED(1 MINUTE) ON ts;"],
                          env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert re.search(r"error: line 1, col \d+: .*no_such_table", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    missing = subprocess.run([sys.executable, "-m", "dfsql.cli", "-f", "nope.sql"],
                             env=_env(tmp_path), cwd=tmp_path, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert missing.returncode == 1 and "error: cannot read nope.sql" in missing.stderr


def test_commands_without_a_terminal(tmp_path) -> None:
    """\\maxrows caps what is fetched and says so; \\timing drops the elapsed time;
    \\explain shows the trigger tree; --master picks the Spark master; \\connection names
    a database and lists the connections."""
    proc = subprocess.run(
        [sys.executable, "-m", "dfsql.cli", "--master", "local[1]",
         "-e", "\\maxrows 2", "-e", "SELECT id FROM range(5);",
         "-e", "\\timing", "-e", "SELECT 1 AS x;",
         "-e", "\\explain SELECT key, SUM(value) AS total FROM s GROUP BY key "
               "WINDOW SESSIONS(GAP 1 MINUTE) ON ts TRIGGER AFTER 2 ROWS THEN AFTER 3 ROWS",
         "-e", "SELECT current_timestamp() IS NOT NULL AS up, "
               "(SELECT 1) AS one; SET spark.master;",
         "-e", "\\connection Sales postgresql://ada@127.0.0.1:9/sales",
         "-e", "\\connection",
         "-e", "\\q", "-e", "SELECT 'after quit' AS never;"],
        env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    tables = _tables(out)
    assert tables[0] == [{"id": "0"}, {"id": "1"}]
    assert re.search(r"first 2 rows shown \(the result has more; \\maxrows N to fetch more\) "
                     r"\(\d+\.\d\d s\)", out)
    assert "timing is off" in out
    assert re.search(r"^1 row$", out, re.MULTILINE)  # no elapsed time after \timing
    assert "at most 2 rows are fetched and shown" in out
    assert "TRIGGER AfterEach(ElemCount(2), ElemCount(3))" in out  # the seed's notation
    assert {"key": "spark.master", "value": "local[1]"} in tables[-1]
    assert "after quit" not in out  # \q ended the run there, successfully
    # named (lower case, as SQL compares names), then listed; no terminal: no password
    assert out.count("sales: postgresql://ada@127.0.0.1:9/sales") == 2
