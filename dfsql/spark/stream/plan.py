"""Live streams: a windowed query over a streaming source, on Structured Streaming.

Layout (planning → packing → the bucket processor):

* this module **plans a stream**: what a stream cannot do (positioned errors), the
  native path, and the query that packs the input and runs the processor;
* :mod:`dfsql.spark.stream.packing` **packs** each input partition of a micro-batch into
  a few Arrow IPC blobs per bucket (elements and watermark points);
* :mod:`dfsql.spark.stream.buckets` is the **bucket processor**: the model's
  GroupAlsoByWindow in ``transformWithStateInPandas``, with its state in Spark's state
  store (checkpointed with the query), so a restarted query continues exactly where its
  checkpoint left off. Its panes' order and membership come from
  :mod:`dfsql.model.changelog`, as the bounded replay's do.

**State keyed by a bucket of user keys.** The stream is grouped by
``pmod(hash(keys), B)`` (B = ``spark.sql.shuffle.partitions``), not by the user key: one
Python call per bucket and micro-batch runs the driver over all of the bucket's keys as
arrays, as the bounded replay's ``mapInArrow`` driver does. A call per user key costs a
Python round trip and a model run per key and batch, and the watermark points must reach
every key; ``benchmarks/bench_stream.py --buckets 0 16 -1`` measures this executor both
ways (the session setting ``dfsql.stream.buckets``; -1 there, 0 here, keys the state by
user key). A bucket's state is one ValueState holding Arrow IPC blobs: the elements of
its keys' live windows, and the watermark's change points.

**Time from the column.** With ``PROCESSING TIME <col>`` the clock is the column
(docs/reference.md#allowed-lateness), so the result cannot depend on where Spark cuts the stream: rows come
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
and keeps the session's state store, as native does (``bench_stream.py`` compares the
two). Any other trigger, lateness or LATE ROWS INTO runs in the bucket processor with
the same clock: a row's arrival is its batch's timestamp (``current_timestamp()``, kept
in the offset log), the batch is complete when it runs, and the watermark at a batch is
the buckets' record of the largest event time before it, less the delay. Spark's own
watermark is kept beside (over each blob's largest event time: it filters nothing, the
column is gone before the stateful operator) so that Spark runs a batch without data
when it moves, and an event-time timer just past it calls every bucket with live state
then: windows close and triggers fire after the last rows. (A processing-time timer
would do the same at every batch, but with processing-time timers Spark runs batches for
ever, and ``availableNow`` never ends.) A source with no batches at all holds the clock
still.

**The state store.** transformWithState runs only on the RocksDB state store. Planning
changes no session setting: the plan says which store its query needs (:data:`ROCKSDB`,
or the session's for a native query) and :func:`dfsql.api.start` starts the stream on it;
for the streaming DataFrame ``dfsql.sql`` returns (the user starts it), ``dfsql.sql``
sets it on the session.

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

from dfsql.errors import NotSupportedError, WatermarkError
from dfsql.language.names import EVENT_TIME, IN_QUERY, LATE_ROW, PROCESSING_TIME, SORT_COLUMNS
from dfsql.model import clauses as c
from dfsql.model.pane_columns import PANE_COLUMNS, PANE_TIMES, pane_types
from dfsql.spark import door
from dfsql.spark.native_batch import batch_panes_sql
from dfsql.spark.replay.ordering import shuffle_partitions
from dfsql.spark.stream.buckets import ELEMENTS, POINTS, BucketProcessor
from dfsql.spark.stream.output_rows import (
    LATE,
    LATE_FIELDS,
    PANE,
    ROW_KIND,
    STATS,
    STATS_FIELDS,
)
from dfsql.spark.stream.packing import (
    AT,
    BLOB,
    BUCKET,
    ET,
    KIND,
    KIND_ELEMENT,
    KIND_POINT,
    MARK,
    MARKS_NONE,
    MARKS_SERIES,
    MARKS_WRITERS,
    MAX_ET,
    WRITER,
    Packer,
)
from dfsql.spark.timelines import from_table_timeline, watermark_table
from dfsql.spark.values import late_row_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from dfsql.language.stages import Stages
    from dfsql.spark.values import ReplayPlan

__all__ = ["BUCKET", "BUCKETS_CONF", "LATE", "LATE_FIELDS", "METRICS", "NATIVE_CONF", "PANE",
           "ROCKSDB", "ROW_KIND", "STATS", "STATS_FIELDS", "BucketProcessor", "Packer",
           "bucket_count",
           "check_streamable", "native_panes", "runs_natively", "stream_panes"]

def stream_panes(plan: ReplayPlan, inp: DataFrame, history: DataFrame | None = None,
                 restate: bool = False) -> tuple[DataFrame, BucketProcessor, StructType]:
    """The panes of a windowed block over a streaming input (a streaming DataFrame):
    keys, aggregates, pane columns and the hidden §7 rank, in append mode; and the
    bucket processor with its output's schema (they read the query's state back:
    :mod:`dfsql.spark.stream.live_state`). ``history``: the input stage over a
    continuous query's history (:mod:`dfsql.spark.stream.backfill`), packed as the
    stream is into the processor's initial state; ``restate``: the history's panes are
    another query's, and the backfill emits each window's current row instead
    (ALTER STREAMING QUERY into an appending sink)."""
    from pyspark.sql import functions as F  # noqa: N812

    cl = plan.clauses
    keys = list(plan.stages.key_columns)
    payload = [n for n in inp.columns if n.startswith("__c")]
    aggs = _aggregates(plan, inp)
    engine = cl.processing_time is None
    static, marks, packed = _packed(plan, inp, keys, payload,
                                    every_bucket=history is not None)
    if engine:
        # Spark's own watermark over the blobs' largest event times, only so that Spark
        # runs a batch without data when it moves (for the buckets' event-time timers);
        # the column goes before the stateful operator, which filters nothing then
        assert isinstance(cl.watermark, c.WatermarkDelay)
        packed = packed.withWatermark(MAX_ET, f"{cl.watermark.delay.micros // 1000} "
                                              "milliseconds")
    packed = packed.drop(MAX_ET)
    initial = None
    if history is not None:  # one row per bucket: handleInitialState is called once
        _, _, packed_history = _packed(plan, history, keys, payload)
        initial = packed_history.groupBy(BUCKET).agg(
            F.collect_list(F.when(F.col(KIND) == KIND_ELEMENT, F.col(BLOB))).alias(ELEMENTS),
            F.collect_list(F.when(F.col(KIND) == KIND_POINT, F.col(BLOB))).alias(POINTS),
        ).groupBy(BUCKET)
    read = [col for col, _ in late_row_columns(plan).read] if cl.late_rows_into else []
    out_schema = _processor_schema(cl, inp.schema, keys, aggs.types, read)
    fields = out_schema.fields
    proc = BucketProcessor(cl, keys, payload, aggs.specs, [f.name for f in fields], static,
                           marks, restate)
    panes = packed.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=proc, outputStructType=out_schema, outputMode="Append",
        timeMode="EventTime" if engine else "None", initialState=initial)
    panes = _observed(panes).where(F.col(ROW_KIND) != STATS)
    late = _late_row(plan) if cl.late_rows_into else []
    return panes.select(
        *keys, *[a for a, _ in aggs.types],
        *[F.timestamp_micros(n).alias(n) if n in PANE_TIMES else n for n in PANE_COLUMNS],
        SORT_COLUMNS[0],
        *late), proc, out_schema


def _packed(plan: ReplayPlan, inp: DataFrame, keys: list[str], payload: list[str],
            every_bucket: bool = False):
    """(bounded watermark timeline, marks kind, the input packed per bucket): each input
    partition's elements as a blob per bucket and its watermark points to every bucket
    (:class:`~dfsql.spark.stream.packing.Packer`), the same for a stream and its history."""
    from pyspark.sql import functions as F  # noqa: N812

    cl = plan.clauses
    buckets = bucket_count(plan.spark)
    if EVENT_TIME not in inp.columns:
        inp = inp.withColumn(EVENT_TIME, F.timestamp_seconds(F.lit(0)))
    if cl.processing_time is None:  # the engine's clock: every row arrives at its
        inp = inp.withColumn(PROCESSING_TIME, F.current_timestamp())  # batch's timestamp
    # a row without an arrival time has no place in processing time: it is left out
    # every row drives time (docs/reference.md#processing-time): the packer takes the watermark points and
    # the frontier from all of them, and the elements from those WHERE keeps
    flag = [IN_QUERY] if IN_QUERY in inp.columns else []
    elements = inp.where(F.col(PROCESSING_TIME).isNotNull()).select(
        *keys, *payload, F.unix_micros(F.col(EVENT_TIME).cast("timestamp")).alias(ET),
        F.unix_micros(F.col(PROCESSING_TIME)).alias(AT), *flag)
    static, marks = None, MARKS_NONE
    if isinstance(cl.watermark, c.WatermarkFrom):
        if door.table(plan.spark, cl.watermark.table).isStreaming:
            # a stream of marks joins the elements' stream (see Packer)
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
        Packer(buckets, marks, percentile, every_bucket),
        f"{BUCKET} INT, {KIND} TINYINT, {BLOB} BINARY, {MAX_ET} TIMESTAMP")
    return static, marks, packed


def _processor_schema(cl: c.Clauses, schema, keys: list[str], agg_types,
                      read: list[str]) -> StructType:
    """The bucket processor's output: keys, aggregates, pane columns (times in µs), the
    §7 rank, what a row is, and the metrics' and dropped elements' own fields (with the
    ``read`` columns of LATE ROWS INTO's rows)."""
    from pyspark.sql.types import (
        BooleanType,
        ByteType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    fields = [schema[k] for k in keys]
    fields += [StructField(alias, t, True) for alias, t in agg_types]
    spark_type = {"BIGINT": LongType(), "STRING": StringType(), "BOOLEAN": BooleanType()}
    fields += [StructField(n, spark_type[t]) for n, t in pane_types(times_as_micros=True)]
    fields.append(StructField(SORT_COLUMNS[0], LongType()))
    # what a row is, and the fields of the metrics and dropped rows (see stream.buckets)
    fields.append(StructField(ROW_KIND, ByteType()))
    fields += [StructField(f, LongType()) for f in STATS_FIELDS]
    if cl.late_rows_into:
        fields += [StructField(f, LongType()) for f in LATE_FIELDS[:-1]]
        fields.append(StructField(LATE_FIELDS[-1], StringType()))
        fields += [StructField(n, schema[n].dataType, True) for n in read]
    return StructType(fields)


def _observed(panes: DataFrame) -> DataFrame:
    """The processor's output with the query's metrics (:data:`METRICS`) observed on it:
    its metrics rows' fields summed, its panes and retractions counted."""
    from pyspark.sql import functions as F  # noqa: N812

    stats = F.col(ROW_KIND) == STATS
    fired = F.col(ROW_KIND) == PANE
    arrived, retained, dropped, change, watermark, frontier, rows, marks, late = (
        F.col(f) for f in STATS_FIELDS)
    return panes.observe(
        METRICS,
        F.sum(F.when(stats, arrived)).alias("elements_in"),
        F.sum(F.when(stats, retained)).alias("state_elements"),
        F.sum(F.when(stats, change)).alias("state_change"),
        F.sum(F.when(stats, dropped)).alias("late_dropped"),
        F.sum(F.when(stats, late)).alias("late_kept"),
        F.timestamp_micros(F.max(F.when(stats, watermark))).alias("watermark"),
        F.timestamp_micros(F.max(F.when(stats, frontier))).alias("frontier"),
        F.timestamp_micros(F.max(F.when(stats, rows))).alias("rows_latest"),
        F.timestamp_micros(F.max(F.when(stats, marks))).alias("marks_latest"),
        F.count(F.when(fired & ~F.col("is_retraction"), 1)).alias("panes"),
        F.count(F.when(fired & F.col("is_retraction"), 1)).alias("retractions"))


def _late_row(plan: ReplayPlan) -> list:
    """LATE ROWS INTO: a dropped element rides along as one struct (the view's row), which
    the sink splits off (:func:`dfsql.spark.stream.sinks.start_stream`)."""
    from pyspark.sql import functions as F  # noqa: N812

    event_time, arrival, watermark_then, reason = LATE_FIELDS
    named = late_row_columns(plan)
    return [F.when(F.col(ROW_KIND) == LATE, F.struct(
        *[F.col(k).alias(n) for k, n in (*named.keys, *named.read)],
        F.timestamp_micros("window_start").alias("window_start"),
        F.timestamp_micros("window_end").alias("window_end"),
        F.timestamp_micros(event_time).alias("event_time"),
        F.timestamp_micros(arrival).alias("arrival_time"),
        F.col(reason).alias("reason"),
        F.timestamp_micros(watermark_then).alias("watermark_at_arrival"))).alias(LATE_ROW)]

#: the observed metrics' name in a stream's progress (``progress.observedMetrics``):
#: elements_in, state_elements (retained by the buckets this batch ran), state_change
#: (retained elements gained by this batch: summed over batches, all the state),
#: late_dropped, late_kept (docs/guides/watching.md#system-tables), watermark, panes, retractions (panes and retractions as fired, before
#: HAVING); on the engine's clock: panes
METRICS = "dfsql"

def _marks_rows(table: DataFrame) -> DataFrame:
    """A stream of watermark marks as rows beside the elements: ``__mark`` 1, the mark's
    processing time as the arrival, its watermark (or noted time) as the event time, and
    the writer, if any, as a string."""
    from pyspark.sql import functions as F  # noqa: N812

    cols = table.columns
    out = [F.lit(1).cast("tinyint").alias(MARK),
           F.unix_micros(F.col(cols[-2]).cast("timestamp")).alias(AT),
           F.unix_micros(F.col(cols[-1]).cast("timestamp")).alias(ET)]
    if len(cols) == 3:
        out.append(F.col(cols[0]).cast("string").alias(WRITER))
    return table.where(F.col(cols[-2]).isNotNull() & F.col(cols[-1]).isNotNull()).select(*out)


#: the state store transformWithState needs (Spark refuses the default HDFS-backed one; it
#: is the store for large state anyway): a stream the bucket processor runs starts on it
#: (the plan says so, :class:`~dfsql.spark.values.StreamPlan`); a query Spark's own
#: operator runs keeps the session's store (Spark's default, the in-memory HDFS-backed
#: one, is its fastest)
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def check_streamable(plan: ReplayPlan, stages: Stages) -> None:
    """What a stream cannot do, as positioned errors at plan time (docs/reference.md#errors);
    ``stages``: the block's as a stream runs them (a changelog, dropped rows riding)."""
    cl = plan.clauses
    where = c.line_col
    wm = cl.watermark
    if isinstance(wm, c.WatermarkPerfect):
        raise WatermarkError("WATERMARK PERFECT looks ahead in a bounded input: not on a "
                             "stream", *where(wm.pos),
                             "use WATERMARK DELAY d on a streaming source")
    if cl.processing_time is None:
        _check_engine_clock(plan)
    if not stages.default_order or stages.default_order_by is None:
        word = _first_word(plan, ("ORDER BY", "LIMIT", "DISTINCT", "OVER"))
        raise NotSupportedError(
            "a stream is ordered only inside each micro-batch: ORDER BY, LIMIT, DISTINCT and "
            "window functions over its result need the whole result", *where(word or cl.pos),
            "leave them out (dfsql.start sorts each micro-batch in the changelog order)")


def _check_engine_clock(plan: ReplayPlan) -> None:
    """A stream without PROCESSING TIME runs on the engine's clock (each micro-batch an
    instant, Spark's watermark): its watermark is WATERMARK DELAY d (Spark's own rule)."""
    cl = plan.clauses
    where = c.line_col
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
            and not isinstance(cl.window, c.GlobalWindows) and not _sampling(cl.window))


def _sampling(w: c.WindowSpec) -> bool:
    """SLIDING with a period larger than its size (windows with gaps between them).
    Spark's window() cannot slide by more than its size, and the batch path's stand-in
    (the period-long window, filtered) ends a window at the period: on the engine's
    clock Spark would then still accept an element the watermark has made late. The
    bucket processor runs the model's windows instead."""
    return isinstance(w, c.SlidingWindows) and w.period.micros > w.size.micros


#: the triggers whose panes on the engine's clock are exactly Spark's append-mode output
#: (with no allowed lateness a window fires once, when the watermark passes its end)
NATIVE_CONF = "dfsql.stream.native"
ENGINE_CLOCK_TRIGGERS = (c.Repeat(c.EndOfWindow()), c.EndOfWindow())


def native_panes(plan: ReplayPlan) -> DataFrame:
    """A stream on the engine's clock, compiled to Spark's own streaming aggregation in
    append mode (``withWatermark`` and ``window`` / ``session_window``, as the batch path).

    The engine's clock (docs/reference.md#allowed-lateness): every micro-batch is one instant of processing
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
    inp = plan.timed_input_df()
    inp = inp.withColumn(EVENT_TIME, F.col(EVENT_TIME).cast("timestamp")).withWatermark(
        EVENT_TIME, f"{cl.watermark.delay.micros // 1000} milliseconds")
    if IN_QUERY in inp.columns:
        # every row drives time (docs/reference.md#watermark): WHERE's verdict is applied above the
        # watermark. Spark's optimizer pushes a filter below EventTimeWatermark unless
        # it reads the event-time column, so this one does (a NULL event time is in no
        # window anyway).
        inp = inp.where(f"CASE WHEN {EVENT_TIME} IS NULL THEN false ELSE {IN_QUERY} END"
                        ).drop(IN_QUERY)
    view = plan.name("__dfsql_in")
    plan.temp_view(inp, view)
    # the progress' dfsql figures: panes; Spark's own progress has the rest (input rows,
    # state rows, rows dropped by the watermark, the watermark)
    return door.sql(plan.spark, batch_panes_sql(plan, view, stream=True)).observe(
        METRICS, F.count(F.lit(1)).alias("panes"))


def _first_word(plan: ReplayPlan, words: tuple[str, ...]) -> c.Pos | None:
    """Where the first of ``words`` (each one or more words) is written in the block,
    outside its extension clauses and its inner windowed blocks: read from the
    statement's tokens, so a string, a quoted name or a comment is never taken for one
    (for an error's position only; planning reads the parsed tree)."""
    block = plan.block  # type: ignore[attr-defined]
    stmt = plan.stmt  # type: ignore[attr-defined]
    tokens = stmt.scanned.tokens if stmt.scanned is not None else []
    skip = [block.region, *(stmt.blocks[i].span for i in block.inner)]
    mine = [t for t in tokens if block.span[0] <= t.start < block.span[1]
            and not any(s0 <= t.start < s1 for s0, s1 in skip)]
    phrases = [w.split() for w in words]
    for k, t in enumerate(mine):
        if any(all(k + j < len(mine) and mine[k + j].is_word(w) for j, w in enumerate(ph))
               for ph in phrases):
            return plan.src.pos(t.start)
    return None


class _Aggregates:
    def __init__(self, specs: list[tuple[str, str, str | None]], types: list) -> None:
        # (alias, function as the kernels name it: "sum", "count", ..., payload column or
        # None for COUNT(*))
        self.specs = specs
        self.types = types  # (alias, Spark type)


def _aggregates(plan: ReplayPlan, inp: DataFrame) -> _Aggregates:
    """The block's aggregates as (function, column), each one a stream computes; their
    Spark result types come from Spark itself (the same SQL over an empty input)."""
    specs = []
    for call in plan.stages.aggregate_calls:
        ok = call.decomposable and call.filter is None and (call.column is not None
                                                             or call.star)
        if not ok:
            line, column = c.line_col(plan.clauses.pos)
            raise NotSupportedError(
                f"{call.sql.replace('__c', 'column ')} on a stream: a stream computes SUM, "
                "COUNT, MIN, MAX and AVG of a column", line, column,
                "compute other aggregates over a bounded replay, or aggregate a column "
                "expression in a subquery first")
        specs.append((call.alias, call.function, call.column))
    empty = plan.spark.createDataFrame([], inp.schema)
    select = [f"{call.sql} AS {call.alias}" for call in plan.stages.aggregate_calls]
    types = [(f.name, f.dataType) for f in empty.selectExpr(*select).schema] if select else []
    return _Aggregates(specs, types)


#: Session setting: how many buckets of user keys hold the state (default: the shuffle
#: partitions); 0 keys the state by the user key itself (the design measured against).
BUCKETS_CONF = "dfsql.stream.buckets"


def bucket_count(spark) -> int:
    """The buckets of user keys a stream's state is kept in (0: one per user key)."""
    try:
        return max(0, int(spark.conf.get(BUCKETS_CONF, None) or shuffle_partitions(spark)))
    except ValueError:
        return shuffle_partitions(spark)

