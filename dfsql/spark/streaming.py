"""Live streams: a windowed query over a streaming source, on Structured Streaming.

The model's GroupAlsoByWindow runs in ``transformWithStateInPandas`` with its state in
Spark's state store (checkpointed with the query; RocksDB where the session configures
it), so a restarted query continues exactly where its checkpoint left off.

**State keyed by a bucket of user keys.** The stream is grouped by
``pmod(hash(keys), B)`` (B = ``spark.sql.shuffle.partitions``), not by the user key: one
Python call per bucket and micro-batch runs the driver over all of the bucket's keys as
arrays, as the bounded replay's ``mapInArrow`` driver does. A call per user key costs a
Python round trip per key and batch; the team's design note on streaming state measured
a count-only processor at 5.0× native per key against 1.5–1.8× per bucket;
``benchmarks/bench_stream.py --buckets 0 16 -1`` measures this executor both ways (the
session setting ``dfsql.stream.buckets``; -1 there, 0 here, keys the state by user key).
Measured here (1M generated events, 10k keys, 10 micro-batches, sessions with EVERY 10
SECONDS … THEN REPEAT WATERMARK, retracting, noop sink; one cold run each, in one
process): per user key 360 s, 16 buckets 19.0 s, 4 buckets 29.2 s (the first dfsql run,
paying the Python workers' start), native ``session_window`` 23.4 s (the first run of
all). Per user key is ~19× the bucketed design: a Python call and a model run per key
and batch, and the watermark points must reach every key. Warm, median of 3: native
8.5 s (default HDFS-backed store), 4 buckets 14.6 s (1.72×).
A bucket's state is one ValueState holding Arrow IPC blobs: the elements of its keys'
live windows, and the watermark's change points.

**Time from the column.** With ``PROCESSING TIME <col>`` the clock is the column
(LANGUAGE.md §4), so the result cannot depend on where Spark cuts the stream: rows come
in arrival order, and after each micro-batch every instant before the latest arrival
seen (the *frontier*) is complete. A bucket re-runs the model over its retained elements
up to the frontier and emits exactly the panes and retractions whose emit time lies
between the previous frontier and the new one; rows at the frontier wait for the next
batch (more rows of that instant may follow). The run is the model's own, so a stream
gives what the bounded replay of the same rows gives, row for row, up to the frontier.

**The engine's clock.** Without ``PROCESSING TIME`` each micro-batch is one instant (its
timestamp) and the watermark is Spark's own (:func:`native_panes`). With the default
trigger and no allowed lateness every window fires exactly once, when that watermark
passes its end: exactly Spark's append-mode aggregation, which such a query compiles to
and keeps the session's state store, as native does (measured with ``bench_stream.py``,
1M events, median of 3, both on Spark's default in-memory store: native 5.15 s, dfsql
5.36 s, 1.04×; when dfsql forced RocksDB here: 1.31–1.50×). Any other trigger, lateness or LATE ROWS
INTO runs in the bucket processor with the same clock: a row's arrival is its batch's
timestamp (``current_timestamp()``, kept in the offset log), the batch is complete when
it runs, and the watermark at a batch is the buckets' record of the largest event time
before it, less the delay. Spark's own watermark is kept beside (over each blob's
largest event time: it filters nothing, the column is gone before the stateful
operator) so that Spark runs a batch without data when it moves, and an event-time
timer just past it calls every bucket with live state then: windows close and triggers
fire after the last rows. (A processing-time timer would do the same at every batch, but
with processing-time timers Spark runs batches for ever, and ``availableNow`` never
ends.) A source with no batches at all holds the clock still.

**The watermark is global.** Each input partition reduces its rows to the change points
of its running maximum event time (and its latest arrival), and those few rows go to
every bucket, which keeps the global change points: every bucket sees the same timeline.

**PERCENTILE** needs every delay seen so far, not a running maximum: each partition
sends its rows' delays, rounded as the model rounds them (three significant digits,
:func:`~dfsql.model.watermarks.round_delay`), counted per (arrival, delay); each bucket
keeps the histogram of all complete instants (bounded by the rounding: at most 900
values per decade) and extends the rising timeline with the model's own
:func:`~dfsql.model.watermarks.percentile_lags`, so it equals the replay's.

**State stays bounded by the live windows.** After each batch a bucket drops dropped
elements and the elements of windows the watermark has passed by more than the allowed
lateness (for sessions, conservatively, of the union of the key's proto-windows): the
model has garbage-collected those windows, so nothing later depends on them. The
watermark's change points before the oldest retained arrival fold into one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dfsql.errors import NotSupportedError, WatermarkError
from dfsql.language.names import EVENT_TIME, LATE_ROW, PROCESSING_TIME, SORT_COLUMNS
from dfsql.model import clauses as c
from dfsql.spark.replay import (
    TIMING,
    _changelog_ranks,
    emission_place,
    pane_members,
    retraction_place,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.spark.plan_types import ReplayPlan

NEG = np.iinfo(np.int64).min
POS = np.iinfo(np.int64).max
#: input rows: an element, a watermark point (arrival, max event time so far), or a
#: writer's marks (WATERMARK FROM a stream BY writer)
KIND_ELEMENT, KIND_POINT, KIND_MARKS = 0, 1, 2
#: where the watermark comes from: the elements (DELAY) or a bounded table; a stream of
#: marks (FROM); a stream of writers' notes (FROM … BY writer)
MARKS_NONE, MARKS_SERIES, MARKS_WRITERS = 0, 1, 2
_MARK, _WRITER = "__mark", "__writer"
_ET, _AT, _VALUE, _N = "__et", "__at", "__point", "__n"
# the packed rows' columns (no leading underscore: PySpark hands them to the processor
# through namedtuples, which rename such fields)
BUCKET, KIND, BLOB, MAX_ET = "dfsql_bucket", "dfsql_kind", "dfsql_blob", "dfsql_max_et"


def stream_panes(plan: ReplayPlan, inp: DataFrame) -> DataFrame:
    """The panes of a windowed block over a streaming input (a streaming DataFrame):
    keys, aggregates, pane columns and the hidden §7 rank, in append mode."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import (
        BooleanType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    cl = plan.clauses
    _use_rocksdb(plan.spark)
    keys = list(plan.stages.key_columns)
    payload = [n for n in inp.columns if n.startswith("__c")]
    aggs = _aggregates(plan, inp)
    buckets = _buckets(plan.spark)

    if EVENT_TIME not in inp.columns:
        inp = inp.withColumn(EVENT_TIME, F.timestamp_seconds(F.lit(0)))
    engine = cl.processing_time is None
    if engine:  # the engine's clock: every row arrives at its micro-batch's timestamp
        inp = inp.withColumn(PROCESSING_TIME, F.current_timestamp())
    # a row without an arrival time has no place in processing time: it is left out
    elements = inp.where(F.col(PROCESSING_TIME).isNotNull()).select(
        *keys, *payload, F.unix_micros(F.col(EVENT_TIME).cast("timestamp")).alias(_ET),
        F.unix_micros(F.col(PROCESSING_TIME)).alias(_AT))
    static, marks = None, MARKS_NONE
    if isinstance(cl.watermark, c.WatermarkFrom):
        from dfsql.spark.timelines import from_table_timeline, watermark_table

        if plan.spark.table(cl.watermark.table).isStreaming:
            # a stream of marks joins the elements' stream (see _Packer)
            marks = MARKS_SERIES if cl.watermark.writer is None else MARKS_WRITERS
            elements = elements.unionByName(
                _marks_rows(watermark_table(plan, cl.watermark)), allowMissingColumns=True)
        else:  # a bounded table of watermarks
            static = from_table_timeline(plan, cl.watermark)  # type: ignore[arg-type]
    if not keys:
        bucket_of = F.lit(0)
    elif buckets:
        bucket_of = F.pmod(F.hash(*[F.col(k) for k in keys]), F.lit(buckets))
    else:  # one state key per user key (its hash; a collision shares a state row)
        bucket_of = F.hash(*[F.col(k) for k in keys])
    percentile = isinstance(cl.watermark, c.WatermarkPercentile)
    packed = elements.withColumn(BUCKET, bucket_of).mapInArrow(
        _Packer(buckets, marks, percentile), f"{BUCKET} INT, {KIND} TINYINT, {BLOB} BINARY, "
                                 f"{MAX_ET} TIMESTAMP")
    if engine:
        # Spark's own watermark over the blobs' largest event times, only so that Spark
        # runs a batch without data when it moves (for the buckets' event-time timers);
        # the column goes before the stateful operator, which filters nothing then
        assert isinstance(cl.watermark, c.WatermarkDelay)
        packed = packed.withWatermark(MAX_ET, f"{cl.watermark.delay.micros // 1000} "
                                              "milliseconds")
    packed = packed.drop(MAX_ET)
    schema = inp.schema
    fields = [schema[k] for k in keys]
    fields += [StructField(alias, t, True) for alias, t in aggs.types]
    fields += [StructField("window_start", LongType()), StructField("window_end", LongType()),
               StructField("pane_index", LongType()), StructField("pane_timing", StringType()),
               StructField("is_last", BooleanType()), StructField("emit_time", LongType()),
               StructField("is_retraction", BooleanType()),
               StructField(SORT_COLUMNS[0], LongType())]
    if cl.late_rows_into:  # a dropped element's reason (see BucketProcessor._late_rows)
        fields.append(StructField("late_reason", StringType()))
    out_schema = StructType(fields)
    proc = BucketProcessor(cl, keys, payload, aggs.specs, [f.name for f in fields], static,
                           marks)
    panes = packed.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=proc, outputStructType=out_schema, outputMode="Append",
        timeMode="EventTime" if engine else "None")
    stats = F.col("pane_timing") == STATS
    pane = ~stats & ~F.col("is_retraction")
    panes = panes.observe(
        METRICS,
        F.sum(F.when(stats, F.col("pane_index"))).alias("elements_in"),
        F.sum(F.when(stats, F.col("window_start"))).alias("state_elements"),
        F.sum(F.when(stats, F.col("window_end"))).alias("late_dropped"),
        F.timestamp_micros(F.max(F.when(stats, F.col("emit_time")))).alias("watermark"),
        F.count(F.when(pane, 1)).alias("panes"),
        F.count(F.when(~stats & F.col("is_retraction"), 1)).alias("retractions"),
    ).where(~stats)
    late = []
    if cl.late_rows_into:
        # a dropped element rides along as one struct (the LATE ROWS INTO view's row);
        # the sink splits it off (dfsql.spark.sinks.start_stream)
        from dfsql.spark.replay import _key_names

        is_late = F.col("pane_timing") == LATE
        late = [F.when(is_late, F.struct(
            *[F.col(k).alias(n) for k, n in zip(keys, _key_names(plan), strict=True)],
            F.timestamp_micros("window_start").alias("event_time"),
            F.timestamp_micros("emit_time").alias("arrival_time"),
            F.col("late_reason").alias("reason"),
            F.timestamp_micros("window_end").alias("watermark_at_arrival"))).alias(LATE_ROW)]
    return panes.select(
        *keys, *[a for a, _ in aggs.types],
        F.timestamp_micros("window_start").alias("window_start"),
        F.timestamp_micros("window_end").alias("window_end"),
        "pane_index", "pane_timing", "is_last",
        F.timestamp_micros("emit_time").alias("emit_time"), "is_retraction", SORT_COLUMNS[0],
        *late)


