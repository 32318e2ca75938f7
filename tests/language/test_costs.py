"""Costs bounded by the clauses' values (issue #52): a SLIDING spec that puts each row
in more windows than the bound (dfsql.language.costs, default 1,000) is refused as it
is parsed, positioned at its period, before any Spark work; legitimate sliding windows
still run with the same rows."""

from __future__ import annotations

import time

import pytest

import dfsql
from dfsql.errors import DfsqlError
from dfsql.language import costs, parse_any

ONE_ROW = "FROM VALUES (TIMESTAMP '2026-01-01 00:00:00', 1) AS t(ts, v)"
#: the issue's query and its disguises (a period of 1 µs with a days-long window too)
ABSURD = [
    f"SELECT SUM(v) AS s {ONE_ROW} WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) ON ts",
    f"select sum(v) as s {ONE_ROW} window sliding(1 hour, every 1 millisecond) on ts",
    f"SELECT SUM(v) AS s {ONE_ROW}\nWINDOW SLIDING(INTERVAL '1' HOUR, "
    "EVERY INTERVAL '1' MILLISECOND) ON ts",
    f"SELECT SUM(v) AS s {ONE_ROW}\nWINDOW SLIDING(1 HOUR, EVERY 0.001 SECONDS) ON ts",
    f"SELECT SUM(v) AS s {ONE_ROW}\nWINDOW /* every */ SLIDING(3 DAYS,\n  EVERY 0.000001 SECONDS) ON ts",
]


def _where(statement: str) -> str:
    """"line L, col C" of the period: the word after the last EVERY."""
    at = statement.lower().rindex("every") + len("every ")
    line = statement.count("\n", 0, at) + 1
    return f"line {line}, col {at - statement.rfind(chr(10), 0, at)}"


@pytest.mark.parametrize("statement", ABSURD)
def test_a_sliding_spec_over_the_bound_is_refused_where_its_period_is(statement):
    t0 = time.perf_counter()
    with pytest.raises(DfsqlError) as info:
        parse_any(statement)
    assert time.perf_counter() - t0 < 0.5
    e = info.value
    assert e.sqlstate == "54000"
    assert str(e).startswith(_where(statement) + ": SLIDING puts each row in ")
    assert "the bound is 1,000 windows per row (dfsql serve --max-windows-per-row)" in str(e)
    assert e.hint and "size / 1,000" in e.hint


def test_the_message_counts_the_windows_rounded_up():
    with pytest.raises(DfsqlError, match=r"in 3,600,000 windows"):
        parse_any(ABSURD[0])
    with pytest.raises(DfsqlError, match=r"in 1,001 windows"):
        parse_any(f"SELECT COUNT(*) AS n {ONE_ROW} WINDOW SLIDING(1001 SECONDS, EVERY 1 SECOND) ON ts")
    with pytest.raises(DfsqlError, match=r"in 1,001 windows"):  # 1000.5, rounded up
        parse_any(f"SELECT COUNT(*) AS n {ONE_ROW} WINDOW SLIDING(2001 SECONDS, EVERY 2 SECONDS) ON ts")


def test_at_the_bound_and_below_it_parses():
    parse_any(f"SELECT COUNT(*) AS n {ONE_ROW} WINDOW SLIDING(1000 SECONDS, EVERY 1 SECOND) ON ts")
    parse_any(f"SELECT COUNT(*) AS n {ONE_ROW} WINDOW SLIDING(16 HOURS, EVERY 1 MINUTE) ON ts")
    # a sampling grid (period > size): one window at most
    parse_any(f"SELECT COUNT(*) AS n {ONE_ROW} WINDOW SLIDING(0.000001 SECONDS, EVERY 3 DAYS) ON ts")


def test_the_bound_is_settable_and_0_lifts_it():
    query = f"SELECT 1 {ONE_ROW} WINDOW SLIDING(1 DAY, EVERY 1 MINUTE) ON ts"
    try:
        costs.set_max_windows_per_row(100)
        with pytest.raises(DfsqlError, match=r"in 1,440 windows.*the bound is 100 "):
            parse_any(query)
        costs.set_max_windows_per_row(0)
        parse_any(ABSURD[0])
    finally:
        costs.set_max_windows_per_row(costs.MAX_WINDOWS_PER_ROW)
    with pytest.raises(ValueError):
        costs.set_max_windows_per_row(-1)


DISGUISED = [
    f"WITH c AS (SELECT SUM(v) AS s {ONE_ROW} WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) "
    "ON ts) SELECT * FROM c",
    f"SELECT * FROM (SELECT SUM(v) AS s {ONE_ROW} "
    "WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) ON ts) AS q",
    f"CREATE OR REPLACE TEMP VIEW absurd_v AS SELECT SUM(v) AS s {ONE_ROW} "
    "WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) ON ts",
    f"EXPLAIN SELECT SUM(v) AS s {ONE_ROW} WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) ON ts",
]


