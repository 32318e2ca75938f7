"""Every SQL example in docs/ runs, and prints what the page says it prints.

The convention of docs/**/*.md (docs/reference.md, "About the examples", says it to the
reader too): a ```sql block is run by the shell's own code on the run's session, with the
paper's ``scores`` and ``paper_watermarks`` registered, and the ```text block right after
it is what the shell prints for it (``\\timing`` off): the ASCII table, ``N rows``, any
warning, or the positioned error with its caret and hint. ```text unordered compares the
rows as a multiset (a batch result has no order); a ```python setup block runs, in page
order, before the sql blocks after it (it registers a source). A block that cannot run
here is marked: ```sql no-run (a stream, an endpoint's statement) is counted, so the
number cannot grow unnoticed; ```sql pending(feature) is skipped with that reason until
the feature is in.

docs/guides/databases.md writes to PostgreSQL: its examples run against a real server
(tests/postgres.py, one per module, with the page's database ``sales`` of the role ``ada``),
the page's hosts (``db.example:5432``, ``localhost:5432``) standing for it, its password
in ``PGPASSWORD``; the page's worked example runs its shell steps against that server and
a real ``dfsql serve`` (tests/docs_walkthrough.py says what it substitutes), and its
Python sink block writes the worked example's first table.

The expected outputs in the pages were derived by hand from the Dataflow paper's figures
and the reference's rules (each page says how, next to the example), not copied from a
run: this test is where the code meets them.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from dfsql.connections import CONNECTIONS
from dfsql.session import register_paper_tables
from dfsql.shell import reference_help as docs_help
from tests.docs_walkthrough import (
    Walkthrough,
    drop_tables,
    password,
    psql_normal,
    steps,
    superuser,
    warehouse,
)

DOCS = Path(__file__).resolve().parents[1] / "docs"

#: ```sql no-run blocks per page: a new one must be counted here on purpose
NO_RUN = {
    "reference.md": 0,
    "tutorial.md": 0,
    "guides/streams.md": 4,  # CREATE / SHOW / STOP STREAMING QUERY over a live stream; BACKFILL
    "guides/endpoint.md": 3,  # typed into beeline; a dbt model (Jinja); SHOW STREAMING QUERIES
    "guides/shell.md": 1,  # a script that \\loads a file by a path relative to the checkout
    "guides/notebooks.md": 0,
    "guides/databases.md": 0,
    "guides/watching.md": 2,  # over system.streaming_progress: needs a running query
}

_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Example:
    """One sql block and what the page says it prints."""

    page: str
    line: int
    info: str  # the fence's words after "sql"
    sql: str
    expected: str | None
    unordered: bool
    setup: tuple[str, ...]  # the page's python setup blocks before it

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def examples(page: Path) -> list[Example]:
    """The page's sql blocks, each with the text block right after it (only blank lines
    between) and the setup blocks above it."""
    text = page.read_text(encoding="utf-8")
    fences = list(_FENCE.finditer(text))
    found: list[Example] = []
    setup: list[str] = []
    for i, m in enumerate(fences):
        words = m.group(1).split()
        if words[:2] == ["python", "setup"]:
            setup.append(m.group(2))
        if not words or words[0] != "sql":
            continue
        expected, unordered = None, False
        nxt = fences[i + 1] if i + 1 < len(fences) else None
        if nxt is not None and not text[m.end():nxt.start()].strip() and \
                nxt.group(1).split()[:1] == ["text"]:
            expected = nxt.group(2)
            unordered = "unordered" in nxt.group(1).split()
        found.append(Example(page.relative_to(DOCS).as_posix(),
                             text.count("\n", 0, m.start()) + 1, " ".join(words[1:]),
                             m.group(2), expected, unordered, tuple(setup)))
    return found


PAGES = sorted(DOCS.rglob("*.md"))
ALL = [e for p in PAGES for e in examples(p)]
RUNNABLE = [e for e in ALL if not e.info]


def test_no_run_blocks_are_counted() -> None:
    """A block left out of the run is a decision: each page's count is written above."""
    counts = {p.relative_to(DOCS).as_posix(): 0 for p in PAGES}
    for e in ALL:
        if e.info == "no-run":
            counts[e.page] += 1
    assert counts == NO_RUN


