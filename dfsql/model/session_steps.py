"""The sessions fast path's steps (:mod:`dfsql.model.sessions_fast`): after the
closed-form prefix (:func:`dfsql.model.session_chains.prefix`), the rest of every session,
one arrival of every session per step, so the Python loop is as long as the longest
session, not the input.

Each step (:class:`_Walk`) has three parts, named as the state machine's: a new instant
first forgets a live window that expired (the next arrival starts a new chain); the
arrival is *merged* into its session's live window (the merge rule of
:mod:`dfsql.model.windows`: it must overlap it, else two windows would coexist and the
session is handed to the state machine); and at the instant's last arrival the window is
*closed*: a new window if the instant grew it, else the same one (merge identity), whose
trigger fires in closed form before the next arrival.
"""

from __future__ import annotations

import numpy as np

from dfsql.model.panes import EARLY, LATE, ON_TIME
from dfsql.model.session_chains import NO_FIRST, Chains, Pieces, Sessions, ord_end, wm_at
from dfsql.model.triggers import ceil_to
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import I64, NEG_INF, POS_INF, expired, expiry, overlaps, within


def steps(s: Sessions, c_off: np.ndarray, ch: Chains, tl: Timeline, end_time: int,
          lateness: int, period: int | None) -> tuple[Chains, np.ndarray, Pieces]:
    """The rest of each session, one element of every session per step: (the chains'
    final state, which sessions' windows interleave, the windows and panes found).

    Takes over the arrays of ``ch`` (the prefix's state) and returns them updated.
    """
    walk = _Walk(s, c_off, ch, tl, end_time, lateness, period)
    c_rem = s.c_len - c_off
    max_len = int(c_rem.max()) if s.n_comp else 0
    for step in range(max_len):
        a = np.nonzero(c_rem > step)[0]
        i = s.c_start[a] + c_off[a] + step
        walk.new_instant(a, i)
        walk.merge(a, i)
        last = ~s.same_next[i]  # the instant group's last element closes its window
        if last.any():
            walk.close(a[last], i[last])
    return walk.result()


