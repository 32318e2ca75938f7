"""SLIDING windows whose period exceeds their size (docs/reference.md#window: sampling windows with
gaps between them) on every path: the batch path (Spark's window() cannot slide by more
than its size), the replay, and streams on the engine's clock and on a PROCESSING TIME
column. An element in a gap belongs to no window: it is outside the result, and not
counted by ``dfsql.dropped_late`` nor kept by LATE ROWS INTO.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

import dfsql
from dfsql.errors import AnalysisError
from dfsql.spark.errors import map_spark_error
from tests.spark import engine_clock, feeds


def _t(hh: int, mm: int = 0, ss: int = 0) -> datetime:
    return datetime(2024, 1, 1, hh, mm, ss)


#: (key, value, event time, arrival); hour windows every 3 hours: [0, 1), [3, 4), [6, 7)
ROWS = [
    ("a", 1, "00:10:00", "00:11:00"),  # [0, 1)
    ("a", 2, "01:10:00", "01:11:00"),  # gap; moves the watermark past 01:00
    ("a", 4, "03:20:00", "03:21:00"),  # [3, 4)
    ("b", 8, "06:59:59", "07:00:00"),  # [6, 7)
    ("a", 16, None, "07:00:00"),  # NULL event time: dropped
    ("b", 32, "02:30:00", "07:05:00"),  # gap, and behind the watermark: still not dropped
    ("a", 64, "00:40:00", "07:10:00"),  # [0, 1), behind the watermark: dropped in a replay
]


@pytest.fixture(scope="module")
def samples(spark):
    values = ", ".join(
        f"('{k}', {v}, {'NULL' if e is None else repr('2024-01-01 ' + e)}, '2024-01-01 {a}')"
        for k, v, e, a in ROWS)
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW samples AS
                  SELECT k, CAST(v AS BIGINT) AS v, CAST(et AS TIMESTAMP) AS et,
                         CAST(at AS TIMESTAMP) AS at FROM VALUES {values} AS t(k, v, et, at)""")
    return "samples"


def _rows(df, emit: bool = False):
    return sorted((r.k, r.window_start, r.window_end, r.total, *([r.emit_time] if emit else []))
                  for r in df.collect())


Q = "SELECT k, SUM(v) AS total FROM samples GROUP BY k WINDOW {w} ON {on} {tail}"


def test_batch_sampling_windows(spark, samples):
    df = dfsql.sql(Q.format(w="SLIDING(1 HOUR, EVERY 3 HOURS)", on="et", tail=""), spark)
    # by hand: a has 1 and 64 in [0, 1) and 4 in [3, 4); b has 8 in [6, 7); 2 and 32 are
    # in gaps; only the NULL event time is dropped
    assert _rows(df) == [("a", _t(0), _t(1), 65), ("a", _t(3), _t(4), 4),
                         ("b", _t(6), _t(7), 8)]
    assert dfsql.dropped_late(df) == 1


@pytest.mark.parametrize("on", ["et", "CAST(et AS TIMESTAMP_NTZ)"])
def test_batch_sampling_windows_with_offset_and_uneven_period(spark, samples, on):
    # 40-minute windows every 90 minutes from 00:00: [00:00, 00:40), [01:30, 02:10),
    # [03:00, 03:40), [04:30, 05:10), [06:00, 06:40). 00:40 is at an end (outside it)
    df = dfsql.sql(Q.format(w="SLIDING(40 MINUTES, EVERY 90 MINUTES)", on=on, tail=""), spark)
    assert _rows(df) == [("a", _t(0), _t(0, 40), 1), ("a", _t(3), _t(3, 40), 4)]
    # with OFFSET 1 HOUR: [01:00, 02:00), [04:00, 05:00), [07:00, 08:00): only 01:10
    df = dfsql.sql(Q.format(w="SLIDING(1 HOUR, EVERY 3 HOURS, OFFSET 1 HOUR)", on=on,
                            tail=""), spark)
    assert _rows(df) == [("a", _t(1), _t(2), 2)]
    assert dfsql.dropped_late(df) == 1


@pytest.mark.parametrize("on", ["et", "CAST(et AS TIMESTAMP_NTZ)"])
def test_replayed_sampling_windows(spark, samples, on):
    df = dfsql.sql(Q.format(w="SLIDING(1 HOUR, EVERY 3 HOURS)", on=on,
                            tail="PROCESSING TIME at ALLOWED LATENESS 0 SECONDS "
                            "LATE ROWS INTO sampled_late"), spark)
    # by hand, watermark = max event time so far (DELAY 0): [0, 1) of a fires at 01:11,
    # when the gap element (01:10) moves the watermark past 01:00; [3, 4) at 07:00 (06:59:59
    # arrives); [6, 7) of b with the end of the input (the last arrival, 07:10). 64 (00:40)
    # arrives at 07:10, after [0, 1) ended: dropped. 32 (02:30) is in a gap: not dropped.
    assert _rows(df, emit=True) == [
        ("a", _t(0), _t(1), 1, _t(1, 11)), ("a", _t(3), _t(4), 4, _t(7)),
        ("b", _t(6), _t(7), 8, _t(7, 10))]
    assert dfsql.dropped_late(df) == 2
    late = sorted((r.k, r.reason) for r in spark.table("sampled_late").collect())
    assert late == [("a", "expired"), ("a", "null event time")]


