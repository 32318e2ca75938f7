"""A bounded block whose windows are on the processing-time clock itself, planned as
Spark's own aggregation with the replay's emit times (issue #55): the rule is the
model's (:mod:`dfsql.model.clock_windows`), this module only renders it.

One small job reads the arrival column of every row the FROM reads (time belongs to
the input, docs/reference.md#processing-time: WHERE or not): per watermark group its first
arrival, the last arrival, and how many rows have no processing time (refused as the
replay refuses them). The emit instant of every window end those arrivals can make is
then computed on the driver (numpy, a few rows per window end) and joined to the batch
aggregation's panes by window end. Windows spanning more than :data:`MAX_ENDS` window
ends keep the replay, whose rows are the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dfsql.language.names import PROCESSING_TIME
from dfsql.model import clauses as c
from dfsql.model.clock_windows import arrival_group, clock_grid, emit_instants, end_range
from dfsql.spark import door
from dfsql.spark.errors import spark_errors
from dfsql.spark.native_batch import EMIT_AT, EMIT_END, batch_panes_sql
from dfsql.spark.timelines import check_processing_time
from dfsql.spark.values import NATIVE_BATCH, PhysicalPlan
from dfsql.spark.window_assignment import Sql, pmod

if TYPE_CHECKING:
    from pyarrow import Table

    from dfsql.spark.values import ReplayPlan

#: "false" keeps every processing-time block on the replay (tests compare the two; the
#: benchmarks measure the replay)
CLOCK_CONF = "dfsql.replay.clockWindows"
#: the most window ends an emit-time table holds (beyond it: the replay, as EXPLAIN's
#: line says: PhysicalPlan.line)
MAX_ENDS = 1_000_000


def on_clock(plan: ReplayPlan, signed: bool) -> PhysicalPlan | None:
    """The executor of a bounded block whose replay is the batch aggregation (a native
    batch with emit times), or None: a stream, a block reading a changelog (``signed``),
    clauses the model's rule does not cover, or the conf set to "false"."""
    if signed or clock_grid(plan.clauses) is None or plan.is_streaming():
        return None
    if plan.spark.conf.get(CLOCK_CONF, "true").strip().lower() == "false":
        return None
    functions = tuple(call.function for call in plan.stages.aggregate_calls)
    return PhysicalPlan(NATIVE_BATCH, functions=functions, on_clock=True)


def clock_panes_sql(plan: ReplayPlan, inp: str) -> tuple[str, tuple[int, int] | None] | None:
    """The block's panes over the input stage ``inp``, each window's emit_time the
    replay's, and where the emit times lie (µs; None for no arrival), which orders the
    result without sampling it (:func:`~dfsql.spark.replay.ordering.in_emit_order`); None
    when its window ends are too many for one table (the replay then)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cl = plan.clauses
    g = clock_grid(cl)
    assert g is not None and isinstance(cl.watermark, c.WatermarkDelay)
    groups = _arrival_groups(plan, str(arrival_group(Sql("a"), g, cl.watermark.delay.micros,
                                                      pmod)))
    known = pc.is_valid(groups.column("g"))
    check_processing_time(cl, pc.sum(pc.filter(groups.column("n"), pc.invert(known))).as_py()
                          or 0)
    groups = groups.filter(known).sort_by("g")
    name = plan.name("__dfsql_emit_times")
    ends = emits = np.empty(0, np.int64)
    emit_range = None
    if groups.num_rows:
        firsts = groups.column("first").to_numpy()
        last = int(pc.max(groups.column("last")).as_py())
        e0, n = end_range(g, int(firsts[0]), last)
        if n > MAX_ENDS:
            return None
        ends = e0 + np.arange(max(n, 0), dtype=np.int64) * g.period
        emits = emit_instants(ends, groups.column("g").to_numpy(), firsts, last)
        if len(emits):  # every arrival in a sampling grid's gaps: no window at all
            emit_range = int(emits.min()), last
    table = pa.table({EMIT_END: pa.array(ends, pa.int64()), EMIT_AT: pa.array(emits, pa.int64())})
    plan.temp_view(plan.spark.createDataFrame(table), name)
    return batch_panes_sql(plan, inp, ranked=True, emit_times=name), emit_range


def _arrival_groups(plan: ReplayPlan, group: str) -> Table:
    """Per watermark group (``group``, over the arrival ``a`` in µs; NULL for a row
    without a processing time) of every row the FROM reads: its first and last arrival
    and how many rows (one small job)."""
    view = plan.name("__dfsql_timed")
    plan.temp_view(plan.timed_input_df(), view)
    sql = (f"SELECT g, min(a) AS first, max(a) AS last, count(*) AS n FROM (SELECT {group} "
           f"AS g, a FROM (SELECT unix_micros({PROCESSING_TIME}) AS a FROM {view}) AS t) AS u "
           "GROUP BY g")
    with spark_errors(None):
        return door.sql(plan.spark, sql).toArrow()