#: the observed metrics' name in a stream's progress (``progress.observedMetrics``):
#: elements_in, state_elements (retained by the buckets this batch ran), late_dropped,
#: watermark, panes, retractions (panes and retractions as fired, before HAVING); on the
#: engine's clock: panes
METRICS = "dfsql"
#: the pane_timing of the row each bucket call adds for the metrics (filtered out)
STATS = "__stats"
#: the pane_timing of a dropped element's row (LATE ROWS INTO)
LATE = "__late"

def _marks_rows(table: DataFrame) -> DataFrame:
    """A stream of watermark marks as rows beside the elements: ``__mark`` 1, the mark's
    processing time as the arrival, its watermark (or noted time) as the event time, and
    the writer, if any, as a string."""
    from pyspark.sql import functions as F  # noqa: N812

    cols = table.columns
    out = [F.lit(1).cast("tinyint").alias(_MARK),
           F.unix_micros(F.col(cols[-2]).cast("timestamp")).alias(_AT),
           F.unix_micros(F.col(cols[-1]).cast("timestamp")).alias(_ET)]
    if len(cols) == 3:
        out.append(F.col(cols[0]).cast("string").alias(_WRITER))
    return table.where(F.col(cols[-2]).isNotNull() & F.col(cols[-1]).isNotNull()).select(*out)


ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STORE_CONF = "spark.sql.streaming.stateStore.providerClass"


