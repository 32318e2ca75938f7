"""Replay of a bounded table in processing-time order (PROCESSING TIME given).

The Dataflow model's driver decides windows and panes; Spark does everything else:

1. the **watermark timeline** is global across keys, so it is computed once: Spark
   reduces the input to one row per processing instant (max / min event time), the
   driver turns that into the monotone step function (or reads WATERMARK FROM's table);
2. the input is repartitioned by the group keys and sorted by key and processing time;
   ``mapInArrow`` runs the model's driver over whole Arrow batches holding many keys —
   no Python call per key, no Python object per row — and emits one union-typed stream:
   element rows (which pane first emitted them), pane rows, cover pairs, retractions and
   dropped elements;
3. Spark aggregates elements per pane (DISCARDING) or per covering pane (ACCUMULATING),
   joins the pane metadata and the retractions, and the output stage does the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dfsql.errors import DataError, SourceError
from dfsql.language import clauses as c
from dfsql.language.rewrite import EVENT_TIME, PROCESSING_TIME

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.spark.planner import BlockPlan

KIND_ELEMENT, KIND_PANE, KIND_COVER, KIND_RETRACTION, KIND_DROPPED = 0, 1, 2, 3, 4
TIMING = np.array(["EARLY", "ON_TIME", "LATE"], dtype=object)
# Pane ids are unique across tasks: the partition id in the high bits.
_PARTITION_SHIFT = 40


def _us(arr) -> np.ndarray:
    """An Arrow timestamp column as int64 microseconds (numpy, zero-copy where possible)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_timestamp(arr.type) and arr.type.unit != "us":
        arr = arr.cast(pa.timestamp("us", tz=arr.type.tz))
    return arr.cast(pa.int64()).to_numpy(zero_copy_only=False)


def watermark_timeline(plan: BlockPlan, inp: DataFrame):
    """The global watermark as a monotone step function over processing time."""
    from dfsql.model import watermarks as wmod
    from dfsql.spark.errors import spark_errors

    cl = plan.clauses
    wm = cl.watermark
    from pyspark.sql import functions as F  # noqa: N812

    with spark_errors(None):
        per_instant = (inp.groupBy(PROCESSING_TIME)
                       .agg(F.max(EVENT_TIME).alias("__max"), F.min(EVENT_TIME).alias("__min"))
                       .toArrow())
    p = per_instant.column(PROCESSING_TIME)
    if p.null_count:
        pt = cl.processing_time
        raise DataError(
            f"the PROCESSING TIME column {pt} has NULL values ({p.null_count} instant(s))",
            pt.pos.line if pt else None, pt.pos.column if pt else None,
            "filter them out in WHERE, or COALESCE them to an arrival time")
    order = np.argsort(_us(p), kind="stable")
    instants = _us(p)[order]
    max_et = _us(per_instant.column("__max"))[order]
    min_et = _us(per_instant.column("__min"))[order]
    if isinstance(wm, c.WatermarkDelay):
        return wmod.delay_timeline(max_et, instants, wm.delay.micros)
    if isinstance(wm, c.WatermarkPerfect):
        return wmod.perfect_timeline(min_et, instants)
    if isinstance(wm, c.WatermarkPercentile):
        with spark_errors(None):
            t = inp.select(PROCESSING_TIME, EVENT_TIME).toArrow()
        return wmod.percentile_timeline(_us(t.column(EVENT_TIME)), _us(t.column(PROCESSING_TIME)),
                                        wm.percentile, wm.delay.micros)
    if isinstance(wm, c.WatermarkFrom):
        series, writers = _read_watermark_table(plan, wm)
        if writers is None:
            return wmod.series_timeline(*series)
        timeout = None if wm.idle_timeout is None else wm.idle_timeout.micros
        return wmod.writers_timeline(*writers, timeout)
    raise TypeError(f"unknown watermark {wm!r}")


def _read_watermark_table(plan: BlockPlan, wm: c.WatermarkFrom):
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


