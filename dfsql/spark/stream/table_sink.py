"""The sinks that keep a table of their own (:class:`~dfsql.spark.stream.sink.Sink`):
:class:`TableSink` keeps the current value of every live window (``INTO TABLE``);
:class:`AppendView` a temp view growing by each batch (LATE ROWS INTO)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from dfsql.spark.stream.sink import Restated, batch_rows

#: the rows of the latest batches a table sink remembers as they came (:attr:`TableSink.recent`)
RECENT_ROWS = 5_000

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter
    from pyspark.sql.types import StructType

    from dfsql.spark.stream.sink import Restatement


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
        #: the panes and retractions of the latest batches, in changelog order, with
        #: their batch id (``__batch``): the table keeps a window's last row only, the
        #: console's pane timeline (:mod:`dfsql.server.console_data`) draws the ones
        #: before and the retractions; at most RECENT_ROWS rows, replaced whole
        self.recent = None  # pandas DataFrame
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

    changelog_order = True  # the last change of a window decides its row
    #: one row per window's key (the query's group keys must all be selected)
    keeps_current_rows = True

    def native(self, visible: DataFrame, name: str | None) -> DataStreamWriter | None:
        return None

    def open(self, spark: SparkSession, schema: StructType, row_key: tuple[str, ...],
             name: str | None) -> None:
        """The view before the first batch (:meth:`publish_initial`); each batch's view
        is registered in ``spark``, the query's own session."""
        self.publish_initial(spark, schema)
        self._receive = self.receiver(row_key, spark)

    def commit(self, batch: DataFrame, batch_id: int) -> None:
        self._receive(batch, batch_id)

    def restated(self, how: Restatement) -> Restated:
        """The changed query's table, in its version's place: it replaces this one, whose
        rows readers keep seeing (from this sink's ``path`` after a restart) until its
        first batch publishes the restated table."""
        return Restated(TableSink(self.name, path=how.place, global_view=self.global_view,
                                  replaces=True, previous=self.path))

    def receiver(self, keys: tuple[str, ...], spark) -> Callable[[DataFrame, int], None]:
        """What each micro-batch of a query goes to: ``keys`` are the output columns that
        identify a window's row (group keys and window); the view is registered in
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
        self._remember(rows, batch_id)
        ident = keys  # one live window
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

    def _remember(self, rows, batch_id: int) -> None:
        import pandas as pd

        new = rows.tail(RECENT_ROWS).assign(__batch=batch_id)
        old = self.recent
        self.recent = new if old is None else \
            pd.concat([old, new], ignore_index=True).tail(RECENT_ROWS)

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
