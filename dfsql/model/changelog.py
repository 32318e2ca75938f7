"""The changelog of a driver run, in numpy: which panes aggregate each element, and
LANGUAGE.md §7's order of panes and retractions as places in that changelog.

One implementation, called by both executors: the bounded replay's ``mapInArrow`` driver
(:mod:`dfsql.spark.replay`) and the stream's bucket processor
(:mod:`dfsql.spark.stream_buckets`). Both read the flat arrays of one
:func:`~dfsql.model.group_also_by_window.drive` run (a
:class:`~dfsql.model.group_also_by_window.FlatResult`).

**Membership.** A pane aggregates the elements of every delta it covers; an element
belongs to the panes that cover its first delta (:func:`element_panes`).

**Order (§7).** Rows sort by emit time, key, window_start, pane_index; a retraction sorts
immediately before the pane that replaces it (the model says which; in a merge another
window's), several before one pane in their own window_start order.
:func:`changelog_ranks` gives each pane its emission's and its retraction's places in the
run's changelog, packed into one int64 (:func:`packed_ranks`): one sort column after
(emit_time, keys) where the tuple would be four, and no replacing window carried per pane.
"""

from __future__ import annotations

import numpy as np

from dfsql.model.windows import concat_ranges


def element_panes(r, n_panes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which panes aggregate each element: those that cover its first delta. Returns the
    mask of elements in some pane, how many panes each of those is in, and the panes,
    element after element."""
    ok = r.element_first_pane >= 0
    fp = r.element_first_pane[ok]
    co = np.argsort(r.cover_delta, kind="stable")
    c_pane, c_delta = r.cover_pane[co], r.cover_delta[co]
    per_delta = np.bincount(c_delta, minlength=n_panes)
    c_start = np.cumsum(per_delta) - per_delta
    lens = per_delta[fp]
    return ok, lens, c_pane[concat_ranges(c_start[fp], lens)]


def changelog_ranks(r, wstart: np.ndarray) -> np.ndarray:
    """Each pane's place in §7's order and its retraction's, as positions in this run's
    changelog, packed into one id (:func:`packed_ranks`). All of a key's rows are in one
    run, so the output sorts by (emit_time, keys, rank).

    The model's fast paths emit panes in (key, emit time, window) order already, so this
    is linear unless a check finds otherwise; :func:`changelog_ranks_by_sort` is the
    plain definition (and what a retraction without a replacing pane needs)."""
    n = len(r.pane_index)
    pi = r.pane_index.astype(np.int64)
    rp, repl = r.retraction_pane, r.retraction_replacing
    if len(rp) and repl.min() < 0:
        return changelog_ranks_by_sort(r, wstart)
    key, emit = r.pane_key, r.pane_emit_time
    po = None if nondecreasing(key, emit, wstart, pi) else np.lexsort((pi, wstart, emit, key))
    before = np.bincount(repl, minlength=n)  # retractions placed right before each pane
    before_s = before if po is None else before[po]
    pos_s = np.arange(n, dtype=np.int64) + np.cumsum(before_s)
    pane_pos = pos_s
    if po is not None:
        pane_pos = np.empty(n, np.int64)
        pane_pos[po] = pos_s
    ro = np.lexsort((wstart[rp], repl))  # retractions before one pane: window_start order
    anchor = repl[ro]
    idx = np.arange(len(ro), dtype=np.int64)
    first = np.ones(len(ro), bool)
    first[1:] = anchor[1:] != anchor[:-1]
    within = idx - np.maximum.accumulate(np.where(first, idx, 0))
    return packed_ranks(pane_pos, rp[ro], pane_pos[anchor] - before[anchor] + within)


def changelog_ranks_by_sort(r, wstart: np.ndarray) -> np.ndarray:
    """:func:`changelog_ranks` by sorting every row by §7's tuple; a retraction that no
    pane replaces sorts where its window's next pane would."""
    n = len(r.pane_index)
    pi = r.pane_index.astype(np.int64)
    rp, repl = r.retraction_pane, r.retraction_replacing
    has = repl >= 0
    to = np.where(has, repl, rp)
    sort_ws = np.concatenate([wstart, wstart[to]])
    sort_pi = np.concatenate([pi, np.where(has, pi[to], pi[rp] + 1)])
    emit = np.concatenate([r.pane_emit_time, r.retraction_emit_time])
    key = np.concatenate([r.pane_key, r.pane_key[rp]])
    inserted = np.concatenate([np.ones(n, np.int8), np.zeros(len(rp), np.int8)])
    own_ws = np.concatenate([wstart, wstart[rp]])
    order = np.lexsort((own_ws, inserted, sort_pi, sort_ws, emit, key))
    ranks = np.empty(len(order), np.int64)
    ranks[order] = np.arange(len(order), dtype=np.int64)
    return packed_ranks(ranks[:n], rp, ranks[n:])


# A packed rank holds two places in a run's changelog: the emission's (high 32 bits) and
# the retraction's, as an offset from the emission's biased by 2^31 (low 32 bits). A
# retraction sorts soon after the pane it retracts, so the offset is small: ids that
# differ in few bits compress in Spark's shuffle like the running counters they replace.
RETRACTION_BIAS = 1 << 31
LOW_BITS = 0xFFFFFFFF


def packed_ranks(pane_pos: np.ndarray, retracted: np.ndarray,
                 retract_pos: np.ndarray) -> np.ndarray:
    """Pane ids from each pane's place, and the places of the retractions of the panes
    ``retracted`` (in that order)."""
    offset = np.zeros(len(pane_pos), np.int64)
    offset[retracted] = retract_pos - pane_pos[retracted]
    return (pane_pos << 32) | (offset + RETRACTION_BIAS)


def emission_place(ranks: np.ndarray) -> np.ndarray:
    """A pane's place in its run's changelog, from its packed rank."""
    return ranks >> 32


def retraction_place(ranks: np.ndarray) -> np.ndarray:
    """The place of a pane's retraction, from its packed rank."""
    return (ranks >> 32) + (ranks & LOW_BITS) - RETRACTION_BIAS


def nondecreasing(*columns: np.ndarray) -> bool:
    """Whether the rows of ``columns`` are in lexicographic (non-decreasing) order."""
    if len(columns[0]) < 2:
        return True
    tied = np.ones(len(columns[0]) - 1, bool)  # equal in every column so far
    for col in columns:
        a, b = col[:-1], col[1:]
        if (tied & (b < a)).any():
            return False
        tied &= b == a
    return True
