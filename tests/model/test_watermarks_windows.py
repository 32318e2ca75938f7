"""Watermark timelines and window assignment on hand-worked examples."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dfsql.model import clauses as c
from dfsql.model.watermarks import (
    DelayHistogram,
    Timeline,
    delay_timeline,
    percentile_lags,
    percentile_timeline,
    perfect_timeline,
    round_delay,
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
    # between arrivals it rises with p (docs/reference.md#watermark); at 30 the median grows back to
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


def test_percentile_delays_round_up_to_three_significant_digits() -> None:
    # exact below 1 ms and for three significant digits; otherwise up (toward +inf),
    # by less than 1% of the delay
    d = np.array([0, 999, 5_000_000, 2_500_000, 1_234_567, 1_001, -1_234_567, -5])
    assert round_delay(d).tolist() == [0, 999, 5_000_000, 2_500_000, 1_240_000, 1_010,
                                       -1_230_000, -5]
    # delays 1.234567 s and 2.0001 s: the median (nearest rank, 1 of 2) is the first,
    # rounded up to 1.24 s, so the watermark at 10 s is 8.76 s, not 8.765433 s
    s = 1_000_000
    t = percentile_timeline(np.array([5 * s - 1_234_567, 10 * s - 2_000_100]),
                            np.array([5 * s, 10 * s]), 50, 0)
    assert int(t.at(10 * s)) == 10 * s - 1_240_000


def test_percentile_lags_continue_from_a_histogram() -> None:
    # what a stream's bucket does batch by batch equals one pass over all arrivals
    rng = np.random.default_rng(5)
    at = np.sort(rng.integers(0, 10_000, 500))
    d = round_delay(rng.integers(-50, 5_000_000, 500))
    one = np.ones(500, np.int64)
    times, lags, _ = percentile_lags(DelayHistogram.empty(), at, d, one, 90, 7)
    # cut between instants (an instant is complete only when a later one arrives)
    cuts = [0, *np.searchsorted(at, [1, 3_000, 3_001, 9_000]).tolist(), 500]
    hist, got_t, got_lag = DelayHistogram.empty(), [], []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        t, lag, hist = percentile_lags(hist, at[lo:hi], d[lo:hi], one[lo:hi], 90, 7)
        got_t.append(t)
        got_lag.append(lag)
    assert np.array_equal(np.concatenate(got_t), times)
    assert np.array_equal(np.concatenate(got_lag), lags)
    assert hist.counts.sum() == 500 and len(hist.values) < 500


def test_percentile_lags_are_the_nearest_rank_of_every_delay_so_far() -> None:
    """Against the definition, spelled out: at each instant, sort the histogram's delays
    (each repeated by its count) and every row's arrived by then (by its count), and take
    the ceil(q% of them)-th (at least the 1st); the lag is that plus DELAY."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        n = int(rng.integers(1, 40))
        at = np.sort(rng.integers(0, 12, n))
        d = round_delay(rng.integers(-1_000, 3_000_000, n))
        cnt = rng.integers(1, 4, n)
        hv = np.unique(round_delay(rng.integers(0, 3_000_000, int(rng.integers(0, 4)))))
        hist = DelayHistogram(hv, rng.integers(0, 3, len(hv)))
        q = float(rng.choice([1, 33.3, 50, 90, 99, 100]))
        times, lags, after = percentile_lags(hist, at, d, cnt, q, 7)
        assert times.tolist() == sorted(set(at.tolist()))
        for t, lag in zip(times.tolist(), lags.tolist(), strict=True):
            seen = sorted(np.repeat(hist.values, hist.counts).tolist()
                          + np.repeat(d[at <= t], cnt[at <= t]).tolist())
            assert lag == seen[max(1, int(np.ceil(q / 100 * len(seen)))) - 1] + 7
        assert dict(zip(after.values.tolist(), after.counts.tolist(), strict=True)) == {
            v: int(hist.counts[hv == v].sum() + cnt[d == v].sum())
            for v in set(hv.tolist()) | set(d.tolist())}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(-5, 20)), max_size=30))
def test_timeline_of_raw_points_is_the_running_max_by_instant(points) -> None:
    """Points in any order, several at one instant: the watermark after instant p is the
    largest value among points at or before p, and the timeline keeps only its changes."""
    t = Timeline.of([p for p, _ in points], [v for _, v in points])
    for p in range(-1, 8):
        seen = [v for q, v in points if q <= p]
        assert int(t.at(p)) == (max(seen) if seen else NEG_INF)
    assert np.all(np.diff(t.values) > 0) and np.all(np.diff(t.times) > 0)
