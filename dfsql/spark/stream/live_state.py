"""A running continuous query's windows now, read from its state (EXPLAIN FIRINGS FOR
STREAMING QUERY, docs/guides/streams.md#continuous-queries-as-statements; planned by :mod:`dfsql.spark.explain.live`).

Spark's state data source reads the bucket processor's state as of the query's last
committed micro-batch, one row per bucket (:mod:`dfsql.spark.stream.buckets`: the
retained elements, the watermark's change points, the frontier). Each bucket runs here as
the processor runs it each batch — the model over the retained elements — with the
recorder on, every instant before the frontier and no further: the input has not ended,
so nothing fires at +inf (:func:`~dfsql.model.group_also_by_window.group_also_by_window`'s
``until``). What comes out is the last pane of every live window and a WAITING row for
each window still to fire (the watermark against its end, what holds the watermark, its
trigger's next condition, and where the query's clock stands), as rows of the
processor's own output schema with the event's fields beside them.
"""

from __future__ import annotations

import numpy as np

from dfsql.language.names import SORT_COLUMNS
from dfsql.model import firings as fr
from dfsql.model.changelog import current_at
from dfsql.model.group_also_by_window import drive, flatten, group_also_by_window
from dfsql.model.panes import RESTATED, TIMING_NAMES
from dfsql.model.watermarks import holding_writer
from dfsql.spark.stream.output_rows import ROW_KIND, changelog_rows
from dfsql.spark.stream.packing import AT, ET, MARKS_NONE, MARKS_WRITERS, NEG, POS, WRITER

#: the processor's state variable (:meth:`BucketProcessor.init`)
STATE_VARIABLE = "bucket"
#: ROW_KIND of an event row (a pane row keeps the processor's own kind)
EVENT = 5
#: an event row's fields beside the processor's output columns (times in µs)
EVENT_FIELDS = (("__at", "long"), ("__event", "string"), ("__wm", "long"),
                ("__ev_index", "long"), ("__ev_timing", "string"), ("__detail", "string"),
                ("__etime", "long"), ("__reason", "byte"), ("__seq", "long"))

_TIMINGS = np.array([*TIMING_NAMES, None], dtype=object)  # index -1: no pane
_NAMES = np.array(fr.EVENT_NAMES, dtype=object)


class EachBucket:
    """``mapInPandas`` over a query's state rows, one per bucket (a handful, not rows of
    data): ``run(processor, stored, *args)`` of each — :func:`bucket_now` or
    :func:`current_panes` — its frames as they come."""

    def __init__(self, run, processor, *args) -> None:
        self.run = run
        self.processor = processor
        self.args = args

    def __call__(self, frames):
        for frame in frames:
            for stored in frame.itertuples(index=False, name=None):  # a row per bucket
                out = self.run(self.processor, stored, *self.args)
                if out is not None:
                    yield out


def bucket_now(proc, stored: tuple, names: list[str], time_zone: str | None,
               writers: tuple | None = None):
    """One bucket's live windows now (see the module doc), as rows named ``names``.
    ``writers``: a bounded WATERMARK FROM … BY writer table's rows (writer, processing
    time, noted time; µs), to name the writer that holds the watermark."""
    import pandas as pd

    run = _run_now(proc, stored, time_zone, writers)
    if run is None:
        return None
    elems, dense, et, at, timeline, res, rec = run
    ev = fr.events(res, rec, dense, et, at, timeline)
    last = np.array([p for _, p in rec.live if p >= 0], np.int64)
    keep = (ev.code == fr.WAITING) | ((ev.code == fr.FIRE) & np.isin(ev.pane, last))
    events = _event_rows(ev, keep, elems, dense, proc.keys, names)
    if events is None:  # no live window
        return None
    panes = changelog_rows(flatten(res), elems, dense, NEG, POS, proc.keys, proc.aggs,
                           proc.out_names)
    parts = [_named(p, names) for p in (panes, events) if p is not None and len(p)]
    return pd.concat(parts, ignore_index=True)


def current_panes(proc, stored: tuple):
    """The current row of each window of one bucket at its frontier T, as ALTER STREAMING
    QUERY restates it (docs/guides/streams.md#continuous-queries-as-statements; the model's
    :func:`~dfsql.model.changelog.current_at`): pane_timing RESTATED, emitted at T, placed
    before the panes of T itself; rows of the processor's output schema, or None. The
    run is the processor's own over the retained elements (an expired window's are
    gone: it keeps its rows)."""
    held = _retained(proc, stored)
    if held is None:
        return None
    elems, dense, et, at, timeline, frontier, _ = held
    r = drive(dense, et, at, proc.clauses, timeline, end_floor=frontier, ordered=False)
    current = current_at(r, frontier)
    if not len(current):
        return None
    rows = changelog_rows(r, elems, dense, NEG, POS, proc.keys, proc.aggs, proc.out_names,
                          panes=current)
    rows["pane_timing"] = RESTATED
    rows["emit_time"] = frontier
    rows[SORT_COLUMNS[0]] = rows[SORT_COLUMNS[0]] - BEFORE_ALL
    return rows


#: how far a restated row's §7 place moves back: before every row of its instant
BEFORE_ALL = 1 << 62


