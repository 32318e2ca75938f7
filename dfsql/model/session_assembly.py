"""The sessions fast path's result (:mod:`dfsql.model.sessions_fast`): from the panes
and windows its chains found (:class:`~dfsql.model.session_chains.Pieces`) to the
driver's :class:`~dfsql.model.result.GabwResult`: pane ids and pane_index, each
element's first pane, retractions and covers along each chain, and the join with the
part the state machine ran.
"""

from __future__ import annotations

import numpy as np

from dfsql.model import clauses as c
from dfsql.model.lexsort import lexsort
from dfsql.model.result import Cover, GabwResult, Instances, Panes, Retractions
from dfsql.model.session_chains import Pieces
from dfsql.model.windows import I64, concat_ranges

_EMPTY = np.empty(0, I64)


def fast_panes(pieces: tuple[Pieces, ...], fast_chain: np.ndarray,
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
    po = lexsort((cols[4], cols[1], cols[0]))
    return tuple(x[po] for x in cols)


def pane_index_and_next(pieces: tuple[Pieces, ...], n_windows: int, pidx: np.ndarray,
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
    wo = lexsort((wseq, win_chain_a))  # windows along each chain, in creation order
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


def retractions(accumulation: c.Accumulation, pid: np.ndarray, prev_same: np.ndarray,
                 emit: np.ndarray) -> Retractions:
    """Every pane of a chain retracts the chain's previous pane (when retracting)."""
    if accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING:
        return Retractions(pid[prev_same] - 1, emit[prev_same], pid[prev_same])
    return Retractions(np.empty(0, I64), np.empty(0, I64), np.empty(0, I64))


def cover(accumulation: c.Accumulation, pid: np.ndarray, prev_same: np.ndarray) -> Cover:
    """Discarding panes cover themselves; accumulating ones their chain so far."""
    if accumulation is c.Accumulation.DISCARDING or not len(pid):
        return Cover(pid.copy(), pid.copy())
    chain_first = np.where(prev_same, 0, pid)
    chain_first = np.maximum.accumulate(chain_first)  # first pane id of the chain
    counts = pid - chain_first + 1
    return Cover(np.repeat(pid, counts), concat_ranges(chain_first, counts))


def concat(a: GabwResult, b: GabwResult) -> GabwResult:
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
