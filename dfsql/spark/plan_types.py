"""What the replay executor needs of a windowed block's plan.

:mod:`dfsql.spark.planner` builds the plan and calls :mod:`dfsql.spark.replay`; the
replay only reads the plan. This protocol is that read-only view, so the replay does not
import the planner (not even for typing): the two modules form no import cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.rewrite import Stages
    from dfsql.language.scan import Source
    from dfsql.model import clauses as c


class ReplayPlan(Protocol):
    """A windowed block as the replay sees it (see planner.BlockPlan)."""

    spark: SparkSession
    src: Source
    clauses: c.Clauses
    stages: Stages
    #: the driver's output, set by the replay (dropped elements are read from it)
    emitted: DataFrame | None
    #: where the replay's emit times lie (first arrival, end of input), microseconds
    emit_range: tuple[int, int] | None

    #: the driver's dropped-element counts per partition (an accumulator), and how
    #: many partitions the driver runs in
    dropped_by_partition: object
    driver_partitions: int

    def temp_view(self, df: DataFrame, name: str) -> None:
        """Register a temp view that only the statement's own SQL reads."""
        ...

    def name(self, base: str) -> str:
        """``base`` made unique to the statement (temp view names)."""
        ...

    def input_df(self) -> DataFrame:
        """The input stage, checked (ON / PROCESSING TIME types, no stream)."""
        ...


def late_row_key_names(plan: ReplayPlan) -> list[str]:
    """The key columns' names in a LATE ROWS INTO view (key_0, key_1, ...): the replay's
    and the stream's dropped rows look the same."""
    return [f"key_{i}" for i in range(len(plan.stages.key_columns))]