def test_engine_clock_stream_of_sampling_windows_equals_the_replay(spark, tmp_path):
    # not Spark's own operator (its window would end at the period): dfsql's executor, on
    # Spark's watermark, checked against the bounded replay on that clock
    engine_clock.engine_clock_equals_replay(
        spark, tmp_path, 21, "SLIDING(20 SECONDS, EVERY 1 MINUTE, OFFSET 10 SECONDS)", 5)


def test_engine_clock_stream_sums_only_elements_in_windows(spark, tmp_path):
    # rows in event-time order over 50 minutes, in 4 micro-batches: none is late, and
    # every window that ends by the largest event time fires (the watermark, DELAY 0,
    # reaches it in the data-less batch after the last)
    rng = np.random.default_rng(22)
    et = np.sort(rng.integers(0, 3000, 200))
    frame = pd.DataFrame({"key": rng.choice(["a", "b"], 200),
                          "value": rng.integers(1, 10, 200).astype(np.int64),
                          "event_time": [engine_clock.T0 + timedelta(seconds=int(s))
                                         for s in et]})
    batches = [frame.iloc[i:i + 50] for i in range(0, 200, 50)]
    got, _, _ = engine_clock._run(spark, tmp_path, "live_sampled", batches,
                                  engine_clock.QUERY.format(
                                      src="{src}", window="SLIDING(20 SECONDS, EVERY 1 MINUTE)",
                                      tail="WATERMARK DELAY 0 SECONDS"))
    # independently (pandas): per key and window [minute, minute + 20 s) ending by the
    # largest event time, the sum, count and maximum of the elements in it
    last = frame["event_time"].max().tz_localize(None)
    inside = frame[frame["event_time"].dt.second < 20]
    start = inside["event_time"].dt.floor("min").dt.tz_localize(None)
    want = sorted((k, int(g["value"].sum()), len(g), int(g["value"].max()), s,
                   s + timedelta(seconds=20))
                  for (k, s), g in inside.groupby([inside["key"], start])
                  if s + timedelta(seconds=20) <= last)
    assert sorted(tuple(r[1:7]) for r in got) == want
    assert len(want) > 30
    assert sum(n for _, _, n, *_ in want) < len(frame) / 2  # two thirds are in gaps


def test_processing_time_stream_of_sampling_windows_equals_the_replay(spark, tmp_path):
    frame = feeds.workload(23)
    rng = np.random.default_rng(123)
    cuts = sorted(rng.choice(np.arange(1, len(frame)), 5, replace=False).tolist())
    q = feeds.STREAM_QUERY.format(window="SLIDING(30 SECONDS, EVERY 100 SECONDS, OFFSET 7 SECONDS)",
                               trigger="EVERY 15 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
                               emit="ACCUMULATING AND RETRACTING")
    stream, replay, _ = feeds.stream_and_replay(spark, frame, q, cuts, tmp_path)
    assert len(replay) > 10
    # every window is 30 s long, starting 7 s past a multiple of 100 s
    assert all(r.window_end - r.window_start == timedelta(seconds=30)
               and (r.window_start - _t(0)).total_seconds() % 100 == 7 for r in replay)
    assert stream == replay


def test_a_spark_error_on_a_generated_stage_names_no_internal_column(spark):
    # the shape of the error SLIDING(1 HOUR, EVERY 3 HOURS) gave before: Spark suggests
    # the stage's own columns
    with pytest.raises(Exception) as exc:  # noqa: PT011 - Spark's own exception
        spark.sql("SELECT `window`.start FROM (SELECT 1 AS __k0, 2 AS __c0) AS __dfsql_in_11")
    mapped = map_spark_error(exc.value, None)
    assert isinstance(mapped, AnalysisError)
    assert "`window`.`start`" in mapped.message
    assert "__" not in mapped.message and mapped.hint is None
    # a user's column among Spark's suggestions stays, without dfsql's qualifier
    with pytest.raises(Exception) as exc:  # noqa: PT011
        spark.sql("SELECT totl FROM (SELECT 1 AS total, 2 AS __k0) AS __dfsql_panes_3")
    mapped = map_spark_error(exc.value, None)
    assert "__" not in mapped.message and mapped.hint == "did you mean one of `total`?"
