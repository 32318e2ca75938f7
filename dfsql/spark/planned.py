"""The plan value: what planning a statement returns, and what
EXPLAIN, :func:`dfsql.api.start`, ALTER and the shell read.

It sits between :mod:`dfsql.spark.plan` (the planner, which makes it) and the executors
(:mod:`dfsql.spark.explain`, :mod:`dfsql.spark.stream`), so an executor that reads a
block's plan or a statement's blocks never imports the planner. A block's plan is read
through :class:`BlockView`, the part of the planner's ``BlockPlan`` the executors call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dfsql.model import clauses as c
from dfsql.spark.replay.driver import ROW_ID, dropped_total
from dfsql.spark.replay.panes import KIND_DROPPED
from dfsql.spark.values import ReplayPlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.language.statement import Statement, WindowedBlock
    from dfsql.spark.values import PhysicalPlan, Replayed, StreamPlan


class BlockView(ReplayPlan, Protocol):
    """A windowed block's plan as the executors read it (the planner's ``BlockPlan``)."""

    stmt: Statement
    block: WindowedBlock
    #: the session's registered defaults (``SET WINDOW …``), by name
    registry: dict

    def analyse_original(self) -> list[str] | None:
        """Spark's analysis of the user's SELECT (its errors at the user's offsets)."""

    def check_clauses(self) -> None:
        """Refuse the clauses that cannot run together."""

    def null_time_count(self) -> int:
        """How many elements have no event time (what a batch block drops)."""


@dataclass(frozen=True)
class PlannedBlock:
    """A planned block: its plan, and what its replay or stream computed (not its result,
    which :func:`dfsql.spark.plan.planner.remember` keys weakly)."""

    plan: BlockView
    #: the executor it ran on (:func:`dfsql.spark.physical.choose`)
    physical: PhysicalPlan
    replay: Replayed | None = None
    stream: StreamPlan | None = None

    def dropped_count(self, windows: bool = False) -> int:
        """How many rows this block dropped as too late or without an event time (a row
        dropped from several SLIDING windows once; ``windows``: the (row, window) pairs)."""
        if self.plan.clauses.processing_time is None:
            return self.plan.null_time_count()
        r = self.replay
        if r is None:
            return 0
        counts = r.dropped_by_partition.value if r.dropped_by_partition else {}
        if len(counts) >= r.driver_partitions:
            return dropped_total(counts.values(), windows)  # what the query's run counted
        # the query has not run (in full) yet: run the driver once, which fills the count
        dropped = r.emitted.where(f"__kind = {KIND_DROPPED}")
        if windows or ROW_ID not in r.emitted.columns:
            return dropped.count()
        return dropped.select(ROW_ID).distinct().count()


@dataclass(frozen=True)
class Planned:
    """A planned statement: its result, its windowed blocks (innermost first), and the
    stream :func:`dfsql.api.start` starts (the last block over a streaming source)."""

    result: DataFrame
    blocks: tuple[PlannedBlock, ...] = ()

    @property
    def stream(self) -> StreamPlan | None:
        streams = [b.stream for b in self.blocks if b.stream is not None]
        return streams[-1] if streams else None

    def dropped_count(self, windows: bool = False) -> int:
        """Rows dropped by the statement's windowed blocks (``windows``: (row, window)
        pairs, see :meth:`PlannedBlock.dropped_count`)."""
        return sum(b.dropped_count(windows) for b in self.blocks)

    @property
    def top_block(self) -> BlockView | None:
        """The plan of the statement's own (outermost) windowed block, or None: what
        ``\\plot`` draws the input elements and the watermark of."""
        plans = [b.plan for b in self.blocks]
        top = [p for p in plans if p.block is p.stmt.top] or plans[-1:]
        return top[0] if top else None

    @property
    def is_changelog(self) -> bool:
        """Whether the result is a windowed query's that EMITs retractions: the shell and
        the notebook mark its rows +/-; a plain query over a table with an is_retraction
        column is not one."""
        if not self.blocks:
            return False
        plan = self.blocks[-1].plan  # the statement's own block, if it is windowed
        top = plan.stmt.top
        return top is not None and plan.block.index == top.index and \
            plan.stmt.kind != "explain_firings" and \
            plan.clauses.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING
