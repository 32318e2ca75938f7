"""The function a replay gives ``mapInArrow`` (:mod:`dfsql.spark.replay.panes`): the model's
driver over the keys of one partition, and the one union-typed Arrow stream it emits —
element rows with the panes that aggregate them, one marker row per pane, dropped
elements (and, for EXPLAIN FIRINGS, the recorded events)."""

from __future__ import annotations

import numpy as np

from dfsql.language.names import EVENT_TIME, PROCESSING_TIME
from dfsql.model.changelog import changelog_ranks as _changelog_ranks
from dfsql.model.changelog import element_panes as pane_members
from dfsql.model.group_also_by_window import drive
from dfsql.model.panes import TIMING_NAMES
from dfsql.model.windows import NULL_EVENT_TIME, AssignedWindows
from dfsql.spark.replay.pane_sql import KIND_DROPPED, KIND_MARKER, KIND_MEMBER
from dfsql.spark.replay.recorder import event_types, recorded
from dfsql.spark.timelines import us as _us

#: the timing names by their code (the model's), for Arrow columns
TIMING = np.array(TIMING_NAMES, dtype=object)
#: the column holding an element's window start, for windows that never merge (the
#: driver runs one state machine per key and window: :func:`dfsql.spark.replay.panes.by_window`)
WINDOW_START = "__window_start"
#: SLIDING windows: each input row's identity, given before the row is sent once per
#: window (:func:`dfsql.spark.replay.panes.by_window`), so that a row dropped from several
#: windows, in several tasks, is counted once (:func:`dropped_total`)
ROW_ID = "__row_id"
# Pane ids are unique across tasks: the partition id in the high bits.
_PARTITION_SHIFT = 40
# Rows gathered before one driver call (Arrow batches hold 10k rows by default).
_MIN_ROWS_PER_RUN = 200_000


