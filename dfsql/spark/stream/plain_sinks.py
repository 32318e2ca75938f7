"""The sinks that keep nothing of their own (:class:`~dfsql.spark.stream.sink.Sink`):
Spark's memory and file sinks, the console and a Python callable; with a LATE ROWS INTO
side sink, memory is a growing temp view and a directory gets files named after each
batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dfsql.spark.stream.restate import restated_directory
from dfsql.spark.stream.table_sink import AppendView

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter
    from pyspark.sql.types import StructType

    from dfsql.spark.stream.sink import Restated, Restatement


class CallableSink:
    """A callable handed ``(batch DataFrame, batch_id)``; it must itself be idempotent
    per batch_id to keep exactly once."""

    changelog_order = True

    def __init__(self, receive: Callable[[DataFrame, int], None]) -> None:
        self.receive = receive

    def native(self, visible: DataFrame, name: str | None) -> DataStreamWriter | None:
        return None

    def open(self, spark: SparkSession, schema: StructType, row_key: tuple[str, ...],
             name: str | None) -> None:
        pass

    def commit(self, batch: DataFrame, batch_id: int) -> None:
        self.receive(batch, batch_id)


class ConsoleSink(CallableSink):
    """Each micro-batch printed."""

    def __init__(self) -> None:
        super().__init__(lambda b, _i: b.show(1000, truncate=False))


class MemorySink:
    """Spark's memory sink, a table ``name``; beside a side sink, a temp view ``name``
    growing by each batch (once per batch id)."""

    changelog_order = True

    def __init__(self) -> None:
        self.view: AppendView | None = None

    def native(self, visible: DataFrame, name: str | None) -> DataStreamWriter | None:
        return visible.writeStream.format("memory").queryName(name or "dfsql_panes")

    def open(self, spark: SparkSession, schema: StructType, row_key: tuple[str, ...],
             name: str | None) -> None:
        self.view = AppendView(name or "dfsql_panes", spark, schema)

    def commit(self, batch: DataFrame, batch_id: int) -> None:
        assert self.view is not None
        self.view.append(batch, batch_id)


class FileSink:
    """A directory: Spark's file sink (parquet; its log and the checkpoint commit
    together); beside a side sink, each batch as files named after it."""

    changelog_order = True

    def __init__(self, path: str) -> None:
        self.path = path

    def __str__(self) -> str:
        return self.path

    def restated(self, how: Restatement) -> Restated:
        """A first version's directory: the next version goes on with the log Spark's
        file sink wrote (from its entry 0; :func:`restated_directory`)."""
        return restated_directory(self.path, 0, how)

    def native(self, visible: DataFrame, name: str | None) -> DataStreamWriter | None:
        return visible.writeStream.format("parquet").option("path", self.path)

    def open(self, spark: SparkSession, schema: StructType, row_key: tuple[str, ...],
             name: str | None) -> None:
        pass

    def commit(self, batch: DataFrame, batch_id: int) -> None:
        _write_batch_files(batch, self.path, batch_id)


def _write_batch_files(batch: DataFrame, path: str, batch_id: int) -> None:
    """One micro-batch's rows as parquet files in ``path`` named after the batch, so a
    batch replayed after a crash replaces its own files (exactly once; local paths)."""
    import glob
    import os
    import shutil

    tmp = os.path.join(path, f"_dfsql_batch_{batch_id}")
    batch.write.mode("overwrite").parquet(tmp)
    for old in glob.glob(os.path.join(path, f"batch-{batch_id:010d}-*")):
        os.remove(old)
    for f in sorted(glob.glob(os.path.join(tmp, "part-*"))):
        os.replace(f, os.path.join(path, f"batch-{batch_id:010d}-{os.path.basename(f)}"))
    shutil.rmtree(tmp, ignore_errors=True)
