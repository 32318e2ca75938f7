"""NULL and DATE event times (docs/reference.md#window).

A row whose event time is NULL belongs to no window on every path: it is dropped, counted
by ``dfsql.dropped_late`` (reason ``null event time``) and kept by LATE ROWS INTO. A DATE
event time is a TIMESTAMP at midnight of the session time zone, as Spark's own window()
reads it, on the batch path and the replay alike.
"""

from __future__ import annotations

from datetime import datetime

import pytest

import dfsql

T = datetime(2024, 1, 1, 12, 0, 0)
#: (key, value, event_time, arrival_time): two NULL event times, one of them arriving last
ROWS = [
    ("a", 1, "2024-01-01 12:00:10", "2024-01-01 12:00:20"),
    ("a", 2, None, "2024-01-01 12:00:30"),
    ("a", 4, "2024-01-01 12:00:50", "2024-01-01 12:01:05"),
    ("b", 8, "2024-01-01 12:01:10", "2024-01-01 12:01:15"),
    ("b", 16, None, "2024-01-01 12:03:00"),
]
@pytest.fixture(scope="module")
def null_events(spark):
    values = ", ".join(
        f"('{k}', {v}, {'NULL' if e is None else repr(e)}, '{a}')" for k, v, e, a in ROWS)
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW null_events AS
                  SELECT k, CAST(v AS BIGINT) AS v, CAST(et AS TIMESTAMP) AS et,
                         CAST(at AS TIMESTAMP) AS at FROM VALUES {values} AS t(k, v, et, at)""")
    spark.sql("""CREATE OR REPLACE TEMP VIEW null_events_kept AS
                 SELECT * FROM null_events WHERE et IS NOT NULL""")
    spark.sql("""CREATE OR REPLACE TEMP VIEW date_events AS
                 SELECT k, CAST(v AS BIGINT) AS v, CAST(d AS DATE) AS d,
                        CAST(at AS TIMESTAMP) AS at FROM VALUES
                   ('a', 1, '2024-01-01', '2024-01-01 10:00:00'),
                   ('a', 2, '2024-01-01', '2024-01-01 11:00:00'),
                   ('a', 4, '2024-01-02', '2024-01-02 09:00:00'),
                   ('b', 8, NULL, '2024-01-02 10:00:00') AS t(k, v, d, at)""")
    return "null_events"


def _windows(df):
    return sorted((r.k, r.window_start, r.window_end, r.total) for r in df.collect())


# Hand derivation: FIXED(1 MINUTE) over the non-NULL rows: a has 1 in [12:00, 12:01) and
# 4 in [12:00, 12:01) -> 5; b has 8 in [12:01, 12:02).
EXPECTED_FIXED = [("a", T, datetime(2024, 1, 1, 12, 1), 5),
                  ("b", datetime(2024, 1, 1, 12, 1), datetime(2024, 1, 1, 12, 2), 8)]


def test_batch_null_event_time_is_dropped_and_counted(spark, null_events):
    df = dfsql.sql("SELECT k, SUM(v) AS total FROM null_events GROUP BY k "
                   "WINDOW FIXED(1 MINUTE) ON et", spark)
    assert _windows(df) == EXPECTED_FIXED
    assert dfsql.dropped_late(df) == 2


def test_batch_sessions_null_event_time_is_counted(spark, null_events):
    df = dfsql.sql("SELECT k, SUM(v) AS total FROM null_events GROUP BY k "
                   "WINDOW SESSIONS(GAP 1 MINUTE) ON et", spark)
    # a: sessions [12:00:10, 12:01:10) and [12:00:50, 12:01:50) merge: [12:00:10, 12:01:50)
    assert _windows(df) == [
        ("a", datetime(2024, 1, 1, 12, 0, 10), datetime(2024, 1, 1, 12, 1, 50), 5),
        ("b", datetime(2024, 1, 1, 12, 1, 10), datetime(2024, 1, 1, 12, 2, 10), 8)]
    assert dfsql.dropped_late(df) == 2


def test_batch_late_rows_into_keeps_null_event_times(spark, null_events):
    df = dfsql.sql("SELECT k, SUM(v) AS total FROM null_events GROUP BY k "
                   "WINDOW FIXED(1 MINUTE) ON et ALLOWED LATENESS 1 SECOND "
                   "LATE ROWS INTO null_late_batch", spark)
    assert _windows(df) == EXPECTED_FIXED
    late = spark.table("null_late_batch")
    # the key under its own name, the column SUM reads, in no window
    assert late.columns == ["k", "v", "window_start", "window_end", "event_time",
                            "arrival_time", "reason", "watermark_at_arrival"]
    assert sorted(tuple(r) for r in late.collect()) == [
        ("a", 2, None, None, None, None, "null event time", None),
        ("b", 16, None, None, None, None, "null event time", None)]
    assert dfsql.dropped_late(df) == 2


def test_replay_null_event_time_is_dropped_counted_and_kept(spark, null_events):
    q = ("SELECT k, SUM(v) AS total FROM {t} GROUP BY k WINDOW FIXED(1 MINUTE) ON et "
         "WATERMARK DELAY 0 SECONDS PROCESSING TIME at ALLOWED LATENESS 1 SECOND "
         "LATE ROWS INTO null_late_replay")
    df = dfsql.sql(q.format(t="null_events"), spark)
    got = _windows(df)
    assert got == EXPECTED_FIXED  # no window near the year 294,000 nor in 1970
    late = spark.table("null_late_replay")
    assert sorted((r.k, r.event_time, r.arrival_time, r.reason) for r in late.collect()) == [
        ("a", None, datetime(2024, 1, 1, 12, 0, 30), "null event time"),
        ("b", None, datetime(2024, 1, 1, 12, 3), "null event time")]
    assert dfsql.dropped_late(df) == 2


@pytest.mark.parametrize("watermark", ["DELAY 10 SECONDS", "PERFECT",
                                       "PERCENTILE 50 DELAY 5 SECONDS"])
def test_replay_null_event_times_move_no_watermark(spark, null_events, watermark):
    """The same panes (emit times included) with and without the NULL rows: no watermark
    timeline counts a NULL event time (PERFECT would hold the watermark at -inf until
    the NULL arrives; PERCENTILE would see a delay of 294,000 years)."""
    q = ("SELECT k, SUM(v) AS total FROM {t} GROUP BY k WINDOW FIXED(1 MINUTE) ON et "
         f"WATERMARK {watermark} PROCESSING TIME at TRIGGER EVERY 1 ROW")
    cols = ["k", "total", "window_start", "pane_index", "pane_timing", "emit_time"]

    def rows(t):
        return [tuple(r[c] for c in cols)
                for r in dfsql.sql(q.format(t=t), spark).collect()]

    with_nulls, without = rows("null_events"), rows("null_events_kept")
    # the NULL of b arrives last (12:03): the input ends there, so final panes may move
    # to it; compare everything else
    assert [r[:5] for r in with_nulls] == [r[:5] for r in without]
    assert [r[5] for r in with_nulls if r[5] < datetime(2024, 1, 1, 12, 1, 15)] == \
        [r[5] for r in without if r[5] < datetime(2024, 1, 1, 12, 1, 15)]


# DATE event times: a DATE is midnight (session time zone, UTC in the tests) of that day.
EXPECTED_DATES = [("a", datetime(2024, 1, 1), datetime(2024, 1, 2), 3),
                  ("a", datetime(2024, 1, 2), datetime(2024, 1, 3), 4)]


def test_batch_date_event_time(spark, null_events):
    df = dfsql.sql("SELECT k, SUM(v) AS total FROM date_events GROUP BY k "
                   "WINDOW FIXED(1 DAY) ON d", spark)
    assert _windows(df) == EXPECTED_DATES
    assert dfsql.dropped_late(df) == 1


def test_replay_date_event_time(spark, null_events):
    df = dfsql.sql("SELECT k, SUM(v) AS total FROM date_events GROUP BY k "
                   "WINDOW FIXED(1 DAY) ON d PROCESSING TIME at", spark)
    assert _windows(df) == EXPECTED_DATES
    assert dfsql.dropped_late(df) == 1


def test_replay_date_event_time_without_nulls(spark, null_events):
    df = dfsql.sql("SELECT k, SUM(v) AS total FROM date_events WHERE d IS NOT NULL GROUP BY k "
                   "WINDOW SESSIONS(GAP 1 HOUR) ON d PROCESSING TIME at", spark)
    assert _windows(df) == [("a", datetime(2024, 1, 1), datetime(2024, 1, 1, 1), 3),
                            ("a", datetime(2024, 1, 2), datetime(2024, 1, 2, 1), 4)]
