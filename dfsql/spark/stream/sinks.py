"""Where a live stream's panes go: ``dfsql.start`` and the retraction-applying table sink.

A file directory uses Spark's own file sink (exactly once: the sink's log and the
checkpoint commit together). Memory uses Spark's memory sink. Console and a callable get
each micro-batch in docs/reference.md#output-columns's changelog order (``foreachBatch``; a callable is
handed ``(batch DataFrame, batch_id)`` and must itself be idempotent per batch_id to keep
exactly once). :class:`TableSink` keeps the current value of every live window.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dfsql.language.names import LATE_ROW, SORT_COLUMNS
from dfsql.session import setting_while
from dfsql.spark.replay.ordering import sort_columns
from dfsql.spark.stream.checkpoint import FILE_MANAGER_CONF, file_manager_for
from dfsql.spark.stream.restate import LoggedDirectory

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def in_changelog_order(batch: DataFrame, order_by: tuple[str, ...] | None) -> DataFrame:
    """One micro-batch (a bounded DataFrame) in §7's order, the hidden columns dropped."""

    if order_by:
        # one task sorts (a micro-batch's panes are few); no range exchange, whose
        # sampling job would run the stateful operator a second time
        batch = batch.repartition(1).sortWithinPartitions(*sort_columns(order_by))
    return batch.drop(*SORT_COLUMNS)


#: A micro-batch cancelled while Spark computes it (its query stopped: ALTER STREAMING
#: QUERY, STOP) fails in ``toPandas`` as it must, and pyspark then warns with Spark's whole
#: Java stack, printed into the user's program. The batch runs again from the checkpoint,
#: or never, as the stop decides: the warning says nothing a user can act on, and the
#: error itself still raises. (A filter for the process: ``catch_warnings`` around each
#: call is not thread-safe, and batches of several queries convert at once.)
QUIET = "toPandas attempted Arrow optimization"
warnings.filterwarnings("ignore", message=QUIET, category=UserWarning)


def batch_rows(batch: DataFrame):
    """A micro-batch's rows in pandas (see the filter above)."""
    return batch.toPandas()


