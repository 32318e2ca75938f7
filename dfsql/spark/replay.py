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
   stage does the rest (§7's order: :mod:`dfsql.spark.ordering`).

Where every aggregate is one the model's kernels compute exactly (COUNT, SUM, MIN, MAX,
AVG: :mod:`dfsql.spark.replay_aggregates`), the driver emits no element rows: its pane
rows carry their aggregates, and step 3 only adds the retraction rows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from dfsql.language.names import EVENT_TIME, PROCESSING_TIME, SORT_COLUMNS
from dfsql.model import clauses as c
from dfsql.model.changelog import LOW_BITS as _LOW
from dfsql.model.changelog import RETRACTION_BIAS as _RETRACTION_BIAS
from dfsql.model.changelog import changelog_ranks as _changelog_ranks
from dfsql.model.changelog import element_panes as pane_members
from dfsql.model.group_also_by_window import drive, end_floor_of
from dfsql.model.panes import TIMING_NAMES
from dfsql.model.windows import NEG_INF, NULL_EVENT_TIME, AssignedWindows
from dfsql.spark.ordering import shuffle_partitions
from dfsql.spark.plan_types import Replayed, in_query
from dfsql.spark.plan_types import late_row_key_names as _key_names
from dfsql.spark.replay_aggregates import kernels_for
from dfsql.spark.replay_firings import EVENT_FIELDS, KIND_EVENT, event_types, for_firings, recorded
from dfsql.spark.timelines import Shipped, watermark_timeline
from dfsql.spark.timelines import us as _us

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.spark.plan_types import FiringsRequest, ReplayPlan

KIND_MEMBER, KIND_MARKER, KIND_DROPPED = 0, 1, 4
#: Aggregates see only the elements, not the pane markers beside them.
_MEMBERS_ONLY = f"__kind = {KIND_MEMBER}"
TIMING = np.array(TIMING_NAMES, dtype=object)
# Pane ids are unique across tasks: the partition id in the high bits.
_PARTITION_SHIFT = 40
# Rows gathered before one driver call (Arrow batches hold 10k rows by default).
_MIN_ROWS_PER_RUN = 200_000