def test_every_block_is_runnable_no_run_or_pending() -> None:
    odd = [e.id for e in ALL if e.info and e.info != "no-run"
           and not re.fullmatch(r"pending\([^)]+\)", e.info)]
    assert odd == []
    assert [e.id for e in RUNNABLE if e.expected is None] == []
    assert len(RUNNABLE) >= 25  # the pages are examples first


@pytest.fixture(scope="module")
def pg():
    """The page's PostgreSQL (docs/guides/databases.md), for this module."""
    with warehouse() as server:
        yield server


def _local(block: str, pg) -> str:
    """A databases.md block with the page's database host standing for the test's."""
    return block.replace("db.example:5432", f"127.0.0.1:{pg.port}")


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_the_databases_worked_example_runs(tmp_path, pg) -> None:
    """docs/guides/databases.md's worked example, step by step as a reader runs it
    (tests/docs_walkthrough.py): a real ``dfsql serve`` on a state directory, its
    continuous query created and changed from beeline, files moved into the stream,
    the server killed with SIGKILL and started again, psql reading the table; each psql
    output is the page's, which it derives by hand. No file the server wrote holds the
    password. Defined before test_examples: in a process of its own the module runs the
    server's JVM before the run's session starts, not beside it."""
    found = steps()
    scripts = [s.script for s in found]
    assert sum("dfsql serve" in s for s in scripts) == 2
    assert sum("kill -9" in s for s in scripts) == 1
    assert [s for s in scripts if "STREAMING QUERY" in s][0].count("CREATE") == 1
    assert sum("ALTER STREAMING QUERY" in s for s in scripts) == 1
    assert sum(s.expected is not None for s in found) == 4
    drop_tables(pg, "user_sessions")
    walk = Walkthrough(tmp_path.resolve(), pg)
    failures = []
    try:
        for step in found:
            out = walk.run(step)
            if step.expected is not None and psql_normal(out) != psql_normal(step.expected):
                failures.append(f"--- line {step.line}\n{step.script}--- page says\n"
                                f"{step.expected}--- psql prints\n{out}")
    finally:
        walk.stop()
        print("worked example, seconds per step (page line):", walk.timings)
    assert not failures, "\n".join(failures) + f"\n{walk.timings}"
    # the page's words on SHOW and on when the change took effect, as the server said
    # them at the last psql step
    assert walk.shown["sink"] == "table warehouse.public.user_sessions"
    assert walk.shown["status"] == "RUNNING"
    assert walk.shown["versions"].startswith("v1 from the start; v2 from 2025-06-02 09:36:00")
    assert walk.password_in() == []


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _normal(text: str, unordered: bool) -> list:
    """The lines of a shell's output with a table's padding ignored (a page may align
    its columns by hand) and, for ``unordered``, each table's data rows sorted."""
    out: list = []
    rows: list[list[str]] | None = None  # the data rows of the table being read
    for line in text.rstrip().splitlines():
        s = line.strip()
        if re.fullmatch(r"\+-+\+", s):  # a table's top or bottom edge
            if rows is not None:
                out.append(sorted(rows) if unordered else rows)
                rows = None
            else:
                rows = []
        elif rows is not None and re.fullmatch(r"\|[-+|]+\|", s):
            continue  # the rule under the header
        elif rows is not None and s.startswith("|"):
            if out and out[-1] == "<table>":
                out.append(_cells(s))  # the header
            else:
                rows.append(_cells(s))
            continue
        else:
            out.append(line.rstrip())
            continue
        if rows == []:
            out.append("<table>")
    return out


@pytest.fixture(scope="module")
def shell(spark):
    """The shell's own code on the run's session: what it prints is what a page shows.
    What the pages make (tables, views, a cached table, registered views) is dropped
    afterwards, so the modules after this one on the session see its catalog as before."""
    from dfsql.shell.repl import Shell

    register_paper_tables(spark)
    before = {r.tableName for r in spark.sql("SHOW TABLES").collect()}
    sh = Shell(paper_tables=False, history="/dev/null")
    sh._spark = spark
    sh._started.set()
    sh.timing, sh.pager = False, False
    yield sh
    views = {r.viewName for r in spark.sql("SHOW VIEWS").collect() if not r.isTemporary}
    for t in spark.sql("SHOW TABLES").collect():
        if t.tableName in before:
            continue
        spark.sql(f"UNCACHE TABLE IF EXISTS `{t.tableName}`")
        if t.isTemporary:
            spark.catalog.dropTempView(t.tableName)
        else:
            kind = "VIEW" if t.tableName in views else "TABLE"
            spark.sql(f"DROP {kind} IF EXISTS `{t.tableName}`")


