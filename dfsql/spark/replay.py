"""Replay of a bounded table in processing-time order (PROCESSING TIME given).

The Dataflow model's driver decides windows and panes; Spark does everything else:

1. the **watermark timeline** is global across keys, so it is computed once: Spark
   reduces the input to the rows that can move the watermark (per-partition running
   maxima of event time, or one row per processing instant), the driver turns that into
   the monotone step function (or reads WATERMARK FROM's table);
2. the input is repartitioned by the group keys and sorted by key and processing time;
   ``mapInArrow`` runs the model's driver over whole Arrow batches holding many keys —
   no Python call per key, no Python object per row — and emits one union-typed stream:
   element rows (with the list of panes that aggregate them), one marker row per pane
   (its metadata and when it is retracted) and dropped elements;
3. one Spark SQL statement aggregates the elements into the panes that cover them (in
   two levels for SUM / COUNT / MIN / MAX), adds the retraction rows, and the output
   stage does the rest (§7's order: :mod:`dfsql.spark.ordering`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pyspark.accumulators import AccumulatorParam

from dfsql.errors import DataError, SourceError
from dfsql.language import clauses as c
from dfsql.language.rewrite import EVENT_TIME, PROCESSING_TIME, SORT_COLUMNS
from dfsql.spark.ordering import shuffle_partitions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.spark.plan_types import ReplayPlan

KIND_MEMBER, KIND_MARKER, KIND_DROPPED = 0, 1, 4
#: Aggregates see only the elements, not the pane markers beside them.
_MEMBERS_ONLY = f"__kind = {KIND_MEMBER}"
TIMING = np.array(["EARLY", "ON_TIME", "LATE"], dtype=object)
# Pane ids are unique across tasks: the partition id in the high bits.
_PARTITION_SHIFT = 40
# Rows gathered before one driver call (Arrow batches hold 10k rows by default).
_MIN_ROWS_PER_RUN = 200_000


def _us(arr, null: int | None = None) -> np.ndarray:
    """An Arrow timestamp column as int64 microseconds (numpy, zero-copy where possible).

    A NULL becomes ``null`` (the caller says what a NULL means; without it the column
    must have none: numpy would otherwise turn it into a float NaN)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_timestamp(arr.type) and arr.type.unit != "us":
        arr = arr.cast(pa.timestamp("us", tz=arr.type.tz))
    arr = arr.cast(pa.int64())
    if null is not None and arr.null_count:
        arr = arr.fill_null(null)
    return arr.to_numpy(zero_copy_only=False)


def watermark_timeline(plan: ReplayPlan, inp: DataFrame):
    """The global watermark as a monotone step function over processing time, and the
    first and last arrivals of the whole input (None when it is empty)."""
    from dfsql.model import watermarks as wmod
    from dfsql.spark.errors import spark_errors

    cl = plan.clauses
    wm = cl.watermark
    from pyspark.sql import functions as F  # noqa: N812

    if isinstance(wm, c.WatermarkDelay):
        # Only running-max records can move the watermark, and every global record is a
        # record of its own partition: collect those, not one row per instant.
        with spark_errors(None):
            rec = (inp.select(PROCESSING_TIME, EVENT_TIME)
                   .mapInArrow(_running_max_records, f"{PROCESSING_TIME} TIMESTAMP, "
                               f"{EVENT_TIME} TIMESTAMP").toArrow())
        _check_processing_time(cl, rec.column(PROCESSING_TIME).null_count)
        p_all, e_all = _us(rec.column(PROCESSING_TIME)), rec.column(EVENT_TIME)
        has_e = e_all.is_valid().to_numpy(zero_copy_only=False)
        first, last = (int(p_all.min()), int(p_all.max())) if len(p_all) else (None, None)
        return wmod.delay_timeline(_us(e_all, null=0)[has_e], p_all[has_e],
                                   wm.delay.micros), first, last
    with spark_errors(None):
        per_instant = (inp.groupBy(PROCESSING_TIME)
                       .agg(F.min(EVENT_TIME).alias("__min"))
                       .toArrow())
    p = per_instant.column(PROCESSING_TIME)
    _check_processing_time(cl, p.null_count)
    order = np.argsort(_us(p), kind="stable")
    instants = _us(p)[order]
    first, last = (int(instants[0]), int(instants[-1])) if len(instants) else (None, None)
    if isinstance(wm, c.WatermarkPerfect):
        # an instant where only NULL event times arrive (min NULL) holds nothing back
        mins = per_instant.column("__min")
        has_e = mins.is_valid().to_numpy(zero_copy_only=False)[order]
        min_et = _us(mins, null=0)[order]
        return wmod.perfect_timeline(min_et[has_e], instants[has_e]), first, last
    if isinstance(wm, c.WatermarkPercentile):
        with spark_errors(None):
            t = (inp.where(F.col(EVENT_TIME).isNotNull())
                 .select(PROCESSING_TIME, EVENT_TIME).toArrow())
        return wmod.percentile_timeline(_us(t.column(EVENT_TIME)), _us(t.column(PROCESSING_TIME)),
                                        wm.percentile, wm.delay.micros), first, last
    if isinstance(wm, c.WatermarkFrom):
        series, writers = _read_watermark_table(plan, wm)
        if writers is None:
            return wmod.series_timeline(*series), first, last
        timeout = None if wm.idle_timeout is None else wm.idle_timeout.micros
        return wmod.writers_timeline(*writers, timeout), first, last
    raise TypeError(f"unknown watermark {wm!r}")