class PartitionDriver:
    """The function given to ``mapInArrow``: runs the driver over a partition's keys.

    Rows arrive sorted by key then processing time, in batches that may cut a key in two;
    a key's rows are held back until the key is complete.
    """

    def __init__(self, clauses, timeline, keys, payload, out_names, end_floor,
                 negate_marker_group: bool = False, group: list[str] | None = None,
                 dropped=None, ranked: bool = False, kernels=None, record=None,
                 row_ids: bool = False) -> None:
        #: EXPLAIN FIRINGS: (time zone, watermark at the end of input, what holds it), or
        #: None: the state machine records nothing (the query's own path, unchanged)
        self.record = record
        #: accumulator of {partition: elements dropped}, so that dropped_late reads what
        #: the query's run counted (a re-run of a partition overwrites its own entry)
        self.dropped = dropped
        #: the rows carry ROW_ID (SLIDING): the accumulator gets the dropped rows' ids
        self.row_ids = row_ids
        #: a marker's one-element pane list holds -1 - its id (the two-level plan, where
        #: it must not share a group with the elements its own pane first emitted)
        self.negate_marker_group = negate_marker_group
        #: number each pane by its §7 changelog rank (its emission's and its retraction's
        #: positions, see _packed_ranks) instead of a running id: unique within a key (a key's
        #: rows are one run, and panes group by id and key), and the sort key after
        self.ranked = ranked
        #: the aggregates the driver computes per pane (replay.kernels.Kernels), or
        #: None: it emits the elements with their panes for Spark to aggregate
        self.kernels = kernels
        self.end_floor = end_floor
        self.clauses = clauses
        self.timeline = timeline
        self.keys = keys
        #: what the driver runs one state machine per: the keys, and for non-merging
        #: windows the window (see by_window)
        self.group = keys if group is None else group
        self.payload = payload
        self.out_names = out_names

    def __call__(self, batches):
        from pyspark import TaskContext

        next_id = 0
        n_dropped = 0
        ids: list[np.ndarray] = []
        ctx = TaskContext.get()  # None outside a Spark task
        part = ctx.partitionId() if ctx is not None else 0
        base = part << _PARTITION_SHIFT
        for table, key_ids in key_runs(batches, self.group):
            out, used, dropped = self._run(table, key_ids, base + next_id)
            next_id += used
            n_dropped += len(dropped)
            if self.row_ids and len(dropped):
                ids.append(_us(table.column(ROW_ID)).take(dropped))
            if out is not None:
                yield from out.to_batches()
        if self.dropped is not None:
            rows = np.unique(np.concatenate(ids)) if ids else np.empty(0, np.int64)
            self.dropped.add({part: (n_dropped, rows if self.row_ids else None)})

    def _run(self, table, key_ids, id_base):
        # A NULL event time reaches the driver as NULL_EVENT_TIME: it belongs to no
        # window, and the driver drops and counts it (docs/reference.md#window).
        et = _us(table.column(EVENT_TIME), null=NULL_EVENT_TIME)
        if isinstance(self.clauses.window, AssignedWindows):  # the window, not the time
            et = np.where(et == NULL_EVENT_TIME, et, _us(table.column(WINDOW_START), null=0))
        pt = _us(table.column(PROCESSING_TIME))
        events = None
        if self.record is None:
            r = drive(key_ids, et, pt, self.clauses, self.timeline.get(),
                      end_floor=self.end_floor, ordered=False)
        else:
            r, events = recorded(self.record, self.clauses, self.timeline.get(), self.end_floor,
                                 table, self.keys, key_ids, et, pt)
        n_panes = len(r.pane_key)
        pane_ids = (_changelog_ranks(r, r.pane_window_start) if self.ranked
                    else np.arange(n_panes, dtype=np.int64) + id_base)
        parts = [p for p in (self._member_rows(table, r, n_panes, pane_ids),
                             self._marker_rows(table, r, n_panes, pane_ids, key_ids),
                             self._dropped_rows(table, r)) if p is not None]
        if events is not None and len(events):
            parts.append(events)
        if not parts:
            return None, n_panes, r.dropped_row
        schema = table.schema if self.kernels is None else self.kernels.arrow_schema(
            table.schema)
        return _union(parts, self.out_names, schema), n_panes, r.dropped_row

    def _member_rows(self, table, r, n_panes: int, pane_ids: np.ndarray) -> dict | None:
        """The elements: one row each, listing the panes that aggregate it (cover pairs by
        delta); none when the driver aggregates them itself."""
        import pyarrow as pa

        if self.kernels is not None:
            return None
        ok, lens, member_panes = pane_members(r, n_panes)
        m = int(ok.sum())
        if not m:
            return None
        offsets = np.r_[0, np.cumsum(lens)].astype(np.int32)
        gids = pane_ids[member_panes]
        taken = table.select([*self.keys, *self.payload]).take(pa.array(r.element_row[ok]))
        cols = {"__kind": pa.array(np.full(m, KIND_MEMBER, np.int8)),
                "__gids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(gids))}
        for n in [*self.keys, *self.payload]:
            cols[n] = taken.column(n)
        return cols

    def _marker_rows(self, table, r, n_panes: int, pane_ids: np.ndarray,
                     key_ids: np.ndarray) -> dict | None:
        """One row per pane: its metadata, when it is retracted (and with kernels its
        aggregates)."""
        import pyarrow as pa

        if not n_panes:
            return None
        first_row = _first_row_of_key(key_ids, r.pane_key)
        taken = table.select(self.keys).take(pa.array(first_row)) if self.keys else None
        wstart, wend = r.pane_window_start, r.pane_window_end
        finite = (wstart != _MIN) & (wend != np.iinfo(np.int64).max)
        retract = np.full(n_panes, _MIN, np.int64)
        if len(r.retraction_pane):
            retract[r.retraction_pane] = r.retraction_emit_time
        ids = -1 - pane_ids if self.negate_marker_group else pane_ids
        info = (r.pane_index.astype(np.int64) << 3) | \
            (r.pane_timing.astype(np.int64) << 1) | r.pane_is_last.astype(np.int64)
        cols = {"__kind": pa.array(np.full(n_panes, KIND_MARKER, np.int8)),
                "__gids": pa.ListArray.from_arrays(
                    pa.array(np.arange(n_panes + 1, dtype=np.int32)), pa.array(ids)),
                "window_start": _ts(wstart, finite), "window_end": _ts(wend, finite),
                "__pane_info": pa.array(info),
                "emit_time": _ts(r.pane_emit_time, r.pane_emit_time != _MIN),
                "__retract_time": _ts(retract, retract != _MIN)}
        for k in self.keys:
            cols[k] = taken.column(k)
        if self.kernels is not None:
            cols.update(self.kernels.pane_columns(table, r, n_panes))
        return cols

    def _dropped_rows(self, table, r) -> dict | None:
        """The dropped elements (one per window a row was dropped from), with that window,
        why, the watermark then and the columns the query reads."""
        import pyarrow as pa

        k = len(r.dropped_row)
        if not k:
            return None
        taken = table.take(pa.array(r.dropped_row))
        # a NULL event time is in no window: both NULL_EVENT_TIME (_MIN), NULL here
        ws, we = r.dropped_window_start, r.dropped_window_end
        cols = {"__kind": pa.array(np.full(k, KIND_DROPPED, np.int8)),
                EVENT_TIME: taken.column(EVENT_TIME),
                PROCESSING_TIME: taken.column(PROCESSING_TIME),
                "window_start": _ts(ws, ws != _MIN),
                "window_end": _ts(we, (we != _MIN) & (we != np.iinfo(np.int64).max)),
                "reason": pa.array(r.dropped_reason_text, type=pa.string()),
                "watermark": _ts(r.dropped_watermark, r.dropped_watermark > _MIN)}
        for name in [*self.keys, *self.payload, *([ROW_ID] if self.row_ids else [])]:
            cols[name] = taken.column(name)
        return cols


_MIN = np.iinfo(np.int64).min


def dropped_total(counts, windows: bool = False) -> int:
    """The rows the driver's tasks dropped, from their accumulated (pairs, row ids or
    None) — a row dropped from several SLIDING windows once — or with ``windows``, the
    (row, window) pairs."""
    counts = list(counts)
    ids = [i for _, i in counts if i is not None]
    if windows or not ids:
        return sum(n for n, _ in counts)
    return len(np.unique(np.concatenate(ids)))


def _ts(values: np.ndarray, valid: np.ndarray | None = None):
    """Microseconds as an Arrow UTC timestamp array (``valid``: where not NULL)."""
    import pyarrow as pa

    mask = None if valid is None else ~valid
    return pa.array(values, type=pa.int64(), mask=mask).cast(pa.timestamp("us", tz="UTC"))


def key_runs(batches, group: list[str], min_rows: int = _MIN_ROWS_PER_RUN):
    """The rows of a partition sorted by ``group`` (then processing time), as runs of
    whole groups: (Arrow table, dense group ids) of at least ``min_rows`` rows where
    the partition has them (the driver's per-call cost is amortised over many keys).
    Batches may cut a group in two: its rows are held back until it is complete."""
    import pyarrow as pa

    pending: pa.Table | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        if pending is not None:
            table = pa.concat_tables([pending, table])
        if table.num_rows < min_rows:
            pending = table
            continue
        ids = group_ids(table, group)
        # Keep the last group back: more of its rows may come in the next batch.
        last_start = int(np.searchsorted(ids, ids[-1], side="left"))
        if last_start == 0:
            pending = table
            continue
        yield table.slice(0, last_start), ids[:last_start]
        pending = table.slice(last_start)
    if pending is not None and pending.num_rows:
        yield pending, group_ids(pending, group)


def group_ids(table, group: list[str]) -> np.ndarray:
    """Dense ids 0..K-1 for runs of equal ``group`` values (null-safe)."""
    import pyarrow.compute as pc

    n = table.num_rows
    if not group or n == 0:
        return np.zeros(n, dtype=np.int64)
    changed = np.zeros(n, dtype=bool)
    for k in group:
        col = table.column(k).combine_chunks()
        a, b = col.slice(1), col.slice(0, n - 1)
        eq = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
        changed[1:] |= ~(eq | both_null)
    return np.cumsum(changed).astype(np.int64)


def _first_row_of_key(key_ids: np.ndarray, pane_key: np.ndarray) -> np.ndarray:
    starts = np.searchsorted(key_ids, pane_key, side="left")
    return starts.astype(np.int64)


def _union(parts: list[dict], names: list[str], in_schema):
    """Stack column dicts into one table of the union schema (missing columns null)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    types = {}
    for n in names:
        if n in in_schema.names:
            types[n] = in_schema.field(n).type
    types.update({"__kind": pa.int8(), "__retract_time": ts, "__pane_info": pa.int64(),
                  "__gids": pa.list_(pa.int64()),
                  "window_start": pa.timestamp("us", tz="UTC"),
                  "window_end": pa.timestamp("us", tz="UTC"),
                  "emit_time": pa.timestamp("us", tz="UTC"), "reason": pa.string(),
                  "watermark": pa.timestamp("us", tz="UTC"), **event_types()})
    tables = []
    for cols in parts:
        n = len(next(iter(cols.values())))
        arrays = []
        for name in names:
            t = types[name]
            if name in cols:
                a = cols[name]
                if isinstance(a, pa.ChunkedArray):
                    a = a.combine_chunks()
                arrays.append(a.cast(t) if a.type != t else a)
            else:
                arrays.append(pa.nulls(n, type=t))
        tables.append(pa.Table.from_arrays(arrays, names=names))
    return pa.concat_tables(tables)
