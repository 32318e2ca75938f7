"""A continuous query's history (``BACKFILL FROM``, docs/guides/streams.md#continuous-queries-as-statements), read as its
stream is read.

The history is the stream's own past: a bounded relation with the stream's columns
holding what arrived before the stream's first row. The windowed block's input stage is
rendered again with the stream's relation replaced by the history (a transform of the
block's input tree: the same projection, joins and WHERE verdict), so the history's rows
reach the bucket processor exactly as the stream's would; packed the same way, they are
the processor's initial state (transformWithState's ``initialState``), which it runs as
the step before the stream's first micro-batch
(:meth:`~dfsql.spark.stream.buckets.BucketProcessor.handleInitialState`). The history's
panes then reach the sink with that micro-batch, committed with it: a query killed
before its first batch completes backfills again on restart, exactly once; one restarted
after it reads no history at all (:func:`needed`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.errors import AnalysisError, DfsqlError, NotSupportedError, SourceError
from dfsql.language.facts import tables_read
from dfsql.language.scan import Source
from dfsql.model import clauses as c
from dfsql.spark import door
from dfsql.spark.catalog import views
from dfsql.spark.errors import map_spark_error
from dfsql.spark.progress import say
from dfsql.spark.stream.checkpoint import committed_batches
from dfsql.spark.stream.plan import BUCKETS_CONF, bucket_count
from dfsql.spark.stream.progress_log import REREAD

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.continuous import Backfill
    from dfsql.spark.values import ReplayPlan

HINT = ("the history has the stream's columns (its processing-time column included) and "
        "holds what arrived before the stream's first row")


def needed(spark: SparkSession, checkpoint: str | None) -> bool:
    """Whether a query starting from ``checkpoint`` still needs its history: not once a
    micro-batch has committed (the first one carried the history's state and panes)."""
    return checkpoint is None or not committed_batches(spark, checkpoint)


def history_input(plan: ReplayPlan, backfill: Backfill) -> DataFrame:
    """The block's input stage over the history instead of the stream: the rows the
    bucket processor's initial state is packed from (``plan.timed_input_df()``'s
    columns, over the history)."""
    refused = unsupported(plan, "BACKFILL")
    if refused is not None:
        message, hint, cls = refused
        raise _error(backfill, message, hint, cls)
    history = _history_frame(plan, backfill)
    view = plan.name("__dfsql_history")
    plan.temp_view(history, view)
    streams = stream_relations(plan)
    if len(streams) != 1:
        raise _error(backfill, "BACKFILL needs a query that reads exactly one stream "
                     f"(it reads {len(streams) or 'no'} streams)",
                     "the history stands in for the query's one streaming source")
    try:  # analysed here: a column the history lacks is found now
        rows = plan.timed_input_df({streams[0]: view})
    except DfsqlError as err:
        raise _error(backfill, f"the history cannot stand in for the stream {streams[0]}: "
                     f"{err.message}", HINT) from None
    say(phase_line(backfill, streams[0]))
    return rows


def phase_line(backfill: Backfill, stream: str) -> str:
    """What the progress says of a backfill (:func:`dfsql.spark.progress.say`): where
    its history comes from and when it is replayed (no count: that would cost a scan)."""
    if backfill.restate:
        what = "ALTER: restating: the changed query replays what the running one read"
    elif backfill.skip:
        what = "ALTER: the changed query replays what the running one read"
    else:
        written = (backfill.written[backfill.offset:].split() or ["("])[0] \
            if backfill.frame is None and backfill.offset >= 0 else "("
        relation = "a query" if written.startswith("(") else written.rstrip(";")
        what = f"backfill: replaying the history of {stream} from {relation}"
    return (f"{what}, as the state of the stream's first micro-batch (its panes reach "
            "the sink with that batch)")


def unsupported(plan: ReplayPlan, what: str) -> tuple[str, str, type] | None:
    """Why the block's stream cannot start from a history (``what``: BACKFILL, or ALTER
    STREAMING QUERY, which gives the new query one): (message, hint, error class), or
    None when it can."""
    if plan.clauses.processing_time is None:
        return (f"{what} needs the query's PROCESSING TIME <column>: the history arrives "
                "in that column's order, and the stream goes on from its latest instant",
                "add PROCESSING TIME <arrival column> to the query", AnalysisError)
    if not bucket_count(plan.spark):
        return (f"{what} needs the stream's state kept in buckets of keys ({BUCKETS_CONF} "
                "is set to one per user key)", f"unset {BUCKETS_CONF}", NotSupportedError)
    if _reads_marks_stream(plan):
        return (f"{what} is not supported with WATERMARK FROM a stream yet (its marks have "
                "no history)", "use WATERMARK DELAY, PERCENTILE or FROM a bounded table",
                AnalysisError)
    return None


def stream_input(plan: ReplayPlan, backfill: Backfill | None) -> DataFrame:
    """The block's input stage over the stream, without the files the history already
    holds (ALTER STREAMING QUERY: :attr:`Backfill.skip`), each row's file asked at the
    scan."""
    if backfill is None or not backfill.skip:
        return plan.timed_input_df()
    from pyspark.sql import functions as F  # noqa: N812

    stream = stream_relations(plan)[0]
    view = plan.name("__dfsql_unread")
    read_before = F.input_file_name().isin(list(backfill.skip))
    # Spark counts those rows among the batch's input too: the query's progress log
    # takes them out again (dfsql.spark.stream.progress_log), so a changed query counts
    # each row it read once
    unread = door.table(plan.spark, stream).observe(
        REREAD, F.count(F.when(read_before, 1)).alias("rows")).where(~read_before)
    plan.temp_view(unread, view)
    return plan.timed_input_df({stream: view})


def _history_frame(plan: ReplayPlan, backfill: Backfill) -> DataFrame:
    """The history as a bounded DataFrame: the relation read (its errors placed where it
    was written), or the DataFrame given."""
    from pyspark.errors import PySparkException

    if backfill.frame is not None:
        df = backfill.frame
    else:
        # a database table NAME.schema.table: its rows' view (dropped with the plan's)
        expanded = views.expand(backfill.sql, plan.spark, windowed=False)
        plan.registered.extend(expanded.made)
        try:
            df = door.sql(plan.spark, expanded.text)
            df.schema  # noqa: B018
        except PySparkException as exc:
            mapped = map_spark_error(exc, Source(expanded.text) if expanded.made
                                     else backfill.source)
            if mapped is None:
                raise
            raise expanded.remap(mapped) from None
    if df.isStreaming:  # type: ignore[union-attr]
        raise _error(backfill, "BACKFILL FROM reads a bounded table, not a stream",
                     HINT, SourceError)
    return df  # type: ignore[return-value]


def stream_relations(plan: ReplayPlan) -> list[str]:
    """The names of the streaming relations the block's input stage reads (as written,
    qualified as written): the tables the facts' walk finds (a CTE's own name in its
    scope is none), each asked of Spark's catalog."""
    tree = plan.stages.timed_input if plan.stages.filters_input else plan.stages.input
    placeholders = set(plan.views)
    found: list[str] = []
    for name in tables_read(tree):
        if name in placeholders:
            continue
        try:
            streaming = door.table(plan.spark, name).isStreaming
        except Exception:  # noqa: BLE001 - not a catalog relation (a path)
            continue
        if streaming:
            found.append(name)
    return found


def _reads_marks_stream(plan: ReplayPlan) -> bool:
    wm = plan.clauses.watermark
    if not isinstance(wm, c.WatermarkFrom):
        return False
    try:
        return door.table(plan.spark, wm.table).isStreaming
    except Exception:  # noqa: BLE001 - its own error comes with planning
        return False


def _error(backfill: Backfill, message: str, hint: str, cls: type = AnalysisError):
    p = backfill.source.pos(max(backfill.offset, 0))
    line, col = (p.line, p.column) if backfill.offset >= 0 else (1, 1)
    return cls(message, line, col, hint)
