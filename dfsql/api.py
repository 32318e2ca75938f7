"""The public API: ``sql``, ``start``, ``explain``, ``register``.

Plain Spark SQL goes to ``spark.sql`` untouched (same DataFrame, same errors mapped to
DfsqlError). Any other statement is planned by :mod:`dfsql.planning` (a continuous-query
statement run by :mod:`dfsql.continuous`, which calls the same pipeline).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from dfsql import planning, result_warnings
from dfsql.continuous import run as run_continuous
from dfsql.continuous_queries import QUERIES, Running
from dfsql.errors import AnalysisError, DfsqlError, WatermarkError
from dfsql.language import Statement, parse_any, parse_clauses, parse_statement
from dfsql.language.continuous import ContinuousStatement
from dfsql.language.registered import Registration
from dfsql.model.clauses import Watermark
from dfsql.planning import explain_statement
from dfsql.registrations import REGISTRATIONS
from dfsql.registrations import session_id as _session_id  # noqa: F401 (tests read it)
from dfsql.session import active_session, session
from dfsql.spark.plan import planner
from dfsql.spark.planned import Planned
from dfsql.spark.progress_bar import watching
from dfsql.spark.stream import progress_log

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
    if isinstance(stmt, ContinuousStatement):
        return Planned(run_continuous(stmt, stmt.written, _spark(spark)))
    return planning.statement(stmt, _spark(spark))


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
    :func:`sql`'s does.

    A stream given a ``name`` and a ``checkpoint`` is watched: its checkpoint keeps a
    record of each micro-batch, and :func:`dfsql.serve_metrics` serves its counters and
    gauges (label ``query``: its name) while it runs (docs/guides/watching.md)."""
    if name is None or checkpoint is None:
        return planning.start(text, sink, checkpoint, trigger, name, spark, backfill)
    s = _spark(spark)
    progress_log.watch(s, name, checkpoint)  # before it starts: its first batch may end first
    query = planning.start(text, sink, checkpoint, trigger, name, s, backfill)
    QUERIES.watch_started(Running(name, query, sink if isinstance(sink, str) else
                                  type(sink).__name__, checkpoint,
                                  text if isinstance(text, str) else text.written,
                                  time.time()))
    return query


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
    """docs/reference.md#allowed-lateness, dropped rows are never silent: for each windowed
    block behind ``df`` (a result of :func:`sql`) that dropped rows, the line the shell
    prints under the result and the endpoint returns as a warning with it
    (:func:`dfsql.result_warnings.dropped_warnings`, which reads the plan value). []
    for any other DataFrame or a stream (its drops are in the query's progress)."""
    planned = planned_of(df)
    return [] if planned is None else result_warnings.dropped_warnings(planned)


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
