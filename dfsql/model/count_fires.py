"""Where ``Repeat(ElemCount(n))`` (EVERY n ROWS) fires in windows that never merge, vectorised.

The trigger counts the elements a window takes since its last firing; at an instant where
the count reaches ``n`` (every element arriving at that instant added first) it fires and
counts from zero again, so the elements of an instant past ``n`` are not carried over.
Which instants fire therefore depends on every earlier firing of the window: a chain.

Over the instants of all windows in (window, arrival) order, with ``C`` the running count,
a firing at instant ``i`` is followed by one at the first ``j`` with ``C[j] >= C[i] + n``
(``searchsorted``), if that is still in the window; a window's first firing is the first
``j`` with ``C[j] >= C[before the window] + n``. The firings are each window's path along
these links, enumerated for all windows at once by doubling the links (``log`` of the
longest path many steps): no loop over elements, instants or firings.
"""

from __future__ import annotations

import numpy as np

from dfsql.model.windows import I64, POS_INF, concat_ranges

#: no firing of the count at or after the element's instant (the watermark or the end of
#: input emits it)
NO_FIRE = POS_INF


def count_fire_ordinals(wid: np.ndarray, arrival: np.ndarray, taken: np.ndarray,
                        n: int) -> np.ndarray:
    """Per element (``wid``: its window, ``arrival``: its instant, both in window then
    arrival order; ``taken``: the window took it), the ordinal ``2·instant`` of the first
    firing of ``Repeat(ElemCount(n))`` at or after its arrival, or :data:`NO_FIRE`."""
    out = np.full(len(wid), NO_FIRE, I64)
    idx = np.nonzero(taken)[0]
    if not len(idx):
        return out
    w, a = wid[idx], arrival[idx]
    new_instant = np.ones(len(idx), bool)
    new_instant[1:] = (w[1:] != w[:-1]) | (a[1:] != a[:-1])
    instant = np.cumsum(new_instant) - 1  # each taken element's instant
    starts = np.nonzero(new_instant)[0]
    i_w, i_a = w[starts], a[starts]
    count = np.diff(np.r_[starts, len(idx)]).astype(I64)
    total = np.cumsum(count)  # C: the running count over every window's instants
    m = len(starts)
    new_window = np.ones(m, bool)
    new_window[1:] = i_w[1:] != i_w[:-1]
    w_first = np.nonzero(new_window)[0]
    w_last = np.r_[w_first[1:], m] - 1
    last_of = np.repeat(w_last, np.diff(np.r_[w_first, m]))  # each instant's window's last
    link = np.searchsorted(total, total + n, side="left")
    link = np.where(link <= last_of, link, m)  # m: no further firing in the window
    before = total[w_first] - count[w_first]
    root = np.searchsorted(total, before + n, side="left")
    has = root <= w_last
    fired = _paths(np.r_[link, m], root[has],
                   (total[w_last] - before)[has] // n)  # at most count / n firings
    if not len(fired):
        return out
    # each element's first firing at or after its instant, in its own window
    pos = np.searchsorted(fired, instant, side="left")
    nxt = fired[np.minimum(pos, len(fired) - 1)]
    ok = (pos < len(fired)) & (i_w[nxt] == w)
    out[idx[ok]] = 2 * i_a[nxt[ok]]
    return out


def _paths(link: np.ndarray, roots: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The sorted distinct nodes on each root's path along ``link`` (its last node, a
    sink, links to itself and is left out), a path ``lengths`` nodes at most."""
    sink = len(link) - 1
    k = concat_ranges(np.zeros(len(lengths), I64), lengths)  # the k-th node of a path
    node = np.repeat(roots.astype(I64), lengths)
    step, bit, top = link.astype(I64), 1, int(lengths.max(initial=0)) - 1
    while bit <= top:
        move = (k & bit) != 0
        node[move] = step[node[move]]
        step = step[step]
        bit <<= 1
    return np.unique(node[node != sink])
