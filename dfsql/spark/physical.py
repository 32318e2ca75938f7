"""What runs a windowed block: one choice, made once, as a value (issue #33).

A block runs on one of five executors, chosen from its clauses and its input (whether it
is a stream, and the types its aggregates read):

* **native batch** — no PROCESSING TIME over a bounded input: one ON_TIME, last pane per
  key and window whatever the trigger, which *is* Spark's ``GROUP BY window()`` /
  ``session_window()``;
* **replay** — PROCESSING TIME over a bounded input: the model's driver decides windows
  and panes (:mod:`dfsql.spark.replay.panes`); the aggregates are computed by the model's
  kernels where every one is decomposable over types they compute exactly
  (:mod:`dfsql.spark.replay.kernels`), else by Spark in two levels where every one has a
  one-column merge of its partial results, else by Spark over every (pane, element) pair
  (:mod:`dfsql.spark.replay.pane_sql`);
* **native stream** — a stream on the engine's clock whose panes are exactly Spark's
  append-mode aggregation (:func:`dfsql.spark.stream.plan.runs_natively`);
* **bucket processor** — any other stream (:mod:`dfsql.spark.stream.buckets`), on the
  RocksDB state store.

Every decision about aggregates starts from the model's one rule,
:func:`dfsql.model.aggregates.decomposable`; what each executor adds to it (the kernels'
types, the two-level merge, the stream's columns) is said here and nowhere else.
``EXPLAIN`` prints the choice as one line (:meth:`PhysicalPlan.line`); the value is
:class:`~dfsql.spark.values.PhysicalPlan`, beside the other values the planner and the
executors pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.spark.replay.kernels import KERNELS_CONF, kernels_for
from dfsql.spark.replay.pane_sql import two_level_merges
from dfsql.spark.stream.plan import NATIVE_CONF, ROCKSDB, runs_natively
from dfsql.spark.values import (
    BUCKET_PROCESSOR,
    EXPLODED,
    KERNELS,
    NATIVE_BATCH,
    NATIVE_STREAM,
    REPLAY,
    TWO_LEVEL,
    PhysicalPlan,
    in_query,
)

if TYPE_CHECKING:
    from dfsql.spark.values import ReplayPlan


def choose(plan: ReplayPlan) -> PhysicalPlan:
    """The one choice of executor for ``plan`` (analysis only: nothing runs)."""
    cl = plan.clauses
    functions = tuple(call.function for call in plan.stages.aggregate_calls)
    late = cl.late_rows_into
    if plan.is_streaming():
        if runs_natively(cl) and plan.backfill is None and \
                plan.spark.conf.get(NATIVE_CONF, "true") != "false":
            return PhysicalPlan(NATIVE_STREAM, late_rows=late, functions=functions)
        return PhysicalPlan(BUCKET_PROCESSOR, state_store=ROCKSDB, late_rows=late,
                            functions=functions)
    if cl.processing_time is None:
        return PhysicalPlan(NATIVE_BATCH, late_rows=late, functions=functions)
    inp = in_query(plan.timed_input_df())
    kernels = None
    if plan.spark.conf.get(KERNELS_CONF, "true").strip().lower() != "false":
        kernels = kernels_for(plan, inp)
    if kernels is not None:
        return PhysicalPlan(REPLAY, KERNELS, kernels=kernels, late_rows=late,
                            functions=functions)
    merges = two_level_merges(plan, inp)
    if merges is not None:
        return PhysicalPlan(REPLAY, TWO_LEVEL, merges=tuple(merges), late_rows=late,
                            functions=functions)
    return PhysicalPlan(REPLAY, EXPLODED, late_rows=late, functions=functions)


__all__ = ["BUCKET_PROCESSOR", "EXPLODED", "KERNELS", "NATIVE_BATCH", "NATIVE_STREAM",
           "REPLAY", "TWO_LEVEL", "PhysicalPlan", "choose"]
