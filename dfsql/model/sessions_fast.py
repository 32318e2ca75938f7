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
    merge_sessions,
    sat_add,
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


def run(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray,
        clauses: c.Clauses, timeline: Timeline, period: int | None,
        end_floor: int = NEG_INF, ordered: bool = True) -> GabwResult:
    """Same contract and output as ``state_machine.general``."""
    row, start, end, arr, ikey = instances_of(clauses, key, event_time, arrival_time)
    n = len(row)
    tl = timeline
    lateness = clauses.allowed_lateness.micros
    accumulation = clauses.accumulation
    last_arrival = int(arrival_time.max()) if len(arrival_time) else NEG_INF
    end_time = max(end_floor, end_floor_of(clauses.trigger, last_arrival, tl))

    # 1. Dropped on arrival: the element's own window already expired (window-independent).
    wm_prev = tl.before(arr).astype(I64)
    dropped = wm_prev >= sat_add(end, lateness)
    live = np.nonzero(~dropped)[0]

    # 2. Final sessions of the live elements; elements of each in arrival (instance) order.
    comp, _, _ = merge_sessions(ikey[live], start[live], end[live])
    o = np.lexsort((live, comp))
    el = live[o]  # instance indices, grouped by session, in arrival order
    cmp_ = comp[o]
    m = len(el)
    bounds = np.r_[0, np.nonzero(cmp_[1:] != cmp_[:-1])[0] + 1, m].astype(I64) if m else \
        np.zeros(1, I64)
    n_comp = len(bounds) - 1
    c_start, c_len = bounds[:-1], np.diff(bounds)
    e_arr, e_s, e_e, e_wmp = arr[el], start[el], end[el], wm_prev[el]
    e_key = ikey[el]
    same_next = np.zeros(m, bool)  # the next element of the session arrives at the same instant
    first_of_instant = np.ones(m, bool)
    # ordinal of the next element's instant in the session (for the last element of an
    # instant group: the session's next, later instant)
    next_arr2 = np.full(m, POS_INF, I64)
    if m:
        same_comp = cmp_[1:] == cmp_[:-1]
        same_next[:-1] = same_comp & (e_arr[1:] == e_arr[:-1])
        first_of_instant[1:] = ~same_next[:-1]
        next_arr2[:-1] = np.where(same_comp, 2 * e_arr[1:], POS_INF)

    # Per-session state.
    has_win = np.zeros(n_comp, bool)
    lo = np.zeros(n_comp, I64)
    hi = np.zeros(n_comp, I64)
    chain = np.full(n_comp, -1, I64)
    phase2 = np.zeros(n_comp, bool)
    # the live window's own timing history: created late, on-time pane fired (a window
    # that absorbs an element without growing stays the same window: merge identity)
    late_born = np.zeros(n_comp, bool)
    ontime_done = np.zeros(n_comp, bool)
    glo = np.zeros(n_comp, I64)  # the live window's bounds before the current instant
    ghi = np.zeros(n_comp, I64)
    first = np.full(n_comp, NO_FIRST, I64)
    complex_ = np.zeros(n_comp, bool)
    next_chain = 0
    elem_chain = np.empty(m, I64)
    elem_window = np.empty(m, I64)  # window (instant group) id of each element
    n_windows = 0

    win_chain, win_seq, win_grew = [], [], []
    p_chain, p_ord, p_lo, p_hi, p_index, p_timing, p_last, p_win = ([] for _ in range(8))

    # Prefix: the leading windows of a session that are not created late and that the
    # watermark does not reach before the next arrival stay in phase 1 (every merge
    # rewinds), so with an early period the last window before each period boundary fires
    # there, and nothing else fires: closed form, no steps. (Hot keys' long sessions.)
    c_off = np.zeros(n_comp, I64)
    if m:
        seg = np.repeat(np.arange(n_comp, dtype=I64), c_len)
        pos = np.arange(m, dtype=I64) - np.repeat(c_start, c_len)
        run_hi = segmented_cummax(e_e, seg)
        run_lo = -segmented_cummax(-e_s, seg)
        prev_hi = np.r_[NEG_INF, run_hi[:-1]]
        prev_lo = np.r_[POS_INF, run_lo[:-1]]
        ok = (pos == 0) | ((e_s < prev_hi) & (e_e > prev_lo))
        wrow = ~same_next
        o_end_all = np.maximum(2 * e_arr, _ord_end(tl, run_hi, end_time))
        good = ok & (~wrow | ((e_wmp < run_hi) & (o_end_all >= next_arr2)))
        first_bad = np.full(n_comp, POS_INF, I64)
        np.minimum.at(first_bad, seg[~good], pos[~good])
        last_good_w = np.full(n_comp, -1, I64)
        cand = wrow & (pos < first_bad[seg])
        np.maximum.at(last_good_w, seg[cand], pos[cand])
        c_off = last_good_w + 1
        pre = pos < c_off[seg]  # elements in a prefix
        pc = np.nonzero(c_off > 0)[0]
        if len(pc):
            chain[pc] = np.arange(len(pc), dtype=I64)
            next_chain = len(pc)
            has_win[pc] = True
            last_i = c_start[pc] + c_off[pc] - 1
            lo[pc], hi[pc] = run_lo[last_i], run_hi[last_i]
            elem_chain[pre] = chain[seg[pre]]
            prow = np.nonzero(pre & wrow)[0]
            wid = np.arange(len(prow), dtype=I64)
            n_windows = len(prow)
            elem_window[prow] = wid
            win_chain.append(chain[seg[prow]])
            win_seq.append(wid)
            g0 = np.maximum.accumulate(np.where(first_of_instant, np.arange(m), 0))[prow]
            win_grew.append((pos[g0] == 0) | (run_hi[prow] > prev_hi[g0])
                            | (run_lo[prow] < prev_lo[g0]))
            if period is None:
                first[pc] = e_arr[c_start[pc]]
            else:
                bnd = ceil_to(e_arr, period)
                fires = next_arr2[prow] > 2 * bnd[prow]
                if fires.any():
                    fr = prow[fires]
                    k = len(fr)
                    p_chain.append(chain[seg[fr]])
                    p_ord.append(2 * bnd[fr])
                    p_lo.append(run_lo[fr])
                    p_hi.append(run_hi[fr])
                    p_index.append(np.zeros(k, I64))
                    p_timing.append(np.full(k, EARLY, np.int8))
                    p_last.append(np.zeros(k, bool))
                    p_win.append(wid[fires])
                # the first unfired arrival after the prefix: its boundary group's first
                gstart = (pos == 0) | np.r_[True, bnd[1:] != bnd[:-1]]
                gfirst = np.maximum.accumulate(np.where(gstart, np.arange(m), 0))
                fired_last = next_arr2[last_i] > 2 * bnd[last_i]
                first[pc] = np.where(fired_last, NO_FIRST, e_arr[gfirst[last_i]])

    c_rem = c_len - c_off
    max_len = int(c_rem.max()) if n_comp else 0
    for s in range(max_len):
        A = np.nonzero(c_rem > s)[0]
        i = c_start[A] + c_off[A] + s
        # A new instant: is the session's live window still alive (not expired)?
        fo = first_of_instant[i]
        if fo.any():
            Af = A[fo]
            alive = has_win[Af] & (e_wmp[i[fo]] < sat_add(hi[Af], lateness))
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
        elem_chain[i] = chain[A]
        # Window ids: one per (session, instant group); assigned at the group's last element.
        lst = ~same_next[i]
        if not lst.any():
            continue
        Al, il = A[lst], i[lst]
        k = len(Al)
        wid = np.arange(n_windows, n_windows + k, dtype=I64)
        n_windows += k
        win_chain.append(chain[Al])
        win_seq.append(wid)
        # elements of this instant group get the window id (group = trailing run of same instant)
        elem_window[il] = wid
        al = e_arr[il]
        wlo, whi = lo[Al], hi[Al]
        # A new window only if the instant's elements grew the session; else it is the
        # same window (merge identity), with its trigger phase and timing history.
        grew = (wlo < glo[Al]) | (whi > ghi[Al])
        win_grew.append(grew)
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
        nb = next_arr2[il]
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
        exp_thr = sat_add(whi, lateness)

        def wm_at(ords: np.ndarray) -> np.ndarray:
            return np.where(ords >= FINAL, POS_INF, tl.at(ords // 2))

        wm1 = wm_at(t1)
        timing1 = np.where(wm1 < whi, EARLY, np.where(lb | od, LATE, ON_TIME))
        last1 = wm1 >= exp_thr
        # second pane: the on-time pane after an early-only first pane
        fire2 = fire1 & main1 & ~final1 & (o_end < nb)
        wm2 = wm_at(o_end)
        last2 = wm2 >= exp_thr
        for sel, ords, idx, tim, lst_ in ((fire1, t1, 0, timing1, last1),
                                          (fire2, o_end, 1, None, last2)):
            if sel.any():
                p_chain.append(chain[Al][sel])
                p_ord.append(ords[sel])
                p_lo.append(wlo[sel])
                p_hi.append(whi[sel])
                p_index.append(np.full(int(sel.sum()), idx, I64))
                p_timing.append(tim[sel] if tim is not None
                                else np.full(int(sel.sum()), ON_TIME, np.int8))
                p_last.append(lst_[sel])
                p_win.append(wid[sel])
        # state carried to the next window of the chain
        ontime_done[Al] = od | (fire1 & (timing1 == ON_TIME)) | fire2
        reached2 = ph2 | final1 | fire2
        phase2[Al] = reached2
        first[Al] = np.where(main1, NO_FIRST, f)

    # Elements of a session with a window added before it in the same instant got the id at
    # the group's last element: fill backwards within each instant group.
    if m:
        has = np.zeros(m, bool)
        has[~same_next] = True
        idx = np.where(has, np.arange(m), m)
        idx = np.minimum.accumulate(idx[::-1])[::-1]
        elem_window = elem_window[np.minimum(idx, m - 1)]

    # 3. Sessions whose windows interleave go to the state machine (sessions never interact:
    #    their elements' windows never overlap); the rest is assembled here.
    complex_el = np.repeat(complex_, c_len) if m else np.zeros(0, bool)
    win_chain_a = np.concatenate(win_chain) if win_chain else np.empty(0, I64)
    pc_ = np.concatenate(p_chain) if p_chain else np.empty(0, I64)
    pk = np.concatenate(p_ord) if p_ord else np.empty(0, I64)
    plo = np.concatenate(p_lo) if p_lo else np.empty(0, I64)
    phi = np.concatenate(p_hi) if p_hi else np.empty(0, I64)
    pidx = np.concatenate(p_index) if p_index else np.empty(0, I64)
    ptim = np.concatenate(p_timing).astype(np.int8) if p_timing else np.empty(0, np.int8)
    plast = np.concatenate(p_last).astype(bool) if p_last else np.empty(0, bool)
    pwin = np.concatenate(p_win) if p_win else np.empty(0, I64)

    chain_key = np.full(next_chain, -1, I64)
    fast_chain = np.ones(next_chain, bool)
    if m:
        chain_key[elem_chain] = e_key
        fast_chain[elem_chain[complex_el]] = False
    keep = fast_chain[pc_] if len(pc_) else np.empty(0, bool)
    pc_, pk, plo, phi, pidx, ptim, plast, pwin = (x[keep] for x in (
        pc_, pk, plo, phi, pidx, ptim, plast, pwin))

    gen = None
    if complex_el.any():
        sub = np.sort(row[el[complex_el]])  # element rows, still in (key, arrival) order
        # unordered: _concat joins by id, and the caller orders the whole result
        gen = general(key[sub], event_time[sub], arrival_time[sub], clauses, tl,
                      end_floor=end_time, ordered=False)
        gen.instances.row = sub[gen.instances.row]

    # Panes in (chain, ordinal, index) order: ids increase along each chain.
    po = np.lexsort((pidx, pk, pc_))
    pc_, pk, plo, phi, pidx, ptim, plast, pwin = (x[po] for x in (
        pc_, pk, plo, phi, pidx, ptim, plast, pwin))
    npanes = len(pc_)
    emit = np.where(pk >= FINAL, end_time, pk // 2).astype(I64)
    pid = np.arange(npanes, dtype=I64)
    prev_same = np.zeros(npanes, bool)
    if npanes:
        prev_same[1:] = pc_[1:] == pc_[:-1]
    # pane_index counts the panes of one window: a chain's window changes only where an
    # instant grew it (otherwise the window absorbed its elements and stayed the same)
    wseq = np.concatenate(win_seq) if win_seq else np.empty(0, I64)
    grew_of = np.zeros(n_windows, bool)
    if len(wseq):
        grew_of[wseq] = np.concatenate(win_grew)
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

    first_pane = np.full(n, -1, I64)
    drop_reason = np.zeros(n, np.int8)
    drop_wm = np.full(n, NEG_INF, I64)
    drop_reason[dropped] = DROP_EXPIRED
    drop_wm[dropped] = wm_prev[dropped]
    if m:
        first_pane[el] = window_next_pane[elem_window]
    fast_inst = np.ones(n, bool)
    fast_inst[el[complex_el]] = False

    # Retractions: every pane of a chain retracts the chain's previous pane.
    if accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING:
        retr = Retractions(pid[prev_same] - 1, emit[prev_same], pid[prev_same])
    else:
        retr = Retractions(np.empty(0, I64), np.empty(0, I64), np.empty(0, I64))
    # Cover: discarding panes cover themselves; accumulating ones their chain so far.
    if accumulation is c.Accumulation.DISCARDING or not npanes:
        cover = Cover(pid.copy(), pid.copy())
    else:
        chain_first = np.where(prev_same, 0, pid)
        chain_first = np.maximum.accumulate(chain_first)  # first pane id of the chain
        counts = pid - chain_first + 1
        cover = Cover(np.repeat(pid, counts), concat_ranges(chain_first, counts))

    panes_key = chain_key[pc_] if npanes else np.empty(0, I64)
    res = GabwResult(
        Panes(pid, panes_key, plo, phi, pane_index, ptim, plast, emit),
        retr, cover,
        Instances(row[fast_inst], start[fast_inst], end[fast_inst], first_pane[fast_inst],
                  drop_reason[fast_inst], drop_wm[fast_inst]),
        end_time)
    if gen is not None:
        res = _concat(res, gen)
    return canonical(res) if ordered else res


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
