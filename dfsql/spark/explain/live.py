"""``EXPLAIN FIRINGS FOR STREAMING QUERY q [WHERE p]`` on Spark (docs/guides/streams.md#continuous-queries-as-statements): why a
running continuous query has or has not produced a window's pane, now.

The query is planned again (on the partitions its checkpoint recorded, so its buckets
are the ones in the state) for its bucket processor and its block's columns; Spark's
state data source reads the processor's state as of the last committed micro-batch,
and each bucket runs in a task as :mod:`dfsql.spark.stream.live_state` says. The rows
are §8b's: for every live window the last pane it emitted (FIRE, with its value) and,
for each window still to fire, a WAITING row at the query's frontier. ``WHERE`` narrows
them as it narrows EXPLAIN FIRINGS'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.model import clauses as c
from dfsql.spark import door
from dfsql.spark.explain.firings import in_order, with_values
from dfsql.spark.stream.live_state import (
    EVENT,
    EVENT_FIELDS,
    STATE_VARIABLE,
    EachBucket,
    bucket_now,
)
from dfsql.spark.stream.output_rows import ROW_KIND
from dfsql.spark.timelines import us, watermark_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.language.scan import Source
    from dfsql.spark.planned import BlockView


def live_firings(plan: BlockView, state: tuple, checkpoint: str,
                 where: tuple[int, str] | None, source: Source) -> DataFrame:
    """The live windows of the query whose block is ``plan`` and whose bucket processor
    and output schema are ``state`` (:attr:`StreamPlan.state`), from ``checkpoint``."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    processor, out_schema = state
    spark = plan.spark
    fields = [StructField(n, _parse_datatype_string(t)) for n, t in EVENT_FIELDS]
    schema = StructType([*out_schema.fields, *fields])
    stored = spark.read.format("statestore").option("stateVarName", STATE_VARIABLE) \
        .load(checkpoint).select("value.*")
    explainer = EachBucket(bucket_now, processor, schema.fieldNames(),
                           spark.conf.get("spark.sql.session.timeZone"), _bounded_writers(plan))
    # once: the panes and the events are both read from it
    both = stored.mapInPandas(explainer, schema).localCheckpoint()
    keys = list(plan.stages.key_columns)
    aggs = [alias for alias, _, _ in processor.aggs]
    panes = both.where(F.col(ROW_KIND) != EVENT).select(
        *keys, *aggs, *_times("window_start", "window_end", "emit_time"), "pane_index",
        "is_retraction")
    events = both.where(F.col(ROW_KIND) == EVENT).select(
        *keys, *_times("window_start", "window_end"), F.timestamp_micros("__at").alias("at"),
        F.col("__event").alias("event"), *_times("__wm", "__etime"), "__ev_index",
        "__ev_timing", F.col("__detail").alias("detail"), "__reason", "__seq")
    return in_order(plan, with_values(plan, panes, events), where, source)


def _times(*names: str) -> list:
    from pyspark.sql import functions as F  # noqa: N812

    return [F.timestamp_micros(n).alias(n) for n in names]


def _bounded_writers(plan: BlockView) -> tuple | None:
    """A bounded WATERMARK FROM … BY writer table's rows (writer, processing time, noted
    time; µs), which name the writer holding the watermark (a stream's are in the
    state); None for every other watermark."""
    wm = plan.clauses.watermark
    if not isinstance(wm, c.WatermarkFrom) or wm.writer is None or \
            door.table(plan.spark, wm.table).isStreaming:
        return None
    t = watermark_table(plan, wm).toArrow()
    return t.column(0).to_pylist(), us(t.column(1), null=0), us(t.column(2), null=0)