class TableSink:
    """A table that always holds the current row of every live window: each micro-batch's
    retractions delete the rows they retract and its panes replace their window's row,
    in changelog order (so ``+EARLY -EARLY +ON_TIME`` leaves the ON_TIME row, and a
    session merged away leaves nothing). The table is a temp view ``name``; with ``path``
    it is also written there after every batch, with the batch id, so a restarted query
    resumes from it and a batch replayed after a crash is applied once.

    A sink that ``replaces`` another's table (ALTER STREAMING QUERY's next version) leaves
    the view the other published until its own first batch publishes the restated table
    (readers never see no rows between the two); ``previous``, the other's kept table,
    is what it publishes before that batch when the view is gone (a restart)."""

    def __init__(self, name: str, path: str | None = None, global_view: bool = False,
                 replaces: bool = False, previous: str | None = None) -> None:
        self.name = name
        self.path = path
        #: publish as ``global_temp.<name>`` (every session of the application sees it)
        self.global_view = global_view
        self.replaces = replaces
        self.previous = previous
        self.current = None  # pandas DataFrame
        self.last_batch = -1
        #: the first batch and :meth:`publish_initial` (another thread) race to register
        #: the view: the initial view must not replace a batch's
        self._publishing = threading.Lock()
        self._published = False

    def _load(self) -> None:
        import json
        import os

        import pandas as pd

        with self._publishing:  # the query's thread and publish_initial's: read once
            if self.current is not None or not self.path:
                return
            meta = os.path.join(self.path, "_batch.json")
            if os.path.exists(meta):
                with open(meta) as f:
                    self.last_batch = json.load(f)["batch_id"]
                self.current = pd.read_parquet(os.path.join(self.path, "table.parquet"))

    def receiver(self, keys: tuple[str, ...], spark) -> Callable[[DataFrame, int], None]:
        """What each micro-batch of a query goes to: ``keys`` are the output columns that
        select a group key (with the window, a row's identity); the view is registered in
        ``spark``, the query's own session (a foreachBatch batch belongs to a clone whose
        temp views nobody else sees)."""
        return lambda batch, batch_id: self._apply(batch, batch_id, list(keys), spark)

    def _apply(self, batch: DataFrame, batch_id: int, keys: list[str], spark) -> None:
        import pandas as pd

        self._load()
        if batch_id <= self.last_batch:  # applied before a crash: once only
            self._publish(spark, batch)
            return
        rows = batch_rows(batch)
        ident = [*keys, "window_start", "window_end"]  # one live window
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
        # table first, then the batch id, each by rename: killed between the two, the
        # table holds the batch and the id the one before; the batch, replayed from the
        # checkpoint, is then applied again, which changes nothing (its rows replace their
        # windows' rows: twice is once)
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
        self._register(df)

    def _register(self, df: DataFrame, initial: bool = False) -> None:
        with self._publishing:
            if initial and self._published:  # a batch came first: its view stays
                return
            self._published = True
            if self.global_view:
                df.createOrReplaceGlobalTempView(self.name)
            else:
                df.createOrReplaceTempView(self.name)

    def publish_initial(self, spark, schema) -> None:
        """The view before the query's first batch: the table kept at ``path`` (a
        restarted query's rows before the restart), else no rows; the panes' columns."""
        from pyspark.sql.types import StructType

        self._load()
        if self.replaces and self.current is None:  # the old table until the restated one
            self._publish_previous(spark)
            return
        fields = StructType([f for f in schema.fields if f.name != "is_retraction"])
        rows = self.current if self.current is not None and len(self.current) else []
        self._register(spark.createDataFrame(rows, fields), initial=True)

    def _publish_previous(self, spark) -> None:
        """The replaced table, kept at ``previous``, when no view shows it (a restarted
        process); the view as it is, when one does."""
        import os

        import pandas as pd

        table = os.path.join(self.previous or "", "table.parquet")
        shown = spark.catalog.tableExists(f"global_temp.{self.name}" if self.global_view
                                          else self.name)
        if shown or not self.previous or not os.path.exists(table):
            return
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import from_arrow_schema

        rows = pd.read_parquet(table)
        schema = from_arrow_schema(pq.read_schema(table))
        self._register(spark.createDataFrame(rows if len(rows) else [], schema),
                       initial=True)


class AppendView:
    """A temp view that grows by each micro-batch's rows, once per batch id: a stream's
    LATE ROWS INTO side sink (and, beside it, a "memory" sink). Kept in the driver's
    memory, as Spark's memory sink is."""

    def __init__(self, name: str, spark, schema) -> None:
        self.name = name
        self.spark = spark
        self.schema = schema
        self.frames: list = []
        self.last_batch = -1
        self._publish()

    def append(self, batch: DataFrame, batch_id: int) -> None:
        if batch_id <= self.last_batch:  # a batch replayed after a failure: once only
            return
        rows = batch_rows(batch)
        if len(rows):
            self.frames.append(rows)
            self._publish()
        self.last_batch = batch_id

    def _publish(self) -> None:
        import pandas as pd

        if self.frames:
            df = self.spark.createDataFrame(pd.concat(self.frames, ignore_index=True),
                                            schema=self.schema)
        else:
            df = self.spark.createDataFrame([], self.schema)
        df.createOrReplaceTempView(self.name)


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


def start_stream(df: DataFrame, order_by: tuple[str, ...] | None, sink: Any,
                 checkpoint: str | None, trigger: dict | None, name: str | None,
                 late_view: str | None = None, state_store: str | None = None,
                 key_names: tuple[str, ...] = ()):
    """Start ``df`` (a stream with its hidden sort columns) into ``sink``; with
    ``late_view``, each batch's dropped rows (the hidden LATE_ROW column) go to that
    temp view instead, in the same query (one stateful operator, one checkpoint). With
    ``state_store``, the query starts on that state store provider (the session keeps
    its own: a query runs on its own copy of the settings). ``key_names``: the output
    columns that select a group key (a :class:`TableSink` keeps one row per key and
    window)."""
    spark = df.sparkSession
    with setting_while(spark, STORE_CONF, state_store), \
            setting_while(spark, FILE_MANAGER_CONF, file_manager_for(spark, checkpoint)):
        if late_view:
            return _start_with_late_rows(df, order_by, sink, checkpoint, trigger, name,
                                         late_view, key_names)
        return _start(df, order_by, sink, checkpoint, trigger, name, key_names)


