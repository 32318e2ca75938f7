"""Where a live stream's panes go: ``dfsql.start``'s sink argument made a
:class:`~dfsql.spark.stream.sink.Sink` (:func:`as_sink`), and the query started into it.

A file directory uses Spark's own file sink (exactly once: the sink's log and the
checkpoint commit together). Memory uses Spark's memory sink. Console and a callable get
each micro-batch in docs/reference.md#output-columns's changelog order (``foreachBatch``; a callable is
handed ``(batch DataFrame, batch_id)`` and must itself be idempotent per batch_id to keep
exactly once). :class:`TableSink` keeps the current value of every live window.
CREATE STREAMING QUERY's ``INTO`` words become a sink here too (:func:`statement_into`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dfsql.connections import CONNECTIONS
from dfsql.language.continuous import string_literal
from dfsql.language.names import LATE_ROW, SORT_COLUMNS
from dfsql.language.scan import quoted_name
from dfsql.session import setting_while
from dfsql.spark.replay.ordering import sort_columns
from dfsql.spark.stream.checkpoint import FILE_MANAGER_CONF, file_manager_for
from dfsql.spark.stream.plain_sinks import CallableSink, ConsoleSink, FileSink, MemorySink
from dfsql.spark.stream.postgres_sink import PostgresChangelog, PostgresTable
from dfsql.spark.stream.restate import LoggedDirectory
from dfsql.spark.stream.sink import ReaderRows, Sink, batch_rows
from dfsql.spark.stream.table_sink import AppendView, TableSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["AppendView", "STORE_CONF", "Into", "TableSink", "as_sink", "batch_rows",
           "in_changelog_order", "start_stream", "statement_into"]


def in_changelog_order(batch: DataFrame, order_by: tuple[str, ...] | None) -> DataFrame:
    """One micro-batch (a bounded DataFrame) in §7's order, the hidden columns dropped."""

    if order_by:
        # one task sorts (a micro-batch's panes are few); no range exchange, whose
        # sampling job would run the stateful operator a second time
        batch = batch.repartition(1).sortWithinPartitions(*sort_columns(order_by))
    return batch.drop(*SORT_COLUMNS)


def as_sink(sink: Any) -> Sink:
    """The one place a sink argument becomes a :class:`Sink`: one already (a
    :class:`TableSink`, a :class:`~dfsql.spark.stream.restate.LoggedDirectory`, a new
    kind), a callable, ``"console"``, ``"memory"``, else a directory's path."""
    if isinstance(sink, Sink):
        return sink
    if callable(sink):
        return CallableSink(sink)
    if sink == "console":
        return ConsoleSink()
    if sink == "memory":
        return MemorySink()
    return FileSink(str(sink))


@dataclass(frozen=True)
class Into:
    """A CREATE STREAMING QUERY's ``INTO`` words, read by the sink layer once
    (:func:`statement_into`): how SHOW names the sink, what it needs, and its sink."""

    #: what SHOW STREAMING QUERIES and CREATE's answer call the sink
    where: str
    #: the ``INTO`` clause as a changed version's statement writes it again
    clause: str
    #: how a change reads the sink to restate it by retractions (None: restated whole)
    reader_rows: ReaderRows | None
    #: ``(message, hint)`` refusing the sink over Spark Connect (None: it runs there)
    classic_only: tuple[str, str] | None
    #: the sink, from ``(place, changed, log_base, previous)``: the query's place with a
    #: keeper; whether it is a changed version (ALTER's, at its start or a restart); the
    #: log entry the keeper recorded for its first batch (:class:`~dfsql.spark.stream.
    #: sink.Restated`); the version before's place, until its first batch
    build: Callable[[str | None, bool, int | None, str | None], Sink]

    def sink(self, place: str | None, changed: bool = False, log_base: int | None = None,
             previous: str | None = None) -> Sink:
        return self.build(place, changed, log_base, previous)


def statement_into(name: str, into: str, path: str | None,
                   target: tuple[str, str, str] | None = None) -> Into:
    """The one place CREATE STREAMING QUERY's ``INTO TABLE`` / ``INTO DIRECTORY 'path'``
    (``into``: the statement's ``sink``, "table" or "directory") becomes a sink for the
    query ``name`` (docs/guides/streams.md#continuous-queries-as-statements): a table is
    a :class:`TableSink` (``global_temp.<name>``) that a changed version ``replaces``; a
    directory is Spark's file sink, a changed version's a
    :class:`~dfsql.spark.stream.restate.LoggedDirectory` going on with its log."""
    if into in ("database", "changelog"):
        return _database_into(name, target, into == "changelog")
    if into == "directory":
        return Into(f"directory {path}", f" INTO DIRECTORY {string_literal(str(path))}",
                    ReaderRows(f"directory {path}",
                               lambda spark: spark.read.parquet(str(path))), None, lambda place, changed, log_base, previous:
                    FileSink(str(path)) if log_base is None
                    else LoggedDirectory.resumed(str(path), log_base, place))
    return Into(f"table global_temp.{name}", "", None,
                ("INTO TABLE is not supported over Spark Connect yet: the table's sink is a "
                 "function of this process, which a Spark Connect server does not run",
                 "write the panes INTO DIRECTORY '<path>' (Spark's file sink)"),
                lambda place, changed, log_base, previous:
                TableSink(name, path=place, global_view=True, replaces=changed,
                          previous=previous))