def _use_rocksdb(spark) -> None:
    """transformWithState runs only on the RocksDB state store (Spark refuses the default
    HDFS-backed one); it is the store for large state anyway. A session-level setting:
    the streaming DataFrame ``dfsql.sql`` returns must start on it; ``dfsql.start`` puts
    the session's own choice back once its query runs (on its own copy of the settings).
    A query Spark's own operator runs (the default trigger on the engine's clock) keeps
    the session's store: Spark's default, the in-memory HDFS-backed one, is its fastest."""
    if spark.conf.get(STORE_CONF, None) != ROCKSDB:
        spark.conf.set(STORE_CONF, ROCKSDB)


def check_streamable(plan: ReplayPlan) -> None:
    """What a stream cannot do, as positioned errors at plan time (LANGUAGE.md §9)."""
    cl = plan.clauses
    where = plan._where  # type: ignore[attr-defined]
    wm = cl.watermark
    if isinstance(wm, c.WatermarkPerfect):
        raise WatermarkError("WATERMARK PERFECT looks ahead in a bounded input: not on a "
                             "stream", *where(wm.pos),
                             "use WATERMARK DELAY d on a streaming source")
    if cl.processing_time is None:
        _check_engine_clock(plan)
    st = plan.stages
    if not st.default_order or st.default_order_by is None:
        word = _first_word(plan, ("ORDER BY", "LIMIT", "DISTINCT", "OVER"))
        raise NotSupportedError(
            "a stream is ordered only inside each micro-batch: ORDER BY, LIMIT, DISTINCT and "
            "window functions over its result need the whole result", *where(word or cl.pos),
            "leave them out (dfsql.start sorts each micro-batch in the changelog order)")


def _check_engine_clock(plan: ReplayPlan) -> None:
    """A stream without PROCESSING TIME runs on the engine's clock (each micro-batch an
    instant, Spark's watermark): its watermark is WATERMARK DELAY d (Spark's own rule)."""
    cl = plan.clauses
    where = plan._where  # type: ignore[attr-defined]
    hint = ("on the engine's clock the watermark is WATERMARK DELAY d; name the arrival "
            "column (PROCESSING TIME arrival_time) for FROM and PERCENTILE")
    if isinstance(cl.window, c.GlobalWindows) and cl.trigger in ENGINE_CLOCK_TRIGGERS:
        raise NotSupportedError("WINDOW GLOBAL over a stream never ends: with the default "
                                "trigger its one pane would never fire", *where(cl.window.pos),
                                "give it a trigger that fires early, e.g. TRIGGER EVERY "
                                "1 MINUTE")
    if not isinstance(cl.watermark, c.WatermarkDelay):
        raise NotSupportedError(
            "on the engine's clock a stream's watermark is WATERMARK DELAY d (Spark's own); "
            "WATERMARK FROM and PERCENTILE need PROCESSING TIME <column>",
            *where(cl.watermark.pos), hint)


def runs_natively(cl: c.Clauses) -> bool:
    """Whether a stream on the engine's clock is exactly Spark's own operator: the
    default trigger, no allowed lateness, no LATE ROWS INTO, a window that ends (the
    session setting ``dfsql.stream.native`` = false runs it in dfsql's executor)."""
    return (cl.processing_time is None and cl.trigger in ENGINE_CLOCK_TRIGGERS
            and not cl.allowed_lateness.micros and not cl.late_rows_into
            and not isinstance(cl.window, c.GlobalWindows))


#: the triggers whose panes on the engine's clock are exactly Spark's append-mode output
#: (with no allowed lateness a window fires once, when the watermark passes its end)
NATIVE_CONF = "dfsql.stream.native"
ENGINE_CLOCK_TRIGGERS = (c.Repeat(c.EndOfWindow()), c.EndOfWindow())


