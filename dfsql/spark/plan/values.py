"""The values that pass between the planner and the executors.

:mod:`dfsql.spark.plan.block` builds a block's plan and calls :mod:`dfsql.spark.replay.panes`
and :mod:`dfsql.spark.stream.plan`; they only read the plan (:class:`ReplayPlan` is that
read-only view, so they do not import the planner, not even for typing) and return what
they computed (:class:`Replayed`, :class:`StreamPlan`). Planning a statement returns a
:class:`Planned`: nothing is set on a DataFrame or written back onto a plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from dfsql.language.names import IN_QUERY

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.continuous import Backfill
    from dfsql.language.scan import Source
    from dfsql.language.stages import Stages
    from dfsql.model import clauses as c


class ReplayPlan(Protocol):
    """A windowed block as the replay sees it (see planner.BlockPlan)."""

    spark: SparkSession
    src: Source
    clauses: c.Clauses
    stages: Stages
    #: a continuous query's history (BACKFILL FROM; None: none)
    backfill: Backfill | None

    @property
    def views(self) -> Mapping[str, str]:
        """The inner blocks' placeholder names → their views in this statement run."""
        ...

    def temp_view(self, df: DataFrame, name: str) -> None:
        """Register a temp view that only the statement's own SQL reads."""
        ...

    def name(self, base: str) -> str:
        """``base`` made unique to the statement (temp view names)."""
        ...

    def input_df(self) -> DataFrame:
        """The input stage, checked (ON / PROCESSING TIME types, no stream)."""
        ...

    def is_streaming(self) -> bool:
        """Whether the block reads a streaming source."""
        ...

    def timed_input_df(self, relations: Mapping[str, str] | None = None) -> DataFrame:
        """Every row that drives time, WHERE's verdict in :data:`IN_QUERY` (see
        :func:`in_query`); ``relations``: tables read as other views instead."""
        ...


NATIVE_BATCH = "native batch"
REPLAY = "replay"
NATIVE_STREAM = "native stream"
BUCKET_PROCESSOR = "bucket processor"

#: how a replay computes its aggregates (:func:`dfsql.spark.plan.physical.choose`)
KERNELS, TWO_LEVEL, EXPLODED = "the model's kernels", "Spark, two levels", "Spark, per element"


@dataclass(frozen=True)
class PhysicalPlan:
    """The executor a block runs on, with everything the executor needs to know of the
    choice (it decides nothing again)."""

    executor: str
    #: the replay's aggregates: KERNELS, TWO_LEVEL or EXPLODED (None for another executor)
    aggregates: str | None = None
    #: the kernels, for KERNELS (:class:`~dfsql.spark.replay.kernels.Kernels`)
    kernels: Any = None
    #: the two-level merges (:func:`~dfsql.spark.replay.pane_sql.two_level_merges`)
    merges: tuple[tuple, ...] | None = None
    #: the state store provider a stream must start on (None: the session's own)
    state_store: str | None = None
    #: LATE ROWS INTO: the temp view (bounded) or side sink (stream) of dropped rows
    late_rows: str | None = None
    #: the aggregates' Spark names, for :meth:`line`
    functions: tuple[str, ...] = ()

    def line(self) -> str:
        """The choice as EXPLAIN prints it."""
        fns = ", ".join(dict.fromkeys(f.upper() for f in self.functions)) or "no aggregate"
        text = {
            NATIVE_BATCH: "native batch (Spark's GROUP BY window: one ON_TIME pane per window)",
            REPLAY: f"replay in the model's driver; aggregates ({fns}) by {self.aggregates}",
            NATIVE_STREAM: "native stream (Spark's append-mode aggregation, the session's "
                           "state store)",
            BUCKET_PROCESSOR: f"stream in the bucket processor; aggregates ({fns}) by the "
                              f"model's kernels; state store {_short(self.state_store)}",
        }[self.executor]
        if self.late_rows:
            text += f"; dropped rows to {self.late_rows}"
        return f"-- runs as: {text}"


def _short(provider: str | None) -> str:
    """A state store provider's class name without its package."""
    return "the session's" if provider is None else provider.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Replayed:
    """What a replay computed (:func:`dfsql.spark.replay.panes.replay_panes`)."""

    #: keys, aggregates and the pane columns, one row per emitted pane or retraction
    panes: DataFrame
    #: the driver's output (dropped elements are read from it)
    emitted: DataFrame
    #: where the emit times lie (first arrival, end of input), microseconds; None for an
    #: empty input
    emit_range: tuple[int, int] | None
    #: the driver's dropped-element counts per partition (an accumulator the driver fills
    #: as the query runs; None without a SparkContext), and how many partitions it runs in
    dropped_by_partition: Any
    driver_partitions: int
    #: EXPLAIN FIRINGS: the events the driver recorded in the same run (see
    #: :data:`dfsql.spark.replay.panes.EVENT_FIELDS`); None for a query
    events: DataFrame | None = None


@dataclass(frozen=True)
class FiringsRequest:
    """What EXPLAIN FIRINGS asks of a replay (:func:`dfsql.spark.replay.panes.replay_panes`)."""

    #: a filter over the input stage's columns (group keys), applied after the watermark
    #: is computed from the whole input (it is global across keys), before the driver
    where: str | None
    #: the session time zone the events' details print times in
    time_zone: str


@dataclass(frozen=True)
class StreamPlan:
    """A live stream's result as :func:`dfsql.api.start` starts it."""

    #: the result with its hidden §7 sort columns (and LATE_ROW with LATE ROWS INTO)
    df: DataFrame
    #: the order those columns make (each micro-batch is sorted by it)
    order_by: tuple[str, ...] | None
    #: LATE ROWS INTO: the temp view the dropped rows go to
    late_view: str | None
    #: the state store provider the query must start on (None: the session's own)
    state_store: str | None
    #: the output columns that select a group key (a TableSink's row identity)
    key_names: tuple[str, ...] = ()
    #: the bucket processor and its output's schema (None: Spark's own operator): what
    #: reads the running query's state back (EXPLAIN FIRINGS FOR STREAMING QUERY)
    state: tuple | None = None


def late_row_key_names(plan: ReplayPlan) -> list[str]:
    """The key columns' names in a LATE ROWS INTO view (key_0, key_1, ...): the replay's
    and the stream's dropped rows look the same."""
    return [f"key_{i}" for i in range(len(plan.stages.key_columns))]


def in_query(inp: DataFrame) -> DataFrame:
    """The rows of a timed input (:meth:`ReplayPlan.timed_input_df`) that the query's
    WHERE keeps, without the flag: the elements that enter windows. Every row of the
    timed input drives time (LANGUAGE.md §4); only these are the query's."""
    if IN_QUERY not in inp.columns:
        return inp
    return inp.where(IN_QUERY).drop(IN_QUERY)