def replay_panes(plan: ReplayPlan, firings: FiringsRequest | None = None) -> Replayed:
    """The panes table of a replayed block (keys, aggregates, pane columns), and what the
    driver computed beside it; with ``firings`` (EXPLAIN FIRINGS), the events the driver
    recorded as it made those panes, in the same run."""
    from pyspark.sql import functions as F  # noqa: N812

    inp = plan.timed_input_df()
    if EVENT_TIME not in inp.columns:
        # GLOBAL without ON: event time plays no part in the window; the watermark still
        # reaches +inf at the end of the bounded input.
        inp = inp.withColumn(EVENT_TIME, F.timestamp_seconds(F.lit(0)))
    # time belongs to the input (LANGUAGE.md §4): the watermark and the replay's end come
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
    kernels = kernels_for(plan, inp)
    # The union schema of what the driver emits: pane members (one row per element a pane
    # aggregates; not with kernels), one marker row per pane with its metadata (and with
    # kernels its aggregates), and dropped elements.
    fields = ["__kind TINYINT", "__gids ARRAY<BIGINT>"]
    fields += [f"`{k}` {schema[k].dataType.simpleString()}" for k in keys]
    fields += [f"`{n}` {schema[n].dataType.simpleString()}" for n in payload
               if kernels is None]
    fields += ["window_start TIMESTAMP", "window_end TIMESTAMP", "__pane_info BIGINT",
               "emit_time TIMESTAMP", "__retract_time TIMESTAMP"]
    if kernels is not None:
        fields += kernels.fields()
        inp = kernels.with_inputs(inp)
    retracting = clauses.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING
    # where a pane's emission and retraction sort among their key's rows (§7): the
    # driver numbers such panes by that rank, so the pane id carries it (no column more)
    ranked = retracting and clauses.window.merging
    if clauses.late_rows_into:
        # what a dropped element's row says (else a dropped row is only counted)
        fields += [f"{EVENT_TIME} TIMESTAMP", f"{PROCESSING_TIME} TIMESTAMP", "reason STRING",
                   "watermark TIMESTAMP"]
    if record is not None:
        fields += EVENT_FIELDS
    out_schema = ", ".join(fields)
    out_names = [f.split(" ")[0].strip("`") for f in fields]

    merges = _two_level(plan, inp) if kernels is None else None
    inp, per_window, driver_clauses = by_window(inp, clauses)
    group = [*keys, *per_window]
    driver_partitions = shuffle_partitions(plan.spark) if group else 1
    dropped_by_partition = _dropped_accumulator(plan.spark)
    driver = _PartitionDriver(driver_clauses, Shipped(plan.spark, timeline), keys, payload,
                              out_names, end_floor, negate_marker_group=merges is not None,
                              ranked=ranked, kernels=kernels,
                              group=group, dropped=dropped_by_partition, record=record)
    ordered = (inp.repartition(driver_partitions, *group) if group
               else inp.repartition(1))
    ordered = ordered.sortWithinPartitions(*group, PROCESSING_TIME)
    emitted = ordered.mapInArrow(driver, out_schema)
    if clauses.late_rows_into or record is not None:
        # read twice: the panes, and the late rows' view or the events (one run of both)
        emitted = emitted.persist()

    meta = ["window_start", "window_end", "__pane_info", "emit_time", "__retract_time"]
    # The stages after the driver as one statement: analysed once, not once per step.
    view = plan.name("__dfsql_emitted")
    plan.temp_view(emitted, view)
    if kernels is not None:
        panes_sql = kernels.panes_sql(view, f"__kind = {KIND_MARKER}", keys, meta, ranked)
    elif merges is not None:
        panes_sql = _panes_two_level(view, keys, meta, merges, ranked)
    else:
        panes_sql = _panes_exploded(plan, view, keys, payload, meta, ranked)
    timing = "element_at(array({}), CAST(shiftright(__pane_info, 1) & 3 AS INT) + 1)".format(
        ", ".join(f"'{t}'" for t in TIMING))
    cols = ", ".join([*_q(keys), *_q(alias for _, alias in plan.stages.aggregates),
                      "window_start", "window_end", "shiftright(__pane_info, 3) AS pane_index",
                      f"{timing} AS pane_timing", "(__pane_info & 1) = 1 AS is_last"])
    if retracting:
        # A pane is retracted at most once (by the next pane of its window or of the
        # window it merged into): one row as emitted, one more as retracted. Where windows
        # merge, each row carries its place among its key's rows at its emit_time (§7).
        rank = "__row.k AS {}, ".format(*SORT_COLUMNS) if ranked else ""
        k_emit = f", 'k', {_EMISSION_PLACE_SQL}" if ranked else ""
        k_retract = f", 'k', {_RETRACTION_PLACE_SQL}" if ranked else ""
        result_sql = (
            f"SELECT {cols}, __row.t AS emit_time, {rank}__row.r AS is_retraction FROM ("
            "SELECT *, explode(array("
            f"named_struct('t', emit_time, 'r', false{k_emit}), "
            f"named_struct('t', __retract_time, 'r', true{k_retract}))) AS __row "
            f"FROM ({panes_sql}) AS __panes) AS __rows "
            "WHERE __row.t IS NOT NULL OR NOT __row.r")
    else:
        result_sql = f"SELECT {cols}, emit_time, false AS is_retraction FROM ({panes_sql}) AS __p"
    result = plan.spark.sql(result_sql)
    if clauses.late_rows_into:
        dropped = emitted.where(F.col("__kind") == KIND_DROPPED).select(
            *[F.col(k).alias(n) for k, n in zip(keys, _key_names(plan), strict=True)],
            F.col(EVENT_TIME).alias("event_time"), F.col(PROCESSING_TIME).alias("arrival_time"),
            "reason", F.col("watermark").alias("watermark_at_arrival"))
        dropped.createOrReplaceTempView(clauses.late_rows_into)
    events = None if record is None else emitted.where(F.col("__kind") == KIND_EVENT)
    return Replayed(result, emitted, emit_range, dropped_by_partition, driver_partitions,
                    events)


WINDOW_START = "__window_start"


