"""Which functions of a windowed SELECT are aggregates, asked of the Spark session.

docs/reference.md#query-shape allows every Spark aggregate in a windowed query, user-defined ones
included (a pandas grouped-aggregate UDF or a Java ``Aggregator`` registered with
``spark.udf.register``, a Hive UDAF made by ``CREATE FUNCTION``). The rewrite must know
which calls aggregate — they are computed per key, window and pane — but a registered
function's name says nothing, and no Spark session exists when the statement is parsed.
So :func:`~dfsql.language.rewrite.rewrite` knows Spark's built-in aggregates by name and,
at parse time, leaves any mistake that depends on another function for later; when the
planner has a session it calls :func:`resolve_aggregates`, which answers per name:

* a built-in function (its class is one of Catalyst's expressions): an aggregate exactly
  when it is in ``SPARK_AGGREGATES`` (checked against the registry by the tests);
  one catalog lookup (about 10 ms);
* anything else: Spark analyses ``SELECT f(args) OVER () FROM <the block's FROM>`` —
  an aggregate function is a valid window function and a scalar one is not
  (UNSUPPORTED_EXPR_FOR_WINDOW). This is Spark's own answer for any kind of function,
  whatever its arguments; it costs one analysis (no job runs).

A query without such calls never reaches Spark here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from sqlglot import exp

from dfsql.errors import AnalysisError, NotSupportedError
from dfsql.language.blocks import WindowedBlock
from dfsql.language.rewrite import rewrite
from dfsql.language.scan import Source
from dfsql.language.select_tree import SPARK_AGGREGATES, parse_select, unknown_calls
from dfsql.language.stages import with_views
from dfsql.spark import door

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The package of Spark's built-in expressions: a function whose class lies here is
#: built in, so SPARK_AGGREGATES (or sqlglot's typed aggregates) says whether it aggregates.
_BUILTIN_CLASSES = "org.apache.spark.sql.catalyst."


def resolve_aggregates(block: WindowedBlock, src: Source, spark: SparkSession,
                       views: Mapping[str, str] | None = None) -> WindowedBlock:
    """``block`` with :attr:`~WindowedBlock.aggregates` set from Spark's answer, or
    ``block`` itself when every function of its SELECT is known (nothing to ask).
    ``views`` names the inner blocks' results as the executor registered them."""
    views = views or {}
    if block.aggregates is not None:
        return block
    select = parse_select(block, src)
    calls = unknown_calls(select)
    if not calls:
        return block
    found: set[str] = set()
    asked: set[str] = set()
    # innermost first, so that f(g(x)) knows about g when it asks about f
    for call in sorted(calls, key=lambda n: -n.depth):
        name = str(call.this).lower()
        if name in asked:
            continue
        asked.add(name)
        if _is_aggregate(spark, select, call, name, found, views, src, block):
            found.add(name)
    resolved = replace(block, aggregates=frozenset(found))
    if found:
        first = next(n for n in calls if str(n.this).lower() in found)
        _check_aggregation(spark, resolved, src, first, views)
    return resolved


def _check_aggregation(spark: SparkSession, block: WindowedBlock, src: Source,
                       call: exp.Anonymous, views: Mapping[str, str]) -> None:
    """Analyse the block's aggregates over its input stage as the planner will compute
    them, so that what Spark refuses about a user-defined aggregate is reported at its
    call: beside other aggregates (a pandas UDAF must be alone), and in a replay, which
    aggregates each pane's members with ``f(...) FILTER (WHERE …)`` beside the pane's
    metadata (``max``) — a pandas UDAF allows neither."""
    stages = rewrite(block, src)
    source = f"FROM ({stages.input_sql_for(views)}) AS __dfsql_probe"
    aggs = [sql for sql, _ in stages.aggregates]
    p = _call_pos(call, src, block)
    name = str(call.this)
    reason = _planning_error(spark, f"SELECT {', '.join(aggs)} {source}")
    if reason is not None:
        raise AnalysisError(
            f"Spark cannot compute {name} beside this query's other aggregates ({reason})",
            p.line, p.column,
            f"a pandas aggregate UDF must be the only aggregate: compute {name} in a windowed "
            "query of its own and join the results on the keys and window_start") from None
    if block.clauses.processing_time is None:
        return
    members = [f"{sql} FILTER (WHERE true)" for sql in aggs]
    reason = _planning_error(spark, f"SELECT {', '.join(members)}, max(1) {source}")
    if reason is not None:
        raise NotSupportedError(
            f"the aggregate {name} cannot be replayed yet: a replay computes each pane's "
            f"aggregates with FILTER beside other aggregates, which Spark refuses for it "
            f"({reason})", p.line, p.column,
            "drop PROCESSING TIME to compute it in one batch pane per window, or use a "
            "built-in aggregate") from None


def _planning_error(spark: SparkSession, sql: str) -> str | None:
    """Why Spark cannot analyse or plan ``sql``, or None. Analysis errors come with
    Spark's message; some rules (a pandas UDAF beside other aggregates) are checked only
    by the physical planner, which ``EXPLAIN`` runs without running a job."""
    from pyspark.errors import PySparkException  # here: parsing needs no Spark loaded

    try:
        door.sql(spark, sql).schema  # noqa: B018 - analysis only
        plan = door.sql(spark, f"EXPLAIN {sql}").collect()[0][0]
    except PySparkException as exc:
        return _first_line(exc)
    if plan.startswith("Error occurred during query planning"):
        return "its physical planner refuses it"
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _probe(select: exp.Select, items: list[exp.Expression]) -> exp.Select:
    """``SELECT items`` over the block's FROM / WHERE (analysed only, never run)."""
    probe = select.copy()
    for arg in ("group", "having", "order", "limit", "offset", "distinct", "qualify",
                "windows"):
        probe.set(arg, None)
    probe.set("expressions", items)
    return probe


def _call_pos(call: exp.Anonymous, src: Source, block: WindowedBlock):
    """Where the call is written in the user's text (sqlglot's offset in the block)."""
    start = (call.meta or {}).get("start")
    return src.pos(block.span[0] + start) if start is not None else src.pos(block.region[0])


def _is_aggregate(spark: SparkSession, select: exp.Select, call: exp.Anonymous, name: str,
                  found: set[str], views: Mapping[str, str], src: Source,
                  block: WindowedBlock) -> bool:
    from pyspark.errors import PySparkException  # here: parsing needs no Spark loaded

    try:
        fn = spark.catalog.getFunction(name)
    except PySparkException:
        if spark.catalog.functionExists(name):
            return False  # Spark knows it but cannot describe it: let the stages decide
        p = _call_pos(call, src, block)
        raise AnalysisError(f"unknown function {call.this}", p.line, p.column,
                            "check the spelling, or register it in the Spark session first "
                            "(spark.udf.register)") from None
    if (fn.className or "").startswith(_BUILTIN_CLASSES):
        return name in SPARK_AGGREGATES
    if any(isinstance(n, exp.AggFunc) or (isinstance(n, exp.Anonymous) and
                                          str(n.this).lower() in found | SPARK_AGGREGATES)
           for n in call.find_all(exp.Expression) if n is not call):
        return False  # f(SUM(x)): an aggregate cannot take an aggregate, so f is scalar
    probe = _probe(select, [exp.Window(this=call.copy())])
    try:
        door.sql(spark, with_views(probe, views).sql("spark")).schema  # noqa: B018 - analysis only
    except PySparkException:
        return False
    return True
