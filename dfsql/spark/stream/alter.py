"""``ALTER STREAMING QUERY q AS <windowed query>`` on Spark (docs/guides/streams.md#continuous-queries-as-statements): what q
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
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dfsql.errors import AnalysisError, NotSupportedError, SourceError
from dfsql.language.continuous import Backfill
from dfsql.model.clauses import Accumulation
from dfsql.spark import door
from dfsql.spark.progress import say
from dfsql.spark.stream.backfill import stream_relations, unsupported
from dfsql.spark.stream.checkpoint import last_committed
from dfsql.spark.stream.restate import retractions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.scan import Source
    from dfsql.spark.planned import Planned
    from dfsql.spark.stream.sink import ReaderRows

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
    jdf = getattr(door.table(spark, name), "_jdf", None)
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

    done = last_committed(spark, checkpoint)
    if done < 0:
        return []
    try:
        lines = [r[0] for r in spark.read.text(f"{checkpoint.rstrip('/')}/{SOURCE_LOG}")
                 .collect()]
    except PySparkException:
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


def unread_history(backfill: str | None, files: tuple[str, ...]) -> Backfill:
    """A kept query's history named but not read (its restart after a completed
    micro-batch needs none of it): the first version's ``BACKFILL FROM`` (as Spark reads
    it) and the stream's ``files`` the versions before read. :func:`history_of` reads it
    should the query be changed again."""
    return Backfill(sql=backfill, skip=files, unread=True)


def history_of(spark: SparkSession, stream: FileStream, files: list[str],
               before: Backfill | None) -> Backfill:
    """A changed query's history: the history before (``BACKFILL FROM``'s relation, or
    what an earlier change gave, read now if :func:`unread_history`) and the stream's
    ``files`` read since; the stream goes on without any of them."""
    from functools import reduce

    from pyspark.sql.types import StructType

    if before is not None and before.unread:
        first = None if before.sql is None else Backfill(sql=before.sql)
        before = history_of(spark, stream, list(before.skip), first)
    skip = before.skip if before is not None else ()
    held = set(skip)
    frames = []
    if before is not None:
        frames.append(before.frame if before.frame is not None else door.sql(spark, before.sql))
    fresh = [f for f in files if f not in held]
    say(f"ALTER: the changed query's history: {len(fresh)} file(s) of {stream.name} read "
        "again" + (" after the running query's own history" if before is not None else ""))
    if fresh:
        frames.append(stream.read(spark, fresh))
    if not frames:  # nothing read yet: an empty history with the stream's columns
        frames.append(spark.createDataFrame([], StructType.fromJson(json.loads(stream.schema))))
    return Backfill(frame=reduce(lambda a, b: a.unionByName(b), frames),
                    skip=tuple(dict.fromkeys([*skip, *files])))


@dataclass(frozen=True)
class Change:
    """An ALTER STREAMING QUERY checked: the stream both queries read; what makes the new
    query's history once the old one has stopped; and, for a sink restated by
    retractions (a directory, a database table), what makes the restatement's
    retractions then (pandas rows of the sink's columns:
    :func:`dfsql.spark.stream.restate.retractions`)."""

    stream: str
    history: Callable[[], Backfill]
    retractions: Callable[[], object] | None = None


def check_change(new: Planned, old: Planned, checkpoint: str, history: Backfill | None,
                 source: Source, at: int, spark: SparkSession,
                 reader_rows: ReaderRows | None = None) -> Change:
    """The checks of ALTER STREAMING QUERY while the old query runs (each refusal placed
    at ``at`` in ``source``, the query untouched): the new query reads the old one's
    stream, can start from a history, and the files the old one read are all there; into
    a sink restated by retractions (``reader_rows``), both retract and write the same
    columns."""
    streams = [_streams(p, source, at, p is new) for p in (new, old)]
    if sorted(streams[0]) != sorted(streams[1]):
        raise source.error(SourceError, f"the changed query reads {', '.join(streams[0])}; "
                           f"the running one reads {', '.join(streams[1])}", at,
                           "a changed query reads the same stream (CREATE another query "
                           "for another stream)")
    was = streams[1][0]
    fs = file_stream(spark, was)

    def read_so_far() -> list[str]:
        """The files the query's completed micro-batches read, each still there."""
        files = None if fs is None else files_read(spark, checkpoint)
        if files is None:
            raise source.error(NotSupportedError, f"{was} cannot be read again: it is not a "
                               "stream of files, so the changed query could not be given "
                               "what the running one has read", at, "a query over a stream "
                               "of files (spark.readStream.parquet, csv, json …) can be "
                               "changed")
        gone = missing(spark, files)
        if gone:
            raise source.error(SourceError, f"{len(gone)} file(s) the query read are gone "
                               f"(the first: {gone[0]}): what it read cannot be read "
                               "again", at, "the query keeps running unchanged")
        return files

    say(f"ALTER: checking the change: {len(read_so_far())} file(s) of {was} read so far, "
        "each still there")  # checked before the old query stops, and again once it has
    if reader_rows is None:
        return Change(was, lambda: history_of(spark, fs, read_so_far(), history))
    _check_restatable(new, old, source, at, reader_rows.where)
    ob = old.blocks[-1]
    assert old.stream is not None and old.stream.state is not None
    keys = [(k, out) for k, out in zip(ob.plan.stages.key_columns,
                                       (g.output_name for g in ob.plan.stages.group_keys),
                                       strict=True) if out]
    return Change(was, lambda: replace(history_of(spark, fs, read_so_far(), history),
                                       restate=True),
                  lambda: retractions(spark, old.stream.state, checkpoint,  # type: ignore
                                      reader_rows, keys))