def by_window(inp: DataFrame, clauses: c.Clauses):
    """Non-merging windows are independent of each other, so the driver may run each
    (key, window) in any task: no GROUP BY key or one hot key still spreads over every
    core, and a key's rows reach the driver a window at a time instead of all at once.
    FIXED: the element's window start (µs) joins the grouping; SLIDING: the element is
    sent once per window it belongs to, and the driver gets that window pre-assigned.
    Sessions merge (a key's windows depend on each other) and GLOBAL has one window per
    key: they stay grouped by key. Returns (input, extra grouping columns, the clauses
    the driver runs)."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import TimestampType

    w = clauses.window
    if not isinstance(w, c.FixedWindows | c.SlidingWindows) or \
            not isinstance(inp.schema[EVENT_TIME].dataType, TimestampType):
        return inp, [], clauses
    t = F.unix_micros(F.col(EVENT_TIME))
    if isinstance(w, c.FixedWindows):
        size, off = w.size.micros, w.offset.micros
        return inp.withColumn(WINDOW_START, t - F.pmod(t - F.lit(off), F.lit(size))), \
            [WINDOW_START], clauses
    size, period, off = w.size.micros, w.period.micros, w.offset.micros
    last = t - F.pmod(t - F.lit(off), F.lit(period))  # the latest start at or before t
    n = -(-size // period)  # candidate starts per element, as the model assigns them
    starts = F.filter(F.sequence(last - F.lit((n - 1) * period), last, F.lit(period)),
                      lambda s: s + F.lit(size) > t)
    # A NULL event time keeps its row (the driver drops and counts it once); an element
    # in a gap between sampling windows (period > size) has no start and no row: it is in
    # no window and not dropped (LANGUAGE.md §3). The watermark already saw it.
    starts = F.when(t.isNull(), F.array(F.lit(None).cast("bigint"))).otherwise(starts)
    exploded = inp.withColumn(WINDOW_START, F.explode(starts))
    return exploded, [WINDOW_START], replace(clauses, window=AssignedWindows(size=w.size))


def _dropped_accumulator(spark):
    """{partition: elements it dropped}, filled by the driver as the query runs, so that
    ``dropped_late`` reads the count without running the query again; None on Spark
    Connect, which has no accumulators (the count then runs the driver once more)."""
    # inside: importing this module (every task does) must not load pyspark
    from dfsql.session import spark_context
    from dfsql.spark.accumulators import PerPartition

    sc = spark_context(spark)
    return None if sc is None else sc.accumulator({}, PerPartition())


def _q(names) -> list[str]:
    return [f"`{n}`" for n in names]


def _panes_exploded(plan: ReplayPlan, view: str, keys, payload, meta,
                    ranked: bool = False) -> str:
    """Any aggregate: one aggregation over every (pane, element) pair (SQL over ``view``).

    A marker's list holds just its own pane. Aggregates see only the members
    (FILTER), so a pane without new elements gets the empty-set value. An element row
    lists the panes that aggregate it; exploding it in the JVM is far cheaper than
    shipping one Arrow row per (pane, element). Element rows carry their keys and the
    pane metadata is fixed-width (NULL on element rows, so max() is the marker's value):
    no aggregation buffer holds a string, so Spark can hash-aggregate rather than sort
    every (pane, element) row."""
    aggs = [f"{call.filtered(_MEMBERS_ONLY)} AS `{call.alias}`"
            for call in plan.stages.aggregate_calls]
    marked = ("SELECT explode(__gids) AS __pane, "
              + ", ".join(["__kind", *_q(keys), *_q(payload), *meta])
              + f" FROM {view} WHERE __kind <= {KIND_MARKER}")
    return ("SELECT " + ", ".join([*_q(keys), *aggs, *[f"max({m}) AS {m}" for m in meta],
                                   *_RANK[ranked]])
            + f" FROM ({marked}) AS __marked GROUP BY " + ", ".join(["__pane", *_q(keys)]))


#: a ranked pane's id is its §7 rank (see _PartitionDriver): the pane query passes it on
_RANK = {False: [], True: ["__pane AS __pane_rank"]}


def _panes_two_level(view: str, keys, meta, merges, ranked: bool = False) -> str:
    """Decomposable aggregates (SUM, COUNT, MIN, MAX): Spark aggregates each *delta* —
    the elements first emitted by the same pane, which share one list of covering panes
    — then merges the deltas' values into every pane that covers them. In accumulating
    modes a window's k panes cover its elements about k times over; this way only the
    (pane, delta) pairs are repeated, not the (pane, element) pairs. (SQL over ``view``.)

    Both levels read the driver's output once: a marker is a group of its own in the
    first level (its pane id, negated, as a one-element list), so the driver runs once."""
    maxes = [f"max({m}) AS {m}" for m in meta]
    # a marker's list is [-1 - its pane id]: a group of its own
    first = ("SELECT " + ", ".join(
        ["__gids AS __group", *_q(keys),
         *[f"{call.filtered(_MEMBERS_ONLY)} AS `{part}`" for call, part, _, _, _ in merges],
         *maxes])
        + f" FROM {view} WHERE __kind <= {KIND_MARKER} GROUP BY "
        + ", ".join(["__gids", *_q(keys)]))
    pane = "CASE WHEN __group[0] >= 0 THEN __group ELSE array(-1 - __group[0]) END"
    covered = ("SELECT " + ", ".join(
        [f"explode({pane}) AS __pane", *_q(keys), *_q(part for _, part, _, _, _ in merges),
         *meta]) + f" FROM ({first}) AS __deltas")
    return ("SELECT " + ", ".join(
        [*_q(keys), *[f"CAST({second} AS {dtype}) AS `{alias}`"
                      for _, _, second, alias, dtype in merges], *maxes, *_RANK[ranked]])
        + f" FROM ({covered}) AS __covered GROUP BY " + ", ".join(["__pane", *_q(keys)]))


def _two_level(plan: ReplayPlan, inp: DataFrame) -> list[tuple] | None:
    """(per-delta aggregate, its column, merge of the deltas' values, alias, Spark type) for each
    aggregate, or None unless every one is SUM, COUNT, MIN or MAX without DISTINCT (an
    aggregate's own FILTER applies to the elements, in the first level)."""
    from pyspark.sql import functions as F  # noqa: N812

    aggs = plan.stages.aggregates
    if not aggs:
        return None
    second_level = {"sum": "SUM(`{}`)", "count": "COALESCE(SUM(`{}`), 0)",
                    "min": "MIN(`{}`)", "max": "MAX(`{}`)"}
    out = []
    for call in plan.stages.aggregate_calls:
        if not call.decomposable or call.function not in second_level:
            return None
        part = f"__p_{call.alias}"
        out.append((call, part, second_level[call.function].format(part), call.alias))
    from pyspark.errors import PySparkException

    try:  # the types a one-level aggregate would have (analysis only, nothing runs)
        types = inp.groupBy().agg(*[F.expr(sql) for sql, _ in aggs]).schema
    except PySparkException:  # let the one-level path report it
        return None
    return [(*m, f.dataType.simpleString()) for m, f in zip(out, types.fields, strict=True)]


class _PartitionDriver:
    """The function given to ``mapInArrow``: runs the driver over a partition's keys.

    Rows arrive sorted by key then processing time, in batches that may cut a key in two;
    a key's rows are held back until the key is complete.
    """

    def __init__(self, clauses, timeline, keys, payload, out_names, end_floor,
                 negate_marker_group: bool = False, group: list[str] | None = None,
                 dropped=None, ranked: bool = False, kernels=None, record=None) -> None:
        #: EXPLAIN FIRINGS: (time zone, watermark at the end of input, what holds it), or
        #: None: the state machine records nothing (the query's own path, unchanged)
        self.record = record
        #: accumulator of {partition: elements dropped}, so that dropped_late reads what
        #: the query's run counted (a re-run of a partition overwrites its own entry)
        self.dropped = dropped
        #: a marker's one-element pane list holds -1 - its id (the two-level plan, where
        #: it must not share a group with the elements its own pane first emitted)
        self.negate_marker_group = negate_marker_group
        #: number each pane by its §7 changelog rank (its emission's and its retraction's
        #: positions, see _packed_ranks) instead of a running id: unique within a key (a key's
        #: rows are one run, and panes group by id and key), and the sort key after
        self.ranked = ranked
        #: the aggregates the driver computes per pane (replay_aggregates.Kernels), or
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
        ctx = TaskContext.get()  # None outside a Spark task
        part = ctx.partitionId() if ctx is not None else 0
        base = part << _PARTITION_SHIFT
        for table, key_ids in key_runs(batches, self.group):
            out, used, dropped = self._run(table, key_ids, base + next_id)
            next_id += used
            n_dropped += dropped
            if out is not None:
                yield from out.to_batches()
        if self.dropped is not None:
            self.dropped.add({part: n_dropped})

    def _run(self, table, key_ids, id_base):
        import pyarrow as pa

        # A NULL event time reaches the driver as NULL_EVENT_TIME: it belongs to no
        # window, and the driver drops and counts it (LANGUAGE.md §3).
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
        cols: dict[str, pa.Array] = {}
        parts = []

        def ts(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
            mask = None if valid is None else ~valid
            return pa.array(values, type=pa.int64(), mask=mask).cast(
                pa.timestamp("us", tz="UTC"))

        pane_ids = (_changelog_ranks(r, r.pane_window_start) if self.ranked
                    else np.arange(n_panes, dtype=np.int64) + id_base)
        # elements: one row each, listing the panes that aggregate it (cover pairs by delta);
        # none when the driver aggregates them itself
        m = 0
        if self.kernels is None:
            ok, lens, member_panes = pane_members(r, n_panes)
            m = int(ok.sum())
        if m:
            offsets = np.r_[0, np.cumsum(lens)].astype(np.int32)
            gids = pane_ids[member_panes]
            taken = table.select([*self.keys, *self.payload]).take(
                pa.array(r.element_row[ok]))
            cols = {"__kind": pa.array(np.full(m, KIND_MEMBER, np.int8)),
                    "__gids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(gids))}
            for n in [*self.keys, *self.payload]:
                cols[n] = taken.column(n)
            parts.append(cols)
        # pane markers: the pane's metadata (and when it is retracted)
        if n_panes:
            cols = {}
            first_row = _first_row_of_key(key_ids, r.pane_key)
            taken = table.select(self.keys).take(pa.array(first_row)) if self.keys else None
            wstart, wend = r.pane_window_start, r.pane_window_end
            finite = (wstart != np.iinfo(np.int64).min) & (wend != np.iinfo(np.int64).max)
            retract = np.full(n_panes, np.iinfo(np.int64).min, np.int64)
            if len(r.retraction_pane):
                retract[r.retraction_pane] = r.retraction_emit_time
            ids = pane_ids
            if self.negate_marker_group:
                ids = -1 - ids
            info = (r.pane_index.astype(np.int64) << 3) | \
                (r.pane_timing.astype(np.int64) << 1) | r.pane_is_last.astype(np.int64)
            cols.update({"__kind": pa.array(np.full(n_panes, KIND_MARKER, np.int8)),
                         "__gids": pa.ListArray.from_arrays(
                             pa.array(np.arange(n_panes + 1, dtype=np.int32)), pa.array(ids)),
                         "window_start": ts(wstart, finite), "window_end": ts(wend, finite),
                         "__pane_info": pa.array(info),
                         "emit_time": ts(r.pane_emit_time,
                                         r.pane_emit_time != np.iinfo(np.int64).min),
                         "__retract_time": ts(retract, retract != np.iinfo(np.int64).min)})
            for k in self.keys:
                cols[k] = taken.column(k)
            if self.kernels is not None:
                cols.update(self.kernels.pane_columns(table, r, n_panes))
            parts.append(cols)
        # dropped elements
        if len(r.dropped_row):
            k = len(r.dropped_row)
            taken = table.take(pa.array(r.dropped_row))
            cols = {"__kind": pa.array(np.full(k, KIND_DROPPED, np.int8)),
                    EVENT_TIME: taken.column(EVENT_TIME),
                    PROCESSING_TIME: taken.column(PROCESSING_TIME),
                    "reason": pa.array(r.dropped_reason_text, type=pa.string()),
                    "watermark": ts(r.dropped_watermark,
                                    r.dropped_watermark > np.iinfo(np.int64).min)}
            for kk in self.keys:
                cols[kk] = taken.column(kk)
            parts.append(cols)
        n_dropped = len(r.dropped_row)
        if events is not None and len(events):
            parts.append(events)
        if not parts:
            return None, n_panes, n_dropped
        schema = table.schema if self.kernels is None else self.kernels.arrow_schema(
            table.schema)
        return _union(parts, self.out_names, schema), n_panes, n_dropped


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


# a ranked pane's places in its run's changelog, as Spark SQL over its packed id
# (see :func:`dfsql.model.changelog.packed_ranks`)
_EMISSION_PLACE_SQL = "shiftright(__pane_rank, 32)"
_RETRACTION_PLACE_SQL = (f"shiftright(__pane_rank, 32) + (__pane_rank & {_LOW}) "
                         f"- {_RETRACTION_BIAS}")


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