def replay_panes(plan: BlockPlan) -> DataFrame:
    """The panes table of a replayed block (keys, aggregates, pane columns)."""
    from pyspark.sql import functions as F  # noqa: N812

    inp = plan.input_df()
    if EVENT_TIME not in inp.columns:
        # GLOBAL without ON: event time plays no part in the window; the watermark still
        # reaches +inf at the end of the bounded input.
        inp = inp.withColumn(EVENT_TIME, F.timestamp_seconds(F.lit(0)))
    timeline = watermark_timeline(plan, inp)
    keys = list(plan.stages.key_columns)
    payload = [n for n in inp.columns if n.startswith("__c")]
    schema = inp.schema
    clauses = plan.clauses

    # The union schema of what the driver emits.
    fields = ["__kind TINYINT", "__pane BIGINT", "__delta BIGINT"]
    fields += [f"`{k}` {schema[k].dataType.simpleString()}" for k in keys]
    fields += [f"`{n}` {schema[n].dataType.simpleString()}" for n in payload]
    fields += ["window_start TIMESTAMP", "window_end TIMESTAMP", "pane_index BIGINT",
               "pane_timing STRING", "is_last BOOLEAN", "emit_time TIMESTAMP",
               f"{EVENT_TIME} TIMESTAMP", f"{PROCESSING_TIME} TIMESTAMP", "reason STRING",
               "watermark TIMESTAMP"]
    out_schema = ", ".join(fields)
    out_names = [f.split(" ")[0].strip("`") for f in fields]

    driver = _PartitionDriver(clauses, timeline, keys, payload, out_names)
    ordered = (inp.repartition(max(1, _partitions(plan)), *keys) if keys
               else inp.repartition(1))
    ordered = ordered.sortWithinPartitions(*keys, PROCESSING_TIME)
    emitted = ordered.mapInArrow(driver, out_schema).persist()
    plan.emitted = emitted

    elements = emitted.where(F.col("__kind") == KIND_ELEMENT)
    panes = emitted.where(F.col("__kind") == KIND_PANE).select(
        F.col("__pane").alias("__pid"), *keys, "window_start", "window_end", "pane_index",
        "pane_timing", "is_last", "emit_time")
    aggs = [F.expr(sql).alias(alias) for sql, alias in plan.stages.aggregates]
    if clauses.accumulation is c.Accumulation.DISCARDING:
        values = elements.groupBy(F.col("__pane").alias("__pid")).agg(*aggs) if aggs else \
            elements.select(F.col("__pane").alias("__pid")).distinct()
    else:
        # Self-joins of one persisted frame: alias both sides so Spark can tell them apart.
        cover = emitted.where(F.col("__kind") == KIND_COVER).select(
            F.col("__pane").alias("__pid"), F.col("__delta").alias("__cover_delta"))
        joined = elements.alias("__e").join(
            cover.alias("__c"), F.col("__e.__pane") == F.col("__c.__cover_delta"))
        values = joined.groupBy("__pid").agg(*aggs) if aggs else \
            joined.select("__pid").distinct()
    agg_cols = [alias for _, alias in plan.stages.aggregates]
    inserted = panes.join(values.withColumn("__has", F.lit(True)), "__pid", "left")
    if agg_cols:
        # A pane may hold no new element (an on-time pane in DISCARDING mode): its
        # aggregates are those of the empty set (COUNT 0, SUM NULL), computed by Spark.
        empty = inp.where(F.lit(False)).agg(*aggs).select(
            *[F.col(a).alias(f"__empty{a}") for a in agg_cols])
        inserted = inserted.crossJoin(F.broadcast(empty)).select(
            "__pid", *keys, "window_start", "window_end", "pane_index", "pane_timing",
            "is_last", "emit_time",
            *[F.when(F.col("__has"), F.col(a)).otherwise(F.col(f"__empty{a}")).alias(a)
              for a in agg_cols])
    result = inserted.select(*keys, *agg_cols, "window_start", "window_end", "pane_index",
                             "pane_timing", "is_last", "emit_time",
                             F.lit(False).alias("is_retraction"))
    if clauses.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING:
        retr = emitted.where(F.col("__kind") == KIND_RETRACTION).select(
            F.col("__pane").alias("__pid"), F.col("emit_time").alias("__retract_time"))
        retracted = inserted.join(retr, "__pid").select(
            *keys, *agg_cols, "window_start", "window_end", "pane_index", "pane_timing",
            "is_last", F.col("__retract_time").alias("emit_time"),
            F.lit(True).alias("is_retraction"))
        result = result.unionByName(retracted)
    if clauses.late_rows_into:
        dropped = emitted.where(F.col("__kind") == KIND_DROPPED).select(
            *[F.col(k).alias(n) for k, n in zip(keys, _key_names(plan), strict=True)],
            F.col(EVENT_TIME).alias("event_time"), F.col(PROCESSING_TIME).alias("arrival_time"),
            "reason", F.col("watermark").alias("watermark_at_arrival"))
        dropped.createOrReplaceTempView(clauses.late_rows_into)
    return result


def _key_names(plan: BlockPlan) -> list[str]:
    names = []
    for i, _k in enumerate(plan.stages.key_columns):
        names.append(f"key_{i}")
    return names


def _partitions(plan: BlockPlan) -> int:
    try:
        return int(plan.spark.conf.get("spark.sql.shuffle.partitions"))
    except Exception:  # noqa: BLE001
        return 4


