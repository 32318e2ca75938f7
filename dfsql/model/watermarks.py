"""The global watermark timeline (LANGUAGE.md §4), computed once across all keys.

A :class:`Timeline` is a monotone step function of processing time: at change point
``times[i]`` the watermark becomes ``values[i]`` (both int64 µs, times strictly
increasing, values non-decreasing). Before the first change it is -inf (NEG_INF).
The final +inf of a bounded input is not stored: the driver applies it at the last
instant it processes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dfsql.language.clauses import (
    Watermark,
    WatermarkDelay,
    WatermarkFrom,
    WatermarkPercentile,
    WatermarkPerfect,
)
from dfsql.model.windows import I64, NEG_INF, POS_INF


@dataclass(frozen=True)
class Timeline:
    """Watermark as a step function of processing time."""

    times: np.ndarray
    values: np.ndarray

    @staticmethod
    def of(times: Sequence[int] | np.ndarray, values: Sequence[int] | np.ndarray) -> Timeline:
        """Build from raw points in any order: sort, running max, keep only changes."""
        t = np.asarray(times, I64)
        v = np.asarray(values, I64)
        if len(t) == 0:
            return Timeline(np.empty(0, I64), np.empty(0, I64))
        o = np.lexsort((v, t))
        t, v = t[o], np.maximum.accumulate(v[o])
        last_of_time = np.r_[t[1:] != t[:-1], True]
        t, v = t[last_of_time], v[last_of_time]
        change = np.r_[True, v[1:] != v[:-1]] & (v > NEG_INF)
        return Timeline(t[change], v[change])

    def at(self, p: np.ndarray | int) -> np.ndarray:
        """The watermark after instant p's move (largest change point <= p)."""
        i = np.searchsorted(self.times, p, side="right") - 1
        return np.where(i >= 0, self.values[np.maximum(i, 0)], NEG_INF) if len(self.times) else (
            np.full(np.shape(p), NEG_INF, I64)
        )

    def before(self, p: np.ndarray | int) -> np.ndarray:
        """The watermark in effect when elements arrive at p (before p's move)."""
        i = np.searchsorted(self.times, p, side="left") - 1
        return np.where(i >= 0, self.values[np.maximum(i, 0)], NEG_INF) if len(self.times) else (
            np.full(np.shape(p), NEG_INF, I64)
        )

    def first_reaching(self, thresholds: np.ndarray) -> np.ndarray:
        """Index of the first change point whose value >= threshold (len(times) if none)."""
        return np.searchsorted(self.values, thresholds, side="left")


def delay_timeline(event_time: np.ndarray, arrival_time: np.ndarray, delay: int) -> Timeline:
    """DELAY d: max event time among elements arrived so far, minus d."""
    return Timeline.of(arrival_time, np.asarray(event_time, I64) - delay)


def series_timeline(processing_time: Sequence[int], watermark: Sequence[int]) -> Timeline:
    """FROM a series: largest watermark with processing_time <= p (running max)."""
    return Timeline.of(processing_time, watermark)


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
    return Timeline.of(times, values)


def perfect_timeline(event_time: np.ndarray, arrival_time: np.ndarray) -> Timeline:
    """PERFECT: at p, the smallest event time among rows not yet arrived."""
    a = np.asarray(arrival_time, I64)
    e = np.asarray(event_time, I64)
    if len(a) == 0:
        return Timeline.of([], [])
    o = np.lexsort((e, a))
    a, e = a[o], e[o]
    suffix_min = np.minimum.accumulate(e[::-1])[::-1]
    last_of_time = np.r_[a[1:] != a[:-1], True]
    idx = np.nonzero(last_of_time)[0]
    after = np.r_[suffix_min[1:], POS_INF][idx]  # min over rows arriving after this instant
    # POS_INF after the last arrival is the driver's job (end of input), not a change here
    keep = after < POS_INF
    return Timeline.of(a[idx][keep], after[keep])


def percentile_timeline(
    event_time: np.ndarray, arrival_time: np.ndarray, q: float, delay: int
) -> Timeline:
    """PERCENTILE q DELAY d: p minus the nearest-rank q-th percentile of the delays
    (arrival - event time) seen so far, minus d; sampled at every arrival instant."""
    a = np.asarray(arrival_time, I64)
    d = a - np.asarray(event_time, I64)
    o = np.argsort(a, kind="stable")
    a, d = a[o], d[o]
    low: list[int] = []  # max-heap (negated) of the k smallest delays
    high: list[int] = []  # min-heap of the rest
    times: list[int] = []
    values: list[int] = []
    n = 0
    for i in range(len(a)):
        x = int(d[i])
        n += 1
        if low and x < -low[0]:
            heapq.heappush(high, -heapq.heappushpop(low, -x))
        else:
            heapq.heappush(high, x)
        k = max(1, math.ceil(q / 100.0 * n))
        while len(low) < k:
            heapq.heappush(low, -heapq.heappop(high))
        if i + 1 == len(a) or a[i + 1] != a[i]:
            times.append(int(a[i]))
            values.append(int(a[i]) + low[0] - delay)  # p - percentile - d
    return Timeline.of(times, values)


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
