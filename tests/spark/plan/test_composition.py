"""Windowed results feeding windowed queries, and late data kept aside.

The paper's reason for retractions (§2.3): a downstream grouping over a retracting
result must subtract what was retracted, so a two-stage pipeline ends with the values it
would have had if no early pane had ever been emitted.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

import dfsql

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "paper"
#: Figure 14's sessions query (the example file), with the EMIT mode left open.
SESSIONS = "\n".join(
    line for line in (EXAMPLES / "fig14_sessions_retracting.sql").read_text().splitlines()
    if not line.startswith("--")).strip().rstrip(";").replace(
    "EMIT ACCUMULATING AND RETRACTING", "EMIT {mode}")


def test_retractions_are_subtracted_downstream(spark, paper_tables):
    q = f"""WITH s AS ({SESSIONS.format(mode='ACCUMULATING AND RETRACTING')})
            SELECT COUNT(*) AS sessions, SUM(total) AS grand FROM s
            WINDOW FIXED(10 MINUTES) ON window_end"""
    rows = dfsql.sql(q, spark).collect()
    assert [(r.sessions, r.grand, r.window_start) for r in rows] == [
        (2, 51, datetime(2015, 9, 1, 12, 0))]


def test_same_as_batch_final_values(spark, paper_tables):
    """Downstream of retracting sessions sees exactly the final sessions: 39 and 12."""
    q = f"""WITH s AS ({SESSIONS.format(mode='ACCUMULATING AND RETRACTING')})
            SELECT total, COUNT(*) AS n FROM s GROUP BY total WINDOW GLOBAL"""
    got = sorted((r.total, r.n) for r in dfsql.sql(q, spark).collect())
    assert got == [(12, 1), (39, 1)]


def test_without_retractions_downstream_double_counts(spark, paper_tables):
    """The contrast the paper draws: accumulating panes without retractions overcount."""
    q = f"""WITH s AS ({SESSIONS.format(mode='ACCUMULATING')})
            SELECT SUM(total) AS grand FROM s WINDOW GLOBAL"""
    assert dfsql.sql(q, spark).collect()[0].grand == 5 + 7 + 10 + 25 + 39 + 3 + 12


def test_plain_consumer_sees_the_changelog(spark, paper_tables):
    """A plain (non-windowed) query over a retracting CTE reads retraction rows as rows."""
    q = f"""WITH s AS ({SESSIONS.format(mode='ACCUMULATING AND RETRACTING')})
            SELECT SUM(CASE WHEN is_retraction THEN -total ELSE total END) AS net,
                   COUNT(*) AS n FROM s"""
    r = dfsql.sql(q, spark).collect()[0]
    assert (r.net, r.n) == (51, 12)


def test_late_rows_into_view_and_dropped_count(spark, paper_tables):
    q = """SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW FIXED(2 MINUTES) ON event_time
WATERMARK FROM paper_watermarks
PROCESSING TIME arrival_time
ALLOWED LATENESS 1 MINUTE LATE ROWS INTO late_scores"""
    df = dfsql.sql(q, spark)
    totals = {(r.window_start.minute, r.pane_index): r.total for r in df.collect()}
    assert totals[(0, 0)] == 5 and (0, 1) not in totals  # the late 9 was dropped
    assert dfsql.dropped_late(df) == 1
    late = spark.sql("SELECT * FROM late_scores").collect()
    assert len(late) == 1
    row = late[0]
    assert row.event_time == datetime(2015, 9, 1, 12, 1, 20)
    assert row.arrival_time == datetime(2015, 9, 1, 12, 7, 20)
    assert row.watermark_at_arrival == datetime(2015, 9, 1, 12, 5, 10)
    assert row.reason


# Figure 14's retracting changelog, in emit order (the paper's rows):
#   12:05:00 +5 +7 | 12:06:00 +10 | 12:07:00 -7 -10 +25 | 12:07:20 -5 -25 +39
#   12:08:00 +3    | 12:09:00 -3 +12
# A downstream that replays it by emit_time sees each of those rows when it is emitted,
# and each of its panes holds what the upstream emitted minus what it retracted so far:
# the multiset after each instant is {5,7}, {5,7,10}, {5,25}, {39}, {39,3}, {39,12}.
def _at(h, m, s=0):
    return datetime(2015, 9, 1, h, m, s)


def test_replayed_downstream_consumes_retractions_as_rows(spark, paper_tables):
    q = f"""WITH s AS ({SESSIONS.format(mode='ACCUMULATING AND RETRACTING')})
            SELECT SUM(total) AS total, COUNT(*) AS n, MIN(total) AS lo, MAX(total) AS hi,
                   AVG(total) AS mean
            FROM s
            WINDOW GLOBAL ON window_end PROCESSING TIME emit_time TRIGGER EVERY 1 ROW"""
    rows = dfsql.sql(q, spark).collect()
    assert [(r.emit_time, r.pane_index, r.total, r.n, r.lo, r.hi) for r in rows] == [
        (_at(12, 5), 0, 12, 2, 5, 7),
        (_at(12, 6), 1, 22, 3, 5, 10),
        (_at(12, 7), 2, 30, 2, 5, 25),
        (_at(12, 7, 20), 3, 39, 1, 39, 39),
        (_at(12, 8), 4, 42, 2, 3, 39),
        (_at(12, 9), 5, 51, 2, 12, 39),
    ]
    assert [r.mean for r in rows] == [6.0, 22 / 3, 15.0, 39.0, 21.0, 25.5]
    assert all(not r.is_retraction and r.pane_timing == "EARLY" for r in rows)


@pytest.mark.parametrize("kernels", ["true", "false"])
@pytest.mark.parametrize("name", ["v", "y", "acc", "s"])
def test_min_max_over_retractions_whatever_the_column_is_called(spark, paper_tables, name,
                                                                kernels):
    """MIN and MAX over a changelog are rewritten with lambdas (``v -> …``, ``(acc, y) ->
    …``, a struct field ``s``): an upstream column of the same name must still be the
    column, on the model's kernels and on Spark's aggregates alike. The multiset after
    each instant is Figure 14's (above)."""
    up = SESSIONS.format(mode="ACCUMULATING AND RETRACTING").replace("AS total", f"AS {name}")
    q = f"""WITH s AS ({up})
            SELECT MIN({name}) AS lo, MAX({name}) AS hi FROM s
            WINDOW GLOBAL ON window_end PROCESSING TIME emit_time TRIGGER EVERY 1 ROW"""
    spark.conf.set("dfsql.replay.aggregateKernels", kernels)
    try:
        rows = dfsql.sql(q, spark).collect()
    finally:
        spark.conf.unset("dfsql.replay.aggregateKernels")
    assert [(r.lo, r.hi) for r in rows] == [(5, 7), (5, 10), (5, 25), (39, 39), (3, 39),
                                            (12, 39)]