#: the session setting that names the streaming state store provider
STORE_CONF = "spark.sql.streaming.stateStore.providerClass"


def _start(df: DataFrame, order_by: tuple[str, ...] | None, sink: Any,
           checkpoint: str | None, trigger: dict | None, name: str | None,
           key_names: tuple[str, ...]):
    visible = df.drop(*SORT_COLUMNS)
    if isinstance(sink, TableSink):
        sink.publish_initial(df.sparkSession, visible.schema)
        receive = sink.receiver(key_names, df.sparkSession)
        writer = df.writeStream.foreachBatch(
            lambda b, i: receive(in_changelog_order(b, order_by), i))
    elif callable(sink):
        writer = df.writeStream.foreachBatch(
            lambda b, i: sink(in_changelog_order(b, order_by), i))
    elif sink == "console":
        writer = df.writeStream.foreachBatch(
            lambda b, i: in_changelog_order(b, order_by).show(1000, truncate=False))
    elif isinstance(sink, LoggedDirectory):  # a changed query's: Spark's log, its own ids
        writer = df.writeStream.foreachBatch(lambda b, i: sink.write(b.drop(*SORT_COLUMNS), i))
    elif sink == "memory":
        writer = visible.writeStream.format("memory").queryName(name or "dfsql_panes")
    else:  # a directory: Spark's file sink (parquet), exactly once
        writer = visible.writeStream.format("parquet").option("path", str(sink))
    return _finish(writer, sink, checkpoint, trigger, name)


def _finish(writer, sink: Any, checkpoint: str | None, trigger: dict | None,
            name: str | None):
    writer = writer.outputMode("append")
    if checkpoint:
        writer = writer.option("checkpointLocation", str(checkpoint))
    if name and sink != "memory":
        writer = writer.queryName(name)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def _start_with_late_rows(df: DataFrame, order_by: tuple[str, ...] | None, sink: Any,
                          checkpoint: str | None, trigger: dict | None, name: str | None,
                          late_view: str, key_names: tuple[str, ...]):
    """Every sink through ``foreachBatch``: each batch is split into its dropped rows
    (appended to ``late_view``) and its panes (to ``sink``). A directory gets each batch
    as files named after it; "memory" a growing temp view ``name``."""

    spark = df.sparkSession
    late_schema = df.schema[LATE_ROW].dataType
    side = AppendView(late_view, spark, late_schema)
    panes_schema = df.drop(*SORT_COLUMNS, LATE_ROW).schema
    if isinstance(sink, TableSink):
        sink.publish_initial(spark, panes_schema)
        deliver = sink.receiver(key_names, spark)
    elif isinstance(sink, LoggedDirectory):
        deliver = sink.write
    elif callable(sink):
        deliver = sink
    elif sink == "console":
        def deliver(b, _i):
            b.show(1000, truncate=False)
    elif sink == "memory":
        deliver = AppendView(name or "dfsql_panes", spark, panes_schema).append
    else:
        path = str(sink)

        def deliver(b, i):
            _write_batch_files(b, path, i)

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()  # read twice: its panes and its dropped rows
        try:
            side.append(batch.where(f"{LATE_ROW} IS NOT NULL").select(f"{LATE_ROW}.*"),
                        batch_id)
            deliver(in_changelog_order(batch.where(f"{LATE_ROW} IS NULL").drop(LATE_ROW),
                                       order_by), batch_id)
        finally:
            batch.unpersist()

    writer = df.writeStream.foreachBatch(each_batch)
    return _finish(writer, "foreach", checkpoint, trigger, name)
