"""ALTER STREAMING QUERY of a query ``INTO DIRECTORY`` (docs/guides/streams.md#continuous-queries-as-statements): the directory
restated in one batch at the frontier T, then the new query's panes after it.

**The directory's log.** Spark's file sink lists every batch's files in a log beside them
(``_spark_metadata``); readers of the directory read only the files listed there. A new
query on the same directory with a checkpoint of its own would number its batches from
0 again, which the log already holds, and Spark's sink would skip them. So every version
after the first writes its batches with :class:`LoggedDirectory`: the files, then an
entry in the same log, written by Spark's own log class (its format and compaction),
numbered on from the log's last batch (``base``). That is exactly once as Spark's sink
is: a batch's files count once its entry is written; a batch replayed after a crash
finds its entry and is skipped; files written before a crash and never listed are not
read.

**The restatement.** The new query's first batch holds, at T, the retraction of the old
query's current row of every window it still holds and the new query's current row of
each of its windows (pane_timing RESTATED; the processor's ``restate``,
:class:`~dfsql.spark.stream.buckets.BucketProcessor`), then its panes from T on. Which
rows are current is the model's rule (:func:`~dfsql.model.changelog.current_at`: a
window merged away whose retraction is still to come counts; a closed or expired one
keeps its rows), applied to each query's run over its state
(:func:`~dfsql.spark.stream.live_state.current_panes`). The old query's rows are then
taken from the directory as a reader sees them (:func:`current_rows`), so a retraction
repeats the row it retracts.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dfsql.spark.progress import say
from dfsql.spark.stream.checkpoint import last_committed
from dfsql.spark.stream.live_state import STATE_VARIABLE, EachBucket, current_panes
from dfsql.spark.stream.sink import ReaderRows, Restated, Restatement

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter
    from pyspark.sql.types import StructType

#: Spark's file sink log, in the sink's directory
METADATA = "_spark_metadata"

#: a changed directory query's retractions, in its version's place (with a keeper)
RESTATEMENT = "restatement.parquet"


class LoggedDirectory:
    """A directory sink that goes on with Spark's file sink log from batch ``base`` on
    (see the module doc). ``first``: rows (pandas, the directory's columns) written with
    the query's first batch, in the same log entry: the retractions of a restatement."""

    def __init__(self, path: str, base: int, first=None) -> None:
        self.path = path.rstrip("/")
        self.base = base
        self.first = first

    #: its files are read as a changelog, whose readers order it: no sorting task
    #: (beside a LATE ROWS INTO side sink, every batch is ordered)
    changelog_order = False

    def __str__(self) -> str:  # what SHOW and CREATE's answer call the sink
        return self.path

    @classmethod
    def resumed(cls, path: str, base: int, place: str | None) -> LoggedDirectory:
        """A changed version's sink at a restart (``base``: the log entry the keeper
        recorded for its first batch), with its retractions while that batch has not
        committed (kept in ``place``: it restates again)."""
        return cls(path, base, retractions_kept(place))

    def restated(self, how: Restatement) -> Restated:
        """The next version goes on with this one's log (:func:`restated_directory`)."""
        return restated_directory(self.path, self.base, how)

    def native(self, visible: DataFrame, name: str | None) -> DataStreamWriter | None:
        return None  # Spark's log, its own batch ids

    def open(self, spark: SparkSession, schema: StructType, row_key: tuple[str, ...],
             name: str | None) -> None:
        pass  # the log says which batches it holds

    def commit(self, batch: DataFrame, batch_id: int) -> None:
        self.write(batch, batch_id)

    def write(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        log = _log(spark, self.path)
        entry = self.base + batch_id
        if _latest(log) >= entry:  # written before a crash: once only
            return
        if batch_id == 0 and self.first is not None and len(self.first):
            batch = spark.createDataFrame(self.first[batch.columns], batch.schema).union(batch)
        files = _write_files(spark, batch, self.path, entry)
        jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
        status = jvm.org.apache.spark.sql.execution.streaming.sinks.SinkFileStatus
        listed = spark.sparkContext._gateway.new_array(status, len(files))  # type: ignore[union-attr]
        for i, f in enumerate(files):
            listed[i] = status.apply(f)
        log.add(entry, listed)


def restated_directory(path: str, base: int, how: Restatement) -> Restated:
    """The changed query's sink over the directory ``path``, whose log the old query
    wrote from entry ``base`` on (0: Spark's own file sink): its batches go on with the
    log, the first with the retractions of the old query's current rows (kept in the new
    version's place with a keeper, for a restart before that batch commits). Refused
    (the old query then runs on) when the old query stopped between writing a batch and
    committing it: its state is a batch behind its rows."""
    latest = log_latest(how.spark, path)
    if latest - base > last_committed(how.spark, how.checkpoint):
        raise how.refuse(f"{how.name} stopped between writing a micro-batch and "
                         "committing it, so its state is a batch behind its directory; it "
                         "runs on unchanged", "run the ALTER again")
    return Restated(LoggedDirectory(path, latest + 1, kept_retractions(how)), latest + 1)


def kept_retractions(how: Restatement):
    """The restatement's retractions (pandas), kept in the changed version's place when
    it has one: a restart before its first batch commits restates again
    (:func:`retractions_kept`)."""
    assert how.retractions is not None
    first = how.retractions()
    if how.place is not None:
        os.makedirs(how.place, exist_ok=True)
        first.to_parquet(os.path.join(how.place, RESTATEMENT), index=False)
    return first


def retractions_kept(place: str | None):
    """The retractions :func:`kept_retractions` kept in ``place`` (None: none kept)."""
    if place is None or not os.path.exists(os.path.join(place, RESTATEMENT)):
        return None
    import pandas as pd

    return pd.read_parquet(os.path.join(place, RESTATEMENT))


def log_latest(spark: SparkSession, path: str) -> int:
    """The last batch the directory's log lists (-1: none, or no log)."""
    return _latest(_log(spark, path.rstrip("/")))


def _log(spark: SparkSession, path: str):
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
    sinks = jvm.org.apache.spark.sql.execution.streaming.sinks
    return sinks.FileStreamSinkLog(sinks.FileStreamSinkLog.VERSION(),
                                   spark._jsparkSession, f"{path}/{METADATA}",
                                   jvm.scala.Option.empty())


def _latest(log) -> int:
    found = log.getLatestBatchId()
    return int(found.get()) if found.isDefined() else -1


def _write_files(spark: SparkSession, batch: DataFrame, path: str, entry: int) -> list:
    """The batch's rows as parquet files in ``path`` (written aside, then moved in):
    their Hadoop file statuses."""
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    aside = f"{path}/_dfsql_batch_{entry}"
    batch.write.mode("overwrite").parquet(aside)
    hpath = jvm.org.apache.hadoop.fs.Path
    fs = hpath(path).getFileSystem(conf)
    moved = []
    for st in fs.listStatus(hpath(aside)):
        name = st.getPath().getName()
        if not name.startswith("part-"):
            continue
        target = hpath(path, name)
        if not fs.rename(st.getPath(), target):
            raise OSError(f"could not move {st.getPath()} to {target}")
        moved.append(fs.getFileStatus(target))
    fs.delete(hpath(aside), True)
    return moved


def retractions(spark: SparkSession, state: tuple, checkpoint: str, sink: ReaderRows,
                keys: list[tuple[str, str]]):
    """The restatement's first half (see the module doc): the sink's current row of
    every window the query at ``checkpoint`` still holds in its state, retracted at its
    frontier T; pandas rows of the sink's columns (a directory's, a database table's as
    a changelog). ``state``: its bucket processor and output schema; ``keys``: its group
    keys' (state column, sink column)."""
    from pyspark.sql import functions as F  # noqa: N812

    say(f"ALTER: restating {sink.where}: retracting the running query's current rows")
    processor, out_schema = state
    stored = spark.read.format("statestore").option("stateVarName", STATE_VARIABLE) \
        .load(checkpoint).select("value.*")
    live = stored.mapInPandas(EachBucket(current_panes, processor), out_schema).select(
        *[F.col(k).alias(f"__l{i}") for i, (k, _) in enumerate(keys)],
        F.timestamp_micros("window_start").alias("__lws"),
        F.timestamp_micros("window_end").alias("__lwe"), F.col("emit_time").alias("__lt")
    ).localCheckpoint()
    at = live.agg(F.max("__lt")).first()[0]
    rows = current_rows(sink.read(spark), [d for _, d in keys])
    if at is None:  # no window holds a current row: nothing to retract
        return rows.limit(0).toPandas()
    same = [rows[d].eqNullSafe(live[f"__l{i}"]) for i, (_, d) in enumerate(keys)]
    same += [rows["window_start"].eqNullSafe(live["__lws"]),
             rows["window_end"].eqNullSafe(live["__lwe"])]
    retracted = rows.join(live, same, "left_semi").withColumns({
        "is_retraction": F.lit(True), "emit_time": F.timestamp_micros(F.lit(int(at)))
    }).toPandas()
    say(f"ALTER: restating {sink.where}: {len(retracted)} row(s) retracted, written with the "
        "changed query's first micro-batch")
    return retracted


def current_rows(changelog: DataFrame, keys: list[str]) -> DataFrame:
    """The current row of each window of a retracting changelog (docs/reference.md (emit, output-columns)): its
    last row — by emit time, then pane index, a retraction after the row it retracts —
    unless that is a retraction (the window was merged away, or its pane no longer
    passes HAVING)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812

    last = Window.partitionBy(*keys, "window_start", "window_end").orderBy(
        F.col("emit_time").desc(), F.col("pane_index").desc(), F.col("is_retraction").desc())
    return changelog.withColumn("__n", F.row_number().over(last)) \
        .where((F.col("__n") == 1) & ~F.col("is_retraction")).drop("__n")
