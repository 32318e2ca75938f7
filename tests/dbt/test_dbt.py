"""dbt against ``dfsql serve`` (issue #25): dbt-spark's ``thrift`` method, unchanged, builds
tests/dbt/project — the paper's data as seeds, a plain model, and windowed models
materialized as a table, a view and an incremental (append) table — and runs its schema
and singular tests.

The server is ``dfsql serve``'s (:class:`dfsql.server.Server`) on the test run's Spark, whose
warehouse is a temporary directory (tests/conftest.py); dbt is the venv's ``dbt`` run as a
command. Each model is then read through the endpoint and compared with two things:
``dfsql.sql`` running the model's query alone (on the test's session, over the paper's CSV
as temp views, not dbt's seeds), and the paper's numbers derived by hand in each test's
docstring (Figures 6, 8, 10 and 14 over the ten scores of its running example).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

import dfsql
from dfsql.server import Server

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "project"
FIGURES = {f["name"]: f for f in json.loads(
    (ROOT / "examples" / "paper" / "figures.json").read_text())["figures"]}
#: the first build appends to ``minute_panes`` only the rows that had arrived by 12:06; the
#: second build (the model's incremental run) appends the rest
VARS = "{arrived_before: '2015-09-01 12:06:00'}"
#: dbt sends nothing anywhere but the endpoint (no usage statistics, no version check)
DBT_ENV = {"DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DBT_VERSION_CHECK": "false",
           "DBT_USE_COLORS": "false", "DBT_PARTIAL_PARSE": "true"}


@dataclass
class Build:
    """What the two dbt runs gave: the server's port, each run's exit code and output."""

    port: int
    runs: list[subprocess.CompletedProcess]


@pytest.fixture(scope="module")
def endpoint(spark):
    """The endpoint ``dfsql serve`` runs (SASL PLAIN with any password: PyHive's and so
    dbt-spark's default), on the test run's Spark application rather than a second one:
    a cold JVM of its own (started, JIT-compiled and its Python workers forked again) more
    than doubled the module's CPU time, and its wall time went past the budget. The schema dbt made goes with the module."""
    server = Server(spark, port=0, auth="NONE").start()
    yield server
    server.stop()
    # through dfsql, so that the warehouse forgets the persistent view's definition too
    dfsql.sql("DROP DATABASE IF EXISTS analytics CASCADE", spark)


def _dbt(args: list[str], profiles: Path, tmp: Path) -> subprocess.CompletedProcess:
    dbt = Path(sys.executable).parent / "dbt"
    return subprocess.run(
        [str(dbt), *args, "--profiles-dir", str(profiles), "--project-dir", str(PROJECT),
         "--target-path", str(tmp / "target"), "--log-path", str(tmp / "logs"),
         "--vars", VARS],
        capture_output=True, text=True, env=dict(os.environ, **DBT_ENV), timeout=300)


@pytest.fixture(scope="module")
def build(endpoint, tmp_path_factory) -> Build:
    """``dbt build`` of the whole project, then ``dbt build -s minute_panes`` again: its
    incremental run (a temp view of the windowed query, then ``INSERT INTO … SELECT``)."""
    port = endpoint.port
    tmp = tmp_path_factory.mktemp("dbt")
    (tmp / "profiles.yml").write_text(
        "dfsql:\n  target: dev\n  outputs:\n    dev:\n      type: spark\n      method: thrift\n"
        f"      host: 127.0.0.1\n      port: {port}\n      user: analyst\n"
        "      schema: analytics\n      threads: 2\n      connect_retries: 0\n"
        # dfsql holds each status poll until the statement ends (up to 5 s, as HiveServer2
        # does): dbt-spark's own 5 s sleep between polls would only add to every statement
        # longer than that
        "      poll_interval: 0\n")
    first = _dbt(["build"], tmp, tmp)
    second = _dbt(["build", "--select", "minute_panes"], tmp, tmp)
    return Build(port, [first, second])


def _read(port: int, query: str) -> list[tuple]:
    """Rows of ``query`` through the endpoint, as a dbt user's client reads them."""
    from pyhive import hive

    conn = hive.connect(host="127.0.0.1", port=port, username="analyst")
    try:
        cur = conn.cursor()
        cur.execute(query)
        return cur.fetchall()
    finally:
        conn.close()


def _alone(model: str) -> str:
    """The model's query as run alone on the paper's tables: ``ref('x')`` is ``x``, and an
    incremental model's ``{% if is_incremental() %}`` filter is dropped (its whole input)."""
    text = (PROJECT / "models" / f"{model}.sql").read_text()
    text = re.sub(r"\{\{\s*config\(.*?\)\s*\}\}", "", text, flags=re.S)
    text = re.sub(r"\{%\s*if is_incremental\(\)\s*%\}.*?\{%\s*endif\s*%\}", "", text, flags=re.S)
    return re.sub(r"\{\{\s*ref\('(\w+)'\)\s*\}\}", r"\1", text)


def _same(port: int, model: str, columns: str, spark) -> list[tuple]:
    """The model's rows (``columns``) through the endpoint, checked equal, as multisets, to
    ``dfsql.sql`` running the model's query alone; returned sorted (first column first)."""
    def key(row: tuple) -> tuple:
        return tuple((v is None, v if v is not None else 0) for v in row)

    stored = sorted(_read(port, f"SELECT {columns} FROM analytics.{model}"), key=key)
    alone = dfsql.sql(f"SELECT {columns} FROM ({_alone(model)})", spark)
    assert stored == sorted((tuple(r) for r in alone.collect()), key=key)
    return stored


def _ts(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S")


def _tail(run: subprocess.CompletedProcess) -> str:
    return (run.stdout + run.stderr)[-4000:]


def test_seeds_and_plain_model(build, spark, paper_tables):
    """The seeds hold the paper's ten scores and the plain ``table`` model their total, as
    Figure 6 (one global batch window): 5+7+3+4+3+8+9+3+8+1 = 51 over 10 rows for key k."""
    first = build.runs[0]
    for line in ("OK loaded seed file analytics.scores", "OK created sql table model "
                 "analytics.key_totals", "PASS unique_key_totals_key"):
        assert line in first.stdout, _tail(first)
    assert _read(build.port, "SELECT count(*), sum(value) FROM analytics.scores") == [(10, 51)]
    assert _same(build.port, "key_totals", "key, total, n", spark) == [("k", 51, 10)]


def test_dbt_build_is_green(build):
    """Every seed, model and test of the project passes, in both runs."""
    for run in build.runs:
        assert run.returncode == 0, _tail(run)
    assert "ERROR=0" in build.runs[0].stdout and "PASS=" in build.runs[0].stdout


def test_table_of_a_retracting_session_query(build, spark, paper_tables):
    """``session_changelog`` (materialized ``table``) stores Figure 14's whole changelog,
    retractions included: the paper's rows (figures.json); its sessions end as the paper's
    final sums, 5+9+7+8+3+4+3 = 39 for [12:00:30, 12:05:00) (each score within a minute of
    the next) and 3+8+1 = 12 for [12:06:30, 12:08:50)."""
    columns = ["key", "total", "window_start", "window_end", "pane_index", "pane_timing",
               "is_last", "emit_time", "is_retraction"]
    rows = _same(build.port, "session_changelog", ", ".join(columns), spark)
    paper = [tuple(_ts(r[c]) if c in ("window_start", "window_end", "emit_time") else r[c]
                   for c in columns) for r in FIGURES["fig14_sessions_retracting"]["expected"]]
    assert sorted(rows, key=str) == sorted(paper, key=str)
    net: dict[tuple, int] = {}
    for r in rows:
        net[(r[2], r[3])] = net.get((r[2], r[3]), 0) + (-r[1] if r[8] else r[1])
    assert {k: v for k, v in net.items() if v} == {
        (_ts("2015-09-01 12:00:30"), _ts("2015-09-01 12:05:00")): 39,
        (_ts("2015-09-01 12:06:30"), _ts("2015-09-01 12:08:50")): 12}


def test_view_of_fixed_windows(build, spark, paper_tables):
    """``fixed_windows`` (materialized ``view``) reads as Figure 10: two-minute windows of
    14 (5+9), 22 (7+8+3+4), 3 and 12 (3+8+1), one ON_TIME pane each."""
    rows = _same(build.port, "fixed_windows", "window_start, key, total, pane_timing", spark)
    assert rows == [(_ts("2015-09-01 12:00:00"), "k", 14, "ON_TIME"),
                    (_ts("2015-09-01 12:02:00"), "k", 22, "ON_TIME"),
                    (_ts("2015-09-01 12:04:00"), "k", 3, "ON_TIME"),
                    (_ts("2015-09-01 12:06:00"), "k", 12, "ON_TIME")]


def test_incremental_append_of_minute_panes(build, spark, paper_tables):
    """``minute_panes`` (``incremental``, append): the first build's panes of the rows that
    arrived by 12:06 and the second build's of the rest are together Figure 8's discarding
    panes, as the query run alone over all rows gives them: 12 at 12:05 (5, 7), 10 at 12:06
    (3, 4, 3), 8 at 12:07, 12 at 12:08 (9, 3) and 9 at 12:09 (8, 1). (Pane indexes start
    again in each run, so they are not compared.)"""
    assert "OK created sql incremental model analytics.minute_panes" in build.runs[1].stdout
    rows = _same(build.port, "minute_panes", "emit_time, key, total", spark)
    assert rows == [(_ts("2015-09-01 12:05:00"), "k", 12), (_ts("2015-09-01 12:06:00"), "k", 10),
                    (_ts("2015-09-01 12:07:00"), "k", 8), (_ts("2015-09-01 12:08:00"), "k", 12),
                    (_ts("2015-09-01 12:09:00"), "k", 9)]
