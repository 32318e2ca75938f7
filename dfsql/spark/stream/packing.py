"""A live stream's micro-batch packed for the bucket processor (:mod:`dfsql.spark.stream.plan`).

Each input partition of a micro-batch becomes a few rows per bucket: its elements as one
Arrow IPC blob per bucket of user keys, and its watermark points (the change points of
its running maximum event time and its latest arrival; PERCENTILE: its rounded delays,
counted per arrival and delay) as one blob sent to every bucket. The stateful operator
then receives a few rows per bucket instead of one per element (PySpark hands its input
to the processor row by row), and every bucket sees the same global watermark points.

This module is the wire format between the stream's planning and
:mod:`dfsql.spark.stream.buckets`: the row kinds, the columns, and the blobs.
"""

from __future__ import annotations

import numpy as np

from dfsql.language.names import IN_QUERY
from dfsql.model.watermarks import Timeline, round_delay
from dfsql.spark.timelines import count_pairs

NEG = np.iinfo(np.int64).min
POS = np.iinfo(np.int64).max
#: input rows: an element, a watermark point (arrival, max event time so far), or a
#: writer's marks (WATERMARK FROM a stream BY writer)
KIND_ELEMENT, KIND_POINT, KIND_MARKS = 0, 1, 2
#: where the watermark comes from: the elements (DELAY) or a bounded table; a stream of
#: marks (FROM); a stream of writers' notes (FROM … BY writer)
MARKS_NONE, MARKS_SERIES, MARKS_WRITERS = 0, 1, 2
MARK, WRITER = "__mark", "__writer"
ET, AT, VALUE, N_ROWS = "__et", "__at", "__point", "__n"
#: with marks, a latest-arrival point's input: the rows or the marks (several inputs on
#: one clock, docs/reference.md#allowed-lateness)
INPUT = "__input"
INPUT_ROWS, INPUT_MARKS = 0, 1
# the packed rows' columns (no leading underscore: PySpark hands them to the processor
# through namedtuples, which rename such fields)
BUCKET, KIND, BLOB, MAX_ET = "dfsql_bucket", "dfsql_kind", "dfsql_blob", "dfsql_max_et"



