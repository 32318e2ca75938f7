"""The streaming path's executor side: a planned statement (the planner's
:class:`~dfsql.spark.plan.planner.Planned` value, with its ``stream``) started into a sink,
its running windows read from a checkpoint, or a change of it checked against the
running one (docs/guides/streams.md#continuous-queries-as-statements). It reads the plan
value only: planning is its caller's (:mod:`dfsql.api`), so nothing here climbs back up.

A restart plans on the shuffle partitions its checkpoint recorded (they number the
buckets of its state): :func:`as_recorded` is the context the caller plans *and* starts
in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.errors import SourceError, WindowedQueryError
from dfsql.language.continuous import Backfill
from dfsql.spark.errors import spark_errors
from dfsql.spark.explain.live import live_firings
from dfsql.spark.stream.alter import Change, check_change
from dfsql.spark.stream.backfill import needed as backfill_needed
from dfsql.spark.stream.checkpoint import as_recorded
from dfsql.spark.stream.sinks import as_sink, start_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.scan import Source
    from dfsql.language.statement import Statement
    from dfsql.spark.planned import Planned
    from dfsql.spark.stream.sink import ReaderRows

__all__ = ["Change", "as_recorded", "changed", "history", "live_windows", "start_planned"]


def history(spark: SparkSession, checkpoint: str | None, backfill: object) -> Backfill | None:
    """The stream's history to replay first (``backfill``: a table's name or a bounded
    DataFrame), or None: none given, or the checkpoint has committed a batch (the first
    one carried it)."""
    if backfill is None or not backfill_needed(spark, checkpoint):
        return None
    return Backfill.of(backfill)


def start_planned(planned: Planned, stmt: Statement, text: str, sink: object,
                  checkpoint: str | None, trigger: dict | None, name: str | None):
    """Start the planned statement's stream into ``sink`` and return its StreamingQuery;
    None when the statement is not over a stream (the caller says why). Spark's errors
    are placed in ``stmt``'s ``text``."""
    stream = planned.stream if planned.result.isStreaming else None
    if stream is None:
        return None
    if stmt.top is None:
        raise _outer_query(stmt)
    sink = as_sink(sink)
    if getattr(sink, "keeps_current_rows", False) and stream.unselected_keys:
        raise _unselected_key(stream.unselected_keys[0], stmt.source)
    with spark_errors(stmt.source, text=text):
        return start_stream(stream.df, stream.order_by, sink, checkpoint, trigger, name,
                            late_view=stream.late_view, state_store=stream.state_store,
                            row_key=stream.row_key)


def _outer_query(stmt: Statement) -> SourceError:
    """A started stream is a windowed query's own result (its panes, in §7's order, each
    window's row keyed for the sink): a plain query around a windowed subquery is
    refused rather than left out of what the sink gets."""
    start = min(b.span[0] for b in stmt.blocks)
    first = start + len(stmt.text[start:]) - len(stmt.text[start:].lstrip())  # its SELECT
    return stmt.source.error(
        SourceError, "a started stream is a windowed query's own result: this statement's "
        "outermost query is plain SQL over a windowed subquery, which its sink cannot take",
        first, "start the windowed subquery itself (its result is the sink's rows), or "
        "run the whole statement with dfsql.sql, whose streaming DataFrame holds it")


def _unselected_key(key: tuple[str, int | None], source: Source) -> WindowedQueryError:
    """A table of current rows keys a window's row by the group keys: one the SELECT
    leaves out would put its keys' windows in one row."""
    sql, at = key
    return source.error(
        WindowedQueryError, f"the group key {sql} is not in the SELECT list: a table of "
        "current rows keeps one row per group key and window", 0 if at is None else at,
        f"select it (SELECT {sql}, …), or write INTO CHANGELOG to keep every row")


def live_windows(planned: Planned, checkpoint: str, where: tuple[int, str] | None,
                 source: Source) -> DataFrame | None:
    """The live windows of the running query planned again as ``planned``, from its
    state at ``checkpoint`` (:mod:`dfsql.spark.explain.live`); ``where`` (offset in
    ``source``, text) narrows the rows. None when Spark's own operator runs the query
    (its state is Spark's, not the bucket processor's)."""
    stream = planned.stream
    if stream is None or stream.state is None:
        return None
    return live_firings(planned.blocks[-1].plan, stream.state, checkpoint, where, source)


def changed(new: Planned, old: Planned, checkpoint: str, history: Backfill | None,
            source: Source, at: int, spark: SparkSession,
            reader_rows: ReaderRows | None) -> Change:
    """ALTER STREAMING QUERY's check of the new plan against the running one's (both
    planned on its checkpoint's partitions): :func:`dfsql.spark.stream.alter.check_change`."""
    return check_change(new, old, checkpoint, history, source, at, spark, reader_rows)