def _check_processing_time(cl: c.Clauses, nulls: int) -> None:
    if nulls:
        pt = cl.processing_time
        raise DataError(
            f"the PROCESSING TIME column {pt} has NULL values ({nulls} instant(s))",
            pt.pos.line if pt else None, pt.pos.column if pt else None,
            "filter them out in WHERE, or COALESCE them to an arrival time")


def _running_max_records(batches):
    """Per partition: the (processing time, event time) rows that raise the running max
    of event time in processing-time order (a NULL processing time is passed through)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    t = pa.concat_tables(tables)
    nulls = t.filter(pc.is_null(t.column(0)))
    if nulls.num_rows:
        yield from nulls.slice(0, 1).rename_columns([PROCESSING_TIME, EVENT_TIME]).to_batches()
    t = t.filter(pc.is_valid(t.column(0)))
    if not t.num_rows:
        return
    # the partition's last arrival (event time NULL): where the input ends
    yield pa.RecordBatch.from_arrays(
        [pa.array([pc.max(t.column(0)).cast(pa.int64()).as_py()], pa.int64())
         .cast(pa.timestamp("us", tz="UTC")), pa.nulls(1, pa.timestamp("us", tz="UTC"))],
        names=[PROCESSING_TIME, EVENT_TIME])
    t = t.filter(pc.is_valid(t.column(1)))
    if not t.num_rows:
        return
    p, e = _us(t.column(0)), _us(t.column(1))
    if len(p) > 1 and not bool((p[1:] >= p[:-1]).all()):
        # Ties in processing time may come in any order: only the largest event time at
        # an instant counts (Timeline.of keeps the last, largest record per instant).
        o = np.argsort(p)
        p, e = p[o], e[o]
    run = np.maximum.accumulate(e)
    keep = np.r_[True, run[1:] > run[:-1]]
    yield pa.RecordBatch.from_arrays(
        [pa.array(p[keep]).cast(pa.timestamp("us", tz="UTC")),
         pa.array(e[keep]).cast(pa.timestamp("us", tz="UTC"))],
        names=[PROCESSING_TIME, EVENT_TIME])


def _read_watermark_table(plan: ReplayPlan, wm: c.WatermarkFrom):
    from dfsql.spark.errors import spark_errors

    pos = wm.pos
    want = ["processing_time", "watermark"] if wm.writer is None else [
        wm.writer, "processing_time", "noted_time"]
    with spark_errors(plan.src, lambda k: pos.offset):
        df = plan.spark.table(wm.table)
        cols = [x.lower() for x in df.columns]
    missing = [w for w in want if w.lower() not in cols]
    if missing:
        raise SourceError(
            f"WATERMARK FROM {wm.table} needs columns ({', '.join(want)}); "
            f"it has ({', '.join(df.columns)})", pos.line, pos.column,
            "a watermark table has one row per (processing_time, watermark)" if wm.writer is None
            else "a writers' table has one row per (writer, processing_time, noted_time)")
    t = df.select(*want).toArrow()
    if wm.writer is None:
        return (_us(t.column(0)), _us(t.column(1))), None
    import pyarrow.compute as pc

    writer_ids = pc.dictionary_encode(t.column(0)).combine_chunks().indices.to_numpy(
        zero_copy_only=False)
    return None, (writer_ids.astype(np.int64), _us(t.column(1)), _us(t.column(2)))


def replay_panes(plan: ReplayPlan) -> DataFrame:
    """The panes table of a replayed block (keys, aggregates, pane columns)."""
    from pyspark.sql import functions as F  # noqa: N812

    inp = plan.input_df()
    if EVENT_TIME not in inp.columns:
        # GLOBAL without ON: event time plays no part in the window; the watermark still
        # reaches +inf at the end of the bounded input.
        inp = inp.withColumn(EVENT_TIME, F.timestamp_seconds(F.lit(0)))
    timeline, first_arrival, last_arrival = watermark_timeline(plan, inp)
    from dfsql.model.group_also_by_window import end_floor_of
    from dfsql.model.windows import NEG_INF

    # Every slice of keys ends where the whole input ends (not at its own last arrival).
    end_floor = NEG_INF if last_arrival is None else end_floor_of(plan.clauses.trigger,
                                                                  last_arrival)
    if first_arrival is not None:
        plan.emit_range = (first_arrival, max(end_floor, last_arrival))
    keys = list(plan.stages.key_columns)
    payload = [n for n in inp.columns if n.startswith("__c")]
    schema = inp.schema
    clauses = plan.clauses

    # The union schema of what the driver emits: pane members (one row per element a pane
    # aggregates), one marker row per pane with its metadata, and dropped elements.
    fields = ["__kind TINYINT", "__gids ARRAY<BIGINT>"]
    fields += [f"`{k}` {schema[k].dataType.simpleString()}" for k in keys]
    fields += [f"`{n}` {schema[n].dataType.simpleString()}" for n in payload]
    fields += ["window_start TIMESTAMP", "window_end TIMESTAMP", "__pane_info BIGINT",
               "emit_time TIMESTAMP", "__retract_time TIMESTAMP"]
    retracting = clauses.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING
    if retracting:
        # where a pane's retraction sorts: with the pane that replaces it (§7)
        fields += ["__repl_ws TIMESTAMP", "__repl_pi BIGINT"]
    if clauses.late_rows_into:
        # what a dropped element's row says (else a dropped row is only counted)
        fields += [f"{EVENT_TIME} TIMESTAMP", f"{PROCESSING_TIME} TIMESTAMP", "reason STRING",
                   "watermark TIMESTAMP"]
    out_schema = ", ".join(fields)
    out_names = [f.split(" ")[0].strip("`") for f in fields]

    merges = _two_level(plan, inp)
    plan.driver_partitions = shuffle_partitions(plan.spark) if keys else 1
    from pyspark.errors import PySparkAttributeError

    try:
        plan.dropped_by_partition = plan.spark.sparkContext.accumulator({}, _PerPartition())
    except PySparkAttributeError:  # Spark Connect has no accumulators: dropped_late counts
        plan.dropped_by_partition = None
    driver = _PartitionDriver(clauses, timeline, keys, payload, out_names, end_floor,
                              negate_marker_group=merges is not None,
                              dropped=plan.dropped_by_partition)
    ordered = (inp.repartition(plan.driver_partitions, *keys) if keys
               else inp.repartition(1))
    ordered = ordered.sortWithinPartitions(*keys, PROCESSING_TIME)
    emitted = ordered.mapInArrow(driver, out_schema)
    if clauses.late_rows_into:
        emitted = emitted.persist()  # read twice: the panes and the late rows' view
    plan.emitted = emitted

    meta = ["window_start", "window_end", "__pane_info", "emit_time", "__retract_time"]
    if retracting:
        meta += ["__repl_ws", "__repl_pi"]
    # The stages after the driver as one statement: analysed once, not once per step.
    view = plan.name("__dfsql_emitted")
    plan.temp_view(emitted, view)
    if merges is not None:
        panes_sql = _panes_two_level(view, keys, meta, merges)
    else:
        panes_sql = _panes_exploded(plan, view, keys, payload, meta)
    timing = "element_at(array({}), CAST(shiftright(__pane_info, 1) & 3 AS INT) + 1)".format(
        ", ".join(f"'{t}'" for t in TIMING))
    cols = ", ".join([*_q(keys), *_q(alias for _, alias in plan.stages.aggregates),
                      "window_start", "window_end", "shiftright(__pane_info, 3) AS pane_index",
                      f"{timing} AS pane_timing", "(__pane_info & 1) = 1 AS is_last"])
    if retracting:
        # A pane is retracted at most once (by the next pane of its window or of the
        # window it merged into): one row as emitted, one more as retracted. Each row
        # carries the window_start and pane_index of the row it sorts with (§7).
        sort_ws, sort_pi = SORT_COLUMNS
        result_sql = (
            f"SELECT {cols}, __row.t AS emit_time, __row.r AS is_retraction, "
            f"__row.sw AS {sort_ws}, __row.sp AS {sort_pi} FROM ("
            "SELECT *, explode(array("
            "named_struct('t', emit_time, 'r', false, 'sw', window_start, "
            "'sp', shiftright(__pane_info, 3)), "
            "named_struct('t', __retract_time, 'r', true, 'sw', __repl_ws, "
            "'sp', __repl_pi))) AS __row "
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
    return result


def _q(names) -> list[str]:
    return [f"`{n}`" for n in names]


def _panes_exploded(plan: ReplayPlan, view: str, keys, payload, meta) -> str:
    """Any aggregate: one aggregation over every (pane, element) pair (SQL over ``view``).

    A marker's list holds just its own pane. Aggregates see only the members
    (FILTER), so a pane without new elements gets the empty-set value. An element row
    lists the panes that aggregate it; exploding it in the JVM is far cheaper than
    shipping one Arrow row per (pane, element). Element rows carry their keys and the
    pane metadata is fixed-width (NULL on element rows, so max() is the marker's value):
    no aggregation buffer holds a string, so Spark can hash-aggregate rather than sort
    every (pane, element) row."""
    aggs = [f"{_filtered(sql, _MEMBERS_ONLY)} AS `{alias}`"
            for sql, alias in plan.stages.aggregates]
    marked = ("SELECT explode(__gids) AS __pane, "
              + ", ".join(["__kind", *_q(keys), *_q(payload), *meta])
              + f" FROM {view} WHERE __kind <= {KIND_MARKER}")
    return ("SELECT " + ", ".join([*_q(keys), *aggs, *[f"max({m}) AS {m}" for m in meta]])
            + f" FROM ({marked}) AS __marked GROUP BY " + ", ".join(["__pane", *_q(keys)]))


def _panes_two_level(view: str, keys, meta, merges) -> str:
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
         *[f"{_filtered(sql, _MEMBERS_ONLY)} AS `{part}`" for sql, part, _, _, _ in merges],
         *maxes])
        + f" FROM {view} WHERE __kind <= {KIND_MARKER} GROUP BY "
        + ", ".join(["__gids", *_q(keys)]))
    pane = "CASE WHEN __group[0] >= 0 THEN __group ELSE array(-1 - __group[0]) END"
    covered = ("SELECT " + ", ".join(
        [f"explode({pane}) AS __pane", *_q(keys), *_q(part for _, part, _, _, _ in merges),
         *meta]) + f" FROM ({first}) AS __deltas")
    return ("SELECT " + ", ".join(
        [*_q(keys), *[f"CAST({second} AS {dtype}) AS `{alias}`"
                      for _, _, second, alias, dtype in merges], *maxes])
        + f" FROM ({covered}) AS __covered GROUP BY " + ", ".join(["__pane", *_q(keys)]))


def _two_level(plan: ReplayPlan, inp: DataFrame) -> list[tuple[str, ...]] | None:
    """(per-delta aggregate, its column, merge of the deltas' values, alias, Spark type) for each
    aggregate, or None unless every one is SUM, COUNT, MIN or MAX without DISTINCT (an
    aggregate's own FILTER applies to the elements, in the first level)."""
    import sqlglot
    from pyspark.sql import functions as F  # noqa: N812
    from sqlglot import exp

    aggs = plan.stages.aggregates
    if not aggs:
        return None
    out = []
    for sql, alias in aggs:
        node = sqlglot.parse_one(sql, read="spark")
        inner = node.this if isinstance(node, exp.Filter) else node
        if type(inner) not in (exp.Sum, exp.Count, exp.Min, exp.Max) or \
                inner.find(exp.Distinct) is not None or \
                any(a is not inner for a in inner.find_all(exp.AggFunc)):
            return None
        part = f"__p_{alias}"
        second = {exp.Sum: f"SUM(`{part}`)", exp.Count: f"COALESCE(SUM(`{part}`), 0)",
                  exp.Min: f"MIN(`{part}`)", exp.Max: f"MAX(`{part}`)"}[type(inner)]
        out.append((sql, part, second, alias))
    from pyspark.errors import PySparkException

    try:  # the types a one-level aggregate would have (analysis only, nothing runs)
        types = inp.groupBy().agg(*[F.expr(sql) for sql, _ in aggs]).schema
    except PySparkException:  # let the one-level path report it
        return None
    return [(*m, f.dataType.simpleString()) for m, f in zip(out, types.fields, strict=True)]


def _filtered(agg_sql: str, cond: str) -> str:
    """``agg FILTER (WHERE cond)``, AND-ed with the aggregate's own FILTER if it has one."""
    import sqlglot
    from sqlglot import exp

    node = sqlglot.parse_one(agg_sql, read="spark")
    extra = sqlglot.parse_one(cond, read="spark")
    if isinstance(node, exp.Filter):
        where = node.expression
        where.set("this", exp.and_(exp.paren(where.this), extra))
    else:
        node = exp.Filter(this=node, expression=exp.Where(this=extra))
    return node.sql("spark")


def _key_names(plan: ReplayPlan) -> list[str]:
    names = []
    for i, _k in enumerate(plan.stages.key_columns):
        names.append(f"key_{i}")
    return names


class _PerPartition(AccumulatorParam):
    """An accumulator of {partition id: count}: a partition run again (a second action,
    a retried task) replaces its own count instead of adding to it."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:  # noqa: N802 - Spark's name
        value1.update(value2)
        return value1


class _PartitionDriver:
    """The function given to ``mapInArrow``: runs the driver over a partition's keys.

    Rows arrive sorted by key then processing time, in batches that may cut a key in two;
    a key's rows are held back until the key is complete.
    """

    def __init__(self, clauses, timeline, keys, payload, out_names, end_floor,
                 negate_marker_group: bool = False, dropped=None) -> None:
        #: accumulator of {partition: elements dropped}, so that dropped_late reads what
        #: the query's run counted (a re-run of a partition overwrites its own entry)
        self.dropped = dropped
        #: a marker's one-element pane list holds -1 - its id (the two-level plan, where
        #: it must not share a group with the elements its own pane first emitted)
        self.negate_marker_group = negate_marker_group
        self.end_floor = end_floor
        self.clauses = clauses
        self.timeline = timeline
        self.keys = keys
        self.payload = payload
        self.out_names = out_names

    def __call__(self, batches):
        import pyarrow as pa

        pending: pa.Table | None = None
        next_id = 0
        n_dropped = 0
        from pyspark import TaskContext

        ctx = TaskContext.get()  # None outside a Spark task
        part = ctx.partitionId() if ctx is not None else 0
        base = part << _PARTITION_SHIFT
        for batch in batches:
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch])
            if pending is not None:
                table = pa.concat_tables([pending, table])
            if table.num_rows < _MIN_ROWS_PER_RUN:
                pending = table  # the driver's per-call cost is amortised over many keys
                continue
            key_ids, n_keys = self._key_ids(table)
            # Keep the last key back: more of its rows may come in the next batch.
            last_start = int(np.searchsorted(key_ids, key_ids[-1], side="left"))
            if last_start == 0:
                pending = table
                continue
            done, pending = table.slice(0, last_start), table.slice(last_start)
            out, used, dropped = self._run(done, key_ids[:last_start], base + next_id)
            next_id += used
            n_dropped += dropped
            if out is not None:
                yield from out.to_batches()
        if pending is not None and pending.num_rows:
            key_ids, _ = self._key_ids(pending)
            out, used, dropped = self._run(pending, key_ids, base + next_id)
            n_dropped += dropped
            if out is not None:
                yield from out.to_batches()
        if self.dropped is not None:
            self.dropped.add({part: n_dropped})

    def _key_ids(self, table):
        """Dense ids 0..K-1 for runs of equal keys (null-safe)."""
        import pyarrow.compute as pc

        n = table.num_rows
        if not self.keys or n == 0:
            return np.zeros(n, dtype=np.int64), 1 if n else 0
        changed = np.zeros(n, dtype=bool)
        for k in self.keys:
            col = table.column(k).combine_chunks()
            a, b = col.slice(1), col.slice(0, n - 1)
            eq = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
            changed[1:] |= ~(eq | both_null)
        ids = np.cumsum(changed)
        return ids.astype(np.int64), int(ids[-1]) + 1

    def _run(self, table, key_ids, id_base):
        import pyarrow as pa

        from dfsql.model.group_also_by_window import drive
        from dfsql.model.replacing import replacing_pane
        from dfsql.model.windows import NEG_INF, concat_ranges

        # A NULL event time reaches the driver as NEG_INF, which it drops and counts
        # (reason "null event time"): it belongs to no window (LANGUAGE.md §3).
        et = _us(table.column(EVENT_TIME), null=NEG_INF)
        pt = _us(table.column(PROCESSING_TIME))
        r = drive(key_ids, et, pt, self.clauses, self.timeline, end_floor=self.end_floor,
                  ordered=False)
        n_panes = len(r.pane_key)
        cols: dict[str, pa.Array] = {}
        parts = []

        def ts(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
            mask = None if valid is None else ~valid
            return pa.array(values, type=pa.int64(), mask=mask).cast(
                pa.timestamp("us", tz="UTC"))

        # elements: one row each, listing the panes that aggregate it (cover pairs by delta)
        ok = r.element_first_pane >= 0
        m = int(ok.sum())
        if m:
            fp = r.element_first_pane[ok]
            co = np.argsort(r.cover_delta, kind="stable")
            c_pane, c_delta = r.cover_pane[co], r.cover_delta[co]
            per_delta = np.bincount(c_delta, minlength=n_panes)
            c_start = np.cumsum(per_delta) - per_delta
            lens = per_delta[fp]
            offsets = np.r_[0, np.cumsum(lens)].astype(np.int32)
            gids = c_pane[concat_ranges(c_start[fp], lens)] + id_base
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
            if "__repl_ws" in self.out_names:
                # a retraction sorts with the pane that replaces it (or, were none found,
                # just before its window's next pane)
                repl = replacing_pane(r.pane_key, r.pane_emit_time, wstart, wend,
                                      r.pane_index, r.retraction_pane, r.retraction_emit_time)
                repl_ws, repl_pi = wstart.copy(), r.pane_index.astype(np.int64) + 1
                has = repl >= 0
                repl_ws[r.retraction_pane[has]] = wstart[repl[has]]
                repl_pi[r.retraction_pane[has]] = r.pane_index[repl[has]]
                cols["__repl_ws"] = ts(repl_ws, repl_ws != np.iinfo(np.int64).min)
                cols["__repl_pi"] = pa.array(repl_pi)
            ids = np.arange(n_panes, dtype=np.int64) + id_base
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
        if not parts:
            return None, n_panes, n_dropped
        return _union(parts, self.out_names, table.schema), n_panes, n_dropped


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
                  "__repl_ws": ts, "__repl_pi": pa.int64(),
                  "__gids": pa.list_(pa.int64()),
                  "window_start": pa.timestamp("us", tz="UTC"),
                  "window_end": pa.timestamp("us", tz="UTC"),
                  "emit_time": pa.timestamp("us", tz="UTC"), "reason": pa.string(),
                  "watermark": pa.timestamp("us", tz="UTC")})
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
