"""The SQL that aggregates a replay's driver output into panes, where Spark computes the
aggregates (the model's kernels do not: :mod:`dfsql.spark.replay.kernels`).

Each element row lists the panes that aggregate it. Any aggregate takes every
(pane, element) pair (:func:`panes_exploded`); a decomposable one takes each delta once
and merges the deltas' partial results into the panes that cover them
(:func:`panes_two_level`), which :func:`dfsql.spark.physical.choose` picks where it can.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.model.aggregates import PARTIAL_MERGES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.spark.values import ReplayPlan

#: the driver's row kinds (see :class:`dfsql.spark.replay.driver.PartitionDriver`)
KIND_MEMBER, KIND_MARKER, KIND_DROPPED = 0, 1, 4
#: Aggregates see only the elements, not the pane markers beside them.
_MEMBERS_ONLY = f"__kind = {KIND_MEMBER}"
def quoted(names) -> list[str]:
    return [f"`{n}`" for n in names]


def panes_exploded(plan: ReplayPlan, view: str, keys, payload, meta,
                    ranked: bool = False) -> str:
    """Any aggregate: one aggregation over every (pane, element) pair (SQL over ``view``).

    A marker's list holds just its own pane. Aggregates see only the members
    (FILTER), so a pane without new elements gets the empty-set value. An element row
    lists the panes that aggregate it; exploding it in the JVM is far cheaper than
    shipping one Arrow row per (pane, element). Element rows carry their keys and the
    pane metadata is fixed-width (NULL on element rows, so max() is the marker's value):
    no aggregation buffer holds a string, so Spark can hash-aggregate rather than sort
    every (pane, element) row."""
    aggs = [f"{call.filtered(_MEMBERS_ONLY)} AS `{call.alias}`"
            for call in plan.stages.aggregate_calls]
    marked = ("SELECT explode(__gids) AS __pane, "
              + ", ".join(["__kind", *quoted(keys), *quoted(payload), *meta])
              + f" FROM {view} WHERE __kind <= {KIND_MARKER}")
    return ("SELECT " + ", ".join([*quoted(keys), *aggs, *[f"max({m}) AS {m}" for m in meta],
                                   *_RANK[ranked]])
            + f" FROM ({marked}) AS __marked GROUP BY " + ", ".join(["__pane", *quoted(keys)]))


#: a ranked pane's id is its §7 rank (see replay.driver.PartitionDriver): the pane query passes it on
_RANK = {False: [], True: ["__pane AS __pane_rank"]}


def panes_two_level(view: str, keys, meta, merges, ranked: bool = False) -> str:
    """Decomposable aggregates (SUM, COUNT, MIN, MAX): Spark aggregates each *delta* —
    the elements first emitted by the same pane, which share one list of covering panes
    — then merges the deltas' values into every pane that covers them. In accumulating
    modes a window's k panes cover its elements about k times over; this way only the
    (pane, delta) pairs are repeated, not the (pane, element) pairs. (SQL over ``view``.)

    Both levels read the driver's output once: a marker is a group of its own in the
    first level (its pane id, negated, as a one-element list), so the driver runs once."""
    maxes = [f"max({m}) AS {m}" for m in meta]
    # a marker's list is [-1 - its pane id]: a group of its own
    first = ("SELECT " + ", ".join(
        ["__gids AS __group", *quoted(keys),
         *[f"{call.filtered(_MEMBERS_ONLY)} AS `{part}`" for call, part, _, _, _ in merges],
         *maxes])
        + f" FROM {view} WHERE __kind <= {KIND_MARKER} GROUP BY "
        + ", ".join(["__gids", *quoted(keys)]))
    pane = "CASE WHEN __group[0] >= 0 THEN __group ELSE array(-1 - __group[0]) END"
    covered = ("SELECT " + ", ".join(
        [f"explode({pane}) AS __pane", *quoted(keys), *quoted(part for _, part, _, _, _ in merges),
         *meta]) + f" FROM ({first}) AS __deltas")
    return ("SELECT " + ", ".join(
        [*quoted(keys), *[f"CAST({second} AS {dtype}) AS `{alias}`"
                      for _, _, second, alias, dtype in merges], *maxes, *_RANK[ranked]])
        + f" FROM ({covered}) AS __covered GROUP BY " + ", ".join(["__pane", *quoted(keys)]))


def two_level_merges(plan: ReplayPlan, inp: DataFrame) -> list[tuple] | None:
    """(per-delta aggregate, its column, merge of the deltas' values, alias, Spark type) for each
    aggregate, or None unless every one is decomposable with a one-column merge of its
    partial results (:data:`~dfsql.model.aggregates.PARTIAL_MERGES`: not AVG); an
    aggregate's own FILTER applies to the elements, in the first level."""
    from pyspark.sql import functions as F  # noqa: N812

    aggs = plan.stages.aggregates
    if not aggs:
        return None
    out = []
    for call in plan.stages.aggregate_calls:
        if not call.decomposable or call.function not in PARTIAL_MERGES:
            return None
        part = f"__p_{call.alias}"
        merge = f"{PARTIAL_MERGES[call.function].upper()}(`{part}`)"
        if call.function == "count":  # a pane with no element counts 0, as Spark's COUNT
            merge = f"COALESCE({merge}, 0)"
        out.append((call, part, merge, call.alias))
    from pyspark.errors import PySparkException

    try:  # the types a one-level aggregate would have (analysis only, nothing runs)
        types = inp.groupBy().agg(*[F.expr(sql) for sql, _ in aggs]).schema
    except PySparkException:  # let the one-level path report it
        return None
    return [(*m, f.dataType.simpleString()) for m, f in zip(out, types.fields, strict=True)]