def test_replayed_downstream_with_filter_and_discarding(spark, paper_tables):
    # DISCARDING: each pane holds only the instant's changes; FILTER drops values < 10
    q = f"""WITH s AS ({SESSIONS.format(mode='ACCUMULATING AND RETRACTING')})
            SELECT SUM(total) FILTER (WHERE total >= 10) AS big, COUNT(*) AS n FROM s
            WINDOW GLOBAL ON window_end PROCESSING TIME emit_time TRIGGER EVERY 1 ROW
            EMIT DISCARDING"""
    rows = dfsql.sql(q, spark).collect()
    assert [(r.emit_time, r.big, r.n) for r in rows] == [
        (_at(12, 5), None, 2), (_at(12, 6), 10, 1), (_at(12, 7), 15, -1),
        (_at(12, 7, 20), 14, -1), (_at(12, 8), None, 1), (_at(12, 9), 12, 0)]


def test_an_aggregate_that_cannot_subtract_is_refused(spark, paper_tables):
    from dfsql.errors import NotSupportedError

    q = f"""WITH s AS ({SESSIONS.format(mode='ACCUMULATING AND RETRACTING')})
SELECT collect_set(total) AS totals FROM s
WINDOW GLOBAL ON window_end PROCESSING TIME emit_time"""
    with pytest.raises(NotSupportedError) as e:
        dfsql.sql(q, spark)
    # at the call: line 2 of the statement after the CTE's lines, column 8
    assert (e.value.line, e.value.column) == (SESSIONS.count("\n") + 2, 8)
    assert "retraction" in e.value.message and "SUM" in (e.value.hint or "")


def test_names_the_planner_uses_are_not_edited_in_the_users_literals(spark, paper_tables):
    """The planner names an inner block's view and the table of panes in the stages it
    builds, not by editing their text: a string literal that spells those names stays
    the user's (a regex over the stage SQL would rewrite '__dfsql_w0' to the run's view
    name, and '__dfsql_panes' to the panes' view)."""
    q = f"""WITH s AS ({SESSIONS.format(mode='ACCUMULATING')})
            SELECT '__dfsql_w0' AS inner_name, '__dfsql_panes' AS panes_name,
                   COUNT(*) AS n FROM s WHERE '__dfsql_w0' = concat('__dfsql_', 'w0')
            WINDOW GLOBAL"""
    rows = dfsql.sql(q, spark).collect()
    assert [(r.inner_name, r.panes_name, r.n) for r in rows] == [
        ("__dfsql_w0", "__dfsql_panes", 7)]


def _self_join(left: str, right: str) -> str:
    return f"""SELECT SUM(CASE WHEN a.is_retraction THEN -a.total ELSE a.total END) AS net,
                      COUNT(*) AS n, COUNT_IF(a.total <> b.total) AS differ
               FROM ({left}) a JOIN (
                 {right}) b
               ON a.key = b.key AND a.window_start = b.window_start
                 AND a.window_end = b.window_end AND a.pane_index = b.pane_index
                 AND a.is_retraction = b.is_retraction"""


def test_a_block_written_twice_is_planned_once(spark, paper_tables):
    """Figure 14's retracting sessions joined with themselves, the second copy laid out
    otherwise (blanks and line breaks aside it is the same query): one replay serves
    both (Nexmark's q5 counts the same windows twice). Each side's changelog nets to the
    final sessions, 39 + 12, and every row meets its own twin."""
    from dfsql.spark.plan.planner import planned_of

    s = SESSIONS.format(mode="ACCUMULATING AND RETRACTING")
    df = dfsql.sql(_self_join(s, "  ".join(s.split(" "))), spark)
    first, second = planned_of(df).blocks
    assert first is second
    # and it runs once: its driver's output is kept, and both places scan what was kept
    assert first.replay.emitted.is_cached
    assert df._jdf.queryExecution().executedPlan().toString().count("InMemoryTableScan") == 2
    [row] = df.collect()
    assert (row.net, row.differ) == (51, 0) and row.n > 2
    # another gap is another query: planned apart, and joined it meets fewer twins
    other = s.replace("GAP 1 MINUTE", "GAP 5 MINUTES")
    df = dfsql.sql(_self_join(s, other), spark)
    first, second = planned_of(df).blocks
    assert first is not second
    assert not first.replay.emitted.is_cached and not second.replay.emitted.is_cached
