"""What GroupAlsoByWindow produces, shared by every implementation of it.

The general state machine (:mod:`dfsql.model.state_machine`), the vectorised fast paths
(:mod:`dfsql.model.fastpath`, :mod:`dfsql.model.sessions_fast`) and the entry point
(:mod:`dfsql.model.group_also_by_window`) all build a :class:`GabwResult` of numpy arrays;
this module owns those types, the canonical numbering that makes equal results equal
array by array, and the rules every path shares (element instances, the end instant).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfsql.model import clauses as c
from dfsql.model import triggers as tr
from dfsql.model.lexsort import lexsort
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import I64, NEG_INF, NULL_EVENT_TIME, assign

NULL_TIME = NEG_INF  # emit_time of a batch input


# --------------------------------------------------------------------------- result


@dataclass
class Panes:
    """One row per pane; ``pane_id`` is the row index. timing: 0 EARLY 1 ON_TIME 2 LATE."""

    pane_id: np.ndarray
    key: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    pane_index: np.ndarray
    timing: np.ndarray  # int8
    is_last: np.ndarray  # bool
    emit_time: np.ndarray


@dataclass
class Retractions:
    """Retraction rows: repeat pane ``retracted_pane_id`` with is_retraction at emit_time.

    ``replacing_pane_id`` is the pane whose emission retracts it (its window's next pane,
    or the merged window's pane): docs/reference.md#output-columns sorts the retraction right before it."""

    retracted_pane_id: np.ndarray
    emit_time: np.ndarray
    replacing_pane_id: np.ndarray


@dataclass
class Cover:
    """Pairs: pane ``pane_id`` covers every element whose first pane is ``delta_id``."""

    pane_id: np.ndarray
    delta_id: np.ndarray


@dataclass
class Instances:
    """One row per element instance (an element in one window; SLIDING gives several).

    ``first_pane`` is -1 when dropped; then ``drop_reason`` (panes.DROP_*) and
    ``watermark_at_arrival`` say why. ``window_*`` is the assigned (proto-)window.
    """

    row: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    first_pane: np.ndarray
    drop_reason: np.ndarray  # int8
    watermark_at_arrival: np.ndarray


@dataclass
class GabwResult:
    """Everything the driver produced; ``end_time`` is the last instant processed."""

    panes: Panes
    retractions: Retractions
    cover: Cover
    instances: Instances
    end_time: int

    @property
    def dropped(self) -> Instances:
        """The dropped element instances (for metrics and LATE ROWS INTO)."""
        m = self.instances.first_pane < 0
        i = self.instances
        return Instances(i.row[m], i.window_start[m], i.window_end[m], i.first_pane[m],
                         i.drop_reason[m], i.watermark_at_arrival[m])


# --------------------------------------------------------------------------- shared rules


def instances_of(clauses, key: np.ndarray, event_time: np.ndarray,
                 arrival_time: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Element instances ordered by (key, arrival, row, window start)."""
    row, start, end = assign(clauses.window, event_time)
    arr = np.full(len(row), NULL_TIME, I64) if arrival_time is None else arrival_time[row]
    return row, start, end, arr, key[row]


def late_instances(inst: Instances, watermark_at_arrival: np.ndarray) -> np.ndarray:
    """Which element instances arrived late (docs/reference.md#allowed-lateness): their window (as assigned,
    before any merge) ended at or before the watermark in effect when they arrived
    (before that instant's move: ``Timeline.before`` of each instance's arrival). An
    element without an event time is in no window: not late."""
    return (inst.window_end != NULL_EVENT_TIME) & (inst.window_end <= watermark_at_arrival)


def canonical(res: GabwResult) -> GabwResult:
    """Number panes by (emit_time, key, window_start, window_end, pane_index) and sort
    everything else, so that equal results are equal array by array."""
    p = res.panes
    order = lexsort((p.pane_index, p.window_end, p.window_start, p.key, p.emit_time))
    new_id = np.empty(len(order), I64)
    new_id[order] = np.arange(len(order), dtype=I64)
    panes = Panes(np.arange(len(order), dtype=I64), p.key[order], p.window_start[order],
                  p.window_end[order], p.pane_index[order], p.timing[order],
                  p.is_last[order], p.emit_time[order])
    r = res.retractions
    rid = new_id[r.retracted_pane_id]
    ro = lexsort((rid, r.emit_time))
    c = res.cover
    cp, cd = new_id[c.pane_id], new_id[c.delta_id]
    co = lexsort((cd, cp))
    i = res.instances
    lookup = np.r_[new_id, -1]  # index -1 (dropped) maps to -1
    fp = lookup[i.first_pane]
    io = lexsort((i.window_start, i.row))
    return GabwResult(
        panes,
        Retractions(rid[ro], r.emit_time[ro], new_id[r.replacing_pane_id][ro]),
        Cover(cp[co], cd[co]),
        Instances(i.row[io], i.window_start[io], i.window_end[io], fp[io], i.drop_reason[io],
                  i.watermark_at_arrival[io]),
        res.end_time,
    )


def end_floor_of(trigger, last_arrival: int, timeline: Timeline | None = None) -> int:
    """The end instant of a replay (docs/reference.md#allowed-lateness): the latest instant of its input —
    the last arrival and the last row of a WATERMARK FROM series — carried forward to
    the end of any trigger period or processing-time delay then in progress (data
    independent: every slice of keys gets the same end), and at least the watermark's
    last change."""
    latest = last_arrival if timeline is None else max(last_arrival, timeline.end)
    last_change = NEG_INF if timeline is None else timeline.last_change
    if latest == NEG_INF:
        return last_change
    out = latest
    stack = [trigger]
    while stack:
        t = stack.pop()
        if isinstance(t, c.AtPeriod):
            out = max(out, tr.ceil_to(latest, t.period.micros))
        elif isinstance(t, c.SinceEarliestElem) and last_arrival > NEG_INF:
            out = max(out, last_arrival + t.delay.micros)
        for attr in ("subs", "sub", "main", "final"):
            v = getattr(t, attr, None)
            if isinstance(v, tuple):
                stack.extend(v)
            elif v is not None:
                stack.append(v)
    return max(out, last_change)
