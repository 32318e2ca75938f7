"""Windowed results feeding windowed queries, and late data kept aside.

The paper's reason for retractions (§2.3): a downstream grouping over a retracting
result must subtract what was retracted, so a two-stage pipeline ends with the values it
would have had if no early pane had ever been emitted.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import dfsql

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "paper"
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
