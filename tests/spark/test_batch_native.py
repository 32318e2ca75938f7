"""Batch semantics: with no PROCESSING TIME, dfsql's windows equal Spark's own.

A batch input fires exactly one ON_TIME, last pane per key and window, so FIXED, SLIDING
and SESSIONS must give what ``groupBy(window())`` / ``session_window()`` give, on the
benchmark generator's workload (bursty sessions, skewed keys).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import dfsql
from dfsql.language.model_run import run

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


def test_distinct_keys_over_sessions_keeps_the_sessions(spark, events):
    """SELECT DISTINCT of the keys over a sessions block: one row per session, as Spark's
    own session_window count says (Spark 4's RemoveRedundantAggregates would otherwise
    drop the session aggregate under the DISTINCT and give one row per element)."""
    got = dfsql.sql(f"SELECT DISTINCT key FROM {events} GROUP BY key "
                    "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time", spark).count()
    # half-open sessions: Spark's session_window merges t2 <= t1 + gap, so 1 µs less
    sessions = spark.sql(f"SELECT COUNT(*) FROM (SELECT key FROM {events} GROUP BY key, "
                         "session_window(event_time, '29999999 microseconds'))").collect()[0][0]
    elements = spark.table(events).count()
    assert got == sessions < elements


T0 = datetime(2024, 1, 1)


def _random_rows(seed: int, gap_s: int) -> list[tuple]:
    """(key, value, event_time or None): whole seconds in a narrow range, so that many
    sessions touch (an element exactly ``gap`` after another) and several keys share
    times; about one row in twelve has no event time."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(int(rng.integers(20, 120))):
        key = f"k{int(rng.integers(0, 4))}"
        t = T0 + timedelta(seconds=int(rng.integers(0, 12)) * gap_s
                           + int(rng.choice([0, 0, 0, 1, gap_s - 1])))
        rows.append((key, int(rng.integers(1, 100)), None if rng.random() < 0.08 else t))
    return rows


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gap", ["10 SECONDS", "1 MS", "INTERVAL '0.000001' SECOND"])
def test_batch_sessions_equal_the_model(spark, seed, gap):
    """Batch SESSIONS (Spark's session_window) vs the model on the same rows: the same
    sessions and aggregates. Windows are half-open (docs/reference.md#window): [0, 10) and
    [10, 20) stay two sessions; Spark's own session_window would merge them."""
    gap_s = 10 if gap == "10 SECONDS" else 1
    rows = _random_rows(seed, gap_s)
    if gap != "10 SECONDS":  # event times in ms (µs): touching at 1 ms (µs) apart
        scale = 1000 if gap == "1 MS" else 1_000_000
        rows = [(k, v, None if t is None else T0 + (t - T0) / scale) for k, v, t in rows]
    spark.createDataFrame(rows, "k STRING, v BIGINT, et TIMESTAMP") \
        .createOrReplaceTempView("random_sessions")
    df = dfsql.sql("SELECT k, SUM(v) AS total, COUNT(*) AS n, MIN(v) AS lo, MAX(v) AS hi "
                   f"FROM random_sessions GROUP BY k WINDOW SESSIONS(GAP {gap}) ON et", spark)
    got = sorted((r.k, r.window_start, r.window_end, r.total, r.n, r.lo, r.hi, r.pane_index,
                  r.pane_timing, r.is_last, r.emit_time, r.is_retraction)
                 for r in df.collect())
    timed = [(k, v, t, None) for k, v, t in rows if t is not None]
    clauses = f"WINDOW SESSIONS(GAP {gap})"
    want = {}
    for how in (sum, len, min, max):
        for r in run(timed, clauses, aggregate=how):
            want.setdefault((r["key"], r["window_start"], r["window_end"], r["pane_index"],
                             r["pane_timing"], r["is_last"], r["emit_time"],
                             r["is_retraction"]), []).append(r["value"])
    expected = sorted((k, s, e, *vals, i, timing, last, emit, retr)
                      for (k, s, e, i, timing, last, emit, retr), vals in want.items())
    assert got == expected
    # touching sessions exist in these inputs (else the test would prove nothing)
    if seed == 0:
        ends = {(r[0], r[2]) for r in got}
        assert any((r[0], r[1]) in ends for r in got)
    assert dfsql.dropped_late(df) == sum(t is None for _, _, t in rows)


def test_touching_sessions_stay_two(spark):
    """docs/reference.md#window's example: sessions [0, 30) and [30, 60) touch and stay two."""
    df = dfsql.sql("""SELECT k, COUNT(*) AS n FROM VALUES ('a', TIMESTAMP'2024-01-01 00:00:00'),
                      ('a', TIMESTAMP'2024-01-01 00:00:30') AS t(k, et)
                      GROUP BY k WINDOW SESSIONS(GAP 30 SECONDS) ON et""", spark)
    assert sorted((r.window_start, r.window_end, r.n) for r in df.collect()) == [
        (T0, T0 + timedelta(seconds=30), 1),
        (T0 + timedelta(seconds=30), T0 + timedelta(seconds=60), 1)]
