"""Window assignment and merging (docs/reference.md#window), vectorised over int64 microseconds.

Time sentinels, used throughout dfsql.model:

* ``NEG_INF`` (int64 min) is -inf: GLOBAL's ``window_start``, the watermark before
  anything is known, and the NULL ``emit_time`` of a batch input.
* ``POS_INF`` (int64 max) is +inf: GLOBAL's ``window_end`` and the final watermark of a
  bounded input. Only that final watermark passes GLOBAL's end.
* ``NULL_EVENT_TIME`` (= NEG_INF) in an event-time array is a NULL event time: such an
  element belongs to no window (docs/reference.md#window); the driver drops and counts it.

Windows are half-open ``[start, end)``. **The session merge rule** (docs/reference.md#window,
SESSIONS) lives here, once: two session windows merge when they overlap
(:func:`overlaps`: ``a.start < b.end and b.start < a.end``), so windows that only touch
(``[0, 30)`` and ``[30, 60)``) stay two; a window inside another merges into it without
making a new one (:func:`within`); :func:`merge_sessions` is their transitive closure per
key; :func:`closed_gap_sessions` is what an engine with closed-gap sessions (Spark's
``session_window``) is given to honour it. The model's drivers, the sessions fast path,
the stream's retention and the Spark batch SQL all call these.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfsql.model.clauses import (
    Duration,
    FixedWindows,
    GlobalWindows,
    SessionWindows,
    SlidingWindows,
    WindowSpec,
)
from dfsql.model.lexsort import lexsort

I64 = np.int64


@dataclass(frozen=True)
class AssignedWindows(WindowSpec):
    """Windows already assigned upstream: the "event time" handed to the driver is the
    window's start and every window is ``[start, start + size)``. The Spark replay uses
    it for SLIDING windows, whose elements it sends once per window so that every window
    (independent of the others: they never merge) can run in any task."""

    size: Duration = Duration(0)

    def __str__(self) -> str:
        return f"ASSIGNED({self.size})"
NEG_INF = int(np.iinfo(np.int64).min)
POS_INF = int(np.iinfo(np.int64).max)
NULL_EVENT_TIME = NEG_INF


def sat_add(a: np.ndarray | int, b: int) -> np.ndarray | int:
    """``a + b`` for b >= 0, saturating at POS_INF so GLOBAL's end + lateness stays +inf."""
    if isinstance(a, np.ndarray):
        return np.where(a > POS_INF - b, POS_INF, a + b).astype(I64)
    return POS_INF if a > POS_INF - b else a + b


def expiry(window_end: np.ndarray | int, lateness: int) -> np.ndarray | int:
    """When a window's state is released (docs/reference.md#allowed-lateness, ALLOWED LATENESS): once the
    watermark reaches ``window_end + lateness`` (saturating: GLOBAL's never comes)."""
    return sat_add(window_end, lateness)


def expired(window_end: np.ndarray | int, lateness: int,
            watermark: np.ndarray | int) -> np.ndarray | bool:
    """Whether a window has expired at ``watermark``: its state is gone, its closing pane
    has fired, and an element for it is dropped. The one home of the rule; the model's
    drivers and the stream's state retention call it."""
    return watermark >= expiry(window_end, lateness)


