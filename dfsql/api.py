"""The public API: ``sql``, ``start``, ``explain``, ``register``.

Plain Spark SQL goes to ``spark.sql`` untouched (same DataFrame, same errors mapped to
DfsqlError). A statement with windowed blocks is planned by :mod:`dfsql.spark.plan.planner`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql import streaming
from dfsql.continuous import run as run_continuous
from dfsql.errors import (
    AnalysisError,
    DfsqlError,
    SourceError,
    WatermarkError,
)
from dfsql.language import Statement, parse_any, parse_clauses, parse_statement
from dfsql.language.continuous import Backfill, ContinuousStatement
from dfsql.language.registered import (
    CLAUSE_OF_FIELD,
    Defaulted,
    Registration,
    registered_defaults,
)
from dfsql.language.rewrite import rewrite
from dfsql.language.scan import Scanned, Source, scan_text
from dfsql.model.clauses import SlidingWindows, Watermark
from dfsql.model.triggers import batch_trigger_note
from dfsql.registrations import REGISTRATIONS
from dfsql.registrations import session_id as _session_id  # noqa: F401 (tests read it)
from dfsql.session import active_session, session
from dfsql.spark import door
from dfsql.spark.catalog import views
from dfsql.spark.errors import quiet_spark_loggers, spark_errors
from dfsql.spark.plan import planner
from dfsql.spark.planned import Planned
from dfsql.spark.progress_bar import watching
from dfsql.spark.stream.sinks import STORE_CONF
from dfsql.spark.timelines import ahead_note
from dfsql.warehouse import sync as sync_catalog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.streaming import Change


def _registry(spark: SparkSession | None) -> dict[str, Registration]:
    """The registrations of ``spark`` (empty for None, or a session without any)."""
    return REGISTRATIONS.of(spark)


def _spark(spark: SparkSession | None) -> SparkSession:
    return spark if spark is not None else session()


def sql(text: str | Statement | ContinuousStatement,
        spark: SparkSession | None = None) -> DataFrame:
    """Run one statement. Plain SQL returns exactly what ``spark.sql`` returns;
    CREATE / SHOW / STOP / START STREAMING QUERY start, list, stop and start again
    continuous queries.
    ``text`` may be the statement already parsed (:func:`dfsql.language.parse_any`, as
    the shell and the endpoint do): it is not scanned or parsed again.

    In a terminal, a progress bar on stderr shows Spark's running stages (and the
    DataFrame's actions' later on); the session setting ``dfsql.progress=false`` turns
    it off (:mod:`dfsql.spark.progress_bar`)."""
    return plan(text, spark).result


def plan(text: str | Statement | ContinuousStatement,
         spark: SparkSession | None = None) -> Planned:
    """:func:`sql`'s statement, run, as the plan value: its result and its windowed
    blocks (what ran, on which executor, its stream), which the shell and the notebook
    read (:attr:`~dfsql.spark.planned.Planned.top_block`, ``is_changelog``)."""
    with watching(lambda: _spark(spark)):
        return _sql(text, spark)


def _sql(text: str | Statement | ContinuousStatement,
         spark: SparkSession | None) -> Planned:
    stmt = parse_any(text) if isinstance(text, str) else text
    text = stmt.written
    # once: parsing and finding the views it reads share it
    scanned = stmt.scanned if stmt.scanned is not None else scan_text(text)
    if isinstance(stmt, ContinuousStatement):
        return Planned(run_continuous(stmt, text, _spark(spark), start, explain_running,
                                      alter_running))
    planned = _planned(stmt, text, scanned, _spark(spark))
    stores = {b.stream.state_store for b in planned.blocks if b.stream is not None} - {None}
    if stores:
        # the user starts this streaming DataFrame, on the session's settings: put the
        # session on the state store its stateful operator needs (dfsql.start does not).
        # The one setting dfsql leaves changed on a user's session, and it must stay:
        # Spark reads it when the query starts, after dfsql.sql has returned.
        planned.result.sparkSession.conf.set(STORE_CONF, stores.pop())
    planner.remember(planned)
    return planned


def _planned(stmt: Statement, text: str, scanned: Scanned, s: SparkSession,
             backfill: Backfill | None = None) -> Planned:
    """The one pipeline of :func:`sql` and :func:`start`: the catalog brought up to date,
    persistent windowed views expanded into their queries, the statement planned
    (``backfill``: the history of a continuous query's stream)."""
    sync_catalog(s)  # the tables and views other processes made, filled or dropped since
    expanded = views.expand(text, s, scanned.tokens)  # windowed views: their queries instead
    try:
        if expanded.spans:
            stmt = parse_statement(expanded.text)
        if stmt.kind == "create_view" and not stmt.view_temporary and \
                (stmt.windowed or expanded.spans):
            made = views.create_with(stmt, expanded, s, lambda body: sql(body, s))
            sync_catalog(s, stmt)  # its definition, for other processes
            return Planned(made)
        return _plan(stmt, expanded.text, s, backfill)
    except DfsqlError as err:
        raise expanded.remap(err) from None


def _plan(stmt: Statement, text: str, spark: SparkSession | None,
          backfill: Backfill | None = None) -> Planned:
    """The statement planned once: plain SQL as Spark's own DataFrame, EXPLAIN as its
    text, a windowed statement by :mod:`dfsql.spark.plan.planner` (the caller has brought the
    catalog up to date: :func:`~dfsql.warehouse.sync`)."""
    quiet_spark_loggers()
    s = _spark(spark)
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
    planned = planner.execute(stmt, s, _registry(s), backfill)
    if stmt.kind == "write":
        sync_catalog(s, stmt)  # the table the statement made or filled, for later runs
    return planned


def start(text: str | Statement, sink: object = "memory", checkpoint: str | None = None,
          trigger: dict | None = None, name: str | None = None,
          spark: SparkSession | None = None, backfill: object = None):
    """Start a windowed query over a streaming source and return its StreamingQuery.

    ``sink``: a directory (Spark's parquet file sink, exactly once), ``"memory"`` (a
    table named ``name``), ``"console"``, a callable ``f(batch_df, batch_id)``
    (foreachBatch), or a :class:`dfsql.TableSink` (the current row of every live window,
    retractions applied). Console, callable and table sinks get each micro-batch in
    docs/reference.md#output-columns's changelog order. With ``LATE ROWS INTO v`` the dropped rows go to the
    temp view ``v`` (growing by each batch), the panes to ``sink`` — a directory then gets
    each batch as files named after its id, and "memory" a temp view ``name``.
    ``checkpoint``: where the query's state and progress live (restart from it after a
    crash). ``trigger``: ``DataStreamWriter.trigger``'s keyword arguments, e.g.
    ``{"processingTime": "10 seconds"}`` or ``{"availableNow": True}``.

    The statement is planned once; the query starts on the state store its plan needs
    (the session's own setting is left as it was), the same on classic Spark and Spark
    Connect. A restart from ``checkpoint`` is planned on the shuffle partitions the
    checkpoint recorded at the first start (they number the buckets of its state).
    ``text`` may be the query already parsed (as CREATE STREAMING QUERY passes it): it
    is not scanned or parsed again.

    ``backfill``: the stream's history (a table's name or a bounded DataFrame with the
    stream's columns, holding what arrived before its first row; docs/guides/streams.md#continuous-queries-as-statements): it is
    replayed first, and its panes reach ``sink`` with the stream's first micro-batch.
    A restart whose checkpoint has committed a batch does not read it again. In a
    terminal its progress (the backfill's phases, its micro-batches' stages) shows as
    :func:`sql`'s does."""
    with watching(lambda: _spark(spark)):
        return _start(text, sink, checkpoint, trigger, name, spark, backfill)


def _start(text: str | Statement, sink: object, checkpoint: str | None,
           trigger: dict | None, name: str | None, spark: SparkSession | None,
           backfill: object):
    stmt = parse_any(text) if isinstance(text, str) else text
    text = stmt.written
    scanned = stmt.scanned if stmt.scanned is not None else scan_text(text)
    if not isinstance(stmt, ContinuousStatement):
        s = _spark(spark)
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
                  directory: str | None = None) -> Change:
    """ALTER STREAMING QUERY checked while the old query runs, both planned again on its
    checkpoint's partitions (:func:`dfsql.spark.stream.alter.check_change`; refusals
    placed at ``at`` in ``source``; ``directory``: the query's, restated)."""
    return streaming.changed(_planned_again(query, checkpoint, spark),
                             _planned_again(old, checkpoint, spark), checkpoint, history,
                             source, at, spark, directory)