def _streams(planned: Planned, source: Source, at: int, changed: bool) -> list[str]:
    """The streams a planned query reads (the changed one: refused if it cannot start
    from a history)."""
    if planned.stream is None:
        raise source.error(SourceError, "ALTER STREAMING QUERY takes a windowed query over "
                           "the query's stream", at, "read the same stream")
    refused = unsupported(planned.blocks[-1].plan, "ALTER STREAMING QUERY")
    if refused is not None and changed:
        raise source.error(refused[2], refused[0], at, refused[1])
    return stream_relations(planned.blocks[-1].plan)


def _check_restatable(new: Planned, old: Planned, source: Source, at: int,
                      where: str) -> None:
    """A directory or a database table (``where``, as SHOW names it) is restated by retractions (docs/guides/streams.md#continuous-queries-as-statements): both queries retract,
    run in dfsql's bucket processor (whose state holds the windows to restate), and write
    the directory's columns (the results' own: a stream's hidden columns, such as LATE
    ROWS INTO's, are not the directory's)."""
    for planned, which in ((old, "the running query"), (new, "the changed query")):
        plan = planned.blocks[-1].plan
        if plan.clauses.accumulation is not Accumulation.ACCUMULATING_AND_RETRACTING:
            raise source.error(AnalysisError, f"{which} is EMIT {plan.clauses.accumulation}: "
                               f"{where} is restated by retracting the old rows, so "
                               "both queries must EMIT ACCUMULATING AND RETRACTING", at,
                               "add EMIT ACCUMULATING AND RETRACTING"
                               + (", or change an INTO TABLE query (restated whole)"
                                  if where.startswith("directory") else ""))
        if planned.stream is None or planned.stream.state is None:
            raise source.error(NotSupportedError, f"{which} runs on Spark's own streaming "
                               "aggregation, whose windows dfsql cannot read", at,
                               "give it PROCESSING TIME <arrival column>")
    cols = [planned.result.schema.simpleString() for planned in (new, old)]
    if cols[0] != cols[1]:
        raise source.error(AnalysisError, "the changed query's columns differ from the "
                           f"running one's ({cols[0]} against {cols[1]}): both write one "
                           f"{where}", at, "keep the SELECT list's names and types")
