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
    #: the temp views made for the statement, dropped once it is planned
    registered: list[str]

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

#: how a replay computes its aggregates (:func:`dfsql.spark.physical.choose`)
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
    #: a native batch of windows on the processing-time clock itself, whose emit times
    #: come from the arrivals (:mod:`dfsql.spark.plan.clock`)
    on_clock: bool = False

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
        if self.on_clock:  # dfsql.spark.plan.clock.MAX_ENDS: a million
            text = ("native batch on the processing-time clock (Spark's GROUP BY window: one "
                    "ON_TIME pane per window, emitted when the arrivals' watermark reaches its "
                    "end; past a million window ends, the replay)")
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
    #: the watermark the replay ran on (:class:`~dfsql.model.watermarks.Timeline`): the
    #: dropped-row warning says when it ran ahead of processing time
    timeline: Any = None


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
    #: the output columns that identify a window's row in a table (a TableSink's, a
    #: database table's key): the group keys, then window_start and window_end unless
    #: the window is GLOBAL (whose window columns are NULL)
    row_key: tuple[str, ...] = ()
    #: the group keys no output column selects, as (their SQL, where they were written):
    #: a sink of current rows refuses them (it could not tell their windows apart)
    unselected_keys: tuple[tuple[str, int | None], ...] = ()
    #: the bucket processor and its output's schema (None: Spark's own operator): what
    #: reads the running query's state back (EXPLAIN FIRINGS FOR STREAMING QUERY)
    state: tuple | None = None


#: a LATE ROWS INTO row's columns after its keys and the columns the query reads
LATE_ROW_COLUMNS = ("window_start", "window_end", "event_time", "arrival_time", "reason",
                    "watermark_at_arrival")


@dataclass(frozen=True)
class LateRowColumns:
    """The leading columns of a LATE ROWS INTO view: (the input stage's column, its name
    in the view), the same for the replay, the stream and the batch path."""

    #: the GROUP BY keys: the output column that selects a key names it, else the
    #: FROM's column it is, else key_<i>
    keys: tuple[tuple[str, str], ...]
    #: the FROM's columns the aggregates read, under their own names (a column that is
    #: also a key is there once, as the key)
    read: tuple[tuple[str, str], ...]


def late_row_columns(plan: ReplayPlan) -> LateRowColumns:
    """The keys and read columns of ``plan``'s LATE ROWS INTO rows, each name unique (a
    name taken already gets ``_1``, ``_2`` …)."""
    st = plan.stages
    used = {n.lower() for n in LATE_ROW_COLUMNS}

    def unique(name: str) -> str:
        out, j = name, 1
        while out.lower() in used:
            out, j = f"{name}_{j}", j + 1
        used.add(out.lower())
        return out

    typed = st.group_keys if len(st.group_keys) == len(st.key_columns) else ()

    def key_name(i: int) -> str:
        k = typed[i] if typed else None
        return (k.output_name or k.input_name if k else None) or f"key_{i}"

    keys = tuple((col, unique(key_name(i))) for i, col in enumerate(st.key_columns))
    as_keys = {k.input_name.lower() for k in typed if k.input_name}
    read = tuple((col, unique(name)) for col, name in st.read_columns
                 if name.lower() not in as_keys)
    return LateRowColumns(keys, read)


def in_query(inp: DataFrame) -> DataFrame:
    """The rows of a timed input (:meth:`ReplayPlan.timed_input_df`) that the query's
    WHERE keeps, without the flag: the elements that enter windows. Every row of the
    timed input drives time (docs/reference.md#processing-time); only these are the query's."""
    if IN_QUERY not in inp.columns:
        return inp
    return inp.where(IN_QUERY).drop(IN_QUERY)
