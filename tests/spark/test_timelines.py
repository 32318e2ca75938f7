"""The replay's watermark, computed on the executors, equals the model's over the whole
input, and only the watermark's change points leave the executors (issue #10, item 13)."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from dfsql.language.names import EVENT_TIME, PROCESSING_TIME
from dfsql.model import clauses as c
from dfsql.model import timeline_for
from dfsql.model.windows import NULL_EVENT_TIME
from dfsql.spark import timelines

T0 = datetime(2024, 1, 1)
S = 1_000_000


def _rows(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    et = rng.integers(0, 3600, n)
    at = et + rng.exponential(60, n).astype(int) + (rng.random(n) < 0.05) * 600
    null = rng.random(n) < 0.05  # some NULL event times: they move no watermark
    return [(None if z else T0 + timedelta(seconds=int(e)), T0 + timedelta(seconds=int(a)))
            for e, a, z in zip(et, at, null, strict=True)]


class _Plan:
    """What watermark_timeline reads of a BlockPlan."""

    def __init__(self, spark, wm: c.Watermark) -> None:
        self.spark = spark
        self.clauses = c.Clauses(window=c.GlobalWindows(), watermark=wm,
                                 processing_time=c.Expr("arrival_time"))

    def name(self, base: str) -> str:
        return f"{base}_t"


def _partitions_changes(inp) -> int:
    """By the definition, per partition: the instants (in arrival order) at which its
    running max of event time rises, and one row for its last arrival."""
    from pyspark.sql import functions as F

    parts: dict[int, list] = {}
    for pid, e, a in inp.select(F.spark_partition_id(), EVENT_TIME, PROCESSING_TIME).collect():
        parts.setdefault(pid, []).append((a, e))
    changes = 0
    for rows in parts.values():
        top = None
        for a in sorted({a for a, _ in rows}):
            here = [e for b, e in rows if b == a and e is not None]
            if here and (top is None or max(here) > top):
                top, changes = max(here), changes + 1
        changes += 1  # its last arrival
    return changes


def _model(rows, wm):
    e = np.array([NULL_EVENT_TIME if x is None else int((x - datetime(1970, 1, 1)).total_seconds()
                  * S) for x, _ in rows], np.int64)
    a = np.array([int((y - datetime(1970, 1, 1)).total_seconds() * S) for _, y in rows], np.int64)
    return timeline_for(wm, e, a)


@pytest.mark.parametrize("wm", [c.WatermarkDelay(delay=c.Duration(30 * S)), c.WatermarkPerfect(),
                                c.WatermarkPercentile(percentile=90.0, delay=c.Duration(5 * S))],
                         ids=["delay", "perfect", "percentile"])
@pytest.mark.parametrize("seed", [1, 2])
def test_executor_timeline_equals_the_model(spark, wm, seed) -> None:
    rows = _rows(seed)
    inp = spark.createDataFrame(rows, f"{EVENT_TIME} TIMESTAMP, {PROCESSING_TIME} TIMESTAMP")
    inp = inp.repartition(4)  # several partitions: per-partition records must combine
    tl, first, last = timelines.watermark_timeline(_Plan(spark, wm), inp)
    want = _model(rows, wm)
    np.testing.assert_array_equal(tl.times, want.times)
    np.testing.assert_array_equal(tl.values, want.values)
    if want.lags is not None:
        np.testing.assert_array_equal(tl.lags, want.lags)
    arrivals = sorted(int((y - datetime(1970, 1, 1)).total_seconds() * S) for _, y in rows)
    assert (first, last) == (arrivals[0], arrivals[-1])
    # what leaves the executors is the watermark's change points, not the input (DELAY:
    # each partition's own, which the driver combines)
    if isinstance(wm, c.WatermarkDelay):
        assert timelines._delay_records(inp).count() == _partitions_changes(inp) < len(rows)
    elif isinstance(wm, c.WatermarkPerfect):
        assert timelines._perfect_changes(inp).count() == len(want.times) < len(rows) / 2
    else:
        assert timelines._percentile_changes(inp, wm).count() == len(want.times) < len(rows)


def test_null_processing_time_is_a_data_error(spark) -> None:
    from dfsql.errors import DataError

    inp = spark.createDataFrame([(T0, None), (T0, T0)],
                                f"{EVENT_TIME} TIMESTAMP, {PROCESSING_TIME} TIMESTAMP")
    for wm in (c.WatermarkDelay(), c.WatermarkPerfect()):
        with pytest.raises(DataError, match="NULL"):
            timelines.watermark_timeline(_Plan(spark, wm), inp)
