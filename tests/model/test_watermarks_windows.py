"""Watermark timelines and window assignment on hand-worked examples."""

from __future__ import annotations

import numpy as np

from dfsql.language import clauses as c
from dfsql.model.watermarks import (
    Timeline,
    delay_timeline,
    percentile_timeline,
    perfect_timeline,
    series_timeline,
    writers_timeline,
)
from dfsql.model.windows import NEG_INF, POS_INF, assign


def pts(t: Timeline) -> list[tuple[int, int]]:
    return list(zip(t.times.tolist(), t.values.tolist(), strict=True))


def test_delay() -> None:
    t = delay_timeline(np.array([50, 30, 80]), np.array([10, 20, 20]), 5)
    assert pts(t) == [(10, 45), (20, 75)]
    assert int(t.before(20)) == 45 and int(t.at(20)) == 75 and int(t.at(5)) == NEG_INF


def test_series_running_max_and_neg_inf() -> None:
    t = series_timeline([1, 2, 3, 4], [10, NEG_INF, 5, 20])
    assert pts(t) == [(1, 10), (4, 20)]


def test_writers_min_over_live_and_idle_timeout() -> None:
    # a notes 10 @1 then goes silent; b notes 50 @2, 60 @30. timeout 10: a expires at 11
    t = writers_timeline(["a", "b", "b"], [1, 2, 30], [10, 50, 60], 10)
    assert pts(t) == [(1, 10), (11, 50), (30, 60)]
    # without a timeout the silent writer holds it back forever
    t = writers_timeline(["a", "b", "b"], [1, 2, 30], [10, 50, 60], None)
    assert pts(t) == [(1, 10)]
    # never backwards: a slow writer joining late does not lower it
    t = writers_timeline(["a", "b"], [1, 5], [40, 20], None)
    assert pts(t) == [(1, 40)]


def test_perfect() -> None:
    # at each arrival instant: smallest event time still to arrive
    t = perfect_timeline(np.array([5, 1, 9]), np.array([10, 20, 30]))
    assert pts(t) == [(10, 1), (20, 9)]


def test_percentile() -> None:
    # delays 4, 2, 10: the median (nearest rank) after each arrival is 4, 2, 4
    t = percentile_timeline(np.array([6, 18, 20]), np.array([10, 20, 30]), 50, 0)
    assert t.at(np.array([9, 10, 15, 20, 25])).tolist() == [NEG_INF, 6, 11, 18, 23]
    # between arrivals it rises with p (LANGUAGE.md §4); at 30 the median grows back to
    # 4 (30 - 4 = 26), but the watermark never moves back: 30 - 2 = 28
    assert int(t.at(30)) == 28 and int(t.at(40)) == 36
    assert int(t.before(20)) == 19 - 4 and int(t.before(10)) == NEG_INF
    # when does it first reach a window end?
    assert t.reach(np.array([6, 7, 18, 19, 28, 29])).tolist() == [10, 11, 20, 21, 30, 33]
    # with DELAY d it trails by d more
    d = percentile_timeline(np.array([6, 18, 20]), np.array([10, 20, 30]), 50, 5)
    assert int(d.at(25)) == 18


def test_assign_fixed_sliding_global_sessions() -> None:
    t = np.array([0, 59, 60, -1])
    _, s, e = assign(c.FixedWindows(size=c.Duration(60), offset=c.Duration(10)), t)
    assert s.tolist() == [-50, 10, 10, -50] and (e - s).tolist() == [60] * 4
    r, s, e = assign(c.SlidingWindows(size=c.Duration(60), period=c.Duration(20)), np.array([25]))
    assert r.tolist() == [0, 0, 0] and s.tolist() == [-20, 0, 20] and e.tolist() == [40, 60, 80]
    r, s, e = assign(c.SlidingWindows(size=c.Duration(50), period=c.Duration(20)), np.array([5]))
    assert s.tolist() == [-40, -20, 0]
    _, s, e = assign(c.GlobalWindows(), t)
    assert set(s.tolist()) == {NEG_INF} and set(e.tolist()) == {POS_INF}
    _, s, e = assign(c.SessionWindows(gap=c.Duration(30)), t)
    assert (e - s).tolist() == [30] * 4