def _database_into(name: str, target: tuple[str, str, str] | None, changelog: bool) -> Into:
    """``INTO TABLE NAME.schema.table``: a :class:`~dfsql.spark.stream.postgres_sink.
    PostgresTable` over the connection ``NAME`` (docs/guides/databases.md); ``INTO
    CHANGELOG``: a :class:`~dfsql.spark.stream.postgres_sink.PostgresChangelog`. A changed
    version goes on with the table, restated by retractions, its progress ids numbered on
    from ``log_base``."""
    assert target is not None
    conn_name, schema, table = target
    conn = CONNECTIONS.named(conn_name)
    written = ".".join(quoted_name(p) for p in target)
    kind, sink = ("changelog", PostgresChangelog) if changelog else ("table", PostgresTable)
    where = f"{kind} {conn.name}.{schema}.{table}"
    return Into(where, f" INTO {kind.upper()} {written}",
                ReaderRows(where, lambda spark: sink.as_changelog(spark, conn, schema, table)),
                (f"INTO {kind.upper()} NAME.schema.table is not supported over Spark "
                 "Connect yet: "
                 "its transactions are this process's, which a Spark Connect server does "
                 "not run", "run dfsql on classic Spark"),
                lambda place, changed, log_base, previous:
                sink.resumed(conn, schema, table, name, log_base, place))


def start_stream(df: DataFrame, order_by: tuple[str, ...] | None, sink: Any,
                 checkpoint: str | None, trigger: dict | None, name: str | None,
                 late_view: str | None = None, state_store: str | None = None,
                 row_key: tuple[str, ...] = ()):
    """Start ``df`` (a stream with its hidden sort columns) into ``sink``; with
    ``late_view``, each batch's dropped rows (the hidden LATE_ROW column) go to that
    temp view instead, in the same query (one stateful operator, one checkpoint). With
    ``state_store``, the query starts on that state store provider (the session keeps
    its own: a query runs on its own copy of the settings). ``row_key``: the output
    columns that identify a window's row (a :class:`TableSink` keeps one row per key and
    window)."""
    spark = df.sparkSession
    with setting_while(spark, STORE_CONF, state_store), \
            setting_while(spark, FILE_MANAGER_CONF, file_manager_for(spark, checkpoint)):
        target = as_sink(sink)
        if late_view:
            writer = _with_late_rows(df, order_by, target, late_view, row_key, name)
        else:
            writer = _writer(df, order_by, target, row_key, name)
        return _finish(writer, checkpoint, trigger, name)


#: the session setting that names the streaming state store provider
STORE_CONF = "spark.sql.streaming.stateStore.providerClass"


def _writer(df: DataFrame, order_by: tuple[str, ...] | None, sink: Sink,
            row_key: tuple[str, ...], name: str | None):
    visible = df.drop(*SORT_COLUMNS)
    writer = sink.native(visible, name)
    if writer is not None:
        return writer
    sink.open(df.sparkSession, visible.schema, row_key, name)
    if sink.changelog_order:
        return df.writeStream.foreachBatch(
            lambda b, i: sink.commit(in_changelog_order(b, order_by), i))
    return df.writeStream.foreachBatch(lambda b, i: sink.commit(b.drop(*SORT_COLUMNS), i))


def _finish(writer, checkpoint: str | None, trigger: dict | None, name: str | None):
    writer = writer.outputMode("append")
    if checkpoint:
        writer = writer.option("checkpointLocation", str(checkpoint))
    if name:  # a memory sink's table has the same name
        writer = writer.queryName(name)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def _with_late_rows(df: DataFrame, order_by: tuple[str, ...] | None, sink: Sink,
                    late_view: str, row_key: tuple[str, ...], name: str | None):
    """Every sink through ``commit``: each batch is split into its dropped rows
    (appended to ``late_view``) and its panes (to ``sink``, in changelog order)."""

    spark = df.sparkSession
    side = AppendView(late_view, spark, df.schema[LATE_ROW].dataType)
    sink.open(spark, df.drop(*SORT_COLUMNS, LATE_ROW).schema, row_key, name)

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()  # read twice: its panes and its dropped rows
        try:
            side.append(batch.where(f"{LATE_ROW} IS NOT NULL").select(f"{LATE_ROW}.*"),
                        batch_id)
            sink.commit(in_changelog_order(batch.where(f"{LATE_ROW} IS NULL").drop(LATE_ROW),
                                           order_by), batch_id)
        finally:
            batch.unpersist()

    return df.writeStream.foreachBatch(each_batch)
