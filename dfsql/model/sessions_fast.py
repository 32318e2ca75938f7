"""Vectorised GroupAlsoByWindow for replayed SESSIONS (identical to the state machine).

Session windows merge as elements arrive, so in general their panes need the state
machine. But in the common case they do not *interleave*: within each final session
(the batch merge of every non-dropped element of a key) the live windows form one
*chain* — every arrival overlaps the single live window of that session and grows it,
or the live window has expired and the arrival starts a new chain. Then each window of
a chain is a closed form of its bounds, its creation instant, the next arrival and the
watermark timeline, and the trigger state a merge carries over is two numbers (phase
reached, first unfired arrival). Steps run over the *k-th arrival of every session at
once*, so the Python loop is as long as the longest session, not the input.

Applies to the triggers whose late phase repeats at the watermark and never finishes:
``Repeat(EndOfWindow)`` (the default) and
``AfterEach(OrFinally(Repeat(AtPeriod p), EndOfWindow), Repeat(EndOfWindow))``
(EVERY p UNTIL WATERMARK THEN REPEAT WATERMARK), in every accumulation mode.
Keys where two live windows of one session would merge are handed to the general state
machine; both parts share one end instant, so results equal :func:`general`'s.

What the state machine does that the closed forms rely on (see ``triggers.py``): every
merge makes a new window (pane_index from 0, not created late unless the watermark
already passed its end, ontime not yet done) whose trigger is the furthest of the
rewound inputs when its end is ahead of the watermark; ``AtPeriod`` keeps its first
unfired arrival through rewinds and phase 2; every pane of a chain retracts the chain's
previous pane; an accumulating pane covers every earlier pane of its chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfsql.model import clauses as c
from dfsql.model.fastpath import _ord_of
from dfsql.model.panes import DROP_EXPIRED, EARLY, LATE, ON_TIME
from dfsql.model.result import (
    Cover,
    GabwResult,
    Instances,
    Panes,
    Retractions,
    canonical,
    end_floor_of,
    instances_of,
)
from dfsql.model.state_machine import general
from dfsql.model.triggers import ceil_to
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import (
    I64,
    NEG_INF,
    POS_INF,
    concat_ranges,
    expired,
    expiry,
    merge_sessions,
    segmented_cummax,
)

FINAL = POS_INF - 1  # ordinal of the final (+inf watermark) round until its instant is known
NO_FIRST = POS_INF  # AtPeriod without an unfired element


def early_period(clauses: c.Clauses) -> tuple[bool, int | None]:
    """(applies, early period) for replayed sessions with a supported trigger."""
    if not isinstance(clauses.window, c.SessionWindows) or clauses.processing_time is None:
        return False, None
    t = clauses.trigger

    def repeat_eow(x: c.Trigger) -> bool:
        while isinstance(x, c.Repeat):
            x = x.sub
        return isinstance(x, c.EndOfWindow)

    if isinstance(t, c.Repeat) and repeat_eow(t):
        return True, None
    if isinstance(t, c.AfterEach) and len(t.subs) == 2 and isinstance(t.subs[1], c.Repeat) \
            and repeat_eow(t.subs[1]):
        first = t.subs[0]
        if isinstance(first, c.OrFinally) and isinstance(first.final, c.EndOfWindow) \
                and isinstance(first.main, c.Repeat):
            m = first.main
            while isinstance(m, c.Repeat):
                m = m.sub
            if isinstance(m, c.AtPeriod):
                return True, m.period.micros
    return False, None


def _ord_end(tl: Timeline, thresholds: np.ndarray, end: int) -> np.ndarray:
    """Ordinal (2·instant) of the first instant, up to the end instant, at which the
    watermark reaches each threshold (FINAL: only the final round does)."""
    return _ord_of(tl, thresholds, FINAL, end)


def _wm_at(tl: Timeline, ords: np.ndarray) -> np.ndarray:
    """The watermark at each ordinal's instant (+inf in the final round)."""
    return np.where(ords >= FINAL, POS_INF, tl.at(ords // 2))


_EMPTY = np.empty(0, I64)


@dataclass(frozen=True)
class _Sessions:
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


def _sessions(live: np.ndarray, ikey: np.ndarray, start: np.ndarray, end: np.ndarray,
              arr: np.ndarray, wm_prev: np.ndarray) -> _Sessions:
    """Phase 2: the final sessions of the live elements, in arrival order."""
    comp, _, _ = merge_sessions(ikey[live], start[live], end[live])
    o = np.lexsort((live, comp))
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
    return _Sessions(el, bounds[:-1], np.diff(bounds), e_arr, start[el], end[el],
                     wm_prev[el], ikey[el], same_next, first_of_instant, next_arr2)


class _Pieces:
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
class _Chains:
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


def _prefix(s: _Sessions, tl: Timeline, end_time: int, period: int | None,
            ) -> tuple[np.ndarray, _Chains, _Pieces]:
    """The leading windows of each session, in closed form: (their number of elements
    per session, the chains' state after them, their windows and panes).

    The leading windows of a session that are not created late and that the watermark
    does not reach before the next arrival stay in phase 1 (every merge rewinds), so with
    an early period the last window before each period boundary fires there, and nothing
    else fires: no steps. (Hot keys' long sessions.)
    """
    m, n_comp = s.m, s.n_comp
    ch = _Chains(np.zeros(n_comp, bool), np.zeros(n_comp, I64), np.zeros(n_comp, I64),
                 np.full(n_comp, -1, I64), np.full(n_comp, NO_FIRST, I64), 0,
                 np.empty(m, I64), np.empty(m, I64), 0)
    pieces = _Pieces()
    if not m:
        return np.zeros(n_comp, I64), ch, pieces
    c_start, c_len, e_arr, next_arr2 = s.c_start, s.c_len, s.arr, s.next_arr2
    seg = np.repeat(np.arange(n_comp, dtype=I64), c_len)
    pos = np.arange(m, dtype=I64) - np.repeat(c_start, c_len)
    run_hi = segmented_cummax(s.end, seg)
    run_lo = -segmented_cummax(-s.start, seg)
    prev_hi = np.r_[NEG_INF, run_hi[:-1]]
    prev_lo = np.r_[POS_INF, run_lo[:-1]]
    ok = (pos == 0) | ((s.start < prev_hi) & (s.end > prev_lo))
    wrow = ~s.same_next
    o_end_all = np.maximum(2 * e_arr, _ord_end(tl, run_hi, end_time))
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
                       (pos[g0] == 0) | (run_hi[prow] > prev_hi[g0])
                       | (run_lo[prow] < prev_lo[g0]))
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


def _steps(s: _Sessions, c_off: np.ndarray, ch: _Chains, tl: Timeline, end_time: int,
           lateness: int, period: int | None) -> tuple[_Chains, np.ndarray, _Pieces]:
    """The rest of each session, one element of every session per step: (the chains'
    final state, which sessions' windows interleave, the windows and panes found).

    Takes over the arrays of ``ch`` (the prefix's state) and returns them updated.
    """
    n_comp = s.n_comp
    c_start, e_arr, e_s, e_e, e_wmp = s.c_start, s.arr, s.start, s.end, s.wm_prev
    has_win, lo, hi, chain, first = ch.has_win, ch.lo, ch.hi, ch.chain, ch.first
    next_chain, n_windows = ch.next_chain, ch.n_windows
    phase2 = np.zeros(n_comp, bool)
    # the live window's own timing history: created late, on-time pane fired (a window
    # that absorbs an element without growing stays the same window: merge identity)
    late_born = np.zeros(n_comp, bool)
    ontime_done = np.zeros(n_comp, bool)
    glo = np.zeros(n_comp, I64)  # the live window's bounds before the current instant
    ghi = np.zeros(n_comp, I64)
    complex_ = np.zeros(n_comp, bool)
    pieces = _Pieces()
    c_rem = s.c_len - c_off
    max_len = int(c_rem.max()) if n_comp else 0
    for step in range(max_len):
        A = np.nonzero(c_rem > step)[0]
        i = c_start[A] + c_off[A] + step
        # A new instant: is the session's live window still alive (not expired)?
        fo = s.first_of_instant[i]
        if fo.any():
            Af = A[fo]
            alive = has_win[Af] & ~expired(hi[Af], lateness, e_wmp[i[fo]])
            dead = Af[~alive]
            if len(dead):
                has_win[dead] = False
                chain[dead] = np.arange(next_chain, next_chain + len(dead), dtype=I64)
                next_chain += len(dead)
                phase2[dead] = False
                first[dead] = NO_FIRST
            glo[Af] = np.where(has_win[Af], lo[Af], POS_INF)
            ghi[Af] = np.where(has_win[Af], hi[Af], NEG_INF)
        # Add the element: it must overlap the live window, else two windows would coexist.
        hw = has_win[A]
        ok = ~hw | ((e_s[i] < hi[A]) & (e_e[i] > lo[A]))
        complex_[A[~ok]] = True
        lo[A] = np.where(hw, np.minimum(lo[A], e_s[i]), e_s[i])
        hi[A] = np.where(hw, np.maximum(hi[A], e_e[i]), e_e[i])
        has_win[A] = True
        ch.elem_chain[i] = chain[A]
        # Window ids: one per (session, instant group); assigned at the group's last element.
        lst = ~s.same_next[i]
        if not lst.any():
            continue
        Al, il = A[lst], i[lst]
        k = len(Al)
        wid = np.arange(n_windows, n_windows + k, dtype=I64)
        n_windows += k
        # elements of this instant group get the window id (group = trailing run of same instant)
        ch.elem_window[il] = wid
        al = e_arr[il]
        wlo, whi = lo[Al], hi[Al]
        # A new window only if the instant's elements grew the session; else it is the
        # same window (merge identity), with its trigger phase and timing history.
        grew = (wlo < glo[Al]) | (whi > ghi[Al])
        pieces.add_windows(chain[Al], wid, grew)
        cl = e_wmp[il] >= whi  # the watermark already passed the (merged) end
        late_born[Al] = np.where(grew, cl, late_born[Al])
        ontime_done[Al] &= ~grew
        # phase 2 survives a merge only when nothing is rewound (every merged window
        # passed its end); the same window keeps it
        ph2 = phase2[Al] & (cl | ~grew)
        lb, od = late_born[Al], ontime_done[Al]
        # on_element after the merge: the period leaf sees the instant's elements only
        # while the window is in its early phase (a done phase gets no elements)
        f = np.where(ph2, first[Al], np.minimum(first[Al], al))
        first[Al] = f
        nb = s.next_arr2[il]
        o_end = np.maximum(2 * al, _ord_end(tl, whi, end_time))
        if period is None:
            e_star = np.full(k, POS_INF, I64)
        else:
            d = np.where(f == NO_FIRST, POS_INF, ceil_to(np.where(f == NO_FIRST, 0, f), period))
            e_star = np.where(ph2 | (f == NO_FIRST), POS_INF, 2 * np.maximum(al, d))
        t1 = np.minimum(e_star, o_end)
        fire1 = t1 < nb
        main1 = fire1 & (e_star <= t1)
        final1 = fire1 & (o_end <= t1)
        exp_thr = expiry(whi, lateness)
        wm1 = _wm_at(tl, t1)
        timing1 = np.where(wm1 < whi, EARLY, np.where(lb | od, LATE, ON_TIME))
        if fire1.any():
            pieces.add_panes(chain[Al][fire1], t1[fire1], wlo[fire1], whi[fire1], 0,
                             timing1[fire1], (wm1 >= exp_thr)[fire1], wid[fire1])
        # second pane: the on-time pane after an early-only first pane
        fire2 = fire1 & main1 & ~final1 & (o_end < nb)
        if fire2.any():
            pieces.add_panes(chain[Al][fire2], o_end[fire2], wlo[fire2], whi[fire2], 1,
                             np.full(int(fire2.sum()), ON_TIME, np.int8),
                             (_wm_at(tl, o_end) >= exp_thr)[fire2], wid[fire2])
        # state carried to the next window of the chain
        ontime_done[Al] = od | (fire1 & (timing1 == ON_TIME)) | fire2
        phase2[Al] = ph2 | final1 | fire2
        first[Al] = np.where(main1, NO_FIRST, f)
    # Elements of a session with a window added before it in the same instant got the id
    # at the group's last element: fill backwards within each instant group.
    elem_window = ch.elem_window
    if s.m:
        m = s.m
        idx = np.where(~s.same_next, np.arange(m), m)
        idx = np.minimum.accumulate(idx[::-1])[::-1]
        elem_window = elem_window[np.minimum(idx, m - 1)]
    return (_Chains(has_win, lo, hi, chain, first, next_chain, ch.elem_chain, elem_window,
                    n_windows), complex_, pieces)


def run(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray,
        clauses: c.Clauses, timeline: Timeline, period: int | None,
        end_floor: int = NEG_INF, ordered: bool = True) -> GabwResult:
    """Same contract and output as ``state_machine.general``."""
    row, start, end, arr, ikey = instances_of(clauses, key, event_time, arrival_time)
    tl = timeline
    lateness = clauses.allowed_lateness.micros
    last_arrival = int(arrival_time.max()) if len(arrival_time) else NEG_INF
    end_time = max(end_floor, end_floor_of(clauses.trigger, last_arrival, tl))

    # 1. Dropped on arrival: the element's own window already expired (window-independent).
    wm_prev = tl.before(arr).astype(I64)
    dropped = expired(end, lateness, wm_prev)
    live = np.nonzero(~dropped)[0]

    # 2. Final sessions of the live elements; each session's windows: a closed-form
    #    prefix, then steps over the k-th element of every session at once.
    s = _sessions(live, ikey, start, end, arr, wm_prev)
    c_off, ch, prefix_pieces = _prefix(s, tl, end_time, period)
    ch, complex_, step_pieces = _steps(s, c_off, ch, tl, end_time, lateness, period)
    pieces = (prefix_pieces, step_pieces)

    # 3. Sessions whose windows interleave go to the state machine (sessions never interact:
    #    their elements' windows never overlap); the rest is assembled here.
    complex_el = np.repeat(complex_, s.c_len) if s.m else np.zeros(0, bool)
    chain_key = np.full(ch.next_chain, -1, I64)
    fast_chain = np.ones(ch.next_chain, bool)
    if s.m:
        chain_key[ch.elem_chain] = s.key
        fast_chain[ch.elem_chain[complex_el]] = False
    pc_, pk, plo, phi, pidx, ptim, plast, pwin = _fast_panes(pieces, fast_chain)
    gen = None
    if complex_el.any():
        sub = np.sort(row[s.el[complex_el]])  # element rows, still in (key, arrival) order
        # unordered: _concat joins by id, and the caller orders the whole result
        gen = general(key[sub], event_time[sub], arrival_time[sub], clauses, tl,
                      end_floor=end_time, ordered=False)
        gen.instances.row = sub[gen.instances.row]

    npanes = len(pc_)
    emit = np.where(pk >= FINAL, end_time, pk // 2).astype(I64)
    pid = np.arange(npanes, dtype=I64)
    prev_same = np.zeros(npanes, bool)
    if npanes:
        prev_same[1:] = pc_[1:] == pc_[:-1]
    pane_index, window_next_pane = _pane_index_and_next(pieces, ch.n_windows, pidx, pwin)

    n = len(row)
    first_pane = np.full(n, -1, I64)
    drop_reason = np.zeros(n, np.int8)
    drop_wm = np.full(n, NEG_INF, I64)
    drop_reason[dropped] = DROP_EXPIRED
    drop_wm[dropped] = wm_prev[dropped]
    if s.m:
        first_pane[s.el] = window_next_pane[ch.elem_window]
    fast_inst = np.ones(n, bool)
    fast_inst[s.el[complex_el]] = False

    panes_key = chain_key[pc_] if npanes else np.empty(0, I64)
    res = GabwResult(
        Panes(pid, panes_key, plo, phi, pane_index, ptim, plast, emit),
        _retractions(clauses.accumulation, pid, prev_same, emit),
        _cover(clauses.accumulation, pid, prev_same),
        Instances(row[fast_inst], start[fast_inst], end[fast_inst], first_pane[fast_inst],
                  drop_reason[fast_inst], drop_wm[fast_inst]),
        end_time)
    if gen is not None:
        res = _concat(res, gen)
    return canonical(res) if ordered else res


def _fast_panes(pieces: tuple[_Pieces, ...], fast_chain: np.ndarray,
                ) -> tuple[np.ndarray, ...]:
    """The panes of the chains assembled here (chain, ordinal, low and high bound, index
    among the instant's panes, timing, last, window id), in (chain, ordinal, index)
    order: pane ids increase along each chain."""
    parts = [p for pc in pieces for p in pc.panes]
    if parts:
        cols = [np.concatenate(col) for col in zip(*parts, strict=True)]
    else:
        cols = [_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, np.empty(0, np.int8),
                np.empty(0, bool), _EMPTY]
    keep = fast_chain[cols[0]] if len(cols[0]) else np.empty(0, bool)
    cols = [x[keep] for x in cols]
    po = np.lexsort((cols[4], cols[1], cols[0]))
    return tuple(x[po] for x in cols)


def _pane_index_and_next(pieces: tuple[_Pieces, ...], n_windows: int, pidx: np.ndarray,
                         pwin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pane's pane_index, and each window's next pane (its own first pane, else the
    next window's of its chain; -1 if none): the first pane of its elements."""
    npanes = len(pwin)
    pid = np.arange(npanes, dtype=I64)
    win_chain_a = np.concatenate([a for p in pieces for a in p.win_chain] or [_EMPTY])
    wseq = np.concatenate([a for p in pieces for a in p.win_seq] or [_EMPTY])
    # pane_index counts the panes of one window: a chain's window changes only where an
    # instant grew it (otherwise the window absorbed its elements and stayed the same)
    grew_of = np.zeros(n_windows, bool)
    if len(wseq):
        grew_of[wseq] = np.concatenate([a for p in pieces for a in p.win_grew])
    wo = np.lexsort((wseq, win_chain_a))  # windows along each chain, in creation order
    window_of = np.zeros(n_windows, I64)
    window_of[wseq[wo]] = np.cumsum(grew_of[wseq[wo]])
    p_window = window_of[pwin]
    new_window = np.r_[True, p_window[1:] != p_window[:-1]] if npanes else np.zeros(0, bool)
    pane_index = pid - np.maximum.accumulate(np.where(new_window, pid, 0))

    # Element -> first pane: its window's first pane, else the next window's in its chain.
    first_pane_of_window = np.full(n_windows, -1, I64)
    if npanes:
        p1 = pidx == 0
        first_pane_of_window[pwin[p1]] = pid[p1]
    big = npanes + 1
    val = np.where(first_pane_of_window[wseq[wo]] >= 0, first_pane_of_window[wseq[wo]],
                   npanes)
    lifted = win_chain_a[wo] * big + val
    nextp = np.minimum.accumulate(lifted[::-1])[::-1] - win_chain_a[wo] * big
    nextp = np.where(nextp >= npanes, -1, nextp)
    window_next_pane = np.full(n_windows, -1, I64)
    window_next_pane[wseq[wo]] = nextp
    return pane_index, window_next_pane


def _retractions(accumulation: c.Accumulation, pid: np.ndarray, prev_same: np.ndarray,
                 emit: np.ndarray) -> Retractions:
    """Every pane of a chain retracts the chain's previous pane (when retracting)."""
    if accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING:
        return Retractions(pid[prev_same] - 1, emit[prev_same], pid[prev_same])
    return Retractions(np.empty(0, I64), np.empty(0, I64), np.empty(0, I64))


def _cover(accumulation: c.Accumulation, pid: np.ndarray, prev_same: np.ndarray) -> Cover:
    """Discarding panes cover themselves; accumulating ones their chain so far."""
    if accumulation is c.Accumulation.DISCARDING or not len(pid):
        return Cover(pid.copy(), pid.copy())
    chain_first = np.where(prev_same, 0, pid)
    chain_first = np.maximum.accumulate(chain_first)  # first pane id of the chain
    counts = pid - chain_first + 1
    return Cover(np.repeat(pid, counts), concat_ranges(chain_first, counts))


def _concat(a: GabwResult, b: GabwResult) -> GabwResult:
    """Both results in one, b's pane ids shifted past a's."""
    off = len(a.panes.pane_id)
    pa, pb = a.panes, b.panes
    cat = np.concatenate
    ia, ib = a.instances, b.instances
    fb = np.where(ib.first_pane >= 0, ib.first_pane + off, -1)
    return GabwResult(
        Panes(cat([pa.pane_id, pb.pane_id + off]), cat([pa.key, pb.key]),
              cat([pa.window_start, pb.window_start]), cat([pa.window_end, pb.window_end]),
              cat([pa.pane_index, pb.pane_index]), cat([pa.timing, pb.timing]),
              cat([pa.is_last, pb.is_last]), cat([pa.emit_time, pb.emit_time])),
        Retractions(cat([a.retractions.retracted_pane_id, b.retractions.retracted_pane_id + off]),
                    cat([a.retractions.emit_time, b.retractions.emit_time]),
                    cat([a.retractions.replacing_pane_id,
                         b.retractions.replacing_pane_id + off])),
        Cover(cat([a.cover.pane_id, b.cover.pane_id + off]),
              cat([a.cover.delta_id, b.cover.delta_id + off])),
        Instances(cat([ia.row, ib.row]), cat([ia.window_start, ib.window_start]),
                  cat([ia.window_end, ib.window_end]), cat([ia.first_pane, fb]),
                  cat([ia.drop_reason, ib.drop_reason]),
                  cat([ia.watermark_at_arrival, ib.watermark_at_arrival])),
        max(a.end_time, b.end_time))
