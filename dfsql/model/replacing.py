"""Which pane replaces a retracted one (LANGUAGE.md §7's row order).

At one instant, a retraction sorts immediately before the row that replaces it: the next
pane of its own window, or for a window merged away the first pane of the window that
absorbed it, both emitted at the retraction's emit_time for the same key. The pane
results record only which pane is retracted and when; this module finds the replacing
pane with array operations (no Python loop per row), for the model's ``run()`` and the
Spark replay alike.
"""

from __future__ import annotations

import numpy as np

I64 = np.int64


def replacing_pane(pane_key: np.ndarray, pane_emit_time: np.ndarray,
                   pane_window_start: np.ndarray, pane_window_end: np.ndarray,
                   pane_index: np.ndarray, retracted_pane: np.ndarray,
                   retraction_emit_time: np.ndarray) -> np.ndarray:
    """For each retraction, the id (position) of the pane that replaces it, or -1.

    The replacing window is, among the windows of the retraction's key that fire at its
    emit_time, the one with the largest start at or before the retracted window's start
    (at one instant a key's windows that fire are disjoint, except SLIDING windows, which
    then are the same window). Within it, the first pane at that instant — after the
    retracted pane when it is the same window.
    """
    n_ret = len(retracted_pane)
    out = np.full(n_ret, -1, I64)
    if n_ret == 0 or len(pane_key) == 0:
        return out
    rp = np.asarray(retracted_pane, I64)
    q_key = np.asarray(pane_key, I64)[rp]
    q_t = np.asarray(retraction_emit_time, I64)
    q_ws = np.asarray(pane_window_start, I64)[rp]
    q_we = np.asarray(pane_window_end, I64)[rp]
    q_pi = np.asarray(pane_index, I64)[rp]
    p_key = np.asarray(pane_key, I64)
    p_t = np.asarray(pane_emit_time, I64)
    p_ws = np.asarray(pane_window_start, I64)
    p_we = np.asarray(pane_window_end, I64)
    p_pi = np.asarray(pane_index, I64)
    n = len(p_key)

    # 1. the replacing window: the last pane at or before (key, t, ws) in sorted order
    key = np.r_[p_key, q_key]
    t = np.r_[p_t, q_t]
    ws = np.r_[p_ws, q_ws]
    is_q = np.r_[np.zeros(n, I64), np.ones(n_ret, I64)]
    o = np.lexsort((is_q, ws, t, key))  # a pane sorts before a query equal to it
    pos = np.where(o < n, np.arange(len(o)), -1)
    last_pane = np.maximum.accumulate(pos)
    q_at = np.empty(n_ret, I64)
    q_at[o[o >= n] - n] = np.nonzero(o >= n)[0]
    prev = last_pane[q_at]
    cand = np.where(prev >= 0, o[np.maximum(prev, 0)], -1)
    ok = (cand >= 0) & (p_key[cand] == q_key) & (p_t[cand] == q_t)
    w_ws = np.where(ok, p_ws[cand], 0)
    w_we = np.where(ok, p_we[cand], 0)
    same = ok & (w_ws == q_ws) & (w_we == q_we)
    # 2. within that window at t: the first pane with index >= lo (after the retracted
    # pane in its own window, else the window's first pane at t)
    lo = np.where(same, q_pi + 1, np.iinfo(I64).min)
    pi = np.r_[p_pi, lo]
    ws2 = np.r_[p_ws, w_ws]
    we2 = np.r_[p_we, w_we]
    is_p = np.r_[np.ones(n, I64), np.zeros(n_ret, I64)]
    o = np.lexsort((is_p, pi, we2, ws2, t, key))  # a query sorts before a pane equal to it
    big = len(o)
    pos = np.where(o < n, np.arange(big), big)
    next_pane = np.minimum.accumulate(pos[::-1])[::-1]
    q_at[o[o >= n] - n] = np.nonzero(o >= n)[0]
    nxt = next_pane[q_at]
    cand = np.where(nxt < big, o[np.minimum(nxt, big - 1)], -1)
    found = ok & (cand >= 0)
    cand = np.maximum(cand, 0)
    found &= (p_key[cand] == q_key) & (p_t[cand] == q_t) & (p_ws[cand] == w_ws) & \
        (p_we[cand] == w_we)
    out[found] = cand[found]
    return out
