"""The PERFECT watermark rule (docs/reference.md#watermark), one home: ``model.watermarks``
(``perfect_timeline``, in two steps: ``earliest_per_arrival`` then ``perfect_changes``).
At processing time p the watermark is the smallest event time among the rows not yet
arrived (rows arriving at p have arrived); +inf after the last arrival, which the driver
applies at the end of input and the timeline does not store; a NULL event time moves no
watermark. The model and the Spark replay's timeline (``spark.timelines``, which runs the
model's two steps on the executors) hold to it, by hand and over random inputs with ties
in arrival time and equal event times."""

from __future__ import annotations

import numpy as np
import pytest

from dfsql.model.clauses import WatermarkPerfect
from dfsql.model.watermarks import NULL_EVENT_TIME, perfect_timeline, timeline_for

#: (event time, arrival time) rows -> the timeline's (instant, watermark) changes, by hand
HAND = [
    ([], []),
    ([(5, 1)], []),  # the one row: after it, +inf (not stored)
    ([(5, 1), (3, 2), (9, 3)], [(1, 3), (2, 9)]),
    # ties in arrival: both rows of instant 2 have arrived at 2
    ([(7, 1), (4, 2), (2, 2), (8, 3)], [(1, 2), (2, 8)]),
    # equal event times: the watermark does not change where the minimum does not
    ([(1, 1), (6, 2), (6, 3), (9, 4)], [(1, 6), (3, 9)]),
    # an early-arriving late row holds the watermark back until it arrives
    ([(10, 1), (20, 2), (0, 5), (30, 6)], [(1, 0), (5, 30)]),
    # arrival order differs from row order; negative times
    ([(-3, 4), (-9, -2), (-5, 0)], [(-2, -5), (0, -3)]),
]


def _points(tl) -> list[tuple[int, int]]:
    return list(zip(tl.times.tolist(), tl.values.tolist(), strict=True))


def _timeline(rows):
    e = np.array([r[0] for r in rows], np.int64)
    a = np.array([r[1] for r in rows], np.int64)
    return e, a


@pytest.mark.parametrize("rows,changes", HAND)
def test_model_perfect_by_hand(rows, changes) -> None:
    assert _points(perfect_timeline(*_timeline(rows))) == changes


def test_a_null_event_time_moves_no_watermark() -> None:
    e, a = _timeline([(5, 1), (3, 2), (9, 3)])
    e2, a2 = np.r_[e, NULL_EVENT_TIME], np.r_[a, 2]
    assert _points(timeline_for(WatermarkPerfect(), e2, a2)) == [(1, 3), (2, 9)]


def _random(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, max(1, n // 3), n) * 1_000_000  # many ties in arrival
    e = rng.integers(-5, 20, n) * 1_000_000  # many equal event times
    return e.astype(np.int64), a.astype(np.int64)


def _brute(e: np.ndarray, a: np.ndarray) -> list[tuple[int, int]]:
    """The rule itself, instant by instant: the minimum over rows arriving later."""
    out: list[tuple[int, int]] = []
    for p in sorted(set(a.tolist())):
        later = e[a > p]
        if len(later) and (not out or out[-1][1] != int(later.min())):
            out.append((p, int(later.min())))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_model_perfect_is_the_rule(seed) -> None:
    e, a = _random(seed, 1 + seed * 7)
    assert _points(perfect_timeline(e, a)) == _brute(e, a)


def _spark_points(spark, rows, partitions: int) -> list[tuple[int, int]]:
    from dfsql.language.names import EVENT_TIME, PROCESSING_TIME
    from dfsql.model.watermarks import Timeline
    from dfsql.spark.timelines import _perfect_changes, us

    values = ", ".join(f"({'NULL' if e is None else e}, {a})" for e, a in rows) or "(0, 0)"
    inp = spark.sql(f"SELECT timestamp_micros(e) AS {EVENT_TIME}, "
                    f"timestamp_micros(a) AS {PROCESSING_TIME} FROM VALUES {values} AS v(e, a)"
                    + ("" if rows else " WHERE false")).repartition(partitions)
    t = _perfect_changes(inp).toArrow()
    return _points(Timeline.of(us(t.column("t")), us(t.column("wm"))))


@pytest.mark.parametrize("rows,changes", HAND)
def test_spark_perfect_by_hand(spark, rows, changes) -> None:
    assert _spark_points(spark, rows, 3) == changes


def test_spark_perfect_skips_null_event_times(spark) -> None:
    assert _spark_points(spark, [(5, 1), (None, 2), (3, 2), (9, 3)], 2) == [(1, 3), (2, 9)]


@pytest.mark.parametrize("seed", [3, 11, 19])
def test_spark_perfect_is_the_models(spark, seed) -> None:
    e, a = _random(seed, 60 + seed)
    rows = list(zip(e.tolist(), a.tolist(), strict=True))
    assert _spark_points(spark, rows, 4) == _points(perfect_timeline(e, a)) == _brute(e, a)
