"""Replay of a bounded table in processing-time order (PROCESSING TIME given).

The Dataflow model's driver decides windows and panes; Spark does everything else:

1. the **watermark timeline** is global across keys, so it is computed once, on the
   executors, down to the instants where the watermark changes
   (:mod:`dfsql.spark.timelines`), and shipped to the tasks as a broadcast;
2. the input is repartitioned by the group keys (and, for FIXED and SLIDING windows,
   which never merge, by window too: see ``by_window``) and sorted by them and
   processing time;
   ``mapInArrow`` runs the model's driver over whole Arrow batches holding many keys —
   no Python call per key, no Python object per row — and emits one union-typed stream:
   element rows (with the list of panes that aggregate them), one marker row per pane
   (its metadata and when it is retracted) and dropped elements;
3. one Spark SQL statement aggregates the elements into the panes that cover them (in
   two levels for SUM / COUNT / MIN / MAX), adds the retraction rows, and the output
   stage does the rest (§7's order: :mod:`dfsql.spark.replay.ordering`).

Where every aggregate is one the model's kernels compute exactly (COUNT, SUM, MIN, MAX,
AVG: :mod:`dfsql.spark.replay.kernels`), the driver emits no element rows: its pane
rows carry their aggregates, and step 3 only adds the retraction rows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from dfsql.language.names import EVENT_TIME, PANE_COLUMNS, PROCESSING_TIME, SORT_COLUMNS
from dfsql.model import clauses as c
from dfsql.model.changelog import LOW_BITS as _LOW
from dfsql.model.changelog import RETRACTION_BIAS as _RETRACTION_BIAS
from dfsql.model.group_also_by_window import end_floor_of
from dfsql.model.panes import TIMING_NAMES
from dfsql.model.windows import NEG_INF, AssignedWindows
from dfsql.spark import door
from dfsql.spark.replay.driver import ROW_ID, WINDOW_START, PartitionDriver
from dfsql.spark.replay.ordering import shuffle_partitions
from dfsql.spark.replay.pane_sql import (
    KIND_DROPPED,
    KIND_MARKER,
    panes_exploded,
    panes_two_level,
    quoted,
)
from dfsql.spark.replay.recorder import EVENT_FIELDS, KIND_EVENT, for_firings
from dfsql.spark.timelines import Shipped, watermark_timeline
from dfsql.spark.values import Replayed, in_query, late_row_columns
from dfsql.spark.window_assignment import grid_sql

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.spark.values import FiringsRequest, PhysicalPlan, ReplayPlan



def replay_panes(plan: ReplayPlan, physical: PhysicalPlan,
                 firings: FiringsRequest | None = None) -> Replayed:
    """The panes table of a replayed block (keys, aggregates, pane columns), and what the
    driver computed beside it, its aggregates computed as ``physical`` chose; with
    ``firings`` (EXPLAIN FIRINGS), the events the driver recorded as it made those panes,
    in the same run."""
    from pyspark.sql import functions as F  # noqa: N812

    inp = plan.timed_input_df()
    if EVENT_TIME not in inp.columns:
        # GLOBAL without ON: event time plays no part in the window; the watermark still
        # reaches +inf at the end of the bounded input.
        inp = inp.withColumn(EVENT_TIME, F.timestamp_seconds(F.lit(0)))
    # time belongs to the input (docs/reference.md#processing-time): the watermark and the replay's end come
    # from every row the FROM reads; only the rows WHERE keeps enter windows
    timeline, first_arrival, last_arrival = watermark_timeline(plan, inp)
    inp = in_query(inp)

    # Every slice of keys ends where the whole input ends (not at its own last arrival).
    end_floor = end_floor_of(plan.clauses.trigger,
                             NEG_INF if last_arrival is None else last_arrival, timeline)
    record = None
    if firings is not None:
        inp, record = for_firings(plan, inp, timeline, end_floor, firings)
    emit_range = None
    if first_arrival is not None:
        emit_range = (first_arrival, max(end_floor, last_arrival))
    keys = list(plan.stages.key_columns)
    payload = [n for n in inp.columns if n.startswith("__c")]
    schema = inp.schema
    clauses = plan.clauses

    # COUNT / SUM / MIN / MAX / AVG: the driver computes them (None: Spark aggregates)
    kernels = physical.kernels
    retracting = clauses.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING
    # where a pane's emission and retraction sort among their key's rows (§7): the
    # driver numbers such panes by that rank, so the pane id carries it (no column more)
    ranked = retracting and clauses.window.merging
    row_ids = isinstance(clauses.window, c.SlidingWindows)  # see by_window
    fields = _driver_fields(plan, schema, keys, payload, kernels, record is not None, row_ids)
    if kernels is not None:
        inp = kernels.with_inputs(inp)
    out_schema = ", ".join(fields)
    out_names = [f.split(" ")[0].strip("`") for f in fields]

    merges = physical.merges
    inp, per_window, driver_clauses = by_window(inp, clauses)
    group = [*keys, *per_window]
    driver_partitions = shuffle_partitions(plan.spark) if group else 1
    dropped_by_partition = _dropped_accumulator(plan.spark)
    driver = PartitionDriver(driver_clauses, Shipped(plan.spark, timeline), keys, payload,
                              out_names, end_floor, negate_marker_group=merges is not None,
                              ranked=ranked, kernels=kernels,
                              group=group, dropped=dropped_by_partition, record=record,
                              row_ids=row_ids)
    ordered = (inp.repartition(driver_partitions, *group) if group
               else inp.repartition(1))
    ordered = ordered.sortWithinPartitions(*group, PROCESSING_TIME)
    emitted = ordered.mapInArrow(driver, out_schema)
    if clauses.late_rows_into or record is not None:
        # read twice: the panes, and the late rows' view or the events (one run of both)
        emitted = emitted.persist()

    # the window's bounds (pane columns), what the driver packs of its pane, and when
    meta = [*PANE_COLUMNS[:2], "__pane_info", "emit_time", "__retract_time"]
    # The stages after the driver as one statement: analysed once, not once per step.
    view = plan.name("__dfsql_emitted")
    plan.temp_view(emitted, view)
    if kernels is not None:
        panes_sql = kernels.panes_sql(view, f"__kind = {KIND_MARKER}", keys, meta, ranked)
    elif merges is not None:
        panes_sql = panes_two_level(view, keys, meta, merges, ranked)
    else:
        panes_sql = panes_exploded(plan, view, keys, payload, meta, ranked)
    result = door.sql(plan.spark, _result_sql(plan, panes_sql, keys, retracting, ranked))
    if clauses.late_rows_into:
        _dropped_rows(plan, emitted).createOrReplaceTempView(clauses.late_rows_into)
    events = None if record is None else emitted.where(F.col("__kind") == KIND_EVENT)
    return Replayed(result, emitted, emit_range, dropped_by_partition, driver_partitions,
                    events, timeline)




def _dropped_rows(plan: ReplayPlan, emitted: DataFrame) -> DataFrame:
    """LATE ROWS INTO's rows: the dropped elements the driver emitted, one per window a
    row was dropped from (:func:`~dfsql.spark.values.late_row_columns`)."""
    from pyspark.sql import functions as F  # noqa: N812

    named = late_row_columns(plan)
    return emitted.where(F.col("__kind") == KIND_DROPPED).select(
        *[F.col(k).alias(n) for k, n in (*named.keys, *named.read)],
        "window_start", "window_end",
        F.col(EVENT_TIME).alias("event_time"), F.col(PROCESSING_TIME).alias("arrival_time"),
        "reason", F.col("watermark").alias("watermark_at_arrival"))

def _driver_fields(plan: ReplayPlan, schema, keys: list[str], payload: list[str], kernels,
                   recording: bool, row_ids: bool) -> list[str]:
    """The union schema of what the driver emits: pane members (one row per element a
    pane aggregates; not with kernels), one marker row per pane with its metadata (and
    with kernels its aggregates), dropped elements (with the columns the query reads and,
    for SLIDING, the row's identity), and EXPLAIN FIRINGS' events."""
    fields = ["__kind TINYINT", "__gids ARRAY<BIGINT>"]
    fields += [f"`{k}` {schema[k].dataType.simpleString()}" for k in keys]
    fields += [f"`{n}` {schema[n].dataType.simpleString()}" for n in payload
               if kernels is None or plan.clauses.late_rows_into]
    if row_ids:
        fields.append(f"{ROW_ID} BIGINT")
    fields += ["window_start TIMESTAMP", "window_end TIMESTAMP", "__pane_info BIGINT",
               "emit_time TIMESTAMP", "__retract_time TIMESTAMP"]
    if kernels is not None:
        fields += kernels.fields()
    if plan.clauses.late_rows_into:
        # what a dropped element's row says (else a dropped row is only counted)
        fields += [f"{EVENT_TIME} TIMESTAMP", f"{PROCESSING_TIME} TIMESTAMP", "reason STRING",
                   "watermark TIMESTAMP"]
    if recording:
        fields += EVENT_FIELDS
    return fields


def _result_sql(plan: ReplayPlan, panes_sql: str, keys: list[str], retracting: bool,
                ranked: bool) -> str:
    """The panes with their pane columns decoded, and in retracting modes each pane's
    retraction row beside it."""
    timing = "element_at(array({}), CAST(shiftright(__pane_info, 1) & 3 AS INT) + 1)".format(
        ", ".join(f"'{t}'" for t in TIMING_NAMES))
    cols = ", ".join([*quoted(keys), *quoted(alias for _, alias in plan.stages.aggregates),
                      "window_start", "window_end", "shiftright(__pane_info, 3) AS pane_index",
                      f"{timing} AS pane_timing", "(__pane_info & 1) = 1 AS is_last"])
    if not retracting:
        return f"SELECT {cols}, emit_time, false AS is_retraction FROM ({panes_sql}) AS __p"
    # A pane is retracted at most once (by the next pane of its window or of the window
    # it merged into): one row as emitted, one more as retracted. Where windows merge,
    # each row carries its place among its key's rows at its emit_time (§7).
    rank = "__row.k AS {}, ".format(*SORT_COLUMNS) if ranked else ""
    k_emit = f", 'k', {_EMISSION_PLACE_SQL}" if ranked else ""
    k_retract = f", 'k', {_RETRACTION_PLACE_SQL}" if ranked else ""
    return (f"SELECT {cols}, __row.t AS emit_time, {rank}__row.r AS is_retraction FROM ("
            "SELECT *, explode(array("
            f"named_struct('t', emit_time, 'r', false{k_emit}), "
            f"named_struct('t', __retract_time, 'r', true{k_retract}))) AS __row "
            f"FROM ({panes_sql}) AS __panes) AS __rows "
            "WHERE __row.t IS NOT NULL OR NOT __row.r")

def by_window(inp: DataFrame, clauses: c.Clauses):
    """Non-merging windows are independent of each other, so the driver may run each
    (key, window) in any task: no GROUP BY key or one hot key still spreads over every
    core, and a key's rows reach the driver a window at a time instead of all at once.
    FIXED: the element's window start (µs) joins the grouping; SLIDING: the element is
    sent once per window it belongs to, and the driver gets that window pre-assigned.
    Sessions merge (a key's windows depend on each other) and GLOBAL has one window per
    key: they stay grouped by key. SLIDING rows get their identity first (ROW_ID), so
    that a row dropped from several windows counts once. Returns (input, extra grouping
    columns, the clauses the driver runs)."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import TimestampType

    w = clauses.window
    if isinstance(w, c.SlidingWindows):
        inp = inp.withColumn(ROW_ID, F.monotonically_increasing_id())
    if not isinstance(w, c.FixedWindows | c.SlidingWindows) or \
            not isinstance(inp.schema[EVENT_TIME].dataType, TimestampType):
        return inp, [], clauses
    g = grid_sql(w, EVENT_TIME)  # the model's assignment, rendered for Spark
    if isinstance(w, c.FixedWindows):  # one window per element: its start
        return inp.withColumn(WINDOW_START, F.expr(g.last)), [WINDOW_START], clauses
    # A NULL event time keeps its row (the driver drops and counts it once); an element
    # in a gap between sampling windows (period > size) has no start and no row: it is in
    # no window and not dropped (docs/reference.md#window). The watermark already saw it.
    starts = F.when(F.col(EVENT_TIME).isNull(), F.array(F.lit(None).cast("bigint"))) \
        .otherwise(F.expr(g.starts))
    exploded = inp.withColumn(WINDOW_START, F.explode(starts))
    return exploded, [WINDOW_START], replace(clauses, window=AssignedWindows(size=w.size))


def _dropped_accumulator(spark):
    """{partition: elements it dropped}, filled by the driver as the query runs, so that
    ``dropped_late`` reads the count without running the query again; None on Spark
    Connect, which has no accumulators (the count then runs the driver once more)."""
    # inside: importing this module (every task does) must not load pyspark
    from dfsql.session import spark_context
    from dfsql.spark.replay.accumulators import PerPartition

    sc = spark_context(spark)
    return None if sc is None else sc.accumulator({}, PerPartition())


# a ranked pane's places in its run's changelog, as Spark SQL over its packed id
# (see :func:`dfsql.model.changelog.packed_ranks`)
_EMISSION_PLACE_SQL = "shiftright(__pane_rank, 32)"
_RETRACTION_PLACE_SQL = (f"shiftright(__pane_rank, 32) + (__pane_rank & {_LOW}) "
                         f"- {_RETRACTION_BIAS}")
