"""The bucket processor's output rows (:mod:`dfsql.spark.stream.buckets`): panes and
retractions with their aggregates and §7 places, the call's metrics and dropped elements,
each a row of the processor's one output schema, told apart by :data:`ROW_KIND`."""

from __future__ import annotations

import numpy as np

from dfsql.language.names import SORT_COLUMNS
from dfsql.model.changelog import changelog_ranks, emission_place, retraction_place
from dfsql.model.pane_columns import PANE_COLUMNS
from dfsql.model.windows import NULL_EVENT_TIME
from dfsql.spark.replay.driver import TIMING
from dfsql.spark.stream.aggregates import bucket_aggregates
from dfsql.spark.stream.packing import ET, NEG, POS

#: what a row of the processor's output is (its column ROW_KIND): a pane or retraction,
#: the call's metrics (one row per call, filtered out after Spark observes it), or a
#: dropped element (LATE ROWS INTO). Metrics and dropped elements have fields of their
#: own (STATS_FIELDS, LATE_FIELDS); a dropped element also fills window_start and
#: window_end (the window it was dropped from), its keys and the columns the query reads.
ROW_KIND = "__row_kind"
PANE, STATS, LATE = 0, 1, 2
#: the metrics row's fields: elements arrived, retained and dropped as late, the change in
#: retained elements (summed over every batch it is the state of all buckets, also those
#: a batch did not run), the watermark at the new frontier, the frontier, and each
#: input's latest arrival: the rows', and a stream of marks' (µs; SHOW STREAMING QUERIES
#: says which input holds the frontier), and the elements that arrived late but were
#: kept (behind the watermark, their window still within its lateness: docs/guides/watching.md)
STATS_FIELDS = ("__arrived", "__retained", "__dropped", "__state_change", "__watermark",
                "__frontier", "__rows_latest", "__marks_latest", "__late")
#: a dropped element's fields (µs, and why): the replay's LATE ROWS INTO row
LATE_FIELDS = ("__late_event_time", "__late_arrival", "__late_watermark", "__late_reason")


def changelog_rows(r, elems, dense: np.ndarray, lo: int, hi: int, keys: list[str],
                   aggs: list[tuple[str, str, str | None]], out_names: list[str],
                   panes: np.ndarray | None = None):
    """The panes and retractions the run emitted in [lo, hi) as rows of the output's
    schema (aggregates by the model's kernels, §7 places from the model's changelog),
    or None. ``panes``: only these panes (their ids), without retractions."""
    import pandas as pd

    n_panes = len(r.pane_key)
    if panes is None:
        emitted = (r.pane_emit_time >= lo) & (r.pane_emit_time < hi)
        rmask = (r.retraction_emit_time >= lo) & (r.retraction_emit_time < hi)
    else:
        emitted = np.zeros(n_panes, bool)
        emitted[panes] = True
        rmask = np.zeros(len(r.retraction_pane), bool)
    retracted = r.retraction_pane[rmask]
    needed = np.zeros(n_panes, bool)
    needed[emitted] = True
    needed[retracted] = True
    if not needed.any():
        return None
    values = bucket_aggregates(r, elems, n_panes, aggs)
    ranks = changelog_ranks(r, r.pane_window_start)
    e_ids = np.flatnonzero(emitted)
    ids = np.r_[e_ids, retracted]
    is_ret = np.r_[np.zeros(len(e_ids), bool), np.ones(len(retracted), bool)]
    emit = np.r_[r.pane_emit_time[e_ids], r.retraction_emit_time[rmask]]
    rank = np.r_[emission_place(ranks[e_ids]), retraction_place(ranks[retracted])]
    first_row = np.searchsorted(dense, r.pane_key[ids], side="left")
    cols = {}
    for k in keys:
        cols[k] = elems[k].to_numpy()[first_row]
    for alias, _, _ in aggs:
        cols[alias] = values[alias][ids]
    ws, we = r.pane_window_start[ids], r.pane_window_end[ids]
    pane = {  # each pane column's values; the model says which there are, in order
        "window_start": _or_null(ws, ws == NEG), "window_end": _or_null(we, we == POS),
        "pane_index": r.pane_index[ids].astype(np.int64),
        "pane_timing": TIMING[r.pane_timing[ids].astype(np.int64)],
        "is_last": r.pane_is_last[ids].astype(bool),
        "emit_time": emit.astype(np.int64), "is_retraction": is_ret}
    cols |= {n: pane[n] for n in PANE_COLUMNS}  # a column the model adds fails here
    cols[SORT_COLUMNS[0]] = rank.astype(np.int64)
    cols[ROW_KIND] = np.full(len(ids), PANE, np.int8)
    return pd.DataFrame(cols, columns=out_names)


def _or_null(bound: np.ndarray, unbounded: np.ndarray):
    """An instant (µs) as a nullable column: NULL where ``unbounded`` (no such bound)."""
    import pandas as pd

    out = pd.array(np.where(unbounded, 0, bound), dtype="Int64")
    out[unbounded] = pd.NA
    return out


def late_kept(r, at: np.ndarray, timeline, dropped: np.ndarray) -> np.ndarray:
    """Which elements arrived late and were kept (docs/guides/watching.md#system-tables): a
    window of theirs had ended at or before the watermark in effect at their arrival
    (the replay's test, :func:`dfsql.model.result.late_instances`), yet no window dropped
    them. ``dropped``: the elements some window dropped."""
    row, end = r.element_row, r.element_window_end
    late = np.zeros(len(at), bool)
    if len(row):
        behind = (end != NULL_EVENT_TIME) & (end <= timeline.before(at[row]))
        late[row[behind]] = True
    return late & ~dropped


def late_rows(r, elems, at: np.ndarray, lo: int, hi: int, columns: list[str],
              out_names: list[str]):
    """The elements dropped in [lo, hi), one per window a row was dropped from, each as
    one row of the output's schema: its ``columns`` (keys, and the columns the query
    reads where the schema has them), that window, and in the fields
    :data:`LATE_FIELDS` names its event time, its arrival, the watermark then, and why
    (the replay's LATE ROWS INTO)."""
    import pandas as pd

    rows = r.dropped_row
    sel = (at[rows] >= lo) & (at[rows] < hi)
    rows = rows[sel]
    row = {n: pd.Series([None] * len(rows), dtype=object) for n in out_names}
    for k in columns:
        if k in row:
            row[k] = elems[k].to_numpy()[rows]
    for name, bound in (("window_start", r.dropped_window_start[sel]),
                        ("window_end", r.dropped_window_end[sel])):
        # NEG (also a NULL event time's "no window") and POS: NULL
        row[name] = _or_null(bound, (bound == NEG) | (bound == POS))
    wm = r.dropped_watermark[sel]
    event_time, arrival, watermark, reason = LATE_FIELDS
    row[event_time] = pd.Series(elems[ET].to_numpy()[rows]).astype("Int64").array
    row[arrival] = at[rows]
    row[watermark] = _or_null(wm, wm == NEG)
    row[reason] = np.asarray(r.dropped_reason_text)[sel]
    row[ROW_KIND] = np.full(len(rows), LATE, np.int8)
    return pd.DataFrame(row, columns=out_names)
