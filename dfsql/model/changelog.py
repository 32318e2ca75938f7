"""The changelog of a driver run, in numpy: which panes aggregate each element, and
docs/reference.md#output-columns's order of panes and retractions as places in that changelog.

One implementation, called by both executors: the bounded replay's ``mapInArrow`` driver
(:mod:`dfsql.spark.replay.panes`) and the stream's bucket processor
(:mod:`dfsql.spark.stream.buckets`). Both read the flat arrays of one
:func:`~dfsql.model.group_also_by_window.drive` run (a
:class:`~dfsql.model.group_also_by_window.FlatResult`).

**Membership.** A pane aggregates the elements of every delta it covers; an element
belongs to the panes that cover its first delta (:func:`element_panes`).

**Order (§7).** The one home of docs/reference.md#output-columns's changelog order is
:data:`CHANGELOG_ORDER`: rows sort by emit time, the GROUP BY keys, window_start,
pane_index; a retraction sorts immediately before the row that replaces it (the model
says which: in a merge another window's pane, else its window's next pane,
:data:`NEXT_PANE`), several before one row in their own window_start order.
:func:`changelog_order` sorts rows by it (the reference run's order), the rewrite renders
it as the SQL ORDER BY, and :func:`changelog_ranks` gives each pane its emission's and its
retraction's places in the run's changelog, packed into one int64 (:func:`packed_ranks`):
one sort column after (emit_time, keys) where the tuple would be four, and no replacing
window carried per pane.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfsql.model.lexsort import lexsort
from dfsql.model.windows import concat_ranges

#: In an order term: the GROUP BY keys, every one in their order.
KEYS = "keys"


@dataclass(frozen=True)
class OrderTerm:
    """One term of §7's order: a changelog column, read from the row itself or from the
    row a retraction sorts with (``replacing``: the pane that replaces it; a pane's own)."""

    column: str
    replacing: bool = False
    descending: bool = False


#: §7: a changelog's rows come ordered first by these ...
CHANGELOG_GROUP = (OrderTerm("emit_time"), OrderTerm(KEYS))
#: ... then, among one emit time's rows of one key, by these: a retraction reads the
#: window_start and pane_index of the row that replaces it, so it sorts with that row,
#: immediately before it; several before one row come in their own window_start order.
#: (The places :func:`changelog_ranks` packs into one column.)
WITHIN_GROUP = (OrderTerm("window_start", replacing=True),
                OrderTerm("pane_index", replacing=True),
                OrderTerm("is_retraction", descending=True),
                OrderTerm("window_start"))
CHANGELOG_ORDER = CHANGELOG_GROUP + WITHIN_GROUP

#: Where windows do not merge, the row that replaces a retraction is its window's next
#: pane: the retraction's own columns plus these. A retraction that no pane replaces
#: sorts there too.
NEXT_PANE = {"window_start": 0, "pane_index": 1}


def changelog_sort_columns(key: np.ndarray, emit_time: np.ndarray, window_start: np.ndarray,
                           pane_index: np.ndarray, retracted: np.ndarray,
                           retraction_emit_time: np.ndarray, replacing: np.ndarray,
                           ) -> list[np.ndarray]:
    """The columns of :data:`CHANGELOG_ORDER` (a descending one negated) for the rows
    [every pane, then every retraction]: the panes' columns are indexed by pane, the
    retraction of pane ``retracted[j]`` at ``retraction_emit_time[j]`` is replaced by pane
    ``replacing[j]`` (-1: none)."""
    n = len(pane_index)
    cat = np.concatenate
    own = {"emit_time": cat([emit_time, retraction_emit_time]),
           KEYS: cat([key, key[retracted]]),
           "window_start": cat([window_start, window_start[retracted]]),
           "pane_index": cat([pane_index, pane_index[retracted]]),
           "is_retraction": cat([np.zeros(n, np.int64), np.ones(len(retracted), np.int64)])}
    has = replacing >= 0
    to = np.where(has, replacing, 0)
    repl = {col: cat([own[col][:n], np.where(has, own[col][:n][to], own[col][n:] + step)])
            for col, step in NEXT_PANE.items()}
    cols = [np.asarray((repl if t.replacing else own)[t.column], np.int64)
            for t in CHANGELOG_ORDER]
    return [-col if t.descending else col
            for t, col in zip(CHANGELOG_ORDER, cols, strict=True)]


def changelog_order(key: np.ndarray, emit_time: np.ndarray, window_start: np.ndarray,
                    pane_index: np.ndarray, retracted: np.ndarray,
                    retraction_emit_time: np.ndarray, replacing: np.ndarray) -> np.ndarray:
    """The rows of :func:`changelog_sort_columns` (same arguments) in §7's order: the
    permutation that sorts them (stable: ties keep the rows' order)."""
    cols = changelog_sort_columns(key, emit_time, window_start, pane_index, retracted,
                                  retraction_emit_time, replacing)
    return lexsort(cols[::-1])


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
    po = None if nondecreasing(key, emit, wstart, pi) else lexsort((pi, wstart, emit, key))
    before = np.bincount(repl, minlength=n)  # retractions placed right before each pane
    before_s = before if po is None else before[po]
    pos_s = np.arange(n, dtype=np.int64) + np.cumsum(before_s)
    pane_pos = pos_s
    if po is not None:
        pane_pos = np.empty(n, np.int64)
        pane_pos[po] = pos_s
    ro = lexsort((wstart[rp], repl))  # retractions before one pane: window_start order
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
    rp = r.retraction_pane
    cols = changelog_sort_columns(r.pane_key, r.pane_emit_time, wstart,
                                  r.pane_index.astype(np.int64), rp, r.retraction_emit_time,
                                  r.retraction_replacing)
    # places in a run are per key: the key before emit_time orders each key's rows alike
    g = len(CHANGELOG_GROUP)
    order = lexsort((*cols[g:][::-1], *cols[:g]))
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


def current_at(r, at: int) -> np.ndarray:
    """The panes whose rows a retracting changelog holds as current at instant ``at``
    (docs/guides/streams.md#continuous-queries-as-statements, the rows ALTER STREAMING QUERY restates): emitted before ``at``,
    not retracted before it (a window merged away whose retraction is still to come
    counts), and not their window's last (a window closed or expired keeps its rows).
    Their ids, ascending."""
    emitted = r.pane_emit_time < at
    retracted = np.zeros(len(emitted), bool)
    retracted[r.retraction_pane[r.retraction_emit_time < at]] = True
    return np.flatnonzero(emitted & ~retracted & ~r.pane_is_last.astype(bool))