def native_panes(plan: ReplayPlan) -> DataFrame:
    """A stream on the engine's clock, compiled to Spark's own streaming aggregation in
    append mode (``withWatermark`` and ``window`` / ``session_window``, as the batch path).

    The engine's clock (LANGUAGE.md §4): every micro-batch is one instant of processing
    time, its timestamp. Its elements arrive at that instant and are late if their
    window ended at or before the watermark of the previous batch; then the watermark
    moves to Spark's: the maximum event time of the batches before this one, minus the
    delay (a batch's own maximum moves the watermark at the next batch, which Spark runs
    without data if none comes). Every window whose end the watermark passes fires its one
    ON_TIME, last pane then. That is Spark's operator: late rows are filtered with the
    previous batch's watermark and windows evicted with the current one. Spark keeps the
    watermark in milliseconds."""
    from pyspark.sql import functions as F  # noqa: N812

    cl = plan.clauses
    assert isinstance(cl.watermark, c.WatermarkDelay)
    inp = plan.input_df()
    inp = inp.withColumn(EVENT_TIME, F.col(EVENT_TIME).cast("timestamp")).withWatermark(
        EVENT_TIME, f"{cl.watermark.delay.micros // 1000} milliseconds")
    view = plan.name("__dfsql_in")
    plan.temp_view(inp, view)
    # the progress' dfsql figures: panes; Spark's own progress has the rest (input rows,
    # state rows, rows dropped by the watermark, the watermark)
    return plan.spark.sql(plan.batch_panes_sql(view, stream=True)).observe(
        METRICS, F.count(F.lit(1)).alias("panes"))


def _first_word(plan: ReplayPlan, words: tuple[str, ...]) -> c.Pos | None:
    """Where the first of ``words`` appears in the block, outside the extension clauses
    (for an error's position only; planning reads the parsed tree)."""
    import re

    block = plan.block  # type: ignore[attr-defined]
    patterns = [r"(?i)\b" + w.replace(" ", r"\s+") + r"\b" for w in words]
    hits = [m.start() for p in patterns for m in [re.search(p, block.sql)] if m]
    if not hits:
        return None
    return plan.src.pos(block.span[0] + min(hits))


class _Aggregates:
    def __init__(self, specs: list[tuple[str, str, str | None]], types: list) -> None:
        self.specs = specs  # (alias, function, payload column or None for COUNT(*))
        self.types = types  # (alias, Spark type)


def _aggregates(plan: ReplayPlan, inp: DataFrame) -> _Aggregates:
    """The block's aggregates as (function, column), each one a stream computes; their
    Spark result types come from Spark itself (the same SQL over an empty input)."""
    import sqlglot
    from sqlglot import exp

    specs = []
    for sql, alias in plan.stages.aggregates:
        node = sqlglot.parse_one(sql, read="spark")
        name = type(node).__name__.upper()
        arg = node.this if isinstance(node, exp.AggFunc) else None
        col = arg.name if isinstance(arg, exp.Column) else None
        star = isinstance(arg, exp.Star)
        ok = (isinstance(node, exp.Sum | exp.Count | exp.Min | exp.Max | exp.Avg)
              and (col is not None and col.startswith("__c") or (name == "COUNT" and star))
              and not node.args.get("distinct") and not isinstance(arg, exp.Distinct))
        if not ok:
            line, column = plan._where(plan.clauses.pos)  # type: ignore[attr-defined]
            raise NotSupportedError(
                f"{sql.replace('__c', 'column ')} on a stream: a stream computes SUM, COUNT, "
                "MIN, MAX and AVG of a column", line, column,
                "compute other aggregates over a bounded replay, or aggregate a column "
                "expression in a subquery first")
        specs.append((alias, name, None if star else col))
    empty = plan.spark.createDataFrame([], inp.schema)
    select = [f"{sql} AS {alias}" for sql, alias in plan.stages.aggregates]
    types = [(f.name, f.dataType) for f in empty.selectExpr(*select).schema] if select else []
    return _Aggregates(specs, types)


#: Session setting: how many buckets of user keys hold the state (default: the shuffle
#: partitions); 0 keys the state by the user key itself (the design measured against).
BUCKETS_CONF = "dfsql.stream.buckets"


def _buckets(spark) -> int:
    from dfsql.spark.ordering import shuffle_partitions

    try:
        return max(0, int(spark.conf.get(BUCKETS_CONF, None) or shuffle_partitions(spark)))
    except ValueError:
        return shuffle_partitions(spark)


