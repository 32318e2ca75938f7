"""GroupAlsoByWindow: the driver that turns elements into panes, over many keys at once.

Contract (the Spark executor depends on it): :func:`group_also_by_window` takes numpy
arrays ``key`` (int64 ids; rows grouped by key, sorted by key then arrival),
``event_time`` (NULL_EVENT_TIME for a NULL) and ``arrival_time`` (int64 µs;
``arrival_time=None`` for batch), the :class:`Clauses` and the global :class:`Timeline`,
and returns a :class:`GabwResult` of numpy arrays only. Any aggregate is then
``elements → first_pane → cover → pane`` (:func:`aggregate`).

Order at one processing instant p: the elements arriving at p are added, then the
watermark moves to its value at p, then triggers are evaluated. An element is late when
its window's end is at or before the watermark in effect when it arrives (before p's
move). The replay ends at the latest instant of its input (the last arrival, the last
row of a WATERMARK FROM series) carried to the end of every trigger period or delay in
progress, and not before the watermark's last change (:func:`end_floor_of`); at that
instant (``end_time``) the watermark becomes +inf and triggers are evaluated once more
(closing panes fire then). The end instant does not depend on which keys have timers
pending, so an executor that runs keys in slices gives every slice the same end
(``end_floor``). A batch input arrives at one instant, the watermark jumps straight to
+inf, and ``emit_time`` is NULL (``NEG_INF``).

Three implementations give identical results (property-tested): vectorised fast paths
for non-merging windows (:mod:`dfsql.model.fastpath`) and for replayed sessions
(:mod:`dfsql.model.sessions_fast`), and the general state machine
(:mod:`dfsql.model.state_machine`) for everything else. The types they share live in
:mod:`dfsql.model.result`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dfsql.model import fastpath, sessions_fast
from dfsql.model.aggregates import Route, pane_aggregate
from dfsql.model.clauses import Accumulation, Clauses
from dfsql.model.lexsort import lexsort
from dfsql.model.panes import DROP_NULL_TIME
from dfsql.model.panes import DROP_TEXT as _DROP_TEXT
from dfsql.model.result import (
    NULL_TIME,
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
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import I64, NEG_INF, NULL_EVENT_TIME

if TYPE_CHECKING:
    from dfsql.model.firings import Recorder

__all__ = [
    "NULL_TIME", "Cover", "GabwResult", "Instances", "Panes", "Retractions", "aggregate",
    "canonical", "drive", "end_floor_of", "flatten", "general", "group_also_by_window",
    "instances_of", "pane_members",
]


# --------------------------------------------------------------------------- entry point


def group_also_by_window(key: np.ndarray, event_time: np.ndarray,
                         arrival_time: np.ndarray | None, clauses: Clauses,
                         timeline: Timeline, *, fast: bool | None = None,
                         end_floor: int = NEG_INF, ordered: bool = True,
                         recorder: Recorder | None = None,
                         until: int | None = None) -> GabwResult:
    """Run the windowing driver; ``fast=None`` picks the fast path when it applies,
    ``True`` requires it (ValueError otherwise), ``False`` forces the state machine.

    ``ordered=False`` skips the canonical numbering (:func:`canonical`): pane ids are
    then positions in the arrays in no particular order — the same panes, cheaper, for
    a caller that only joins by id.

    ``end_floor``: an executor running keys in slices passes
    ``end_floor_of(trigger, last arrival of the whole input)``.

    ``recorder`` (EXPLAIN FIRINGS, :mod:`dfsql.model.firings`): the state machine runs
    (only it knows which leaf fired) and reports to it; the result is then unordered, so
    that its pane ids are the ones the recorder saw.

    ``until`` (a running stream's state, EXPLAIN FIRINGS FOR STREAMING QUERY): its
    frontier; every instant before it runs, then the run stops there, the input not
    ended (the state machine does it)."""
    if recorder is not None or until is not None:
        fast, ordered = False, False
    key = np.asarray(key, I64)
    event_time = np.asarray(event_time, I64)
    if arrival_time is not None:
        arrival_time = np.asarray(arrival_time, I64)
        last = int(arrival_time.max()) if len(arrival_time) else NEG_INF
        end_floor = max(end_floor, end_floor_of(clauses.trigger, last, timeline))
    null = event_time == NULL_EVENT_TIME
    if null.any():
        return _without_null_times(null, key, event_time, arrival_time, clauses, timeline,
                                   fast=fast, end_floor=end_floor, ordered=ordered,
                                   recorder=recorder, until=until)
    if fast is not False:
        plan = fastpath.plan_for(clauses)
        if plan is not None:
            return fastpath.run(key, event_time, arrival_time, clauses, timeline, plan,
                                end_floor, ordered)
        if arrival_time is not None:
            ok, period = sessions_fast.early_period(clauses)
            if ok:
                return sessions_fast.run(key, event_time, arrival_time, clauses, timeline,
                                         period, end_floor, ordered)
        if fast:
            raise ValueError(f"no fast path for {clauses.window} / {clauses.trigger}")
    return general(key, event_time, arrival_time, clauses, timeline, end_floor=end_floor,
                   ordered=ordered, recorder=recorder, until=until)


def _without_null_times(null: np.ndarray, key: np.ndarray, event_time: np.ndarray,
                        arrival_time: np.ndarray | None, clauses: Clauses, timeline: Timeline,
                        **kw) -> GabwResult:
    """Elements whose event time is NULL belong to no window (docs/reference.md#window): run the
    driver without them, then add them as dropped instances (reason: null event time,
    with the watermark in effect when they arrived). One rule for every path."""
    ok = np.nonzero(~null)[0]
    res = group_also_by_window(key[ok], event_time[ok],
                               None if arrival_time is None else arrival_time[ok],
                               clauses, timeline, **kw)
    i = res.instances
    nulls = np.nonzero(null)[0]
    k = len(nulls)
    wm = (np.full(k, NEG_INF, I64) if arrival_time is None
          else np.asarray(timeline.before(arrival_time[nulls]), I64))
    none = np.full(k, NULL_EVENT_TIME, I64)
    rows = np.concatenate([ok[i.row], nulls])
    inst = Instances(rows, np.concatenate([i.window_start, none]),
                     np.concatenate([i.window_end, none]),
                     np.concatenate([i.first_pane, np.full(k, -1, I64)]),
                     np.concatenate([i.drop_reason, np.full(k, DROP_NULL_TIME, np.int8)]),
                     np.concatenate([i.watermark_at_arrival, wm]))
    if kw.get("ordered", True):  # canonical instance order: by row, then window start
        o = lexsort((inst.window_start, inst.row))
        inst = Instances(*(a[o] for a in (inst.row, inst.window_start, inst.window_end,
                                          inst.first_pane, inst.drop_reason,
                                          inst.watermark_at_arrival)))
    return GabwResult(res.panes, res.retractions, res.cover, inst, res.end_time)


# --------------------------------------------------------------------------- aggregation


_AGGS = ("sum", "count", "min", "max")


def aggregate(res: GabwResult, values: np.ndarray, how: str = "sum") -> np.ndarray:
    """Per pane (by pane_id) the aggregate of its elements via first_pane → cover.

    ``how`` is sum, count, min or max (:mod:`dfsql.model.aggregates`' kernels, which the
    replay runs too). Integer input stays integer; an empty pane gives 0 for sum/count
    and NaN for min/max.
    """
    if how not in _AGGS:
        raise ValueError(f"aggregate {how!r} not in {_AGGS}")
    inst = res.instances
    route = Route(inst.first_pane, res.cover.pane_id, res.cover.delta_id,
                  len(res.panes.pane_id))
    v = np.asarray(values)[inst.row]
    if how in ("min", "max"):
        v = v.astype(np.float64)
    out, has = pane_aggregate(how, route, v)
    if how in ("min", "max"):
        out[~has] = np.nan
    elif how == "sum":
        out[~has] = 0
    return out


def pane_members(res: GabwResult) -> list[np.ndarray]:
    """Per pane, the input rows it aggregates (the same route, for any Python callable)."""
    inst = res.instances
    ok = np.nonzero(inst.first_pane >= 0)[0]
    fp = inst.first_pane[ok]
    o = np.argsort(fp, kind="stable")
    rows_by_delta = inst.row[ok][o]
    n = len(res.panes.pane_id)
    bounds = np.searchsorted(fp[o], np.arange(n + 1))
    out: list[list[np.ndarray]] = [[] for _ in range(n)]
    for pane, delta in zip(res.cover.pane_id.tolist(), res.cover.delta_id.tolist(), strict=True):
        out[pane].append(rows_by_delta[bounds[delta]:bounds[delta + 1]])
    return [np.concatenate(x) if x else np.empty(0, I64) for x in out]


def is_accumulating(clauses: Clauses) -> bool:
    """True unless EMIT DISCARDING."""
    return clauses.accumulation is not Accumulation.DISCARDING


# --------------------------------------------------------------------------- flat view


DROP_TEXT = np.array(_DROP_TEXT, dtype=object)


@dataclass
class FlatResult:
    """The same result as flat arrays (the names the Spark executor reads)."""

    pane_key: np.ndarray
    pane_window_start: np.ndarray
    pane_window_end: np.ndarray
    pane_index: np.ndarray
    pane_timing: np.ndarray
    pane_is_last: np.ndarray
    pane_emit_time: np.ndarray
    retraction_pane: np.ndarray
    retraction_emit_time: np.ndarray
    retraction_replacing: np.ndarray  # the pane a retraction sorts right before (§7)
    cover_pane: np.ndarray
    cover_delta: np.ndarray
    element_row: np.ndarray
    element_window_start: np.ndarray
    element_window_end: np.ndarray
    element_first_pane: np.ndarray
    dropped_row: np.ndarray
    dropped_reason: np.ndarray
    dropped_reason_text: np.ndarray
    dropped_watermark: np.ndarray
    #: the window each dropped instance was dropped from (NULL_EVENT_TIME: none, a NULL
    #: event time); SLIDING drops one row from several
    dropped_window_start: np.ndarray
    dropped_window_end: np.ndarray
    end_time: int


def flatten(res: GabwResult) -> FlatResult:
    """Flat arrays of a :class:`GabwResult`; dropped_reason_text is expired/closed."""
    p, i, d = res.panes, res.instances, res.dropped
    return FlatResult(
        p.key, p.window_start, p.window_end, p.pane_index, p.timing, p.is_last, p.emit_time,
        res.retractions.retracted_pane_id, res.retractions.emit_time,
        res.retractions.replacing_pane_id, res.cover.pane_id, res.cover.delta_id,
        i.row, i.window_start, i.window_end, i.first_pane,
        d.row, d.drop_reason, DROP_TEXT[d.drop_reason.astype(np.int64)],
        d.watermark_at_arrival, d.window_start, d.window_end, res.end_time)


def drive(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray | None,
          clauses: Clauses, timeline: Timeline, *, fast: bool | None = None,
          end_floor: int = NEG_INF, ordered: bool = True) -> FlatResult:
    """:func:`group_also_by_window`, flattened (see :class:`FlatResult`)."""
    return flatten(group_also_by_window(key, event_time, arrival_time, clauses, timeline,
                                        fast=fast, end_floor=end_floor, ordered=ordered))
