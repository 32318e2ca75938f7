"""Where a live stream's panes go: ``dfsql.start`` and the retraction-applying table sink.

A file directory uses Spark's own file sink (exactly once: the sink's log and the
checkpoint commit together). Memory uses Spark's memory sink. Console and a callable get
each micro-batch in LANGUAGE.md §7's changelog order (``foreachBatch``; a callable is
handed ``(batch DataFrame, batch_id)`` and must itself be idempotent per batch_id to keep
exactly once). :class:`TableSink` keeps the current value of every live window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dfsql.language.names import SORT_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def in_changelog_order(batch: DataFrame, order_by: tuple[str, ...] | None) -> DataFrame:
    """One micro-batch (a bounded DataFrame) in §7's order, the hidden columns dropped."""
    from dfsql.spark.ordering import sort_columns

    if order_by:
        # one task sorts (a micro-batch's panes are few); no range exchange, whose
        # sampling job would run the stateful operator a second time
        batch = batch.repartition(1).sortWithinPartitions(*sort_columns(order_by))
    return batch.drop(*SORT_COLUMNS)


class TableSink:
    """A table that always holds the current row of every live window: each micro-batch's
    retractions delete the rows they retract and its panes replace their window's row,
    in changelog order (so ``+EARLY -EARLY +ON_TIME`` leaves the ON_TIME row, and a
    session merged away leaves nothing). The table is a temp view ``name``; with ``path``
    it is also written there after every batch, with the batch id, so a restarted query
    resumes from it and a batch replayed after a crash is applied once."""

    def __init__(self, name: str, path: str | None = None) -> None:
        self.name = name
        self.path = path
        self.current = None  # pandas DataFrame
        self.last_batch = -1
        self.keys: list[str] = []
        #: the session the view is registered in (the query's own session: a
        #: foreachBatch batch belongs to a clone whose temp views nobody else sees)
        self.spark = None

    def _load(self) -> None:
        import json
        import os

        import pandas as pd

        if self.current is not None or not self.path:
            return
        meta = os.path.join(self.path, "_batch.json")
        if os.path.exists(meta):
            with open(meta) as f:
                self.last_batch = json.load(f)["batch_id"]
            self.current = pd.read_parquet(os.path.join(self.path, "table.parquet"))

    def apply(self, batch: DataFrame, batch_id: int) -> None:
        import pandas as pd

        spark = self.spark or batch.sparkSession
        self._load()
        if batch_id <= self.last_batch:  # applied before a crash: once only
            self._publish(spark, batch)
            return
        rows = batch.toPandas()
        ident = [*self.keys, "window_start", "window_end"]  # one live window
        if self.current is None:
            self.current = rows.iloc[0:0].drop(columns=["is_retraction"])
        # the last change of each window in this batch decides its row
        last = rows.drop_duplicates(subset=ident, keep="last")
        touched = last[ident]
        merged = self.current[ident].merge(touched.assign(__t=True), on=ident, how="left")
        kept = self.current[merged["__t"].isna().to_numpy()]
        new = last[~last["is_retraction"]].drop(columns=["is_retraction"])
        self.current = pd.concat([kept, new], ignore_index=True)
        self.last_batch = batch_id
        self._persist()
        self._publish(spark, batch)

    def _persist(self) -> None:
        import json
        import os

        if not self.path:
            return
        os.makedirs(self.path, exist_ok=True)
        tmp = os.path.join(self.path, "table.parquet.tmp")
        self.current.to_parquet(tmp, index=False)
        os.replace(tmp, os.path.join(self.path, "table.parquet"))
        with open(os.path.join(self.path, "_batch.json.tmp"), "w") as f:
            json.dump({"batch_id": self.last_batch}, f)
        os.replace(os.path.join(self.path, "_batch.json.tmp"),
                   os.path.join(self.path, "_batch.json"))

    def _publish(self, spark, batch: DataFrame) -> None:
        schema = batch.drop("is_retraction").schema
        df = spark.createDataFrame(self.current, schema=schema) if len(self.current) else \
            spark.createDataFrame([], schema)
        df.createOrReplaceTempView(self.name)


def key_names(order_by: tuple[str, ...] | None) -> list[str]:
    """The GROUP BY keys' output names, as §7's default order lists them after emit_time."""
    rest = {"window_start", "is_retraction DESC", "pane_index",
            "pane_index + CAST(is_retraction AS INT)", *SORT_COLUMNS}
    return [o.strip("`") for o in (order_by or ())[1:] if o not in rest]


def start_stream(df: DataFrame, order_by: tuple[str, ...] | None, sink: Any, checkpoint: str | None, trigger: dict | None,
                 name: str | None):
    """Start ``df`` (a stream with its hidden sort columns) into ``sink``."""
    visible = df.drop(*SORT_COLUMNS)
    if isinstance(sink, TableSink):
        sink.keys = key_names(order_by)
        sink.spark = df.sparkSession
        writer = df.writeStream.foreachBatch(
            lambda b, i: sink.apply(in_changelog_order(b, order_by), i))
    elif callable(sink):
        writer = df.writeStream.foreachBatch(
            lambda b, i: sink(in_changelog_order(b, order_by), i))
    elif sink == "console":
        writer = df.writeStream.foreachBatch(
            lambda b, i: in_changelog_order(b, order_by).show(1000, truncate=False))
    elif sink == "memory":
        writer = visible.writeStream.format("memory").queryName(name or "dfsql_panes")
    else:  # a directory: Spark's file sink (parquet), exactly once
        writer = visible.writeStream.format("parquet").option("path", str(sink))
    writer = writer.outputMode("append")
    if checkpoint:
        writer = writer.option("checkpointLocation", str(checkpoint))
    if name and sink != "memory":
        writer = writer.queryName(name)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
