"""Batch semantics: with no PROCESSING TIME, dfsql's windows equal Spark's own.

A batch input fires exactly one ON_TIME, last pane per key and window, so FIXED, SLIDING
and SESSIONS must give what ``groupBy(window())`` / ``session_window()`` give, on the
benchmark generator's workload (bursty sessions, skewed keys).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dfsql

GEN = Path(__file__).resolve().parents[2] / "benchmarks" / "gen_events.py"


@pytest.fixture(scope="module")
def events(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "ev.parquet"
    subprocess.run([sys.executable, str(GEN), "--events", "30000", "--keys", "300", "--seed", "7",
                    "--out", str(out), "--quiet"], check=True)
    spark.read.parquet(str(out)).createOrReplaceTempView("bench_events")
    return "bench_events"


CASES = {
    "fixed": ("FIXED(1 MINUTE)", "window(event_time, '1 minute')"),
    "fixed_offset": ("FIXED(1 MINUTE, OFFSET 15 SECONDS)",
                     "window(event_time, '1 minute', '1 minute', '15 seconds')"),
    "sliding": ("SLIDING(2 MINUTES, EVERY 30 SECONDS)",
                "window(event_time, '2 minutes', '30 seconds')"),
    "sessions": ("SESSIONS(GAP 30 SECONDS)", "session_window(event_time, '30 seconds')"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_batch_equals_native(spark, events, case):
    ours, native = CASES[case]
    q = f"""SELECT key, SUM(value) AS total, COUNT(*) AS n, MAX(value) AS top
            FROM {events} GROUP BY key WINDOW {ours} ON event_time"""
    got = dfsql.sql(q, spark)
    assert got.columns[:4] == ["key", "total", "n", "top"]
    rows = {(r.key, r.window_start, r.window_end): (r.total, r.n, r.top, r.pane_index,
                                                     r.pane_timing, r.is_last, r.emit_time,
                                                     r.is_retraction)
            for r in got.collect()}
    w = native.split("(")[0]
    ref = spark.sql(f"""SELECT key, {w}.start AS s, {w}.end AS e, SUM(value) AS total,
                        COUNT(*) AS n, MAX(value) AS top FROM {events}
                        GROUP BY key, {native}""").collect()
    assert len(rows) == len(ref) > 100
    for r in ref:
        assert rows[(r.key, r.s, r.e)] == (r.total, r.n, r.top, 0, "ON_TIME", True, None, False)


def test_batch_global_equals_group_by(spark, events):
    got = dfsql.sql(f"SELECT key, COUNT(*) AS n FROM {events} GROUP BY key WINDOW GLOBAL", spark)
    ref = dict(spark.sql(f"SELECT key, COUNT(*) FROM {events} GROUP BY key").collect())
    rows = got.collect()
    assert {r.key: r.n for r in rows} == ref
    assert all(r.window_start is None and r.pane_timing == "ON_TIME" for r in rows)


def test_batch_rows_are_ordered(spark, events):
    rows = dfsql.sql(f"SELECT key, COUNT(*) AS n FROM {events} GROUP BY key "
                     "WINDOW FIXED(10 MINUTES) ON event_time", spark).collect()
    order = [(r.key, r.window_start) for r in rows]
    assert order == sorted(order)


def test_distinct_keys_over_sessions_keeps_the_sessions(spark, events):
    """SELECT DISTINCT of the keys over a sessions block: one row per session, as Spark's
    own session_window count says (Spark 4's RemoveRedundantAggregates would otherwise
    drop the session aggregate under the DISTINCT and give one row per element)."""
    got = dfsql.sql(f"SELECT DISTINCT key FROM {events} GROUP BY key "
                    "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time", spark).count()
    sessions = spark.sql(f"SELECT COUNT(*) FROM (SELECT key FROM {events} GROUP BY key, "
                         "session_window(event_time, '30 seconds'))").collect()[0][0]
    elements = spark.table(events).count()
    assert got == sessions < elements