class _Packer:
    """``mapInArrow`` over one input partition of a micro-batch: its elements as one Arrow
    IPC blob per bucket, and its watermark points as one blob sent to every bucket. The
    stateful operator then receives a few rows per bucket instead of one per element
    (PySpark hands its input to the processor row by row)."""

    def __init__(self, buckets: int, marks: int = MARKS_NONE, percentile: bool = False) -> None:
        self.buckets = buckets
        self.marks = marks
        self.percentile = percentile

    def __call__(self, batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches).combine_chunks()
        marks = None
        if self.marks != MARKS_NONE:  # the marks' rows apart from the elements'
            is_mark = pc.fill_null(pc.equal(table.column(_MARK), 1), False)
            marks = table.filter(is_mark)
            table = table.filter(pc.invert(is_mark)).drop_columns(
                [c for c in (_MARK, _WRITER) if c in table.column_names])
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
            blobs.append(_ipc(sorted_table.slice(lo, hi - lo)))
        shared = [(KIND_POINT, _ipc(self._points(table, marks)))]
        if marks is not None and self.marks == MARKS_WRITERS and marks.num_rows:
            shared.append((KIND_MARKS, _ipc(marks.select([_AT, _ET, _WRITER]))))
        # every bucket (per user key: only the keys of this partition, a lower bound on
        # that design's cost; a key without rows would need the points too)
        targets = range(self.buckets) if self.buckets else np.unique(bucket).tolist()
        for b in targets:
            for kind, blob in shared:
                ids.append(int(b))
                kinds.append(kind)
                blobs.append(blob)
        max_et = pa.array([None] * len(ids), pa.timestamp("us", tz="UTC"))
        if len(starts) and table.num_rows:
            et = pc.max(table.column(_ET)).as_py()
            if et is not None:  # on the first element blob: Spark's watermark sees it
                max_et = pa.array([et if i == 0 else None for i in range(len(ids))],
                                  pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        yield pa.RecordBatch.from_arrays(
            [pa.array(ids, pa.int32()), pa.array(kinds, pa.int8()), pa.array(blobs, pa.binary()),
             max_et], names=[BUCKET, KIND, BLOB, MAX_ET])


    def _points(self, elements, marks):
        """The partition's watermark points: from the elements' event times (DELAY), or
        from the marks (FROM a stream: the elements give only their latest arrival)."""
        import pyarrow as pa

        if self.percentile:
            return _partition_delays(elements.column(_ET), elements.column(_AT))
        if self.marks == MARKS_NONE:
            return _partition_points(elements.column(_ET), elements.column(_AT))
        parts = []
        if self.marks == MARKS_SERIES and marks.num_rows:
            parts.append(_partition_points(marks.column(_ET), marks.column(_AT)))
        arrivals = [t.column(_AT).to_numpy() for t in (elements, marks) if t.num_rows]
        if arrivals:  # the latest arrival of elements and marks: the frontier
            parts.append(pa.table({_AT: pa.array([max(int(a.max()) for a in arrivals)],
                                                 pa.int64()),
                                   _VALUE: pa.nulls(1, pa.int64())}))
        return pa.concat_tables(parts) if parts else pa.table(
            {_AT: pa.array([], pa.int64()), _VALUE: pa.array([], pa.int64())})


def _partition_points(et, at):
    """One input partition's watermark points: the change points of its running maximum
    event time by arrival, and its latest arrival (value NULL). The global timeline is
    their running maximum, whatever the partitioning."""
    import pyarrow as pa

    known = et.is_valid().to_numpy(zero_copy_only=False)
    e = et.fill_null(0).to_numpy()
    a = at.to_numpy()
    times, values = _change_points(a[known], e[known])
    times = np.r_[times, a.max()]
    valid = np.r_[np.ones(len(values), bool), False]
    values = np.r_[values, 0]
    return pa.table({_AT: pa.array(times, pa.int64()),
                     _VALUE: pa.array(values, pa.int64(), mask=~valid)})


def _partition_delays(et, at):
    """PERCENTILE: one input partition's rounded delays, counted per (arrival, delay),
    and its latest arrival (value NULL). Every bucket adds them all to its histogram."""
    import pyarrow as pa

    from dfsql.model.watermarks import round_delay
    from dfsql.spark.timelines import count_pairs

    known = et.is_valid().to_numpy(zero_copy_only=False)
    a = at.to_numpy()
    e = et.fill_null(0).to_numpy()[known]
    t, d, n = count_pairs(a[known], round_delay(a[known] - e))
    valid = np.r_[np.ones(len(t), bool), False]
    return pa.table({_AT: pa.array(np.r_[t, a.max()], pa.int64()),
                     _VALUE: pa.array(np.r_[d, 0], pa.int64(), mask=~valid),
                     _N: pa.array(np.r_[n, 0], pa.int64())})


def _change_points(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the running maximum of ``values`` by ``times`` rises (per time, its max):
    the model's own reduction of a timeline's raw points."""
    from dfsql.model.watermarks import Timeline

    tl = Timeline.of(times, values)
    return tl.times, tl.values


try:  # the processor's base class (PySpark's state API needs protobuf and grpcio)
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor as _Base
except ImportError:  # pragma: no cover
    _Base = object  # type: ignore[assignment,misc]


class BucketProcessor(_Base):  # type: ignore[misc,valid-type]
    """GroupAlsoByWindow for one bucket of user keys (see the module doc)."""

    def __init__(self, clauses: c.Clauses, keys: list[str], payload: list[str],
                 aggs: list[tuple[str, str, str | None]], out_names: list[str],
                 static_timeline=None, marks: int = MARKS_NONE) -> None:
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

    def init(self, handle) -> None:
        from pyspark.sql.types import BinaryType, LongType, StructField, StructType

        schema = StructType([StructField("elements", BinaryType()),
                             StructField("points", BinaryType()),
                             StructField("frontier", LongType()),
                             StructField("notes", BinaryType()),
                             StructField("pending", LongType()),
                             StructField("timer", LongType()),
                             StructField("delays", BinaryType())])
        self.handle = handle
        self.state = handle.getValueState("bucket", schema)

    def close(self) -> None:
        pass

    def handleInputRows(self, key, rows, timerValues=None):  # noqa: N802 (Spark's name)
        import pandas as pd
        import pyarrow as pa

        elem_tables, point_tables, note_tables = [], [], []
        by_kind = {KIND_ELEMENT: elem_tables, KIND_POINT: point_tables, KIND_MARKS: note_tables}
        for frame in rows:
            kinds = frame[KIND].to_numpy()
            for kind, blob in zip(kinds.tolist(), frame[BLOB].tolist(), strict=True):
                by_kind[kind].append(_unipc(blob))
        if not elem_tables and not point_tables:
            return
        pts = pa.concat_tables(point_tables).to_pandas() if point_tables else \
            pd.DataFrame({_AT: [], _VALUE: []})
        fresh = pa.concat_tables(elem_tables).to_pandas() if elem_tables else None
        yield from self._step(fresh, pts, note_tables, timerValues)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo=None):  # noqa: N802
        """The engine's clock: a micro-batch without rows for this bucket is still an
        instant (its timestamp), at which the watermark moves and triggers fire."""
        import pandas as pd

        now = int(timerValues.getCurrentProcessingTimeInMs()) * 1000
        yield from self._step(None, pd.DataFrame({_AT: [now], _VALUE: [None]}), [],
                              timerValues)

    def _step(self, fresh, pts, note_tables, timer_values=None):
        """Add a micro-batch's elements, points and notes to the bucket's state; run the
        model up to the new frontier; yield the rows emitted before it and the metrics."""
        import pandas as pd
        import pyarrow as pa

        old_elems, old_t, old_v, frontier, notes, pending, timer = self._load()
        if note_tables:  # the writers' notes so far (FROM a stream BY writer)
            self._notes = pa.concat_tables([*([notes] if notes is not None else []),
                                            *note_tables])
        else:
            self._notes = notes
        if fresh is not None and frontier != NEG:  # rows come in arrival order: one
            # behind the frontier arrives now
            fresh = fresh.assign(**{_AT: np.maximum(fresh[_AT].to_numpy(np.int64), frontier)})
        parts = [f for f in (old_elems, fresh) if f is not None]
        elems = pd.concat(parts, ignore_index=True) if len(parts) > 1 else \
            (parts[0] if parts else pd.DataFrame())
        has_v = pts[_VALUE].notna().to_numpy()
        t_new = pts[_AT].to_numpy()[has_v].astype(np.int64)
        v_new = pts[_VALUE].to_numpy()[has_v].astype(np.int64)
        latest = int(pts[_AT].max()) if len(pts) else NEG
        if self.percentile:  # the points are delays: they extend the rising timeline
            n_new = pts[_N].to_numpy()[has_v].astype(np.int64) if _N in pts else \
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
        self._dropped = 0
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
        yield self._stats(0 if fresh is None else len(fresh), len(elems))

    def _stats(self, arrived: int, retained: int):
        """The call's figures for the query's progress (see :data:`STATS`), as one row
        of the output's schema: elements arrived, retained and dropped as late, and the
        watermark at the new frontier."""
        import pandas as pd

        row = {n: [None] for n in self.out_names}
        row.update(window_start=[retained], window_end=[self._dropped], pane_index=[arrived],
                   pane_timing=[STATS],
                   emit_time=[None if self._watermark == NEG else self._watermark])
        row[SORT_COLUMNS[0]] = [0]
        return pd.DataFrame(row, columns=self.out_names)

    # ------------------------------------------------------------------ state
    def _load(self):
        """(retained elements, watermark change points, frontier, writers' notes, the
        engine clock's pending maximum, timer) of the bucket; PERCENTILE's lags and
        delays into ``_lags`` and ``_delays``."""
        self._lags, self._delays = np.empty(0, np.int64), None
        if not self.state.exists():
            return None, np.empty(0, np.int64), np.empty(0, np.int64), NEG, None, NEG, NEG
        elements, points, frontier, notes, pending, timer, delays = self.state.get()
        elems = _unipc(elements).to_pandas() if elements else None
        t = v = np.empty(0, np.int64)
        if points:
            p = _unipc(points)
            t, v = p.column(0).to_numpy(), p.column(1).to_numpy()
            if p.num_columns > 2:
                self._lags = p.column(2).to_numpy().astype(np.int64)
        if delays:
            d = _unipc(delays)
            self._delays = tuple(d.column(i).to_numpy().astype(np.int64) for i in range(3))
        notes = _unipc(notes) if notes else None
        return (elems, t.astype(np.int64), v.astype(np.int64), int(frontier), notes,
                int(pending), int(timer))

    def _save(self, elems, t, v, frontier: int, pending: int, timer: int) -> None:
        import pyarrow as pa

        e = _ipc(pa.Table.from_pandas(elems, preserve_index=False)) if len(elems) else b""
        cols = {"t": pa.array(t, pa.int64()), "v": pa.array(v, pa.int64())}
        if self.percentile:
            cols["lag"] = pa.array(self._lags, pa.int64())
        p = _ipc(pa.table(cols))
        notes = _ipc(self._notes) if self._notes is not None and self._notes.num_rows else None
        delays = None
        if self._delays is not None:
            delays = _ipc(pa.table(dict(zip("tdn", (pa.array(x, pa.int64())
                                                   for x in self._delays), strict=True))))
        self.state.update((e, p, int(frontier), notes, int(pending), int(timer), delays))

    # ------------------------------------------------------------------ PERCENTILE
    def _extend_percentile(self, t_old, v_old, at, delays, counts, frontier: int,
                           new_frontier: int):
        """Add a micro-batch's delay counts; every instant before the new frontier is
        complete, so its percentile lag joins the rising timeline (the model's
        :func:`~dfsql.model.watermarks.percentile_lags` over the bucket's histogram, which
        holds the delays of all complete instants); counts at the frontier's own instant
        wait. Returns the timeline's change points (its lags in ``_lags``)."""
        from dfsql.model.watermarks import DelayHistogram, Timeline, percentile_lags
        from dfsql.spark.timelines import count_pairs

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
        from dfsql.model.watermarks import Timeline, delay_timeline

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
            t_all, v_all = _change_points(t_all, v_all)
        i = _fold_start(t_all, oldest)
        if self.percentile:
            self._lags = self._lags[i:]
        if self._notes is not None:
            self._notes = _fold_notes(self._notes, oldest)
        return t_all[i:], v_all[i:]

    # ------------------------------------------------------------------ the run
    def _advance(self, elems, t_all, v_all, lo: int, hi: int):
        """Run the model over the retained elements; the rows emitted in [lo, hi); what
        stays retained."""
        import pandas as pd

        from dfsql.model.group_also_by_window import drive
        from dfsql.model.windows import NULL_EVENT_TIME

        cl = self.clauses
        if not self.percentile:
            t_all, v_all = _change_points(t_all, v_all)
        timeline = self._timeline(t_all, v_all)
        if self.keys:
            key_ids = elems.groupby(self.keys, sort=False, dropna=False).ngroup().to_numpy()
        else:
            key_ids = np.zeros(len(elems), np.int64)
        at = elems[_AT].to_numpy(np.int64)
        o = np.lexsort((at, key_ids))
        elems = elems.iloc[o].reset_index(drop=True)
        # dense ids in key order, as the driver wants
        kid = key_ids[o]
        dense = np.r_[0, np.cumsum(kid[1:] != kid[:-1])].astype(np.int64)
        at = at[o]
        et_raw = elems[_ET]
        et = np.where(et_raw.isna().to_numpy(), NULL_EVENT_TIME,
                      et_raw.fillna(0).to_numpy().astype(np.int64))
        r = drive(dense, et, at, cl, timeline, end_floor=hi, ordered=False)

        n_panes = len(r.pane_key)
        emitted = (r.pane_emit_time >= lo) & (r.pane_emit_time < hi)
        rmask = (r.retraction_emit_time >= lo) & (r.retraction_emit_time < hi)
        retracted = r.retraction_pane[rmask]
        needed = np.zeros(n_panes, bool)
        needed[emitted] = True
        needed[retracted] = True
        out = None
        if needed.any():
            values = self._aggregate(r, elems, needed)
            ranks = _changelog_ranks(r, r.pane_window_start)
            e_ids = np.flatnonzero(emitted)
            ids = np.r_[e_ids, retracted]
            is_ret = np.r_[np.zeros(len(e_ids), bool), np.ones(len(retracted), bool)]
            emit = np.r_[r.pane_emit_time[e_ids], r.retraction_emit_time[rmask]]
            rank = np.r_[emission_place(ranks[e_ids]), retraction_place(ranks[retracted])]
            first_row = np.searchsorted(dense, r.pane_key[ids], side="left")
            cols = {}
            for k in self.keys:
                cols[k] = elems[k].to_numpy()[first_row]
            for alias, _, _ in self.aggs:
                cols[alias] = values[alias][ids]
            ws, we = r.pane_window_start[ids], r.pane_window_end[ids]
            cols["window_start"] = pd.array(np.where(ws == NEG, 0, ws), dtype="Int64")
            cols["window_start"][ws == NEG] = pd.NA
            cols["window_end"] = pd.array(np.where(we == POS, 0, we), dtype="Int64")
            cols["window_end"][we == POS] = pd.NA
            cols["pane_index"] = r.pane_index[ids].astype(np.int64)
            cols["pane_timing"] = TIMING[r.pane_timing[ids].astype(np.int64)]
            cols["is_last"] = r.pane_is_last[ids].astype(bool)
            cols["emit_time"] = emit.astype(np.int64)
            cols["is_retraction"] = is_ret
            cols[SORT_COLUMNS[0]] = rank.astype(np.int64)
            out = pd.DataFrame(cols, columns=self.out_names)

        dropped = np.zeros(len(elems), bool)
        dropped[r.dropped_row] = True
        self._dropped = int((dropped & (at >= lo) & (at < hi)).sum())
        if self.clauses.late_rows_into and self._dropped:
            late = self._late_rows(r, elems, at, lo, hi)
            out = late if out is None else pd.concat([out, late], ignore_index=True)
        if len(timeline.times):
            wm_now = int(timeline.at(hi - 1))
            self._watermark = wm_now if NEG < wm_now < POS else NEG
        keep = self._retained(r, elems, dense, et, at, timeline, hi)
        elems = elems[keep].reset_index(drop=True)
        oldest = int(at[keep].min()) if keep.any() else hi
        t_all, v_all = self._fold(t_all, v_all, oldest)
        return out, elems, t_all, v_all

    def _writers_timeline(self):
        """FROM a stream BY writer [IDLE TIMEOUT d]: the model's timeline of the notes."""
        from dfsql.model.watermarks import Timeline, writers_timeline

        wm = self.clauses.watermark
        if self._notes is None or not self._notes.num_rows:
            return Timeline.of([], [])
        timeout = wm.idle_timeout.micros if wm.idle_timeout is not None else None
        n = self._notes
        return writers_timeline(n.column(_WRITER).to_pylist(), n.column(_AT).to_numpy(),
                                n.column(_ET).to_numpy(), timeout)

    def _late_rows(self, r, elems, at: np.ndarray, lo: int, hi: int):
        """The elements dropped in [lo, hi), each as one row of the output's schema:
        pane_timing LATE, window_start its event time, window_end the watermark at its
        arrival, emit_time its arrival, late_reason why (the replay's LATE ROWS INTO)."""
        import pandas as pd

        rows = r.dropped_row
        sel = (at[rows] >= lo) & (at[rows] < hi)
        rows = rows[sel]
        row = {n: pd.Series([None] * len(rows), dtype=object) for n in self.out_names}
        for k in self.keys:
            row[k] = elems[k].to_numpy()[rows]
        wm = r.dropped_watermark[sel]
        row["window_start"] = pd.Series(elems[_ET].to_numpy()[rows]).astype("Int64").array
        row["window_end"] = pd.array(np.where(wm == NEG, 0, wm), dtype="Int64")
        row["window_end"][wm == NEG] = pd.NA
        row["emit_time"] = at[rows]
        row["pane_timing"] = LATE
        row[SORT_COLUMNS[0]] = 0
        row["late_reason"] = np.asarray(r.dropped_reason_text)[sel]
        return pd.DataFrame(row, columns=self.out_names)

    def _aggregate(self, r, elems, needed: np.ndarray) -> dict[str, np.ndarray]:
        """Each needed pane's aggregates over its member elements (the panes that cover
        an element's first delta), vectorised with pandas."""
        import pandas as pd

        n_panes = len(needed)
        ok, lens, pane = pane_members(r, n_panes)
        row = np.repeat(r.element_row[ok], lens)
        sel = needed[pane]
        pane, row = pane[sel], row[sel]
        index = pd.RangeIndex(n_panes)
        out = {}
        for alias, fn, col in self.aggs:
            if col is None:  # COUNT(*)
                out[alias] = np.bincount(pane, minlength=n_panes).astype(np.int64)
                continue
            s = pd.Series(elems[col].to_numpy()[row])
            g = s.groupby(pane)
            if fn == "SUM":
                v = g.sum(min_count=1)
            elif fn == "COUNT":
                v = g.count()
            elif fn == "MIN":
                v = g.min()
            elif fn == "MAX":
                v = g.max()
            else:
                v = g.mean()
            v = v.reindex(index)
            if fn == "COUNT":
                v = v.fillna(0).astype(np.int64)
            out[alias] = v.to_numpy(dtype=object) if v.isna().any() else v.to_numpy()
        return out

    def _retained(self, r, elems, key_ids, et, at, timeline, hi: int) -> np.ndarray:
        """Elements a later run still needs: not dropped before ``hi``, and in a window
        the watermark has not passed by more than the allowed lateness."""
        from dfsql.model.windows import NULL_EVENT_TIME

        n = len(elems)
        keep = np.ones(n, bool)
        done = at < hi
        dropped = np.zeros(n, bool)
        dropped[r.dropped_row] = True
        keep &= ~(dropped & done)
        wm = int(timeline.at(hi - 1)) if len(timeline.times) else NEG
        if wm == NEG:
            return keep
        lateness = self.clauses.allowed_lateness.micros if self.clauses.allowed_lateness else 0
        w = self.clauses.window
        if isinstance(w, c.GlobalWindows):
            return keep
        live_end = np.full(n, NEG, np.int64)
        if isinstance(w, c.SessionWindows):
            # the union of the key's proto-windows: at least as late as any merged window
            ok = (et != NULL_EVENT_TIME) & ~dropped
            idx = np.flatnonzero(ok)
            if len(idx) == 0:
                return keep
            o = idx[np.lexsort((et[idx], key_ids[idx]))]
            start, end, k = et[o], et[o] + w.gap.micros, key_ids[o]
            new_key = np.r_[True, k[1:] != k[:-1]]
            # running max of end within a key: offset each key's ends above the previous
            run_end = _segmented_cummax(end, new_key)
            new_run = new_key | np.r_[True, start[1:] >= run_end[:-1]]
            run_id = np.cumsum(new_run) - 1
            run_max = np.maximum.reduceat(end, np.flatnonzero(new_run))
            live_end[o] = run_max[run_id]
        else:
            np.maximum.at(live_end, r.element_row, r.element_window_end)
        expired = (live_end != NEG) & (live_end + lateness < wm) & done
        return keep & ~expired


def _segmented_cummax(values: np.ndarray, new_segment: np.ndarray) -> np.ndarray:
    import pandas as pd

    seg = np.cumsum(new_segment)
    return pd.Series(values).groupby(seg).cummax().to_numpy()


def _fold_start(t: np.ndarray, oldest: int) -> int:
    """Where change points fold before the oldest retained arrival: at the last of them
    (the value then in force); a later run needs no earlier instant."""
    return max(int(np.searchsorted(t, oldest, side="left")) - 1, 0)


def _fold_notes(notes, oldest: int):
    """Writers' notes a later run needs: those at or after the oldest retained arrival,
    and each writer's last note before it (its latest noted time then, and the start of
    its idle timeout)."""
    import pyarrow as pa

    at = notes.column(_AT).to_numpy()
    before = at < oldest
    if before.sum() <= 1:
        return notes
    import pandas as pd

    frame = pd.DataFrame({"w": notes.column(_WRITER).to_pandas(), "t": at})
    last_before = frame[before].sort_values("t", kind="stable").groupby(
        "w", dropna=False).tail(1).index.to_numpy()
    keep = ~before
    keep[last_before] = True
    return notes.filter(pa.array(keep))


def _ipc(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _unipc(blob: bytes):
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
