"""The statement pipeline: a statement (not a continuous-query statement) planned into
its :class:`~dfsql.spark.planned.Planned` value, and the calls a continuous query makes of
it: start its stream, read a running query's windows, check an ALTER.

It sits below :mod:`dfsql.continuous` and :mod:`dfsql.api`, which both call it, and
calls nothing above it: a CREATE VIEW whose body is windowed plans that body with this
pipeline too (docs/guides/streams.md#continuous-queries-as-statements).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql import streaming, system_tables
from dfsql.errors import AnalysisError, DfsqlError, SourceError
from dfsql.language import Statement, parse_any, parse_statement
from dfsql.language.continuous import ContinuousStatement
from dfsql.language.registered import CLAUSE_OF_FIELD, Defaulted, registered_defaults
from dfsql.language.rewrite import rewrite
from dfsql.language.scan import Scanned, Source, scan_text
from dfsql.model.triggers import batch_trigger_note
from dfsql.registrations import REGISTRATIONS
from dfsql.session import session
from dfsql.spark import door
from dfsql.spark.catalog import database_tables, views
from dfsql.spark.errors import quiet_spark_loggers, spark_errors
from dfsql.spark.plan import planner
from dfsql.spark.planned import Planned
from dfsql.spark.progress_bar import watching
from dfsql.spark.stream.sinks import STORE_CONF
from dfsql.warehouse import sync as sync_catalog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.continuous import Backfill
    from dfsql.spark.stream.sink import ReaderRows
    from dfsql.streaming import Change


def statement(stmt: Statement, spark: SparkSession) -> Planned:
    """:func:`dfsql.sql`'s statement planned and run: its Planned value, kept for its
    result (:func:`dfsql.spark.plan.planner.remember`) for the calls handed the
    DataFrame alone (``dfsql.dropped_late(df)``, ``dfsql.plot(df)``)."""
    text = stmt.written
    # once: parsing and finding the views it reads share it
    scanned = stmt.scanned if stmt.scanned is not None else scan_text(text)
    planned = _planned(stmt, text, scanned, spark)
    stores = {b.stream.state_store for b in planned.blocks if b.stream is not None} - {None}
    if stores:
        # the user starts this streaming DataFrame, on the session's settings: put the
        # session on the state store its stateful operator needs (dfsql.start does not).
        # The one setting dfsql leaves changed on a user's session, and it must stay:
        # Spark reads it when the query starts, after dfsql.sql has returned.
        planned.result.sparkSession.conf.set(STORE_CONF, stores.pop())
    planner.remember(planned)
    return planned


def _view_body(text: str, spark: SparkSession) -> DataFrame:
    """A persistent view's windowed body, planned as :func:`dfsql.sql` plans a
    statement: its columns are the view's. A continuous-query statement is no query a
    view can hold (it would start, list or stop streams)."""
    stmt = parse_any(text)
    if isinstance(stmt, ContinuousStatement):
        raise Source(text).error(AnalysisError, "a view's query cannot be a continuous-query "
                                 "statement", len(text) - len(text.lstrip()),
                                 "CREATE STREAMING QUERY … AS SELECT … FROM the view")
    return statement(stmt, spark).result


def _planned(stmt: Statement, text: str, scanned: Scanned, s: SparkSession,
             backfill: Backfill | None = None) -> Planned:
    """The one pipeline of :func:`statement` and :func:`start`: the catalog brought up to
    date, persistent windowed views expanded into their queries, the statement planned
    (``backfill``: the history of a continuous query's stream)."""
    sync_catalog(s)  # the tables and views other processes made, filled or dropped since
    # windowed views: their queries instead; database and system tables: their rows
    expanded = views.expand(text, s, scanned.tokens, system=system_tables.view_of)
    try:
        if expanded.spans:
            stmt = parse_statement(expanded.text)
        if stmt.kind == "create_view" and not stmt.view_temporary and \
                (stmt.windowed or expanded.spans):
            made = views.create_with(stmt, expanded, s, lambda body: _view_body(body, s))
            sync_catalog(s, stmt)  # its definition, for other processes
            return Planned(made)
        return _plan(stmt, expanded.text, s, backfill)
    except DfsqlError as err:
        raise expanded.remap(err) from None
    finally:
        database_tables.drop_views(s, expanded.made)


def _plan(stmt: Statement, text: str, s: SparkSession,
          backfill: Backfill | None = None) -> Planned:
    """The statement planned once: plain SQL as Spark's own DataFrame, EXPLAIN as its
    text, a windowed statement by :mod:`dfsql.spark.plan.planner` (the caller has brought the
    catalog up to date: :func:`~dfsql.warehouse.sync`)."""
    quiet_spark_loggers()
    into = database_tables.write_target(stmt, s) if stmt.kind == "write" else None
    if into is not None and not stmt.windowed:  # a windowed one: the planner writes it
        return Planned(database_tables.write(stmt, text, s, into))
    if not stmt.windowed and stmt.kind != "explain_firings":
        shown = views.show_create(stmt, s) if stmt.kind == "other" else None
        if shown is not None:
            return Planned(shown)
        with spark_errors(stmt.source, text=text):
            df = door.sql(s, text)
        sync_catalog(s, stmt)  # a table this statement made: its definition, for later runs
        return Planned(df)
    if stmt.kind == "explain":
        return Planned(s.createDataFrame([(explain_statement(stmt, s),)], "plan string"))
    planned = planner.execute(stmt, s, REGISTRATIONS.of(s), backfill)
    if stmt.kind == "write" and into is None:
        sync_catalog(s, stmt)  # the table the statement made or filled, for later runs
    return planned


def start(text: str | Statement, sink: object = "memory", checkpoint: str | None = None,
          trigger: dict | None = None, name: str | None = None,
          spark: SparkSession | None = None, backfill: object = None):
    """:func:`dfsql.start`: the windowed query planned once and its stream started into
    ``sink``; its StreamingQuery. In a terminal its progress shows as
    :func:`dfsql.sql`'s does (a continuous query's start, a kept one's restart too)."""
    with watching(lambda: spark if spark is not None else session()):
        return _start(text, sink, checkpoint, trigger, name, spark, backfill)


def _start(text: str | Statement, sink: object, checkpoint: str | None,
           trigger: dict | None, name: str | None, spark: SparkSession | None,
           backfill: object):
    stmt = parse_any(text) if isinstance(text, str) else text
    text = stmt.written
    scanned = stmt.scanned if stmt.scanned is not None else scan_text(text)
    if not isinstance(stmt, ContinuousStatement):
        s = spark if spark is not None else session()
        history = streaming.history(s, checkpoint, backfill)
        # a restart plans on the shuffle partitions its checkpoint fixed: they number
        # the buckets its state is kept in (dfsql.spark.stream.checkpoint)
        with streaming.as_recorded(s, checkpoint):
            planned = _planned(stmt, text, scanned, s, history)
            query = streaming.start_planned(planned, stmt, text, sink, checkpoint, trigger,
                                            name)
            if query is not None:
                return query
    raise SourceError("dfsql.start runs a windowed query over a streaming source", 1, 1,
                      "read the source with spark.readStream and register it as a view; "
                      "for a bounded table use dfsql.sql")


def explain_running(query: Statement | str, checkpoint: str, where: tuple[int, str] | None,
                    source: Source, spark: SparkSession) -> DataFrame | None:
    """EXPLAIN FIRINGS FOR STREAMING QUERY: the live windows of the running query
    ``query`` (:mod:`dfsql.spark.explain.live`), from its state at ``checkpoint``, its
    plan made again on the partitions the checkpoint recorded (they number the state's
    buckets); ``where`` (offset in ``source``, text) narrows the rows. None when Spark's
    own operator runs the query (its state is Spark's, not the bucket processor's)."""
    return streaming.live_windows(_planned_again(query, checkpoint, spark), checkpoint,
                                  where, source)


def _planned_again(query: Statement | str, checkpoint: str, spark: SparkSession) -> Planned:
    """A running query's statement planned again, on the shuffle partitions its
    checkpoint recorded (they number its state's buckets); nothing starts."""
    stmt = parse_any(query) if isinstance(query, str) else query
    scanned = stmt.scanned if stmt.scanned is not None else scan_text(stmt.written)
    with streaming.as_recorded(spark, checkpoint):
        return _planned(stmt, stmt.written, scanned, spark)


def alter_running(query: Statement | str, old: Statement | str, checkpoint: str,
                  history: Backfill | None, source: Source, at: int, spark: SparkSession,
                  reader_rows: ReaderRows | None = None) -> Change:
    """ALTER STREAMING QUERY checked while the old query runs, both planned again on its
    checkpoint's partitions (:func:`dfsql.spark.stream.alter.check_change`; refusals
    placed at ``at`` in ``source``; ``reader_rows``: the query's sink, restated by
    retractions)."""
    return streaming.changed(_planned_again(query, checkpoint, spark),
                             _planned_again(old, checkpoint, spark), checkpoint, history,
                             source, at, spark, reader_rows)


def explain_statement(stmt: Statement, spark: SparkSession | None) -> str:
    """The windowed blocks of a statement: every clause in force (a registered source's
    defaults in ``spark`` marked with the table they came from, and those not in force
    said so), the trigger tree and the three stages — of the block the planner runs."""
    if not stmt.windowed:
        return "plain Spark SQL: passed to Spark unchanged"
    registry = REGISTRATIONS.of(spark)
    runs_as = _runs_as(stmt, spark, registry)
    out = []
    for b, runs in zip(stmt.blocks, runs_as, strict=True):
        defaulted = registered_defaults(b, registry)
        st = rewrite(defaulted.block, stmt.source)
        head = f"== windowed block {b.index}" + (" (the statement)" if b is stmt.top else
                                                  f" (registered as {b.view_name})")
        out.append(f"{head} ==\n{clauses_in_force(defaulted)}\n{runs}\n{st.explain()}")
    return "\n\n".join(out)


def _runs_as(stmt: Statement, spark: SparkSession | None, registry: dict) -> list[str]:
    """EXPLAIN's ``-- runs as:`` line of each block: the executor Spark's analysis of its
    input chooses (:func:`dfsql.spark.physical.choose`), or why it is not known."""
    if spark is None:
        return ["-- runs as: chosen on Spark from the input (no Spark session here)"] * len(
            stmt.blocks)
    lines = []
    for p in planner.physical_plans(stmt, spark, registry):
        why = (str(p).strip().splitlines() or [type(p).__name__])[0] \
            if isinstance(p, Exception) else ""
        lines.append(f"-- runs as: not known: {why}" if why else p.line())
    lines += ["-- runs as: not known: an inner block cannot be planned"] * (
        len(stmt.blocks) - len(lines))
    return lines


def clauses_in_force(defaulted: Defaulted) -> str:
    """One line per clause, as the block runs; ``-- registered with t`` after a default
    of the registered table ``t``."""
    cl = defaulted.block.clauses

    def said(field: str, keyword: str, value: object) -> str:
        """The clause as written, or as registered and marked so."""
        if field not in defaulted.registered:
            return f"{keyword} {value}"
        table, text = defaulted.registered[field]
        return f"{keyword} {text}  -- registered with {table}"

    lines = []
    for field, line in cl.lines(said):
        if field == "watermark" and cl.processing_time is None and defaulted.unused:
            # a registered bounded table, queried without processing time
            lines.append("-- batch: no PROCESSING TIME, so the table arrives at once and "
                         "the watermark is +inf at its end: no row is late")
            lines += [f"-- not in force: {CLAUSE_OF_FIELD[f]} {text}, registered with "
                      f"{table} (a query runs in processing time when it writes a TRIGGER, "
                      "WATERMARK, ALLOWED LATENESS or LATE ROWS INTO)"
                      for f, table, text in defaulted.unused]
            continue
        if field == "watermark" and cl.processing_time is None:
            line += ("  -- no PROCESSING TIME: over a bounded table a batch (the watermark "
                     "is +inf at its end, no row is late); over a stream, the engine's clock")
        elif field == "trigger" and batch_trigger_note(cl) is not None:
            line += ("  -- over a bounded table no effect without PROCESSING TIME: one "
                     "ON_TIME pane per window")
        lines.append(line)
    return "\n".join(lines)