def _retained(proc, stored: tuple):
    """One bucket's state as the processor's run takes it: (elements in key and arrival
    order, key ids, event times, arrivals, the watermark's timeline, the frontier, the
    writers' notes), or None (nothing retained, or no frontier yet)."""
    elems, t, v, frontier, notes, *_ = proc.decode(stored)
    if elems is None or not len(elems) or frontier == NEG:
        return None
    proc._notes = notes  # the writers' notes a FROM a stream BY writer timeline reads
    timeline = proc.timeline_of(t, v)
    elems, dense, et, at = proc.ordered(elems)
    return elems, dense, et, at, timeline, frontier, notes


def _run_now(proc, stored: tuple, time_zone: str | None, writers: tuple | None = None):
    """The model over one bucket's retained elements, recorder on, every instant before
    its frontier: (elements, key ids, event times, arrivals, timeline, result, recorder),
    or None (nothing retained, or no frontier yet)."""
    held = _retained(proc, stored)
    if held is None:
        return None
    elems, dense, et, at, timeline, frontier, notes = held
    tz = fr.zone(time_zone)
    wm = int(timeline.at(frontier - 1)) if len(timeline.times) else NEG
    holder = fr.holder_text(proc.clauses, timeline, frontier - 1, tz,
                            _holding_writer(proc, notes, writers, frontier - 1))
    rec = fr.Recorder(proc.clauses, tz, wm, holder, _clock(proc, frontier, tz))
    res = group_also_by_window(dense, et, at, proc.clauses, timeline, recorder=rec,
                               until=frontier)
    return elems, dense, et, at, timeline, res, rec


def _named(frame, names: list[str]):
    """``frame`` with the columns ``names``, those it lacks all None (not NaN: a float
    column Arrow would not take as a string or a timestamp)."""
    import pandas as pd

    missing = {n: pd.Series([None] * len(frame), index=frame.index, dtype=object)
               for n in names if n not in frame.columns}
    return pd.concat([frame, pd.DataFrame(missing)], axis=1)[names] if missing else \
        frame[names]


def _event_rows(ev, keep: np.ndarray, elems, dense: np.ndarray, keys: list[str],
                names: list[str]):
    import pandas as pd

    n = int(keep.sum())
    if not n:
        return None

    def micros(x: np.ndarray):
        out = pd.array(np.where((x <= NEG) | (x >= POS), 0, x), dtype="Int64")
        out[(x <= NEG) | (x >= POS)] = pd.NA
        return out

    first_row = np.searchsorted(dense, ev.key[keep], side="left")
    cols: dict = {k: elems[k].to_numpy()[first_row] for k in keys}
    cols.update({
        "window_start": micros(ev.window_start[keep]), "window_end": micros(ev.window_end[keep]),
        ROW_KIND: np.full(n, EVENT, np.int8), "__at": ev.at[keep],
        "__event": _NAMES[ev.code[keep]], "__wm": micros(ev.watermark[keep]),
        "__ev_index": pd.array(np.where(ev.pane_index[keep] < 0, 0, ev.pane_index[keep]),
                               dtype="Int64"),
        "__ev_timing": _TIMINGS[ev.timing[keep]], "__detail": ev.detail[keep],
        "__etime": micros(ev.event_time[keep]), "__reason": ev.reason[keep].astype(np.int8),
        "__seq": ev.seq[keep]})
    cols["__ev_index"][ev.pane_index[keep] < 0] = pd.NA
    return pd.DataFrame(cols)


def _holding_writer(proc, notes, writers: tuple | None, at: int) -> str | None:
    """WATERMARK FROM … BY writer: the writer that holds the watermark at ``at``, from a
    stream's notes in the state or the bounded table's rows."""
    wm = proc.clauses.watermark
    if getattr(wm, "writer", None) is None:
        return None
    timeout = wm.idle_timeout.micros if wm.idle_timeout is not None else None
    if proc.marks == MARKS_WRITERS and notes is not None:
        w, p, n = notes.column(WRITER).to_pylist(), notes.column(AT).to_numpy(), \
            notes.column(ET).to_numpy()
    elif writers is not None:
        w, p, n = writers
    else:
        return None
    found = holding_writer(w, p, n, timeout, at)
    return None if found is None else str(found)


def _clock(proc, frontier: int, tz) -> str:
    """Where the query's clock stands (its frontier), and the input that holds it there
    (docs/reference.md#processing-time: several inputs stand at the earliest)."""
    shown = frontier - 1 if proc.engine else frontier  # the engine's: its batch's instant
    now = fr.time_text(shown, tz, shown)
    if proc.marks == MARKS_NONE:
        return f"the query's clock stands at {now}, the input's latest arrival"
    rows, marks = proc._inputs[:2]
    latest = {"rows": rows, "marks": marks}
    held = [k for k, x in latest.items() if x == frontier] or \
        [k for k, x in latest.items() if x == NEG]
    seen = ", ".join(f"{k} at {fr.time_text(x, tz, shown) if x != NEG else 'nothing yet'}"
                     for k, x in latest.items())
    return f"the query's clock stands at {now}, held by the {' and '.join(held)} ({seen})"
