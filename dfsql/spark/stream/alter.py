"""``ALTER STREAMING QUERY q AS <windowed query>`` on Spark (LANGUAGE.md §8c): what q
has read, read again, so that the new query starts from the state it would hold had it
run from the start.

q's stream must be a file source: its checkpoint's source log lists every file its
committed micro-batches read (the structure Spark keeps, not q's text), and Spark's plan
of the stream's relation says how to read them as a bounded table (its format, options
and schema). The new query then starts as a backfilled one (:mod:`dfsql.spark.stream.backfill`):
its history is q's own history and those files, and its stream goes on without them
(``input_file_name()``, per row, at the scan), so each row reaches it once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.language.continuous import Backfill
from dfsql.spark.stream.checkpoint import committed_batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the file source's log in a checkpoint (one source: the query's one stream)
SOURCE_LOG = "sources/0"


@dataclass(frozen=True)
class FileStream:
    """How a streaming relation's files are read as a bounded table."""

    name: str
    format: str
    options: dict
    schema: str  # JSON

    def read(self, spark: SparkSession, files: list[str]) -> DataFrame:
        from pyspark.sql.types import StructType

        opts = {k: v for k, v in self.options.items()
                if k.lower() not in ("path", "maxfilespertrigger", "maxbytespertrigger",
                                     "latestfirst", "maxfileage", "cleansource")}
        return spark.read.format(self.format).options(**opts) \
            .schema(StructType.fromJson(json.loads(self.schema))).load(files)


def file_stream(spark: SparkSession, name: str) -> FileStream | None:
    """The relation ``name`` as Spark's analysed plan has it, if it is one streaming
    file source (None: another source, a socket or Kafka, or several; or Spark Connect,
    whose plan this process does not hold)."""
    jdf = getattr(spark.table(name), "_jdf", None)
    if jdf is None:
        return None
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
    file_format = jvm.java.lang.Class.forName(
        "org.apache.spark.sql.execution.datasources.FileFormat")
    leaves = jdf.queryExecution().analyzed().collectLeaves()
    streams = []
    it = leaves.iterator()
    while it.hasNext():
        leaf = it.next()
        if leaf.isStreaming():
            streams.append(leaf)
    if len(streams) != 1 or streams[0].getClass().getSimpleName() != "StreamingRelation":
        return None
    source = streams[0].dataSource()
    if not file_format.isAssignableFrom(source.providingClass()) or \
            not source.userSpecifiedSchema().isDefined():
        return None
    options, kv = {}, source.options().iterator()
    while kv.hasNext():
        pair = kv.next()
        options[pair._1()] = pair._2()
    return FileStream(name, source.className(), options,
                      source.userSpecifiedSchema().get().json())


def files_read(spark: SparkSession, checkpoint: str) -> list[str] | None:
    """The files the committed micro-batches of the query at ``checkpoint`` read, in
    the order it read them (its file source's log, through its last committed batch);
    None when the log is not a file source's. [] before the first commit."""
    from pyspark.errors import PySparkException

    if not committed_batches(spark, checkpoint):
        return []
    base = checkpoint.rstrip("/")
    try:
        done = max(int(r[0].split("/")[-1]) for r in spark.read.format("binaryFile")
                   .load(f"{base}/commits").select("path").collect()
                   if r[0].split("/")[-1].isdigit())
        lines = [r[0] for r in spark.read.text(f"{base}/{SOURCE_LOG}").collect()]
    except (PySparkException, ValueError):
        return None
    seen: dict[str, int] = {}
    for line in lines:
        if line.startswith("v") and line[1:].isdigit():  # each log file's version line
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        if not isinstance(entry, dict) or "path" not in entry or "batchId" not in entry:
            return None
        if int(entry["batchId"]) <= done:
            seen.setdefault(entry["path"], int(entry["batchId"]))
    return sorted(seen, key=lambda p: (seen[p], p))


def missing(spark: SparkSession, files: list[str]) -> list[str]:
    """Those of ``files`` that are no longer there (asked of Hadoop's file system, which
    Spark reads them with)."""
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    gone = []
    for f in files:
        path = jvm.org.apache.hadoop.fs.Path(f)
        if not path.getFileSystem(conf).exists(path):
            gone.append(f)
    return gone


def history_of(spark: SparkSession, stream: FileStream, files: list[str],
               before: Backfill | None) -> Backfill:
    """A changed query's history: the history before (``BACKFILL FROM``'s relation, or
    what an earlier change gave) and the stream's ``files`` read since; the stream goes
    on without any of them."""
    from functools import reduce

    from pyspark.sql.types import StructType

    skip = before.skip if before is not None else ()
    held = set(skip)
    frames = []
    if before is not None:
        frames.append(before.frame if before.frame is not None else spark.sql(before.sql))
    fresh = [f for f in files if f not in held]
    if fresh:
        frames.append(stream.read(spark, fresh))
    if not frames:  # nothing read yet: an empty history with the stream's columns
        frames.append(spark.createDataFrame([], StructType.fromJson(json.loads(stream.schema))))
    return Backfill(frame=reduce(lambda a, b: a.unionByName(b), frames),
                    skip=tuple(dict.fromkeys([*skip, *files])))