def explain_statement(stmt: Statement, spark: SparkSession | None) -> str:
    """The windowed blocks of a statement: every clause in force (a registered source's
    defaults in ``spark`` marked with the table they came from, and those not in force
    said so), the trigger tree and the three stages — of the block the planner runs."""
    if not stmt.windowed:
        return "plain Spark SQL: passed to Spark unchanged"
    registry = _registry(spark)
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


def explain(text: str | Statement, spark: SparkSession | None = None) -> str:
    """Show how dfsql runs ``text``: per windowed block, every clause in force (the
    defaults of a source registered in ``spark``, by default the active session, marked),
    its trigger tree in the specification's notation, and the input / aggregate / output
    stages (``text`` may be the statement already parsed). No session is started for
    it."""
    return explain_statement(parse_statement(text) if isinstance(text, str) else text,
                             spark if spark is not None else active_session())


def planned_of(df: DataFrame) -> Planned | None:
    """The Planned behind a result of :func:`sql`, for the public calls that are handed
    the DataFrame alone (:func:`dropped_late`, ``dfsql.plot(df)``); None for any other."""
    return planner.planned_of(df)


def dropped_late(df: DataFrame, windows: bool = False) -> int:
    """How many rows the windowed query behind ``df`` dropped: too late (beyond ALLOWED
    LATENESS, or after its trigger finished) or without an event time. A row is in several
    SLIDING windows and may be dropped from more than one: it counts once, and with
    ``windows`` once per window it was dropped from ((row, window) pairs, the rows of its
    LATE ROWS INTO view)."""
    planned = planned_of(df)
    return planned.dropped_count(windows) if planned is not None else 0


