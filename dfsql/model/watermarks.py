"""The global watermark timeline (docs/reference.md#watermark), computed once across all keys.

A :class:`Timeline` is a monotone step function of processing time: at change point
``times[i]`` the watermark becomes ``values[i]`` (both int64 µs, times strictly
increasing, values non-decreasing). Before the first change it is -inf (NEG_INF).
The final +inf of a bounded input is not stored: the driver applies it at the last
instant it processes.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dfsql.model.clauses import (
    Watermark,
    WatermarkDelay,
    WatermarkFrom,
    WatermarkPercentile,
    WatermarkPerfect,
)
from dfsql.model.lexsort import lexsort
from dfsql.model.windows import I64, NEG_INF, NULL_EVENT_TIME, POS_INF


@dataclass(frozen=True)
class Timeline:
    """Watermark as a function of processing time: steps, or steps with rising segments.

    At change point ``times[i]`` the watermark becomes ``values[i]``. Without ``lags`` it
    then stays there until the next change (a step function: DELAY, FROM, PERFECT). With
    ``lags`` (PERCENTILE) it also rises with processing time between change points:
    ``wm(p) = max(values[i], p - lags[i])`` for ``times[i] <= p < times[i+1]``, the
    paper's "p minus the observed delay percentile", never moving backwards.
    ``end`` is the latest instant of the watermark's own input (a WATERMARK FROM
    series' last row), which a bounded replay runs to even if the watermark no longer
    changes there (docs/reference.md#watermark). Before the first change the watermark is -inf.
    """

    times: np.ndarray
    values: np.ndarray
    lags: np.ndarray | None = None
    end: int = NEG_INF

    @staticmethod
    def of(times: Sequence[int] | np.ndarray, values: Sequence[int] | np.ndarray,
           end: int = NEG_INF) -> Timeline:
        """Build from raw points in any order: sort, running max, keep only changes."""
        t = np.asarray(times, I64)
        v = np.asarray(values, I64)
        if len(t) == 0:
            return Timeline(np.empty(0, I64), np.empty(0, I64), None, end)
        # in time order; within one instant any order: the running max at its last
        # point covers them all, and only that point is kept
        o = np.argsort(t, kind="stable")
        t, v = t[o], np.maximum.accumulate(v[o])
        last_of_time = np.r_[t[1:] != t[:-1], True]
        t, v = t[last_of_time], v[last_of_time]
        change = np.r_[True, v[1:] != v[:-1]] & (v > NEG_INF)
        return Timeline(t[change], v[change], None, end)

    @staticmethod
    def rising(times: np.ndarray, lags: np.ndarray, end: int = NEG_INF,
               start: int = NEG_INF) -> Timeline:
        """``wm(p) = max over p' <= p of (p' - lag(p'))`` where the lag changes only at
        ``times`` (strictly increasing): a running max that rises between changes.
        ``start`` is the watermark already reached at ``times[0]`` (a timeline continued
        from folded history)."""
        t = np.asarray(times, I64)
        lag = np.asarray(lags, I64)
        if len(t) == 0:
            return Timeline(np.empty(0, I64), np.empty(0, I64), None, end)
        here = t - lag
        here[0] = max(int(here[0]), start)
        carried = np.r_[NEG_INF, t[1:] - lag[:-1]]  # the previous segment's value at t[i]
        v = np.maximum.accumulate(np.maximum(here, carried))
        # keep a point only where the lag changes (the value is continuous elsewhere)
        keep = np.r_[True, lag[1:] != lag[:-1]]
        return Timeline(t[keep], v[keep], lag[keep], end)

    def _value(self, i: np.ndarray, p: np.ndarray | int) -> np.ndarray:
        """Value at p of segment i (i = -1: before the first change, -inf)."""
        if not len(self.times):
            return np.full(np.shape(p), NEG_INF, I64)
        j = np.maximum(i, 0)
        v = self.values[j]
        if self.lags is not None:
            v = np.maximum(v, np.asarray(p, I64) - self.lags[j])
        return np.where(i >= 0, v, NEG_INF)

    def at(self, p: np.ndarray | int) -> np.ndarray:
        """The watermark after instant p's move (largest change point <= p)."""
        return self._value(np.searchsorted(self.times, p, side="right") - 1, p)

    def before(self, p: np.ndarray | int) -> np.ndarray:
        """The watermark in effect when elements arrive at p (before p's move): its value
        at the previous microsecond, for steps and rising segments alike."""
        q = np.asarray(p, I64)
        q = np.where(q > NEG_INF, q - 1, q)
        return self._value(np.searchsorted(self.times, q, side="right") - 1, q)

    def reach(self, thresholds: np.ndarray | int) -> np.ndarray:
        """The first instant at which the watermark is >= each threshold (POS_INF if
        never): a change point, or a point inside a rising segment."""
        th = np.asarray(thresholds, I64)
        n = len(self.times)
        if n == 0:
            return np.full(np.shape(th), POS_INF, I64)
        j = np.searchsorted(self.values, th, side="left")
        out = np.where(j < n, self.times[np.minimum(j, n - 1)], POS_INF)
        if self.lags is not None:
            i = np.maximum(j - 1, 0)
            lag = self.lags[i]
            inside = (j >= 1) & (th < POS_INF - np.maximum(lag, 0))
            rise = np.where(inside, th + np.where(inside, lag, 0), POS_INF)
            out = np.minimum(out, rise)
        return out.astype(I64)

    def ahead_of_processing_time(self) -> tuple[int, int] | None:
        """(The first instant at which the watermark passed processing time, the watermark
        it became then), or None. No row can have happened after it arrived, so a
        watermark ahead of the clock believes in rows from the future: a mis-dated row
        (DELAY) or mark moved it, and every row after it may be dropped."""
        if not len(self.times):
            return None
        v = self._value(np.arange(len(self.times)), self.times)
        ahead = np.flatnonzero((v > self.times) & (v < POS_INF))
        return (int(self.times[ahead[0]]), int(v[ahead[0]])) if len(ahead) else None

    @property
    def last_change(self) -> int:
        """The last change point (NEG_INF if none); a rising timeline keeps rising after."""
        return int(self.times[-1]) if len(self.times) else NEG_INF


def delay_timeline(event_time: np.ndarray, arrival_time: np.ndarray, delay: int) -> Timeline:
    """DELAY d: max event time among elements arrived so far, minus d."""
    return Timeline.of(arrival_time, np.asarray(event_time, I64) - delay)


def series_timeline(processing_time: Sequence[int], watermark: Sequence[int]) -> Timeline:
    """FROM a series: largest watermark with processing_time <= p (running max)."""
    end = int(np.max(np.asarray(processing_time, I64))) if len(processing_time) else NEG_INF
    return Timeline.of(processing_time, watermark, end)


def writers_timeline(
    writer: Sequence[object],
    processing_time: Sequence[int],
    noted_time: Sequence[int],
    idle_timeout: int | None,
) -> Timeline:
    """FROM … BY writer [IDLE TIMEOUT d]: minimum over live writers of their latest note.

    A writer is live from its first note until ``last note + d`` (then its silence no
    longer holds the watermark back; that expiry is itself a change point). When no
    writer is live the watermark stays where it was. The result never moves backwards.
    """
    rows = sorted(zip(processing_time, range(len(writer)), writer, noted_time, strict=True))
    latest: dict[object, int] = {}
    last_note: dict[object, int] = {}
    expiries: list[tuple[int, int, object]] = []  # (expiry instant, note instant, writer)
    times: list[int] = []
    values: list[int] = []

    def emit(p: int) -> None:
        if latest:
            times.append(p)
            values.append(min(latest.values()))

    i = 0
    while i < len(rows) or expiries:
        p_row = rows[i][0] if i < len(rows) else POS_INF
        while expiries and expiries[0][0] <= p_row and (
            expiries[0][0] < p_row or i >= len(rows)
        ):
            e, noted_at, w = heapq.heappop(expiries)
            if last_note.get(w) == noted_at:  # still silent since that note
                del latest[w]
                emit(e)
        if i >= len(rows):
            break
        p = p_row
        while i < len(rows) and rows[i][0] == p:
            _, _, w, v = rows[i]
            latest[w] = int(v)
            last_note[w] = int(p)
            if idle_timeout is not None:
                heapq.heappush(expiries, (int(p) + idle_timeout, int(p), w))
            i += 1
        emit(int(p))
    end = int(max(processing_time)) if len(processing_time) else NEG_INF
    return Timeline.of(times, values, end)


def holding_writer(writer: Sequence[object], processing_time: Sequence[int],
                   noted_time: Sequence[int], idle_timeout: int | None, at: int) -> object | None:
    """FROM … BY writer: the writer holding the watermark at ``at`` — among the live
    writers (noted within ``idle_timeout`` of ``at``, as :func:`writers_timeline` keeps
    them), the one whose latest note is the lowest; None when none is live. EXPLAIN
    FIRINGS' WAITING rows name it. A writers' table is small: read whole."""
    p = np.asarray(processing_time, I64)
    v = np.asarray(noted_time, I64)
    latest: dict[object, tuple[int, int]] = {}
    for i in np.argsort(p, kind="stable").tolist():
        if p[i] <= at:
            latest[writer[i]] = (int(p[i]), int(v[i]))
    live = {w: n for w, (q, n) in latest.items() if idle_timeout is None or at < q + idle_timeout}
    return min(live, key=live.__getitem__) if live else None


def perfect_timeline(event_time: np.ndarray, arrival_time: np.ndarray) -> Timeline:
    """PERFECT (docs/reference.md#processing-time): at p, the smallest event time among rows not yet arrived
    (+inf after the last: the driver's end of input, not stored). In two steps, which the
    Spark replay runs as they are (:mod:`dfsql.spark.timelines`): each arrival instant's
    earliest event time, then the smallest over the later instants."""
    return Timeline.of(*perfect_changes(*earliest_per_arrival(arrival_time, event_time)))


def earliest_per_arrival(arrival_time: np.ndarray, event_time: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """PERFECT's reduction: the distinct arrival instants, ascending, each with the
    smallest event time arriving then. Applied to parts of the input and then to their
    results it gives the same as applied to the whole (a minimum per instant)."""
    a = np.asarray(arrival_time, I64)
    e = np.asarray(event_time, I64)
    if len(a) == 0:
        return a, e
    o = lexsort((e, a))
    a, e = a[o], e[o]
    first_of_time = np.r_[True, a[1:] != a[:-1]]
    return a[first_of_time], e[first_of_time]


def perfect_changes(instants: np.ndarray, earliest: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """From :func:`earliest_per_arrival`: the instants at which the smallest event time
    still to arrive changes, and that event time (the smallest over the later instants).
    The last instant has none after it; its +inf is the end of input, not a change."""
    t = np.asarray(instants, I64)
    if len(t) < 2:
        return t[:0], t[:0]
    later = np.minimum.accumulate(np.asarray(earliest, I64)[::-1])[::-1][1:]
    change = np.r_[True, later[1:] != later[:-1]] & (later < POS_INF)
    return t[:-1][change], later[change]


#: significant decimal digits a PERCENTILE delay keeps (see :func:`round_delay`)
DELAY_DIGITS = 3


def round_delay(delay: np.ndarray) -> np.ndarray:
    """Delays (µs) rounded up to :data:`DELAY_DIGITS` significant decimal digits.

    PERCENTILE's state is then a histogram of at most 900 values per decade (bounded on
    an endless stream) and the same on every path. Rounding is monotone, so the rounded
    percentile is the exact one rounded up: for a percentile delay P the watermark uses
    P' with P <= P' < P + |P|/100 (exact below 1 ms, and for every delay with three
    significant digits: 5 s, 2.5 s, 125 ms). A larger delay only holds the watermark back."""
    d = np.asarray(delay, I64)
    mag = np.abs(d)
    digits = np.searchsorted(_POW10, mag, side="right")  # mag < 10**digits
    unit = _POW10[np.maximum(digits - DELAY_DIGITS, 0)]
    up = (mag + unit - 1) // unit * unit  # toward +inf for positive delays
    down = mag // unit * unit  # ... and for negative ones (an event time after arrival)
    return np.where(d >= 0, up, -down).astype(I64)


_POW10 = np.array([10**i for i in range(19)], I64)


@dataclass(frozen=True)
class DelayHistogram:
    """The rounded delays seen so far: sorted distinct values and their counts."""

    values: np.ndarray
    counts: np.ndarray

    @staticmethod
    def empty() -> DelayHistogram:
        return DelayHistogram(np.empty(0, I64), np.empty(0, I64))


def percentile_lags(
    hist: DelayHistogram, at: np.ndarray, delays: np.ndarray, counts: np.ndarray,
    q: float, delay: int,
) -> tuple[np.ndarray, np.ndarray, DelayHistogram]:
    """PERCENTILE q DELAY d over arrivals after those in ``hist``: at each distinct
    arrival instant (``at`` ascending; ``delays`` rounded, ``counts`` rows of each), the
    lag p - wm(p) = the nearest-rank q-th percentile of all delays so far, plus d.

    Each instant's percentile is the k-th smallest delay of a prefix of the arrivals
    (the histogram's, then every row arrived by then), answered for all instants at once
    by a weighted wavelet matrix over the delays' ranks: one vectorised step per bit of
    the rank, so the cost is (rows + instants) x log2(distinct delays), whatever the
    number of instants. Returns (instants, lags, the histogram after)."""
    at = np.asarray(at, I64)
    d = np.asarray(delays, I64)
    cnt = np.asarray(counts, I64)
    values = np.union1d(hist.values, d)
    base = np.zeros(len(values), I64)
    base[np.searchsorted(values, hist.values)] = hist.counts
    rank = np.searchsorted(values, d)
    after = base + np.bincount(rank, weights=cnt, minlength=len(values)).astype(I64)
    if not len(at):
        return np.empty(0, I64), np.empty(0, I64), DelayHistogram(values, after)
    instants = np.unique(at)
    # the entries: every delay value weighted by the histogram's count, then the rows;
    # an instant's prefix ends after the last row arrived by it
    ranks = np.r_[np.arange(len(values), dtype=I64), rank]
    weights = np.r_[base, cnt]
    ends = len(values) + np.searchsorted(at, instants, side="right")
    n = np.cumsum(weights)[ends - 1]
    k = np.maximum(1, np.ceil(q / 100.0 * n)).astype(I64)  # the k-th smallest, by weight
    return instants, values[_kth_in_prefix(ranks, weights, ends, k)] + delay, \
        DelayHistogram(values, after)


def _kth_in_prefix(ranks: np.ndarray, weights: np.ndarray, ends: np.ndarray,
                   k: np.ndarray) -> np.ndarray:
    """For each query i, the smallest rank r such that the entries among the first
    ``ends[i]`` whose rank is <= r weigh at least ``k[i]`` (a weighted wavelet matrix:
    per bit, from the highest, the entries are stably split by that bit, and each query
    narrows to the half its k-th smallest weight lies in)."""
    bits = max(1, int(ranks.max()).bit_length()) if len(ranks) else 1
    order = np.arange(len(ranks))
    lo = np.zeros(len(ends), I64)  # each query's range [lo, hi) in the current order
    hi = np.asarray(ends, I64).copy()
    k = np.asarray(k, I64).copy()
    out = np.zeros(len(ends), I64)
    for b in range(bits - 1, -1, -1):
        one = ((ranks[order] >> b) & 1).astype(bool)
        zeros_before = np.r_[0, np.cumsum(~one)]  # positions
        zero_weight = np.r_[0, np.cumsum(np.where(one, 0, weights[order]))]
        n_zero = zeros_before[-1]
        wz = zero_weight[hi] - zero_weight[lo]
        left = k <= wz
        zl, zh = zeros_before[lo], zeros_before[hi]
        lo = np.where(left, zl, n_zero + lo - zl)
        hi = np.where(left, zh, n_zero + hi - zh)
        k = np.where(left, k, k - wz)
        out |= np.where(left, 0, 1 << b).astype(I64)
        order = np.r_[order[~one], order[one]]
    return out


def percentile_timeline(
    event_time: np.ndarray, arrival_time: np.ndarray, q: float, delay: int
) -> Timeline:
    """PERCENTILE q DELAY d: p minus the nearest-rank q-th percentile of the delays
    (arrival - event time, rounded by :func:`round_delay`) seen so far, minus d. The
    percentile changes only at arrival instants; between them the watermark rises with p
    (a rising :class:`Timeline`)."""
    a = np.asarray(arrival_time, I64)
    d = round_delay(a - np.asarray(event_time, I64))
    o = np.argsort(a, kind="stable")
    times, lags, _ = percentile_lags(DelayHistogram.empty(), a[o], d[o],
                                     np.ones(len(a), I64), q, delay)
    return Timeline.rising(times, lags)


def timeline_for(
    watermark: Watermark,
    event_time: np.ndarray,
    arrival_time: np.ndarray | None,
    series: Sequence[tuple[int, int]] | Sequence[tuple[object, int, int]] | None = None,
) -> Timeline:
    """The timeline of a WATERMARK clause. Batch input (no arrival times) has none:
    everything arrives at one instant and the watermark jumps to +inf."""
    if arrival_time is None:
        return Timeline.of([], [])
    known = np.asarray(event_time, I64) != NULL_EVENT_TIME
    if not known.all():  # a NULL event time belongs to no window and moves no watermark
        event_time, arrival_time = np.asarray(event_time)[known], np.asarray(arrival_time)[known]
    if isinstance(watermark, WatermarkDelay):
        return delay_timeline(event_time, arrival_time, watermark.delay.micros)
    if isinstance(watermark, WatermarkFrom):
        pts = list(series or [])
        if watermark.writer is not None:
            w, p, v = zip(*pts, strict=True) if pts else ((), (), ())
            timeout = None if watermark.idle_timeout is None else watermark.idle_timeout.micros
            return writers_timeline(w, p, v, timeout)
        if not pts:
            return Timeline.of([], [])
        p, v = zip(*pts, strict=True)
        return series_timeline(p, v)
    if isinstance(watermark, WatermarkPerfect):
        return perfect_timeline(event_time, arrival_time)
    if isinstance(watermark, WatermarkPercentile):
        return percentile_timeline(
            event_time, arrival_time, watermark.percentile, watermark.delay.micros
        )
    raise TypeError(f"unknown watermark {watermark!r}")


def inputs_frontier(latest: Sequence[int], idle_timeout: int | None = None,
                    first: int = NEG_INF) -> int:
    """Several inputs on one clock (docs/reference.md#allowed-lateness): the instant before which every
    input is complete. Each input (the rows, a stream of marks or of writers' notes) is
    complete before its own latest processing time ``latest[i]`` (NEG_INF: nothing yet),
    and the query's clock stands at the earliest of them, so the result does not depend
    on how the engine cuts either stream. With an idle timeout ``d`` an input quiet for
    ``d`` or more of the latest input's processing time no longer holds the frontier (as
    a writer quiet that long no longer holds the watermark, :func:`writers_timeline`);
    an input that has sent nothing counts as quiet since ``first``, the first instant any
    input reached."""
    newest = max(latest, default=NEG_INF)
    if newest == NEG_INF:
        return NEG_INF
    held = [t for t in latest
            if idle_timeout is None or newest - (first if t == NEG_INF else t) < idle_timeout]
    return min(held)
