"""``dfsql.model.run``: the model end to end on Python tuples (tests, examples, docs).

Elements are ``(key, value, event_time, arrival_time)``; times are datetimes (naive means
UTC) or epoch seconds. Output rows follow docs/reference.md#output-columns order.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from dfsql.model.changelog import changelog_order
from dfsql.model.clauses import Clauses, GlobalWindows, WatermarkFrom
from dfsql.model.group_also_by_window import (
    NULL_TIME,
    end_floor_of,
    group_also_by_window,
    pane_members,
)
from dfsql.model.group_also_by_window import aggregate as aggregate_panes
from dfsql.model.pane_columns import PANE_COLUMNS
from dfsql.model.panes import TIMING_NAMES
from dfsql.model.watermarks import timeline_for
from dfsql.model.windows import I64, NEG_INF, NULL_EVENT_TIME, POS_INF

_EPOCH = dt.datetime(1970, 1, 1)


def to_micros(t: Any) -> int:
    """Datetime (naive = UTC) or epoch seconds -> int64 µs; ±inf -> the sentinels."""
    if isinstance(t, dt.datetime):
        if t.tzinfo is not None:
            t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
        d = t - _EPOCH
        return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    f = float(t)
    if f == float("inf"):
        return POS_INF
    if f == float("-inf"):
        return NEG_INF
    return int(round(f * 1_000_000))


def from_micros(m: int, as_datetime: bool) -> Any:
    """Inverse of :func:`to_micros`; the sentinels become None (NULL)."""
    if m in (NEG_INF, POS_INF):
        return None
    return _EPOCH + dt.timedelta(microseconds=int(m)) if as_datetime else m / 1_000_000


_NUMPY_AGGS: dict[Any, str] = {sum: "sum", len: "count", min: "min", max: "max"}


def run(
    elements: Iterable[Sequence[Any]],
    clauses: Clauses,
    aggregate: Callable[[list[Any]], Any] = sum,
    watermarks: Iterable[Sequence[Any]] | None = None,
    *,
    fast: bool | None = None,
    in_query: Sequence[bool] | None = None,
) -> list[dict[str, Any]]:
    """Run a windowed aggregation over tuples; see the module docstring.

    ``in_query`` (one flag per element; default all true) is what a WHERE keeps. Time
    belongs to the input (docs/reference.md#allowed-lateness): the watermark, the clock and the replay's end
    come from every element, and only the flagged ones enter windows — a row WHERE
    removes moves time but is never late, dropped or counted.

    ``clauses`` are typed (:func:`dfsql.language.model_run.run` takes them as the text
    from WINDOW to EMIT); without PROCESSING TIME the input is batch. ``watermarks``
    feeds WATERMARK FROM: pairs ``(processing_time, watermark)`` or, with BY writer,
    ``(writer, processing_time, noted_time)``. ``aggregate`` is any callable over a list
    (sum, len, max…); ``fast`` is passed to :func:`group_also_by_window`.
    """
    els = list(elements)
    as_dt = any(isinstance(e[2], dt.datetime) for e in els)
    ids: dict[Any, int] = {}  # dense key ids in first-seen order
    kid = np.asarray([ids.setdefault(e[0], len(ids)) for e in els], I64)
    order, et_s, at_s, timeline, end_floor = _arrivals(els, kid, clauses, watermarks,
                                                       in_query)
    res = group_also_by_window(kid[order], et_s, at_s, clauses, timeline, fast=fast,
                               end_floor=end_floor)
    agg = _aggregates(res, [els[i][1] for i in order], aggregate)
    key_of = {v: k for k, v in ids.items()}
    return _changelog(res, agg, key_of, as_dt, isinstance(clauses.window, GlobalWindows))


def _arrivals(els: list[Sequence[Any]], kid: np.ndarray, clauses: Clauses,
              watermarks: Iterable[Sequence[Any]] | None,
              in_query: Sequence[bool] | None,
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, Any, int]:
    """The elements the driver runs, in (key, arrival) order: (their rows, event and
    arrival times), the watermark's timeline over every element, and the end floor (the
    input ends at its last arrival, kept by WHERE or not)."""
    batch = clauses.processing_time is None
    # a NULL event time (None) belongs to no window: the driver drops it
    et = np.asarray([NULL_EVENT_TIME if e[2] is None else to_micros(e[2]) for e in els], I64)
    at = None if batch else np.asarray([to_micros(e[3]) for e in els], I64)
    order = np.lexsort(((at if at is not None else np.zeros(len(els), I64)), kid))
    series: list[Any] | None = None
    if watermarks is not None and isinstance(clauses.watermark, WatermarkFrom):
        series = [
            tuple(to_micros(x) for x in w) if clauses.watermark.writer is None
            else (w[0], to_micros(w[1]), to_micros(w[2]))
            for w in watermarks
        ]
    et_s = et[order]
    at_s = None if at is None else at[order]
    timeline = timeline_for(clauses.watermark, et_s, at_s, series)
    end_floor = NEG_INF
    if in_query is not None:
        kept = np.asarray(in_query, bool)[order]
        if at_s is not None and len(at_s):  # the input ends at its last arrival, kept or not
            end_floor = end_floor_of(clauses.trigger, int(at_s.max()), timeline)
        order, et_s = order[kept], et_s[kept]
        at_s = None if at_s is None else at_s[kept]
    return order, et_s, at_s, timeline, end_floor


def _aggregates(res: Any, vals: list[Any], aggregate: Callable[[list[Any]], Any]) -> list[Any]:
    """Each pane's aggregate: the model's kernels for sum, len, min and max of numbers,
    else ``aggregate`` over each pane's members."""
    how = _NUMPY_AGGS.get(aggregate)
    if how is not None and all(isinstance(v, int | float) for v in vals):
        agg = aggregate_panes(res, np.asarray(vals), how).tolist()
        if how in ("min", "max") and all(isinstance(v, int) for v in vals):
            agg = [None if x != x else int(x) for x in agg]
        return agg
    return [aggregate([vals[r] for r in m.tolist()]) for m in pane_members(res)]


def _changelog(res: Any, agg: list[Any], key_of: dict[int, Any], as_dt: bool,
               is_global: bool) -> list[dict[str, Any]]:
    """The panes and retractions as rows, in docs/reference.md#output-columns's order (the model's
    :func:`~dfsql.model.changelog.changelog_order`)."""
    p, ret = res.panes, res.retractions

    def row(pid: int, emit: int, retraction: bool) -> dict[str, Any]:
        pane = (None if is_global else from_micros(int(p.window_start[pid]), as_dt),
                None if is_global else from_micros(int(p.window_end[pid]), as_dt),
                int(p.pane_index[pid]), TIMING_NAMES[int(p.timing[pid])],
                bool(p.is_last[pid]),
                None if emit == NULL_TIME else from_micros(emit, as_dt), retraction)
        return {"key": key_of[int(p.key[pid])], **dict(zip(PANE_COLUMNS, pane, strict=True)),
                "value": agg[pid]}

    rows = [row(i, int(t), False) for i, t in enumerate(p.emit_time.tolist())]
    rows += [row(r, t, True) for r, t in zip(ret.retracted_pane_id.tolist(),
                                             ret.emit_time.tolist(), strict=True)]
    order = changelog_order(p.key, p.emit_time, p.window_start, p.pane_index,
                            ret.retracted_pane_id, ret.emit_time, ret.replacing_pane_id)
    return [rows[i] for i in order.tolist()]