def dropped_warnings(df: DataFrame) -> list[str]:
    """docs/reference.md#allowed-lateness, dropped rows are never silent: for each windowed block behind
    ``df`` that dropped rows, the line the shell prints under the result and the endpoint
    returns as a warning with it — how many, the clauses in force that dropped them
    (registered defaults marked) and how to keep them. The counts are
    :func:`dropped_late`'s, from the replay itself. [] for any other DataFrame or a
    stream (its drops are in the query's progress)."""
    planned = planned_of(df)
    if planned is None or df.isStreaming:
        return []
    lines = []
    for b in planned.blocks:
        n = b.dropped_count()
        if n:
            where = "" if len(planned.blocks) == 1 else f" (windowed block {b.plan.block.index})"
            lines.append(f"warning{where}: {_dropped_text(b, n)}")
    return lines


def batch_notes(df: DataFrame) -> list[str]:
    """The notes of the windowed blocks behind ``df`` that ran as a batch (no replay, no
    stream) with a TRIGGER that cannot act there (:func:`batch_trigger_note`): the shell
    prints them under the result, the endpoint returns them with its warnings."""
    planned = planned_of(df)
    notes = [batch_trigger_note(b.plan.clauses) for b in planned.blocks
             if b.replay is None and b.stream is None] if planned is not None else []
    return [n for n in notes if n]


def _dropped_text(block, n: int) -> str:
    """The words of one planned block's warning (see :func:`dropped_warnings`) on the
    ``n`` rows it dropped: with SLIDING windows, from how many (row, window) pairs; when
    its watermark ran ahead of processing time, when and why
    (:func:`dfsql.spark.timelines.ahead_note`)."""
    plan = block.plan
    cl = plan.clauses
    marks = registered_defaults(plan.stmt.blocks[plan.block.index],
                                _registry(plan.spark)).registered

    def said(field: str, value: object) -> str:
        if field not in marks:
            return f"{CLAUSE_OF_FIELD[field]} {value}"
        table, text = marks[field]
        return f"{CLAUSE_OF_FIELD[field]} {text} (registered with {table})"

    # a batch block drops only rows without an event time; a replay also drops late ones
    nulls = n if cl.processing_time is None else plan.null_time_count()
    late = n - nulls
    listed = (f"LATE ROWS INTO {cl.late_rows_into} lists them" if cl.late_rows_into
              else "LATE ROWS INTO <view> lists them")
    parts = []
    if late:
        finished = " or after their window's trigger had finished" if cl.trigger_given else ""
        pairs = (block.dropped_count(windows=True) - nulls
                 if isinstance(cl.window, SlidingWindows) else late)
        from_windows = f" (from {pairs:,} (row, window) pairs)" if pairs != late else ""
        ahead = ahead_note(plan, block.replay.timeline) if block.replay else None
        parts.append(
            f"{late:,} row{'s' if late != 1 else ''} dropped as late{from_windows}: they "
            f"arrived ({said('processing_time', cl.processing_time)}) after the watermark "
            f"({said('watermark', cl.watermark)}) had passed "
            f"their window's end + ALLOWED LATENESS {cl.allowed_lateness}{finished}. "
            f"ALLOWED LATENESS <duration> keeps them (LATE panes); {listed}"
            + (f". {ahead}" if ahead else ""))
    if nulls:
        parts.append(f"{nulls:,} row{'s' if nulls != 1 else ''} dropped without an event "
                     f"time ({said('on', cl.on)} is NULL): they belong to no "
                     f"window; {listed}")
    return "; ".join(parts)