@dataclass(frozen=True)
class Grid:
    """FIXED and SLIDING windows (docs/reference.md#window) as the rule that assigns them, in µs.

    The windows are ``[s, s + size)`` for every start ``s ≡ offset (mod period)``;
    FIXED is the grid whose period is its size. An element of event time t belongs to
    each window whose start lies in ``(t - size, t]``: the latest start at or before t
    (:meth:`last_start`) and the ``per_element - 1`` starts before it, those that
    :meth:`contains` t. With a period larger than the size (:attr:`samples`) a t more
    than ``size`` after its latest start falls in a gap: it is in no window (and is not
    a dropped element). The methods take numpy arrays, ints, or any values with ``+``,
    ``-`` and ``<`` (a Spark column: ``mod`` is then Spark's ``pmod``), so that the
    Spark code renders this rule instead of restating it."""

    size: int
    period: int
    offset: int

    @property
    def per_element(self) -> int:
        """How many candidate windows an element has: ceil(size / period)."""
        return -(-self.size // self.period)

    @property
    def samples(self) -> bool:
        """A sampling grid: gaps between windows, where an element is in no window."""
        return self.period > self.size

    def last_start(self, t, mod=np.mod):
        """The latest window start at or before t (``mod``: a floor modulo)."""
        return t - mod(t - self.offset, self.period)

    def steps_back(self) -> list[int]:
        """The candidate starts as offsets below :meth:`last_start`, earliest first."""
        return [self.period * j for j in range(self.per_element - 1, -1, -1)]

    def contains(self, start, t):
        """Whether the window starting at ``start`` holds t (t >= start is given)."""
        return start + self.size > t


def grid(spec: WindowSpec) -> Grid | None:
    """The grid of a FIXED or SLIDING spec; None for windows that are not a grid."""
    if isinstance(spec, FixedWindows):
        return Grid(spec.size.micros, spec.size.micros, spec.offset.micros)
    if isinstance(spec, SlidingWindows):
        return Grid(spec.size.micros, spec.period.micros, spec.offset.micros)
    return None


def assign(
    spec: WindowSpec, t: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Assign every event time to its window(s).

    Returns ``(row, start, end)`` per element instance, ordered by row then start; a
    SLIDING element yields one instance per window containing it — none when its period
    exceeds its size and the element falls in a gap between windows: it is then in no
    window, and not a dropped element (docs/reference.md#window) — every other spec one.
    SESSIONS yields the proto-window ``[t, t+gap)``, still to be merged per key.
    """
    t = np.asarray(t, dtype=I64)
    n = len(t)
    rows = np.arange(n, dtype=I64)
    if isinstance(spec, GlobalWindows):
        return rows, np.full(n, NEG_INF, I64), np.full(n, POS_INF, I64)
    if isinstance(spec, SessionWindows):
        return rows, t.copy(), t + spec.gap.micros
    if isinstance(spec, AssignedWindows):
        return rows, t.copy(), t + spec.size.micros
    g = grid(spec)
    if g is None:
        raise TypeError(f"unknown window spec {spec!r}")
    last = g.last_start(t)
    if g.per_element == 1 and not g.samples:  # FIXED, or SLIDING with period = size
        return rows, last, last + g.size
    starts = last[:, None] - np.asarray(g.steps_back(), I64)[None, :]
    keep = g.contains(starts, t[:, None])
    r = np.broadcast_to(rows[:, None], starts.shape)[keep]
    s = starts[keep]
    return r, s, s + g.size


def overlaps(a_start: np.ndarray | int, a_end: np.ndarray | int,
             b_start: np.ndarray | int, b_end: np.ndarray | int) -> np.ndarray | bool:
    """Whether session windows ``[a_start, a_end)`` and ``[b_start, b_end)`` merge: they
    overlap. Half-open, so windows that only touch stay two (docs/reference.md#window)."""
    return (a_start < b_end) & (b_start < a_end)


def within(start: np.ndarray | int, end: np.ndarray | int,
           outer_start: np.ndarray | int, outer_end: np.ndarray | int) -> np.ndarray | bool:
    """Whether ``[start, end)`` lies inside ``[outer_start, outer_end)``: merging it leaves
    the outer window as it was (Beam's merge identity: no new window, the same trigger,
    panes and timing)."""
    return (outer_start <= start) & (end <= outer_end)


@dataclass(frozen=True)
class ClosedGapSessions:
    """docs/reference.md#window's sessions on an engine whose sessions are closed at the gap: it
    merges ``t2`` into a session whose last time is ``t1`` iff ``t2 <= t1 + gap``, and
    ends the session at ``last + gap`` (Spark's ``session_window``). Ours merge iff
    ``t2 < t1 + g`` (:func:`overlaps` of ``[t1, t1+g)`` and ``[t2, t2+g)``); on integer
    microseconds that is ``t2 <= t1 + (g - 1)``: the engine runs with ``gap = g - 1`` and
    ``end_shift = 1`` µs is added back to its end. For ``g = 1`` the closed gap is 0 (a
    session of equal times only, which Spark's ``session_window`` refuses): ``gap == 0``
    says so, and ``[t, t+1µs)`` is then a 1 µs FIXED window."""

    gap: int  # µs, the closed gap to give the engine
    end_shift: int  # µs to add to the engine's session end


def closed_gap_sessions(gap: int) -> ClosedGapSessions:
    """The closed-gap parameters for SESSIONS(GAP ``gap`` µs): see :class:`ClosedGapSessions`."""
    return ClosedGapSessions(gap - 1, 1)


def sessions(spec: SessionWindows, key: np.ndarray, t: np.ndarray,
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every element's session: its proto-window (:func:`assign`) merged per key with
    every overlapping one (:func:`merge_sessions`'s result, per element)."""
    _, start, end = assign(spec, t)
    return merge_sessions(key, start, end)


def merge_sessions(
    key: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge proto-windows per key, transitively, independent of input order.

    Returns ``(group, merged_start, merged_end)`` per input window: the id of its merged
    window (ids are dense, ordered by key then start) and that window's bounds.
    """
    key = np.asarray(key, I64)
    start = np.asarray(start, I64)
    end = np.asarray(end, I64)
    n = len(start)
    if n == 0:
        e = np.empty(0, I64)
        return e, e, e
    # Non-empty windows with one start all overlap, whatever their ends: (key, start)
    # orders them enough (fewer keys pack into one sort, see dfsql.model.lexsort)
    order = lexsort((start, key) if bool((end > start).all()) else (end, start, key))
    k, s, e = key[order], start[order], end[order]
    # Sorted by start, the session so far is [its first start, running max of end): a
    # window joins it iff they overlap (its start <= this one's, so only the end matters).
    new = np.ones(n, bool)
    runmax = segmented_cummax(e, k)
    new[1:] = (k[1:] != k[:-1]) | ~overlaps(s[1:], e[1:], s[:-1], runmax[:-1])
    gid_sorted = np.cumsum(new) - 1
    ng = int(gid_sorted[-1]) + 1
    mstart = s[new]
    mend = np.full(ng, NEG_INF, I64)
    np.maximum.at(mend, gid_sorted, e)
    group = np.empty(n, I64)
    group[order] = gid_sorted
    return group, mstart[group], mend[group]


def segmented_cummax(e: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Running max of ``e`` restarting at every change of ``k`` (rows grouped by k).

    Ranks are lifted per key above every earlier key so one global
    ``maximum.accumulate`` never leaks a maximum across key boundaries.
    """
    if len(e) == 0:
        return e
    seg = np.cumsum(np.r_[True, k[1:] != k[:-1]]) - 1
    lo, hi = int(e.min()), int(e.max())
    span = hi - lo + 1
    if span * (int(seg[-1]) + 1) < 2**62:
        # Lift each key above the last by the value range: no sort needed.
        lift = seg.astype(I64) * span
        return np.maximum.accumulate((e - lo) + lift) - lift + lo
    # Rank-transform to keep everything small and exact, then lift each key above the last.
    ranks = np.empty(len(e), I64)
    ranks[np.argsort(e, kind="stable")] = np.arange(len(e), dtype=I64)
    lifted = ranks + seg.astype(I64) * len(e)
    # Map back: running max of lifted -> the e value of that rank.
    by_rank = np.sort(e)
    rm = np.maximum.accumulate(lifted)
    return by_rank[rm - seg * len(e)]


def concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])``, vectorised
    (cover pairs and pane members are expanded this way)."""
    lengths = np.asarray(lengths, I64)
    # the i-th output of range r is its start plus (i - where r begins): one repeat
    offset = np.asarray(starts, I64) - (np.cumsum(lengths) - lengths)
    out = np.arange(int(lengths.sum()), dtype=I64)
    out += np.repeat(offset, lengths)
    return out
