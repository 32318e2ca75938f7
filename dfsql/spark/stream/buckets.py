"""The bucket processor: GroupAlsoByWindow for one bucket of user keys in
``transformWithStateInPandas`` (planned by :mod:`dfsql.spark.stream.plan`, fed by
:mod:`dfsql.spark.stream.packing`).

A bucket's state is one ValueState holding Arrow IPC blobs: the elements of its keys'
live windows, and the watermark's change points. Each call adds a micro-batch's
elements and points, re-runs the model (:func:`~dfsql.model.group_also_by_window.drive`)
over the retained elements up to the new frontier, emits exactly the panes and
retractions whose emit time lies between the previous frontier and the new one (their
rows from :mod:`dfsql.spark.stream.output_rows`), and keeps only what a later run needs
(:mod:`dfsql.spark.stream.retention`; see :mod:`dfsql.spark.stream.plan` for the clocks and
the bounds).
"""

from __future__ import annotations

import numpy as np

from dfsql.model import clauses as c
from dfsql.model.group_also_by_window import drive
from dfsql.model.lexsort import lexsort
from dfsql.model.watermarks import (
    DelayHistogram,
    Timeline,
    delay_timeline,
    inputs_frontier,
    percentile_lags,
    writers_timeline,
)
from dfsql.model.windows import NULL_EVENT_TIME
from dfsql.spark.stream.live_state import current_panes
from dfsql.spark.stream.output_rows import (
    ROW_KIND,
    STATS,
    STATS_FIELDS,
    changelog_rows,
    late_kept,
    late_rows,
)
from dfsql.spark.stream.packing import (
    AT,
    BLOB,
    ET,
    INPUT,
    KIND,
    KIND_ELEMENT,
    KIND_MARKS,
    KIND_POINT,
    MARKS_NONE,
    MARKS_WRITERS,
    N_ROWS,
    NEG,
    POS,
    VALUE,
    WRITER,
    change_points,
    from_ipc,
    to_ipc,
)
from dfsql.spark.stream.retention import fold_notes, fold_start, retained
from dfsql.spark.timelines import count_pairs

#: the initial state's columns (a backfill's history, packed: one row per bucket)
ELEMENTS, POINTS = "dfsql_elements", "dfsql_points"
#: the state's ``timer`` on the processing-time clock (which sets no timers) while the
#: rows a backfill's history emitted wait for the bucket's next call (handleInitialState)
HISTORY_HELD = 0


try:  # the processor's base class (PySpark's state API needs protobuf and grpcio)
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor as _Base
except ImportError:  # pragma: no cover
    _Base = object  # type: ignore[assignment,misc]