class _PartitionDriver:
    """The function given to ``mapInArrow``: runs the driver over a partition's keys.

    Rows arrive sorted by key then processing time, in batches that may cut a key in two;
    a key's rows are held back until the key is complete.
    """

    def __init__(self, clauses, timeline, keys, payload, out_names) -> None:
        self.clauses = clauses
        self.timeline = timeline
        self.keys = keys
        self.payload = payload
        self.out_names = out_names

    def __call__(self, batches):
        import pyarrow as pa

        pending: pa.Table | None = None
        next_id = 0
        try:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            part = ctx.partitionId() if ctx is not None else 0
        except Exception:  # noqa: BLE001
            part = 0
        base = part << _PARTITION_SHIFT
        for batch in batches:
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch])
            if pending is not None:
                table = pa.concat_tables([pending, table])
            key_ids, n_keys = self._key_ids(table)
            # Keep the last key back: more of its rows may come in the next batch.
            last_start = int(np.searchsorted(key_ids, key_ids[-1], side="left"))
            if last_start == 0:
                pending = table
                continue
            done, pending = table.slice(0, last_start), table.slice(last_start)
            out, used = self._run(done, key_ids[:last_start], base + next_id)
            next_id += used
            if out is not None:
                yield from out.to_batches()
        if pending is not None and pending.num_rows:
            key_ids, _ = self._key_ids(pending)
            out, used = self._run(pending, key_ids, base + next_id)
            if out is not None:
                yield from out.to_batches()

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

        et = _us(table.column(EVENT_TIME))
        pt = _us(table.column(PROCESSING_TIME))
        r = drive(key_ids, et, pt, self.clauses, self.timeline)
        n_panes = len(r.pane_key)
        cols: dict[str, pa.Array] = {}
        parts = []

        def ts(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
            mask = None if valid is None else ~valid
            return pa.array(values, type=pa.int64(), mask=mask).cast(
                pa.timestamp("us", tz="UTC"))

        # element rows
        inst_rows = r.element_row
        emitted = r.element_first_pane >= 0
        rows = inst_rows[emitted]
        m = len(rows)
        if m:
            cols = {"__kind": pa.array(np.full(m, KIND_ELEMENT, np.int8)),
                    "__pane": pa.array(r.element_first_pane[emitted] + id_base)}
            taken = table.take(pa.array(rows))
            for n in self.payload:
                cols[n] = taken.column(n)
            parts.append(cols)
        # pane rows
        if n_panes:
            first_row = r.pane_first_row if hasattr(r, "pane_first_row") else None
            key_rows = first_row if first_row is not None else _first_row_of_key(key_ids,
                                                                                   r.pane_key)
            taken = table.take(pa.array(key_rows))
            wstart, wend = r.pane_window_start, r.pane_window_end
            finite = (wstart != np.iinfo(np.int64).min) & (wend != np.iinfo(np.int64).max)
            cols = {"__kind": pa.array(np.full(n_panes, KIND_PANE, np.int8)),
                    "__pane": pa.array(np.arange(n_panes, dtype=np.int64) + id_base),
                    "window_start": ts(wstart, finite), "window_end": ts(wend, finite),
                    "pane_index": pa.array(r.pane_index.astype(np.int64)),
                    "pane_timing": pa.array(TIMING[r.pane_timing.astype(np.int64)],
                                            type=pa.string()),
                    "is_last": pa.array(r.pane_is_last.astype(bool)),
                    "emit_time": ts(r.pane_emit_time)}
            for k in self.keys:
                cols[k] = taken.column(k)
            parts.append(cols)
        # cover pairs
        if len(r.cover_pane):
            k = len(r.cover_pane)
            parts.append({"__kind": pa.array(np.full(k, KIND_COVER, np.int8)),
                          "__pane": pa.array(r.cover_pane + id_base),
                          "__delta": pa.array(r.cover_delta + id_base)})
        # retractions
        if len(r.retraction_pane):
            k = len(r.retraction_pane)
            parts.append({"__kind": pa.array(np.full(k, KIND_RETRACTION, np.int8)),
                          "__pane": pa.array(r.retraction_pane + id_base),
                          "emit_time": ts(r.retraction_emit_time)})
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
        if not parts:
            return None, n_panes
        return _union(parts, self.out_names, table.schema), n_panes


def _first_row_of_key(key_ids: np.ndarray, pane_key: np.ndarray) -> np.ndarray:
    starts = np.searchsorted(key_ids, pane_key, side="left")
    return starts.astype(np.int64)


def _union(parts: list[dict], names: list[str], in_schema):
    """Stack column dicts into one table of the union schema (missing columns null)."""
    import pyarrow as pa

    types = {}
    for n in names:
        if n in in_schema.names:
            types[n] = in_schema.field(n).type
    types.update({"__kind": pa.int8(), "__pane": pa.int64(), "__delta": pa.int64(),
                  "window_start": pa.timestamp("us", tz="UTC"),
                  "window_end": pa.timestamp("us", tz="UTC"), "pane_index": pa.int64(),
                  "pane_timing": pa.string(), "is_last": pa.bool_(),
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