class Packer:
    """``mapInArrow`` over one input partition of a micro-batch: its elements as one Arrow
    IPC blob per bucket, and its watermark points as one blob sent to every bucket. The
    stateful operator then receives a few rows per bucket instead of one per element
    (PySpark hands its input to the processor row by row)."""

    def __init__(self, buckets: int, marks: int = MARKS_NONE, percentile: bool = False,
                 every_bucket: bool = False) -> None:
        self.buckets = buckets
        self.marks = marks
        self.percentile = percentile
        #: a partition without rows still sends (empty) points to every bucket, so that
        #: every bucket is called in every micro-batch (a backfilled stream's first one
        #: hands each bucket its history's rows: BucketProcessor.handleInitialState)
        self.every_bucket = every_bucket

    def __call__(self, batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        batches = [b for b in batches if b.num_rows]
        if not batches:
            if self.every_bucket and self.buckets:
                yield self._empty_points()
            return
        table = pa.Table.from_batches(batches).combine_chunks()
        marks = None
        if self.marks != MARKS_NONE:  # the marks' rows apart from the elements'
            is_mark = pc.fill_null(pc.equal(table.column(MARK), 1), False)
            marks = table.filter(is_mark)
            table = table.filter(pc.invert(is_mark)).drop_columns(
                [c for c in (MARK, WRITER) if c in table.column_names])
        # every row drives time (docs/reference.md#watermark): the points and Spark's watermark come
        # from the whole table, the element blobs from the rows WHERE keeps
        everything = table
        if IN_QUERY in table.column_names:
            table = table.filter(table.column(IN_QUERY)).drop_columns([IN_QUERY])
            everything = everything.drop_columns([IN_QUERY])
        bucket = table.column(BUCKET).to_numpy()
        table = table.drop_columns([BUCKET])
        o = np.argsort(bucket, kind="stable")
        b_sorted = bucket[o] if len(bucket) else np.empty(0, np.int64)
        starts = np.flatnonzero(np.r_[True, b_sorted[1:] != b_sorted[:-1]]) if len(o) else \
            np.empty(0, np.int64)
        ends = np.r_[starts[1:], len(o)] if len(o) else starts
        sorted_table = table.take(pa.array(o))
        ids, kinds, blobs = [], [], []
        for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
            ids.append(int(b_sorted[lo]))
            kinds.append(KIND_ELEMENT)
            blobs.append(to_ipc(sorted_table.slice(lo, hi - lo)))
        shared = [(KIND_POINT, to_ipc(self._points(everything, marks)))]
        if marks is not None and self.marks == MARKS_WRITERS and marks.num_rows:
            shared.append((KIND_MARKS, to_ipc(marks.select([AT, ET, WRITER]))))
        # every bucket (per user key: only the keys of this partition, a lower bound on
        # that design's cost; a key without rows would need the points too)
        targets = range(self.buckets) if self.buckets else np.unique(
            everything.column(BUCKET).to_numpy()).tolist()
        for b in targets:
            for kind, blob in shared:
                ids.append(int(b))
                kinds.append(kind)
                blobs.append(blob)
        max_et = pa.array([None] * len(ids), pa.timestamp("us", tz="UTC"))
        if ids and everything.num_rows:
            et = pc.max(everything.column(ET)).as_py()
            if et is not None:  # on the first row: Spark's watermark sees it
                max_et = pa.array([et if i == 0 else None for i in range(len(ids))],
                                  pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        yield pa.RecordBatch.from_arrays(
            [pa.array(ids, pa.int32()), pa.array(kinds, pa.int8()), pa.array(blobs, pa.binary()),
             max_et], names=[BUCKET, KIND, BLOB, MAX_ET])


    def _empty_points(self):
        """One row per bucket with no watermark points: the call moves nothing."""
        import pyarrow as pa

        cols = {AT: pa.array([], pa.int64()), VALUE: pa.array([], pa.int64())}
        if self.percentile:
            cols[N_ROWS] = pa.array([], pa.int64())
        blob = to_ipc(pa.table(cols))
        n = self.buckets
        return pa.RecordBatch.from_arrays(
            [pa.array(range(n), pa.int32()), pa.array([KIND_POINT] * n, pa.int8()),
             pa.array([blob] * n, pa.binary()), pa.nulls(n, pa.timestamp("us", tz="UTC"))],
            names=[BUCKET, KIND, BLOB, MAX_ET])

    def _points(self, elements, marks):
        """The partition's watermark points: from the elements' event times (DELAY), or
        from the marks (FROM a stream). With marks, each input's latest arrival comes
        apart (:data:`INPUT` 0 the rows, 1 the marks): the query's frontier is the
        earliest of the inputs' (:func:`~dfsql.model.watermarks.inputs_frontier`)."""
        import pyarrow as pa

        if self.percentile:
            return partition_delays(elements.column(ET), elements.column(AT))
        if self.marks == MARKS_NONE:
            return partition_points(elements.column(ET), elements.column(AT))
        parts = []
        if self.marks == MARKS_SERIES and marks.num_rows:
            pts = partition_points(marks.column(ET), marks.column(AT))
            pts = pts.filter(pts.column(VALUE).is_valid())
            parts.append(pts.append_column(INPUT, pa.nulls(pts.num_rows, pa.int8())))
        for tag, table in ((INPUT_ROWS, elements), (INPUT_MARKS, marks)):
            if table.num_rows:
                parts.append(pa.table({AT: pa.array([table.column(AT).to_numpy().max()],
                                                    pa.int64()),
                                       VALUE: pa.nulls(1, pa.int64()),
                                       INPUT: pa.array([tag], pa.int8())}))
        return pa.concat_tables(parts) if parts else pa.table(
            {AT: pa.array([], pa.int64()), VALUE: pa.array([], pa.int64()),
             INPUT: pa.array([], pa.int8())})


def partition_points(et, at):
    """One input partition's watermark points: the change points of its running maximum
    event time by arrival, and its latest arrival (value NULL). The global timeline is
    their running maximum, whatever the partitioning."""
    import pyarrow as pa

    known = et.is_valid().to_numpy(zero_copy_only=False)
    e = et.fill_null(0).to_numpy()
    a = at.to_numpy()
    times, values = change_points(a[known], e[known])
    times = np.r_[times, a.max()]
    valid = np.r_[np.ones(len(values), bool), False]
    values = np.r_[values, 0]
    return pa.table({AT: pa.array(times, pa.int64()),
                     VALUE: pa.array(values, pa.int64(), mask=~valid)})


def partition_delays(et, at):
    """PERCENTILE: one input partition's rounded delays, counted per (arrival, delay),
    and its latest arrival (value NULL). Every bucket adds them all to its histogram."""
    import pyarrow as pa


    known = et.is_valid().to_numpy(zero_copy_only=False)
    a = at.to_numpy()
    e = et.fill_null(0).to_numpy()[known]
    t, d, n = count_pairs(a[known], round_delay(a[known] - e))
    valid = np.r_[np.ones(len(t), bool), False]
    return pa.table({AT: pa.array(np.r_[t, a.max()], pa.int64()),
                     VALUE: pa.array(np.r_[d, 0], pa.int64(), mask=~valid),
                     N_ROWS: pa.array(np.r_[n, 0], pa.int64())})


def change_points(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the running maximum of ``values`` by ``times`` rises (per time, its max):
    the model's own reduction of a timeline's raw points."""

    tl = Timeline.of(times, values)
    return tl.times, tl.values


def to_ipc(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(blob: bytes):
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