def _run(sh, example: Example) -> str:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, no_color=True, width=100_000,
                      soft_wrap=True, highlight=False)
    sh.out = sh.err = console
    sh.run_script(example.sql)
    return buf.getvalue()


def test_examples(shell, spark, pg, monkeypatch) -> None:
    """All runnable examples, in page order, on one session (one test: the pages' setup
    blocks and views build on each other, and one Spark warm-up serves them all). A
    single SELECT shown on two pages runs once; each page's text is compared."""
    monkeypatch.setenv("PGPASSWORD", password(steps()))  # libpq's, for the page's role
    try:
        _examples(shell, spark, pg)
    finally:
        CONNECTIONS.remove("warehouse")


def _examples(shell, spark, pg) -> None:
    import dfsql

    failures = []
    done_setup: set[str] = set()
    printed: dict[str, str] = {}  # a query the tutorial and the reference both show runs once
    for e in RUNNABLE:
        for block in e.setup:
            if block not in done_setup:
                exec(_local(block, pg), {"dfsql": dfsql, "spark": spark})  # noqa: S102
                done_setup.add(block)
        one_select = e.sql.lstrip().upper().startswith("SELECT") and ";" not in e.sql
        got = printed.get(e.sql) if one_select else None
        if got is None:
            got = _run(shell, e)
            if one_select:
                printed[e.sql] = got
        if _normal(got, e.unordered) != _normal(e.expected or "", e.unordered):
            failures.append(f"--- {e.id}\n{e.sql}\n--- page says\n{e.expected}"
                            f"--- shell prints\n{got}")
    assert not failures, "\n".join(failures)


def test_the_databases_python_sink_writes_the_worked_examples_table(tmp_path, pg, spark,
                                                                    monkeypatch) -> None:
    """The page's Python blocks, in page order (the connection, then ``PostgresTable``
    and ``dfsql.start``; its ``incoming/`` and checkpoint under tmp_path), fed the worked
    example's first file by the page's own step: the table psql then reads is the page's
    first one. The same query as the worked example's CREATE, so the same table."""
    import dfsql

    monkeypatch.setenv("PGPASSWORD", password(steps()))
    drop_tables(pg, "user_sessions")
    text = (DOCS / "guides" / "databases.md").read_text(encoding="utf-8")
    blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).split()[:1] == ["python"]]
    assert len(blocks) == 2, blocks
    tmp = tmp_path.resolve()
    (tmp / "incoming").mkdir()
    walk = Walkthrough(tmp, pg)
    first, table = [s for s in steps() if "1.json" in s.script or s.expected][:2]
    walk.run(first)
    try:
        for block in blocks:
            block = _local(block, pg).replace('"incoming/"', f'"{tmp}/incoming/"')
            block = block.replace("/var/lib/dfsql/user_sessions", str(tmp / "checkpoint"))
            exec(block, {"dfsql": dfsql, "spark": spark})  # noqa: S102 - the page's own
        [query] = [q for q in spark.streams.active if q.name == "user_sessions"]
        query.processAllAvailable()
        out = walk.run(table)
        assert psql_normal(out) == psql_normal(table.expected or "")
        # the page's layout: the query's columns and the pane columns but is_retraction;
        # the primary key the group key and the window
        with superuser(pg) as c:
            cols = [r[0] for r in c.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = "
                "'user_sessions' ORDER BY ordinal_position")]
            key = sorted(r[0] for r in c.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
                "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = "
                "'public.user_sessions'::regclass AND i.indisprimary"))
        assert cols == ["user_id", "total", "plays", "window_start", "window_end",
                        "pane_index", "pane_timing", "is_last", "emit_time"]
        assert key == ["user_id", "window_end", "window_start"]
    finally:
        for q in spark.streams.active:
            if q.name == "user_sessions":
                q.stop()
        CONNECTIONS.remove("warehouse")
        spark.catalog.dropTempView("live_scores")


