"""Windowed statements on Spark: each windowed block planned in turn, innermost first
(:mod:`dfsql.spark.plan.block`), and the statement around them.

Inner blocks are registered as temp views under names unique to the statement, so the
outer query (windowed or not) reads them like any table. Planning returns a
:class:`Planned` value: the result, each block's plan and what its replay computed, and
the stream to start (:func:`dfsql.api.start`). :func:`remember` keeps a result's
Planned in a map weakly keyed by the result DataFrame, for :func:`dfsql.api.dropped_late` and the
shell's ``\\plot`` (nothing is set on the DataFrame: a Spark Connect result works the same).
The windowed query of ``EXPLAIN WATERMARK`` gives no panes: its block is replayed under
each watermark by :mod:`dfsql.spark.explain.watermark_trials` instead.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from dfsql.errors import AnalysisError, DfsqlError
from dfsql.language.blocks import executor_view
from dfsql.language.scan import splice
from dfsql.language.statement import Statement
from dfsql.model import clauses as c
from dfsql.session import spark_context
from dfsql.spark import door
from dfsql.spark.catalog.writes import finish as finish_write
from dfsql.spark.catalog.writes import write
from dfsql.spark.errors import spark_errors
from dfsql.spark.explain.firings import firings_result, refuse
from dfsql.spark.explain.watermark_trials import explain_watermark
from dfsql.spark.functions import resolve_aggregates
from dfsql.spark.physical import choose
from dfsql.spark.plan.block import BlockPlan, new_uid, reads_changelog
from dfsql.spark.plan.clock import on_clock
from dfsql.spark.planned import Planned, PlannedBlock
from dfsql.spark.values import PhysicalPlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.continuous import Backfill


def net_changelog(df: DataFrame) -> DataFrame:
    """A retracting result as a downstream windowed query sees it: every retraction
    cancels the insertion it repeats, so downstream aggregates subtract what was
    retracted (the paper's reason for retractions, §2.3). The k-th retraction of a row
    cancels the k-th insertion of an identical row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812

    cols = [n for n in df.columns if n not in ("emit_time", "is_retraction")]
    order = Window.partitionBy(*cols).orderBy("emit_time")
    ins = df.where(~F.col("is_retraction")).withColumn("__rn", F.row_number().over(order))
    ret = (df.where(F.col("is_retraction")).withColumn("__rn", F.row_number().over(order))
           .select(*[F.col(n).alias(f"__r_{n}") for n in [*cols, "__rn"]]))
    cond = [ins[n].eqNullSafe(ret[f"__r_{n}"]) for n in [*cols, "__rn"]]
    return ins.join(ret, cond, "left_anti").drop("__rn")


def _create_view(stmt: Statement, result: DataFrame) -> None:
    """``CREATE [OR REPLACE] [GLOBAL] TEMP VIEW [IF NOT EXISTS] v AS <windowed query>``, as
    asked: replace only with OR REPLACE; with IF NOT EXISTS keep an existing view; else an
    existing view is Spark's TEMP_TABLE_OR_VIEW_ALREADY_EXISTS, positioned at the name.
    (parse_statement already refused persistent views, qualified names and column lists.)"""
    from pyspark.errors import AnalysisException

    name = stmt.view_name
    if stmt.view_replace:
        (result.createOrReplaceGlobalTempView if stmt.view_global
         else result.createOrReplaceTempView)(name)
        return
    try:
        (result.createGlobalTempView if stmt.view_global else result.createTempView)(name)
    except AnalysisException as exc:
        if "ALREADY_EXISTS" not in (exc.getCondition() or ""):
            raise
        if stmt.view_if_not_exists:
            return  # the existing view stays, as asked
        p = stmt.source.pos(stmt.view_name_offset)
        kind = "GLOBAL TEMP VIEW" if stmt.view_global else "TEMP VIEW"
        raise AnalysisError(f"the temp view {name} already exists", p.line, p.column,
                            f"write CREATE OR REPLACE {kind} {name} to replace it, or "
                            f"CREATE {kind} IF NOT EXISTS {name} to keep it") from None


def execute(stmt: Statement, spark: SparkSession, registry: dict,
            backfill: Backfill | None = None) -> Planned:
    """Plan a statement with windowed blocks; see the module docstring. ``backfill``: the
    history of the stream the statement's own block reads (a continuous query's)."""
    if stmt.kind == "explain_firings" and stmt.top is None:
        raise refuse(stmt, "EXPLAIN FIRINGS explains a windowed query (one with WINDOW)",
                     "EXPLAIN FIRINGS SELECT ... GROUP BY ... WINDOW ... PROCESSING TIME "
                     "<arrival column> ...")
    plans: list[BlockPlan] = []
    inner_views: list[str] = []
    planned: Planned | None = None
    try:
        planned = _execute(stmt, spark, registry, plans, inner_views, backfill)
    finally:
        # on classic Spark every DataFrame above was analysed when created, so the views
        # are not needed. Spark Connect sends a plan that names them, and analyses a
        # stream's plan again when it starts: a stream's views stay there (their names are
        # the statement's own).
        if not (planned is not None and spark_context(spark) is None
                and any(b.stream is not None for b in planned.blocks)):
            for name in [*inner_views, *(v for p in plans for v in p.registered)]:
                spark.catalog.dropTempView(name)
    _keep_shared(planned)
    if stmt.kind == "write":
        finish_write(stmt, spark)
    return planned


def _block_plan(stmt: Statement, block, spark: SparkSession, uid: str,
                registry: dict, backfill: Backfill | None = None) -> BlockPlan:
    """A block's plan; over the aggregates Spark alone knows (UDAFs), its stages are made
    again from Spark's answer."""
    plan = BlockPlan(stmt, block, spark, uid, registry, backfill)
    resolved = resolve_aggregates(block, stmt.source, spark, plan.views)
    return plan if resolved is block else BlockPlan(stmt, resolved, spark, uid, registry,
                                                    backfill)


def _execute(stmt: Statement, spark: SparkSession, registry: dict, plans: list[BlockPlan],
             inner_views: list[str], backfill: Backfill | None) -> Planned:
    uid = new_uid()
    result = None
    top = stmt.top
    fed_to_window = {i for b in stmt.blocks for i in b.inner}
    # a retracting result cancelled in advance: only for a batch consumer, whose one pane
    # per window holds exactly what is left once every retraction is subtracted
    cancel = {i for b in stmt.blocks if b.clauses.processing_time is None for i in b.inner}
    blocks: list[PlannedBlock] = []
    # a block written twice in one statement (Nexmark's q5 counts the same windows in two
    # subqueries) is planned once: its replay runs once, and both places read its result
    made: dict[tuple, tuple[DataFrame, PlannedBlock]] = {}
    for block in stmt.blocks:
        ordered = block is top or block.index not in fed_to_window
        same = None if block is top else _same_block(block, ordered)
        if same is not None and same in made:
            df, planned = made[same]
            blocks.append(planned)
            inner_views.append(_inner_view(block, df, block.index in cancel, uid))
            continue
        plan = _block_plan(stmt, block, spark, uid, registry,
                           backfill if block is top else None)
        plans.append(plan)
        if block is top and stmt.kind == "explain_watermark":
            return Planned(explain_watermark(plan, stmt.tries))
        if block is top and stmt.kind == "explain_firings":
            df, planned = firings_result(plan, stmt)
        else:
            df, planned = plan.result(ordered=ordered)
            if same is not None:
                made[same] = (df, planned)
        blocks.append(planned)
        if block is top and stmt.kind != "write":
            result = df
        else:
            inner_views.append(_inner_view(block, df, block.index in cancel, uid))
    if stmt.kind == "create_view" and result is not None:  # the view's body is windowed
        _create_view(stmt, result)
        return Planned(door.sql(spark, "SELECT 1 AS ok WHERE false").drop("ok"))
    if result is not None:
        return Planned(result, tuple(blocks))
    # Windowed blocks only inside a plain statement: run it over their views (each
    # outermost block's span read as its view, offsets kept for Spark's positions).
    outer = [(b.span[0], b.span[1], f"SELECT * FROM {executor_view(b.index, uid)}")
             for b in stmt.blocks
             if not any(o is not b and o.span[0] <= b.span[0] and b.span[1] <= o.span[1]
                        for o in stmt.blocks)]
    final = splice(stmt.text, outer)
    if stmt.kind == "create_view":
        # The view's body reads windowed blocks: make the view from the body's DataFrame,
        # which keeps their plans (a SQL view would keep their names, and this
        # statement's views are dropped once it is planned); its head blanked.
        with spark_errors(stmt.source):
            _create_view(stmt, door.sql(spark, splice(final, [(0, stmt.body_start, "")])))
        return Planned(door.sql(spark, "SELECT 1 AS ok WHERE false").drop("ok"))
    if stmt.kind == "write":  # the rows written are the windowed result's, changelog and all
        return Planned(write(stmt, final, spark), tuple(blocks))
    with spark_errors(stmt.source):
        return Planned(door.sql(spark, final), tuple(blocks))


def _same_block(block, ordered: bool) -> tuple:
    """What makes two inner blocks the same query, blanks and offsets aside: the tree,
    the clauses, the blocks they read, and whether the result is in §7's order (an inner
    block only: a statement's own block is one of a kind, and rendering it is spared)."""
    written = block.sql if block.select is None else block.select.sql("spark")
    return written, block.clauses, block.inner, ordered


def _keep_shared(planned: Planned | None) -> None:
    """A replayed block the statement reads in two places: its driver's output kept
    (persisted) until the result goes (:func:`remember` releases it), so the replay runs
    once. Spark alone runs the one DataFrame once per place: reusing an exchange needs the
    same columns on both sides, and each place's column pruning makes them differ. Called
    once the statement's views are dropped (dropping a view uncaches its plan); the
    result has not run yet, and Spark looks for kept plans when it does."""
    blocks = planned.blocks if planned is not None else ()
    for i, b in enumerate(blocks):
        shared = any(o is b for o in blocks[:i])
        if shared and b.replay is not None and not b.replay.emitted.is_cached:
            b.replay.emitted.persist()


def _inner_view(block, df: DataFrame, cancel: bool, uid: str) -> str:
    """An inner block's result as the view the statement reads it by; its name. With
    ``cancel``, a retracting result with its retractions subtracted in advance (a batch
    consumer's one pane per window holds exactly what is left)."""
    if cancel and block.clauses.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING:
        df = net_changelog(df)
    df.createOrReplaceTempView(executor_view(block.index, uid))
    return executor_view(block.index, uid)


def physical_plans(stmt: Statement, spark: SparkSession,
                   registry: dict) -> list[PhysicalPlan | Exception]:
    """What each windowed block runs on (EXPLAIN's ``-- runs as:``), innermost first,
    decided as :func:`execute` decides it but from analysis alone: an inner block's
    result is stood in for by its :meth:`~BlockPlan.shape`, so nothing runs. A block that
    cannot be planned gives its error (a DfsqlError, or whatever Spark raised: EXPLAIN
    shows it on the line and still answers), and the blocks after it are not planned."""
    uid = new_uid()
    out: list[PhysicalPlan | Exception] = []
    registered: list[str] = []
    try:
        for block in stmt.blocks:
            plan: BlockPlan | None = None
            try:
                plan = _block_plan(stmt, block, spark, uid, registry)
                plan.check_clauses()
                out.append(on_clock(plan, reads_changelog(stmt, plan.block)) or choose(plan))
                if block is not stmt.top:
                    plan.shape().createOrReplaceTempView(executor_view(block.index, uid))
                    registered.append(executor_view(block.index, uid))
            except DfsqlError as err:
                out.append(err)
                break
            except Exception as err:  # EXPLAIN says why, and never fails on it
                out.append(err)
                break
            finally:
                registered += plan.registered if plan is not None else []
    finally:
        for name in registered:
            spark.catalog.dropTempView(name)
    return out


#: each remembered result's blocks, weakly keyed by the result DataFrame (the blocks hold
#: no reference to it, so the entry goes with the result)
_PLANNED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def remember(planned: Planned) -> DataFrame:
    """Keep ``planned`` for its result (metrics: dropped elements; the shell's plot) for as
    long as the result lives; a driver output persisted (for LATE ROWS INTO, or for a
    block read in two places) is released with the result (a view of late rows read
    afterwards runs the driver again)."""
    df = planned.result
    if planned.blocks:
        _PLANNED[df] = planned.blocks
    for b in planned.blocks:
        if b.replay is not None and b.replay.emitted.is_cached:
            weakref.finalize(df, b.replay.emitted.unpersist)
    return df


def planned_of(df: DataFrame) -> Planned | None:
    """The Planned behind a result :func:`remember` kept (None for any other DataFrame)."""
    blocks = _PLANNED.get(df)
    return Planned(df, blocks) if blocks is not None else None
