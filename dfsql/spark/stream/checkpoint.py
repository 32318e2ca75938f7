"""What a stream's checkpoint fixed at its first start, and a restart must keep.

dfsql's bucket processor keys its state by a bucket of user keys, ``pmod(hash(keys),
buckets)``, and the number of buckets is the session's ``spark.sql.shuffle.partitions``
when the query is planned (:func:`dfsql.spark.stream.plan.stream_panes`). Spark fixes its
own state partitions at a query's first start and restores them from the checkpoint on
every restart; a restart whose session says another number would put a key in another
bucket than the one its state is in, and its windows would start again from nothing
(sessions split, elements lost: wrong numbers, silently). So a restart plans with the
number the checkpoint recorded, as Spark runs with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from dfsql.session import setting_while, spark_context

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def recorded_shuffle_partitions(spark, checkpoint: str | None) -> int | None:
    """The shuffle partitions a query's checkpoint recorded at its first start (each
    offset log entry's metadata carries them), or None: no checkpoint, or none written
    yet. Read through Spark, so any file system Spark reads serves."""
    if not checkpoint:
        return None
    # the metadata line of an entry: {"batchWatermarkMs": …} (none: a first start)
    for line in _log_lines(spark, checkpoint, "offsets", 20, "value LIKE '{%'"):
        try:
            conf = json.loads(line).get("conf", {})
        except (ValueError, AttributeError):
            continue  # an offset of a source, not the metadata
        if SHUFFLE_PARTITIONS in conf:
            return int(conf[SHUFFLE_PARTITIONS])
    return None


@contextmanager
def as_recorded(spark, checkpoint: str | None) -> Iterator[int | None]:
    """Plan and start a query on the shuffle partitions its checkpoint recorded (the
    session's own setting is put back afterwards); yields that number, or None on a
    first start (the session's setting then becomes the checkpoint's)."""
    recorded = recorded_shuffle_partitions(spark, checkpoint)
    with setting_while(spark, SHUFFLE_PARTITIONS, None if recorded is None else str(recorded)):
        yield recorded


def committed_batches(spark, checkpoint: str) -> bool:
    """Whether the query at ``checkpoint`` has committed a micro-batch (its commit log
    has an entry)."""
    return bool(_log_lines(spark, checkpoint, "commits", 1))


def last_committed(spark, checkpoint: str) -> int:
    """The last micro-batch the query at ``checkpoint`` committed (-1: none), from its
    commit log's file names, listed through Spark."""
    from pyspark.errors import PySparkException

    try:
        names = [r[0].rstrip("/").split("/")[-1] for r in spark.read.format("binaryFile")
                 .load(f"{checkpoint.rstrip('/')}/commits").select("path").collect()]
    except PySparkException:
        return -1
    return max((int(n) for n in names if n.isdigit()), default=-1)


def _log_lines(spark, checkpoint: str, log: str, limit: int,
               where: str | None = None) -> list[str]:
    """Up to ``limit`` lines of the checkpoint's ``log`` (``offsets``, ``commits``),
    read through Spark, so any file system Spark reads serves ([]: no such log yet)."""
    from pyspark.errors import PySparkException

    try:
        df = spark.read.text(f"{checkpoint.rstrip('/')}/{log}")
        return [r[0] for r in (df.where(where) if where else df).limit(limit).collect()]
    except PySparkException:
        return []


#: the session setting that names the class Spark writes a stream's checkpoint with
FILE_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
#: Spark's checkpoint writer through Hadoop's FileSystem API
FILE_SYSTEM_MANAGER = ("org.apache.spark.sql.execution.streaming.checkpointing."
                       "FileSystemBasedCheckpointFileManager")


def file_manager_for(spark, checkpoint: str | None) -> str | None:
    """The checkpoint writer for a query whose checkpoint is on the local disk: Spark's
    FileSystem-based one; None (Spark's choice) anywhere else.

    Spark's default writes through Hadoop's FileContext, whose rename asks the local file
    system for each path's link status, and without Hadoop's native library (a pip
    install has none) that is a ``readlink`` process per path: measured here, two thirds
    of the 50 processes a micro-batch's JVM starts, about 4 ms each. The FileSystem API
    renames with ``rename(2)``, atomic and overwriting on a local disk; on HDFS or an
    object store its rename does not overwrite, so Spark's choice stays there. A path
    without a scheme is local only when the default file system is; without a
    SparkContext (Spark Connect) it cannot be told, and Spark chooses."""
    sc = spark_context(spark)
    if sc is None:
        return None
    first = (checkpoint or "").split("/", 1)[0]  # "file:", "hdfs:", or no scheme
    where = first if ":" in first else sc._jsc.hadoopConfiguration().get("fs.defaultFS")
    return FILE_SYSTEM_MANAGER if (where or "file:").startswith("file:") else None