class BucketProcessor(_Base):  # type: ignore[misc,valid-type]
    """GroupAlsoByWindow for one bucket of user keys (see the module doc)."""

    def __init__(self, clauses: c.Clauses, keys: list[str], payload: list[str],
                 aggs: list[tuple[str, str, str | None]], out_names: list[str],
                 static_timeline=None, marks: int = MARKS_NONE, restate: bool = False) -> None:
        self.engine = clauses.processing_time is None  # the engine's clock
        if self.engine:  # to the model, the batch timestamps are the processing time
            import dataclasses

            clauses = dataclasses.replace(clauses, processing_time=c.Expr("current_timestamp()"))
        self.clauses = clauses
        self.static_timeline = static_timeline  # WATERMARK FROM a bounded table
        self.marks = marks  # WATERMARK FROM a stream (of marks, or of writers' notes)
        self._notes = None  # the writers' notes a run needs (MARKS_WRITERS)
        # PERCENTILE: the timeline's lags beside its change points, the histogram of
        # the delays of complete instants, and the counts at the frontier's instant
        self.percentile = isinstance(clauses.watermark, c.WatermarkPercentile)
        self._lags = np.empty(0, np.int64)
        self._delays = None
        self.keys = keys
        self.payload = payload
        self.aggs = aggs
        self.out_names = out_names
        #: each bucket's backfill rows, for its first call (see handleInitialState)
        self._held: dict = {}
        #: ALTER of a query into an appending sink: the history's panes are the old
        #: query's; the backfill emits each window's current row instead
        self.restate = restate

    def init(self, handle) -> None:
        from pyspark.sql.types import BinaryType, LongType, StructField, StructType

        schema = StructType([StructField("elements", BinaryType()),
                             StructField("points", BinaryType()),
                             StructField("frontier", LongType()),
                             StructField("notes", BinaryType()),
                             StructField("pending", LongType()),
                             StructField("timer", LongType()),
                             StructField("delays", BinaryType()),
                             # with marks: each input's latest arrival, and the first
                             # instant any input reached (see model.watermarks.inputs_frontier)
                             StructField("rows_latest", LongType()),
                             StructField("marks_latest", LongType()),
                             StructField("first_arrival", LongType())])
        self.handle = handle
        self.state = handle.getValueState("bucket", schema)

    def close(self) -> None:
        pass

    def handleInputRows(self, key, rows, timerValues=None):  # noqa: N802 (Spark's name)

        elem_tables, point_tables, note_tables = [], [], []
        by_kind = {KIND_ELEMENT: elem_tables, KIND_POINT: point_tables, KIND_MARKS: note_tables}
        for frame in rows:
            kinds = frame[KIND].to_numpy()
            for kind, blob in zip(kinds.tolist(), frame[BLOB].tolist(), strict=True):
                by_kind[kind].append(from_ipc(blob))
        if not elem_tables and not point_tables:
            return
        yield from self._step(*_frames(elem_tables, point_tables), note_tables, timerValues,
                              key)

    def handleInitialState(self, key, initialState, timerValues=None) -> None:  # noqa: N802
        """A continuous query's history (BACKFILL, :mod:`dfsql.spark.stream.backfill`),
        one row per bucket: run as the step before the stream's first micro-batch. This
        call cannot emit: the rows it emitted wait in memory for the bucket's call with
        the first micro-batch's rows, which emits them first. That call comes in this
        task, in this process: PySpark hands a task its buckets' initial states and
        rows, and every bucket has a row in the first micro-batch (the packer sends one
        to every bucket from every partition, empty or not). The state says the rows
        wait (its ``timer``), so that a call without them fails, never drops them."""
        import pandas as pd

        elems, pts = ([from_ipc(b) for cell in initialState[col] for b in cell]
                      for col in (ELEMENTS, POINTS))
        held = pd.concat([f for f in self._step(*_frames(elems, pts), []) if len(f)],
                         ignore_index=True)
        if self.restate:  # docs/guides/streams.md#continuous-queries-as-statements: each window's current row, at the frontier
            current = current_panes(self, self.state.get())
            held = pd.concat([held[held[ROW_KIND] == STATS],
                              *([current] if current is not None else [])],
                             ignore_index=True)
        self._held[tuple(key)] = held
        kept = list(self.state.get())
        kept[5] = HISTORY_HELD  # the ``timer`` field (see init)
        self.state.update(tuple(kept))

    def _held_rows(self, key):
        """The rows this bucket's backfill emitted (handleInitialState), once."""
        rows = self._held.pop(tuple(key), None)
        if rows is None:  # never: every bucket is called in the first micro-batch
            raise RuntimeError(f"the rows bucket {key} emitted from its backfill were lost; "
                               "start the query again from a new checkpoint")
        return rows

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo=None):  # noqa: N802
        """The engine's clock: a micro-batch without rows for this bucket is still an
        instant (its timestamp), at which the watermark moves and triggers fire."""
        import pandas as pd

        now = int(timerValues.getCurrentProcessingTimeInMs()) * 1000
        yield from self._step(None, pd.DataFrame({AT: [now], VALUE: [None]}), [],
                              timerValues)

    def _step(self, fresh, pts, note_tables, timer_values=None, key=None):
        """Add a micro-batch's elements, points and notes to the bucket's state; run the
        model up to the new frontier; yield the rows emitted before it and the metrics."""
        import pandas as pd
        import pyarrow as pa

        old_elems, old_t, old_v, frontier, notes, pending, timer = self._load()
        if timer == HISTORY_HELD and not self.engine:  # a backfill's rows, first
            yield self._held_rows(key)
            timer = NEG
        if note_tables:  # the writers' notes so far (FROM a stream BY writer); a note
            # behind the frontier (its input was let pass as idle) arrives now
            fresh_notes = pa.concat_tables(note_tables)
            if frontier != NEG:
                fresh_notes = fresh_notes.set_column(
                    fresh_notes.column_names.index(AT), AT,
                    pa.array(np.maximum(fresh_notes.column(AT).to_numpy(), frontier)))
            self._notes = pa.concat_tables([*([notes] if notes is not None else []),
                                            fresh_notes])
        else:
            self._notes = notes
        if fresh is not None and frontier != NEG:  # rows come in arrival order: one
            # behind the frontier arrives now
            fresh = fresh.assign(**{AT: np.maximum(fresh[AT].to_numpy(np.int64), frontier)})
        parts = [f for f in (old_elems, fresh) if f is not None]
        elems = pd.concat(parts, ignore_index=True) if len(parts) > 1 else \
            (parts[0] if parts else pd.DataFrame())
        has_v = pts[VALUE].notna().to_numpy()
        t_new = pts[AT].to_numpy()[has_v].astype(np.int64)
        v_new = pts[VALUE].to_numpy()[has_v].astype(np.int64)
        latest = int(pts[AT].max()) if len(pts) else NEG
        if self.marks != MARKS_NONE:  # several inputs on one clock: the earliest
            latest = self._frontier_of_inputs(pts)
            if frontier != NEG:  # a mark behind the frontier arrives now
                t_new = np.maximum(t_new, frontier)
        if self.percentile:  # the points are delays: they extend the rising timeline
            n_new = pts[N_ROWS].to_numpy()[has_v].astype(np.int64) if N_ROWS in pts else \
                np.ones(len(t_new), np.int64)
            old_t, old_v = self._extend_percentile(old_t, old_v, t_new, v_new, n_new,
                                                   frontier, max(frontier, latest))
            t_new = v_new = t_new[:0]
        if self.engine and latest != NEG:
            # the engine's clock: the batch is the instant `latest`, complete once it
            # runs; the watermark there is Spark's (the batches before it), and this
            # batch's largest event time moves it at the next instant
            now = latest
            latest = now + 1
            t_new, v_new, seen = (np.array([now], np.int64), np.array([pending], np.int64),
                                  max([pending, *v_new.tolist()]))
            if pending == NEG or now < frontier:
                t_new, v_new = t_new[:0], v_new[:0]
            pending = seen
        t_all, v_all = np.r_[old_t, t_new], np.r_[old_v, v_new]
        new_frontier = max(frontier, latest)
        out = None
        self._dropped = self._late = 0
        self._watermark = NEG
        if new_frontier > frontier and len(elems):
            out, elems, t_all, v_all = self._advance(elems, t_all, v_all, frontier,
                                                     new_frontier)
        elif not len(elems):  # nothing retained: only the watermark's present matters
            t_all, v_all = self._fold(t_all, v_all, new_frontier)
        spark_wm = int(timer_values.getCurrentWatermarkInMs()) if timer_values else -1
        if self.engine and len(elems) and timer <= max(spark_wm, 0):
            # run again when Spark's watermark next moves (Spark runs a batch for it,
            # rows or not): an event-time timer just past the current watermark
            timer = max(spark_wm, 0) + 1
            self.handle.registerTimer(timer)
        self._save(elems, t_all, v_all, new_frontier, pending, timer)
        if out is not None and len(out):
            yield out
        before = 0 if old_elems is None else len(old_elems)
        yield self._stats(0 if fresh is None else len(fresh), len(elems), before,
                          new_frontier - 1 if self.engine and new_frontier != NEG
                          else new_frontier)  # the engine's: its batch's instant

    def _frontier_of_inputs(self, pts) -> int:
        """The frontier after this micro-batch's latest arrivals of the rows and the
        marks (the model's :func:`~dfsql.model.watermarks.inputs_frontier`, IDLE TIMEOUT
        letting it pass a quiet input)."""
        tagged = pts[pts[VALUE].isna() & pts[INPUT].notna()] if INPUT in pts else pts[:0]
        seen = tagged.groupby(INPUT)[AT].max()
        latest = list(self._inputs[:2])
        for tag, at in seen.items():
            latest[int(tag)] = max(latest[int(tag)], int(at))
        first = self._inputs[2] if self._inputs[2] != NEG else max(latest)
        self._inputs = (latest[0], latest[1], first)
        idle = self.clauses.watermark.idle_timeout  # marks: WATERMARK FROM a stream
        return inputs_frontier(latest, idle.micros if idle is not None else None, first)

    def _stats(self, arrived: int, retained: int, before: int, frontier: int):
        """The call's figures for the query's progress, as one row of the output's
        schema, in the fields :data:`STATS_FIELDS` names."""
        import pandas as pd

        def known(t: int) -> list:
            return [None if t in (NEG, POS) else int(t)]

        row = {n: [None] for n in self.out_names}
        # one input: its latest arrival is the frontier; with marks, each input's own
        rows, marks = self._inputs[:2] if self.marks != MARKS_NONE else (frontier, NEG)
        row.update(zip(STATS_FIELDS, ([arrived], [retained], [self._dropped],
                                      [retained - before], known(self._watermark),
                                      known(frontier), known(rows), known(marks),
                                      [self._late]),
                       strict=True))
        row[ROW_KIND] = [STATS]
        return pd.DataFrame(row, columns=self.out_names)

    # ------------------------------------------------------------------ state
    def _load(self):
        """(retained elements, watermark change points, frontier, writers' notes, the
        engine clock's pending maximum, timer) of the bucket; PERCENTILE's lags and
        delays into ``_lags`` and ``_delays``."""
        # None when the bucket has none: one round trip to the state server, not two
        # (exists, then get): each is a message over a socket
        return self.decode(self.state.get())

    def decode(self, stored):
        """:meth:`_load`'s values from a stored state row (None: no state), as Spark's
        state data source also reads it (:mod:`dfsql.spark.stream.live_state`)."""
        self._lags, self._delays = np.empty(0, np.int64), None
        self._inputs = (NEG, NEG, NEG)
        if stored is None:
            return None, np.empty(0, np.int64), np.empty(0, np.int64), NEG, None, NEG, NEG
        elements, points, frontier, notes, pending, timer, delays, *inputs = stored
        self._inputs = tuple(NEG if x is None else int(x) for x in inputs)
        elems = from_ipc(elements).to_pandas() if elements else None
        t = v = np.empty(0, np.int64)
        if points:
            p = from_ipc(points)
            t, v = p.column(0).to_numpy(), p.column(1).to_numpy()
            if p.num_columns > 2:
                self._lags = p.column(2).to_numpy().astype(np.int64)
        if delays:
            d = from_ipc(delays)
            self._delays = tuple(d.column(i).to_numpy().astype(np.int64) for i in range(3))
        notes = from_ipc(notes) if notes else None
        return (elems, t.astype(np.int64), v.astype(np.int64), int(frontier), notes,
                int(pending), int(timer))

    def _save(self, elems, t, v, frontier: int, pending: int, timer: int) -> None:
        import pyarrow as pa

        e = to_ipc(pa.Table.from_pandas(elems, preserve_index=False)) if len(elems) else b""
        cols = {"t": pa.array(t, pa.int64()), "v": pa.array(v, pa.int64())}
        if self.percentile:
            cols["lag"] = pa.array(self._lags, pa.int64())
        p = to_ipc(pa.table(cols))
        notes = to_ipc(self._notes) if self._notes is not None and self._notes.num_rows else None
        delays = None
        if self._delays is not None:
            delays = to_ipc(pa.table(dict(zip("tdn", (pa.array(x, pa.int64())
                                                   for x in self._delays), strict=True))))
        self.state.update((e, p, int(frontier), notes, int(pending), int(timer), delays,
                           *self._inputs))

    # ------------------------------------------------------------------ PERCENTILE
    def _extend_percentile(self, t_old, v_old, at, delays, counts, frontier: int,
                           new_frontier: int):
        """Add a micro-batch's delay counts; every instant before the new frontier is
        complete, so its percentile lag joins the rising timeline (the model's
        :func:`~dfsql.model.watermarks.percentile_lags` over the bucket's histogram, which
        holds the delays of all complete instants); counts at the frontier's own instant
        wait. Returns the timeline's change points (its lags in ``_lags``)."""

        q = self.clauses.watermark
        at = np.maximum(at, frontier)  # a row behind the frontier arrives now
        hist = DelayHistogram.empty()
        if self._delays is not None:
            dt, dd, dn = self._delays
            held = dt == NEG
            hist = DelayHistogram(dd[held], dn[held])
            at, delays, counts = (np.r_[dt[~held], at], np.r_[dd[~held], delays],
                                  np.r_[dn[~held], counts])
        done = at < new_frontier
        a, d, n = count_pairs(at[done], delays[done], counts[done])
        times, lags, hist = percentile_lags(hist, a, d, n, q.percentile, q.delay.micros)
        if len(times):
            start = int(v_old[0]) if len(v_old) else NEG
            tl = Timeline.rising(np.r_[t_old, times], np.r_[self._lags, lags], start=start)
            t_old, v_old, self._lags = tl.times, tl.values, tl.lags
        keep = hist.counts > 0
        wait = ~done
        self._delays = (np.r_[np.full(int(keep.sum()), NEG, np.int64), at[wait]],
                        np.r_[hist.values[keep], delays[wait]],
                        np.r_[hist.counts[keep], counts[wait]])
        return t_old, v_old

    def _timeline(self, t_all, v_all):
        """The watermark over processing time from the bucket's points."""

        cl = self.clauses
        if self.static_timeline is not None:
            return self.static_timeline
        if self.marks == MARKS_WRITERS:
            return self._writers_timeline()
        if self.percentile:
            return Timeline(t_all, v_all, self._lags)
        # DELAY: the elements' running max; FROM a stream: the marks' (no delay)
        delay = cl.watermark.delay.micros if isinstance(cl.watermark, c.WatermarkDelay) else 0
        return delay_timeline(v_all, t_all, delay)

    def _fold(self, t_all, v_all, oldest: int):
        """Forget the watermark's history before ``oldest`` (the oldest retained
        arrival): change points fold into the one then in force, writers' notes into each
        writer's last."""
        if not self.percentile:
            t_all, v_all = change_points(t_all, v_all)
        i = fold_start(t_all, oldest)
        if self.percentile:
            self._lags = self._lags[i:]
        if self._notes is not None:
            self._notes = fold_notes(self._notes, oldest)
        return t_all[i:], v_all[i:]

    # ------------------------------------------------------------------ the run
    def _advance(self, elems, t_all, v_all, lo: int, hi: int):
        """Run the model over the retained elements; the rows emitted in [lo, hi); what
        stays retained."""
        import pandas as pd

        cl = self.clauses
        if not self.percentile:
            t_all, v_all = change_points(t_all, v_all)
        timeline = self._timeline(t_all, v_all)
        elems, dense, et, at = self.ordered(elems)
        r = drive(dense, et, at, cl, timeline, end_floor=hi, ordered=False)

        out = changelog_rows(r, elems, dense, lo, hi, self.keys, self.aggs, self.out_names)
        dropped = np.zeros(len(elems), bool)
        dropped[r.dropped_row] = True
        fresh = (at >= lo) & (at < hi)
        self._dropped = int((dropped & fresh).sum())
        self._late = int((late_kept(r, at, timeline, dropped) & fresh).sum())
        if self.clauses.late_rows_into and self._dropped:
            late = late_rows(r, elems, at, lo, hi, [*self.keys, *self.payload], self.out_names)
            out = late if out is None else pd.concat([out, late], ignore_index=True)
        if len(timeline.times):
            wm_now = int(timeline.at(hi - 1))
            self._watermark = wm_now if NEG < wm_now < POS else NEG
        keep = retained(self.clauses, r, dense, et, at, timeline, hi)
        elems = elems[keep].reset_index(drop=True)
        oldest = int(at[keep].min()) if keep.any() else hi
        t_all, v_all = self._fold(t_all, v_all, oldest)
        return out, elems, t_all, v_all

    def ordered(self, elems):
        """(elements sorted by key then arrival, dense key ids in that order, event
        times, arrivals), as the model's driver takes them."""
        if self.keys:
            key_ids = elems.groupby(self.keys, sort=False, dropna=False).ngroup().to_numpy()
        else:
            key_ids = np.zeros(len(elems), np.int64)
        at = elems[AT].to_numpy(np.int64)
        o = lexsort((at, key_ids))
        elems = elems.iloc[o].reset_index(drop=True)
        kid = key_ids[o]
        dense = np.r_[0, np.cumsum(kid[1:] != kid[:-1])].astype(np.int64)
        et_raw = elems[ET]
        et = np.where(et_raw.isna().to_numpy(), NULL_EVENT_TIME,
                      et_raw.fillna(0).to_numpy().astype(np.int64))
        return elems, dense, et, at[o]

    def timeline_of(self, t_all, v_all):
        """The watermark over processing time from stored change points (a run's)."""
        if not self.percentile:
            t_all, v_all = change_points(t_all, v_all)
        return self._timeline(t_all, v_all)

    def _writers_timeline(self):
        """FROM a stream BY writer [IDLE TIMEOUT d]: the model's timeline of the notes."""

        wm = self.clauses.watermark
        if self._notes is None or not self._notes.num_rows:
            return Timeline.of([], [])
        timeout = wm.idle_timeout.micros if wm.idle_timeout is not None else None
        n = self._notes
        return writers_timeline(n.column(WRITER).to_pylist(), n.column(AT).to_numpy(),
                                n.column(ET).to_numpy(), timeout)


def _frames(elem_tables: list, point_tables: list):
    """(the elements, the watermark points) of a call's unpacked blobs, as pandas (no
    elements: None; no points: an empty frame)."""
    import pandas as pd
    import pyarrow as pa

    fresh = pa.concat_tables(elem_tables).to_pandas() if elem_tables else None
    pts = pa.concat_tables(point_tables).to_pandas() if point_tables else \
        pd.DataFrame({AT: [], VALUE: []})
    return fresh, pts
