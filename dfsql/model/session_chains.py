"""The sessions fast path's chains (:mod:`dfsql.model.sessions_fast`): each key's live
elements grouped into final sessions, the windows every session's arrivals make as one
*chain*, and the closed-form *prefix* of those chains; :mod:`dfsql.model.session_steps`
walks the rest. Whether an arrival joins its session's live window is the merge rule of
:mod:`dfsql.model.windows` (:func:`~dfsql.model.windows.overlaps`), and whether it grows it
or leaves it the same window is :func:`~dfsql.model.windows.within`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfsql.model.fastpath import _ord_of
from dfsql.model.lexsort import lexsort
from dfsql.model.panes import EARLY
from dfsql.model.triggers import ceil_to
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import (
    I64,
    NEG_INF,
    POS_INF,
    merge_sessions,
    overlaps,
    segmented_cummax,
    within,
)

FINAL = POS_INF - 1  # ordinal of the final (+inf watermark) round until its instant is known
NO_FIRST = POS_INF  # AtPeriod without an unfired element


def ord_end(tl: Timeline, thresholds: np.ndarray, end: int) -> np.ndarray:
    """Ordinal (2·instant) of the first instant, up to the end instant, at which the
    watermark reaches each threshold (FINAL: only the final round does)."""
    return _ord_of(tl, thresholds, FINAL, end)


def wm_at(tl: Timeline, ords: np.ndarray) -> np.ndarray:
    """The watermark at each ordinal's instant (+inf in the final round)."""
    return np.where(ords >= FINAL, POS_INF, tl.at(ords // 2))


@dataclass(frozen=True)
class Sessions:
    """The live elements grouped by final session (the batch merge of a key's live
    elements), each session's elements in arrival (instance) order."""

    el: np.ndarray  # instance indices, grouped by session, in arrival order
    c_start: np.ndarray  # per session: its first position in ``el``
    c_len: np.ndarray  # per session: its number of elements
    arr: np.ndarray  # per element (position in ``el``): arrival, window bounds, ...
    start: np.ndarray
    end: np.ndarray
    wm_prev: np.ndarray  # the watermark just before the arrival
    key: np.ndarray
    same_next: np.ndarray  # the next element of the session arrives at the same instant
    first_of_instant: np.ndarray
    # ordinal of the next element's instant in the session (for the last element of an
    # instant group: the session's next, later instant)
    next_arr2: np.ndarray

    @property
    def m(self) -> int:
        return len(self.el)

    @property
    def n_comp(self) -> int:
        return len(self.c_start)


def final_sessions(live: np.ndarray, ikey: np.ndarray, start: np.ndarray, end: np.ndarray,
              arr: np.ndarray, wm_prev: np.ndarray) -> Sessions:
    """Phase 2: the final sessions of the live elements, in arrival order."""
    comp, _, _ = merge_sessions(ikey[live], start[live], end[live])
    o = lexsort((live, comp))
    el = live[o]
    cmp_ = comp[o]
    m = len(el)
    bounds = np.r_[0, np.nonzero(cmp_[1:] != cmp_[:-1])[0] + 1, m].astype(I64) if m else \
        np.zeros(1, I64)
    e_arr = arr[el]
    same_next = np.zeros(m, bool)
    first_of_instant = np.ones(m, bool)
    next_arr2 = np.full(m, POS_INF, I64)
    if m:
        same_comp = cmp_[1:] == cmp_[:-1]
        same_next[:-1] = same_comp & (e_arr[1:] == e_arr[:-1])
        first_of_instant[1:] = ~same_next[:-1]
        next_arr2[:-1] = np.where(same_comp, 2 * e_arr[1:], POS_INF)
    return Sessions(el, bounds[:-1], np.diff(bounds), e_arr, start[el], end[el],
                     wm_prev[el], ikey[el], same_next, first_of_instant, next_arr2)


class Pieces:
    """The windows and panes one phase finds, as arrays to concatenate in order."""

    def __init__(self) -> None:
        self.win_chain: list[np.ndarray] = []
        self.win_seq: list[np.ndarray] = []
        self.win_grew: list[np.ndarray] = []
        self.panes: list[tuple[np.ndarray, ...]] = []

    def add_windows(self, chain: np.ndarray, seq: np.ndarray, grew: np.ndarray) -> None:
        self.win_chain.append(chain)
        self.win_seq.append(seq)
        self.win_grew.append(grew)

    def add_panes(self, chain: np.ndarray, ords: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  index: int, timing: np.ndarray, last: np.ndarray, win: np.ndarray) -> None:
        k = len(chain)
        self.panes.append((chain, ords, lo, hi, np.full(k, index, I64),
                           timing.astype(np.int8), last.astype(bool), win))


@dataclass
class Chains:
    """Per session: its live window (bounds, chain id, first unfired arrival) after a
    phase; per element: its chain and its window (instant group) id."""

    has_win: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    chain: np.ndarray
    first: np.ndarray
    next_chain: int
    elem_chain: np.ndarray
    elem_window: np.ndarray
    n_windows: int


def prefix(s: Sessions, tl: Timeline, end_time: int, period: int | None,
            ) -> tuple[np.ndarray, Chains, Pieces]:
    """The leading windows of each session, in closed form: (their number of elements
    per session, the chains' state after them, their windows and panes).

    The leading windows of a session that are not created late and that the watermark
    does not reach before the next arrival stay in phase 1 (every merge rewinds), so with
    an early period the last window before each period boundary fires there, and nothing
    else fires: no steps. (Hot keys' long sessions.)
    """
    m, n_comp = s.m, s.n_comp
    ch = Chains(np.zeros(n_comp, bool), np.zeros(n_comp, I64), np.zeros(n_comp, I64),
                 np.full(n_comp, -1, I64), np.full(n_comp, NO_FIRST, I64), 0,
                 np.empty(m, I64), np.empty(m, I64), 0)
    pieces = Pieces()
    if not m:
        return np.zeros(n_comp, I64), ch, pieces
    c_start, c_len, e_arr, next_arr2 = s.c_start, s.c_len, s.arr, s.next_arr2
    seg = np.repeat(np.arange(n_comp, dtype=I64), c_len)
    pos = np.arange(m, dtype=I64) - np.repeat(c_start, c_len)
    run_hi = segmented_cummax(s.end, seg)
    run_lo = -segmented_cummax(-s.start, seg)
    prev_hi = np.r_[NEG_INF, run_hi[:-1]]
    prev_lo = np.r_[POS_INF, run_lo[:-1]]
    ok = (pos == 0) | overlaps(s.start, s.end, prev_lo, prev_hi)
    wrow = ~s.same_next
    o_end_all = np.maximum(2 * e_arr, ord_end(tl, run_hi, end_time))
    good = ok & (~wrow | ((s.wm_prev < run_hi) & (o_end_all >= next_arr2)))
    first_bad = np.full(n_comp, POS_INF, I64)
    np.minimum.at(first_bad, seg[~good], pos[~good])
    last_good_w = np.full(n_comp, -1, I64)
    cand = wrow & (pos < first_bad[seg])
    np.maximum.at(last_good_w, seg[cand], pos[cand])
    c_off = last_good_w + 1
    pre = pos < c_off[seg]  # elements in a prefix
    pc = np.nonzero(c_off > 0)[0]
    if not len(pc):
        return c_off, ch, pieces
    ch.chain[pc] = np.arange(len(pc), dtype=I64)
    ch.next_chain = len(pc)
    ch.has_win[pc] = True
    last_i = c_start[pc] + c_off[pc] - 1
    ch.lo[pc], ch.hi[pc] = run_lo[last_i], run_hi[last_i]
    ch.elem_chain[pre] = ch.chain[seg[pre]]
    prow = np.nonzero(pre & wrow)[0]
    wid = np.arange(len(prow), dtype=I64)
    ch.n_windows = len(prow)
    ch.elem_window[prow] = wid
    g0 = np.maximum.accumulate(np.where(s.first_of_instant, np.arange(m), 0))[prow]
    pieces.add_windows(ch.chain[seg[prow]], wid,
                       (pos[g0] == 0)
                       | ~within(run_lo[prow], run_hi[prow], prev_lo[g0], prev_hi[g0]))
    if period is None:
        ch.first[pc] = e_arr[c_start[pc]]
        return c_off, ch, pieces
    bnd = ceil_to(e_arr, period)
    fires = next_arr2[prow] > 2 * bnd[prow]
    if fires.any():
        fr = prow[fires]
        pieces.add_panes(ch.chain[seg[fr]], 2 * bnd[fr], run_lo[fr], run_hi[fr], 0,
                         np.full(len(fr), EARLY, np.int8), np.zeros(len(fr), bool), wid[fires])
    # the first unfired arrival after the prefix: its boundary group's first
    gstart = (pos == 0) | np.r_[True, bnd[1:] != bnd[:-1]]
    gfirst = np.maximum.accumulate(np.where(gstart, np.arange(m), 0))
    fired_last = next_arr2[last_i] > 2 * bnd[last_i]
    ch.first[pc] = np.where(fired_last, NO_FIRST, e_arr[gfirst[last_i]])
    return c_off, ch, pieces