def register(name: str, df: DataFrame, event_time: str | None = None,
             processing_time: str | None = None, watermark: str | None = None) -> None:
    """Register ``df`` as temp view ``name`` with defaults for ON / PROCESSING TIME /
    WATERMARK, so that queries over it (it is the table of their FROM, or one of its
    joins) may leave those clauses out; a clause written in the query wins.

    ``event_time`` and ``processing_time`` are column names (or Spark SQL expressions)
    of ``df``: a TIMESTAMP (or DATE for the event time). ``watermark`` is what follows
    the word WATERMARK in a query: ``'DELAY 2 MINUTES'``, ``'PERCENTILE 95 DELAY 10
    SECONDS'``, ``'FROM marks'``, ``'PERFECT'``. A mistake in any of them raises a
    DfsqlError positioned in that argument's text (line 1, its column) at once."""
    wm = _registered_watermark(watermark) if watermark is not None else None
    for arg, expr, types in (("event_time", event_time, ("timestamp", "timestamp_ntz", "date")),
                             ("processing_time", processing_time,
                              ("timestamp", "timestamp_ntz"))):
        if expr is not None:
            _check_column(df, arg, expr, types)
    df.createOrReplaceTempView(name)
    REGISTRATIONS.add(df.sparkSession, Registration(name, event_time, processing_time, wm,
                                                    streaming=df.isStreaming))


def registration(name: str, spark: SparkSession | None = None) -> Registration | None:
    """The defaults ``name`` was registered with in ``spark`` (by default the active
    session) by :func:`register`, or None."""
    return _registry(spark if spark is not None else active_session()).get(name.lower())


def _registered_watermark(text: str) -> Watermark:
    """A WATERMARK clause's body, parsed with the clause grammar; errors are positioned
    in ``text`` itself."""

    head = "WINDOW GLOBAL WATERMARK "
    try:
        cl = parse_clauses(head + text)
        if cl.processing_time is not None or cl.allowed_lateness.micros or \
                cl.trigger_given or cl.emit_given:

            raise WatermarkError(f"only a watermark is expected, got {text!r}",
                                 1, len(head) + 1, "give ON, PROCESSING TIME and the "
                                 "other clauses in the query or as their own arguments")
        return cl.watermark
    except DfsqlError as e:
        col = None if e.column is None else max(1, e.column - len(head))
        raise type(e)(f"register(watermark={text!r}): {e.message}", 1, col,
                      e.hint or "write what follows WATERMARK in a query, "
                                "e.g. watermark='DELAY 2 MINUTES'") from None


def _check_column(df: DataFrame, arg: str, expr: str, types: tuple[str, ...]) -> None:
    """``expr`` must name a time column of ``df`` (analysed by Spark, nothing runs)."""
    from pyspark.errors import AnalysisException, ParseException


    try:
        dtype = df.selectExpr(expr).schema.fields[0].dataType.typeName()
    except (AnalysisException, ParseException) as e:
        msg = str(e).strip().split("\n")[0]
        raise AnalysisError(f"register({arg}={expr!r}): {msg}", 1, 1,
                            f"name one of the DataFrame's columns: {', '.join(df.columns)}"
                            ) from None
    if dtype not in types:
        raise AnalysisError(
            f"register({arg}={expr!r}) must be a {' or '.join(t.upper() for t in types)}, "
            f"but it is {dtype.upper()}", 1, 1,
            f"convert it, e.g. {arg}='CAST({expr} AS TIMESTAMP)'")