def test_pending_examples_are_known_features() -> None:
    """A pending example names a feature being built; each reads as a statement of it."""
    pending = [e for e in ALL if e.info.startswith("pending(")]
    features = {e.info[len("pending("):-1] for e in pending}
    assert features <= {"CTAS", "INSERT", "CACHE TABLE", "persistent views",
                        "EXPLAIN FIRINGS", "EXPLAIN WATERMARK"}, features
    for e in pending:
        assert e.expected is not None, e.id
    if pending:
        pytest.skip(f"{len(pending)} examples wait for: {', '.join(sorted(features))}")


# -- the help: every clause's section, from the shipped reference -------------------------

CLAUSES = ("Query shape", "Durations", "WINDOW", "PROCESSING TIME", "WATERMARK",
           "ALLOWED LATENESS", "TRIGGER", "EMIT", "Output columns", "Sources",
           "Writing results", "Explaining time", "Errors")


@pytest.mark.parametrize("topic", CLAUSES)
def test_help_finds_every_clause(topic: str) -> None:
    text = docs_help.section(topic.lower())
    assert text is not None and text.startswith(f"## {topic}\n")
    assert "\n## " not in text  # one section, up to the next
    assert "```sql" in text  # each with its worked example


def test_help_unknown_topic_lists_the_topics() -> None:
    assert docs_help.section("BANANAS") is None
    assert docs_help.section("") is None
    listing = docs_help.unknown_topic("BANANAS")
    assert all(t in listing for t in CLAUSES)
    assert docs_help.section("allowed")  # the start of one heading


@pytest.mark.parametrize("keyword, heading", [
    ("SESSIONS", "WINDOW"), ("sliding", "WINDOW"), ("GAP", "WINDOW"),
    ("EVERY", "TRIGGER"), ("UNTIL", "TRIGGER"), ("REPEAT", "TRIGGER"),
    ("PERCENTILE", "WATERMARK"), ("PERFECT", "WATERMARK"), ("DELAY", "WATERMARK"),
    ("RETRACTING", "EMIT"), ("accumulating", "EMIT"), ("LATENESS", "ALLOWED LATENESS"),
    ("WINDOWS", "WINDOW"), ("TRIGER", "TRIGGER"),  # the closest heading
])
def test_help_finds_a_keyword_in_its_clause(keyword: str, heading: str) -> None:
    text = docs_help.section(keyword)
    assert text is not None and text.startswith(f"## {heading}\n"), (text or "")[:40]


def test_cli_help_prints_the_trigger_section() -> None:
    """`dfsql help TRIGGER` prints that section (no Spark: a second or so); an unknown
    topic lists the topics on stderr and exits 1."""
    cmd = [sys.executable, "-m", "dfsql.cli", "help"]
    r = subprocess.run([*cmd, "TRIGGER"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == docs_help.section("TRIGGER")
    assert r.stdout.startswith("## TRIGGER\n") and "EVERY n ROW[S]" in r.stdout
    r = subprocess.run([*cmd, "allowed", "LATENESS"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("## ALLOWED LATENESS\n"), r.stderr
    r = subprocess.run([*cmd, "TRIGGERS"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("## TRIGGER\n")  # the closest
    r = subprocess.run([*cmd, "BANANAS"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stdout == ""
    assert "BANANAS" in r.stderr and "  WINDOW\n" in r.stderr


def test_shell_help_topic_prints_the_section() -> None:
    """`\\help window` in the shell (no Spark started): the section, as text off a
    terminal; `\\help` alone still lists the commands, now with the topics; an unknown
    topic is a positioned shell error naming the topics."""
    from dfsql.errors import DfsqlError
    from dfsql.shell.repl import Shell

    sh = Shell(history="/dev/null")
    buf = io.StringIO()
    sh.out = sh.err = Console(file=buf, force_terminal=False, no_color=True, width=100)
    sh.command("\\help window")
    assert buf.getvalue() == docs_help.section("WINDOW")
    buf.seek(0), buf.truncate()
    sh.command("\\help")
    listing = buf.getvalue()
    assert "\\load" in listing and "ALLOWED LATENESS" in listing
    buf.seek(0), buf.truncate()
    sh.command("\\help windw")  # misspelt: the closest heading
    assert buf.getvalue() == docs_help.section("WINDOW")
    with pytest.raises(DfsqlError) as e:
        sh.command("\\help bananas")
    assert e.value.column == 7 and "WINDOW" in e.value.message