@pytest.mark.parametrize("statement", [ABSURD[0], ABSURD[2], *DISGUISED])
def test_dfsql_sql_refuses_it_fast(spark, statement):
    t0 = time.perf_counter()
    with pytest.raises(DfsqlError) as info:
        dfsql.sql(statement, spark)
    assert time.perf_counter() - t0 < 1.0
    assert info.value.sqlstate == "54000", str(info.value)
    assert "3,600,000 windows" in str(info.value)
    assert info.value.line is not None


def test_legitimate_sliding_windows_still_run(spark):
    rows = dfsql.sql(f"SELECT SUM(v) AS s {ONE_ROW} WINDOW SLIDING(10 SECONDS, "
                     "EVERY 2 SECONDS) ON ts", spark).collect()
    assert [(r.s, str(r.window_start)) for r in sorted(rows, key=lambda r: r.window_start)] \
        == [(1, f"2025-12-31 23:59:{s}") for s in (52, 54, 56, 58)] + \
           [(1, "2026-01-01 00:00:00")]
    hour = dfsql.sql(f"SELECT COUNT(*) AS n {ONE_ROW} WINDOW SLIDING(1 HOUR, EVERY 1 MINUTE) "
                     "ON ts", spark).collect()
    assert len(hour) == 60 and {r.n for r in hour} == {1}
    assert min(str(r.window_start) for r in hour) == "2025-12-31 23:01:00"


def _any_of(n: int) -> str:
    return "ANY(" + ", ".join(f"AFTER {i + 1} ROWS" for i in range(n)) + ")"


def test_a_trigger_tree_over_the_bound_is_refused_at_its_trigger():
    # REPEAT ANY(…1000 counts) is 1,002 nodes: REPEAT, ANY and the counts
    statement = (f"SELECT SUM(v) AS s {ONE_ROW} WINDOW FIXED(1 MINUTE) ON ts\n"
                 f"trigger REPEAT {_any_of(1000)}")
    t0 = time.perf_counter()
    with pytest.raises(DfsqlError) as info:
        parse_any(statement)
    assert time.perf_counter() - t0 < 1.0
    assert info.value.sqlstate == "54000"
    assert str(info.value).startswith(
        "line 2, col 1: the trigger has 1,002 nodes; the bound is 1,000 "
        "(dfsql serve --max-trigger-nodes)")
    try:
        costs.set_max_trigger_nodes(0)
        parse_any(statement)
    finally:
        costs.set_max_trigger_nodes(costs.MAX_TRIGGER_NODES)


def test_a_trigger_tree_under_the_bound_still_runs(spark):
    rows = dfsql.sql(f"SELECT SUM(v) AS s {ONE_ROW} WINDOW FIXED(1 MINUTE) ON ts "
                     f"TRIGGER REPEAT {_any_of(998)}", spark).collect()
    assert [(r.s, str(r.window_start)) for r in rows] == [(1, "2026-01-01 00:00:00")]


WINDOWED = (f"SELECT SUM(v) AS s {ONE_ROW} WINDOW FIXED(1 MINUTE) ON ts")


def _union(n: int) -> str:
    return " UNION ALL ".join(f"SELECT * FROM ({WINDOWED}) AS q{i}" for i in range(n))


def test_a_statement_with_more_windowed_blocks_than_the_bound_is_refused_at_the_first_over():
    """dfsql plans each windowed block in Python (measured for #52 on a loaded 2-core
    machine: 10 UNION ALL'd blocks 24 s, 50 31 s): a 1 MB statement holds thousands."""
    text = _union(101)
    t0 = time.perf_counter()
    with pytest.raises(DfsqlError) as info:
        parse_any(text)
    assert time.perf_counter() - t0 < 5.0
    e = info.value
    assert e.sqlstate == "54000"
    at = 0
    for _ in range(101):  # at the 101st block's WINDOW
        at = text.index("WINDOW", at + 1)
    assert str(e).startswith(f"line 1, col {at + 1}: the statement has more than 100 "
                             "windowed queries; the bound is 100 (dfsql serve "
                             "--max-windowed-queries)"), str(e)
    parse_any(_union(100))  # at the bound
    try:
        costs.set_max_windowed_queries(3)
        with pytest.raises(DfsqlError, match="more than 3 windowed queries"):
            parse_any(_union(4))
        costs.set_max_windowed_queries(0)
        parse_any(_union(150))
    finally:
        costs.set_max_windowed_queries(costs.MAX_WINDOWED_QUERIES)