class _Walk:
    """The chains' state between steps, per session (the live window's bounds, chain,
    trigger phase and timing history), updated in place by each part of a step."""

    def __init__(self, s: Sessions, c_off: np.ndarray, ch: Chains, tl: Timeline,
                 end_time: int, lateness: int, period: int | None) -> None:
        n_comp = s.n_comp
        self.s, self.ch, self.tl, self.end_time = s, ch, tl, end_time
        self.lateness, self.period = lateness, period
        self.next_chain, self.n_windows = ch.next_chain, ch.n_windows
        self.phase2 = np.zeros(n_comp, bool)
        # the live window's own timing history: created late, on-time pane fired (a
        # window that absorbs an element without growing stays the same window)
        self.late_born = np.zeros(n_comp, bool)
        self.ontime_done = np.zeros(n_comp, bool)
        self.glo = np.zeros(n_comp, I64)  # the live window's bounds before the instant
        self.ghi = np.zeros(n_comp, I64)
        self.complex_ = np.zeros(n_comp, bool)
        self.pieces = Pieces()

    def new_instant(self, a: np.ndarray, i: np.ndarray) -> None:
        """At a session's new instant: is its live window still alive (not expired)?"""
        ch, s = self.ch, self.s
        fo = s.first_of_instant[i]
        if not fo.any():
            return
        af = a[fo]
        alive = ch.has_win[af] & ~expired(ch.hi[af], self.lateness, s.wm_prev[i[fo]])
        dead = af[~alive]
        if len(dead):
            ch.has_win[dead] = False
            ch.chain[dead] = np.arange(self.next_chain, self.next_chain + len(dead), dtype=I64)
            self.next_chain += len(dead)
            self.phase2[dead] = False
            ch.first[dead] = NO_FIRST
        self.glo[af] = np.where(ch.has_win[af], ch.lo[af], POS_INF)
        self.ghi[af] = np.where(ch.has_win[af], ch.hi[af], NEG_INF)

    def merge(self, a: np.ndarray, i: np.ndarray) -> None:
        """Merge each element into its session's live window: it must overlap it, else two
        windows would coexist (the session is then the state machine's)."""
        ch, s = self.ch, self.s
        hw = ch.has_win[a]
        ok = ~hw | overlaps(s.start[i], s.end[i], ch.lo[a], ch.hi[a])
        self.complex_[a[~ok]] = True
        ch.lo[a] = np.where(hw, np.minimum(ch.lo[a], s.start[i]), s.start[i])
        ch.hi[a] = np.where(hw, np.maximum(ch.hi[a], s.end[i]), s.end[i])
        ch.has_win[a] = True
        ch.elem_chain[i] = ch.chain[a]

    def close(self, al: np.ndarray, il: np.ndarray) -> None:
        """At an instant group's last element: its window (one id per session and instant
        group) and the panes its trigger fires before the session's next arrival."""
        ch, s = self.ch, self.s
        k = len(al)
        wid = np.arange(self.n_windows, self.n_windows + k, dtype=I64)
        self.n_windows += k
        ch.elem_window[il] = wid
        wlo, whi = ch.lo[al], ch.hi[al]
        # A new window only if the instant's elements grew the session; else it is the
        # same window (merge identity), with its trigger phase and timing history.
        grew = ~within(wlo, whi, self.glo[al], self.ghi[al])
        self.pieces.add_windows(ch.chain[al], wid, grew)
        cl = s.wm_prev[il] >= whi  # the watermark already passed the (merged) end
        self.late_born[al] = np.where(grew, cl, self.late_born[al])
        self.ontime_done[al] &= ~grew
        # phase 2 survives a merge only when nothing is rewound (every merged window
        # passed its end); the same window keeps it
        ph2 = self.phase2[al] & (cl | ~grew)
        # on_element after the merge: the period leaf sees the instant's elements only
        # while the window is in its early phase (a done phase gets no elements)
        al_arr = s.arr[il]
        f = np.where(ph2, ch.first[al], np.minimum(ch.first[al], al_arr))
        ch.first[al] = f
        self._fire(al, il, wid, ph2, f)

    def _fire(self, al: np.ndarray, il: np.ndarray, wid: np.ndarray, ph2: np.ndarray,
              f: np.ndarray) -> None:
        """The closed window's panes before the next arrival: the first (early, on time
        or late) and, after an early-only first pane, the on-time pane; and the trigger
        state carried to the next window of the chain."""
        ch, s, tl = self.ch, self.s, self.tl
        wlo, whi = ch.lo[al], ch.hi[al]
        al_arr, nb = s.arr[il], s.next_arr2[il]
        lb, od = self.late_born[al], self.ontime_done[al]
        o_end = np.maximum(2 * al_arr, ord_end(tl, whi, self.end_time))
        if self.period is None:
            e_star = np.full(len(al), POS_INF, I64)
        else:
            d = np.where(f == NO_FIRST, POS_INF,
                         ceil_to(np.where(f == NO_FIRST, 0, f), self.period))
            e_star = np.where(ph2 | (f == NO_FIRST), POS_INF, 2 * np.maximum(al_arr, d))
        t1 = np.minimum(e_star, o_end)
        fire1 = t1 < nb
        main1 = fire1 & (e_star <= t1)
        final1 = fire1 & (o_end <= t1)
        exp_thr = expiry(whi, self.lateness)
        wm1 = wm_at(tl, t1)
        timing1 = np.where(wm1 < whi, EARLY, np.where(lb | od, LATE, ON_TIME))
        if fire1.any():
            self.pieces.add_panes(ch.chain[al][fire1], t1[fire1], wlo[fire1], whi[fire1], 0,
                                  timing1[fire1], (wm1 >= exp_thr)[fire1], wid[fire1])
        fire2 = fire1 & main1 & ~final1 & (o_end < nb)
        if fire2.any():
            self.pieces.add_panes(ch.chain[al][fire2], o_end[fire2], wlo[fire2], whi[fire2],
                                  1, np.full(int(fire2.sum()), ON_TIME, np.int8),
                                  (wm_at(tl, o_end) >= exp_thr)[fire2], wid[fire2])
        self.ontime_done[al] = od | (fire1 & (timing1 == ON_TIME)) | fire2
        self.phase2[al] = ph2 | final1 | fire2
        ch.first[al] = np.where(main1, NO_FIRST, f)

    def result(self) -> tuple[Chains, np.ndarray, Pieces]:
        """The chains' final state, the interleaving sessions, the pieces. Elements of a
        session with a window added before it in the same instant got the id at the
        group's last element: filled backwards within each instant group."""
        ch, s = self.ch, self.s
        elem_window = ch.elem_window
        if s.m:
            m = s.m
            idx = np.where(~s.same_next, np.arange(m), m)
            idx = np.minimum.accumulate(idx[::-1])[::-1]
            elem_window = elem_window[np.minimum(idx, m - 1)]
        return (Chains(ch.has_win, ch.lo, ch.hi, ch.chain, ch.first, self.next_chain,
                       ch.elem_chain, elem_window, self.n_windows), self.complex_, self.pieces)
