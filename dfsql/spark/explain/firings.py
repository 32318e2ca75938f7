"""``EXPLAIN FIRINGS <windowed query> [WHERE p]`` on Spark (docs/reference.md#explaining-time).

The query's block is replayed as for the query itself, with the model's recorder on
(:mod:`dfsql.spark.replay.recorder`): the driver's one run makes the panes and records
every event of every window's life. The FIRE and RETRACT events are joined to the
panes of that run for the values they emitted; the events come back in §7's order.

``WHERE``: conjuncts over group keys that are plain input columns filter the input
before the driver (after the watermark, which is global, is computed from all of it),
so one key of a large table costs about that key's rows; the whole predicate then
filters the events (window_start, event, … included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from dfsql.errors import NotSupportedError
from dfsql.language.names import FIRINGS_COLUMNS, PANE_COLUMNS
from dfsql.model.panes import DROP_REASONS
from dfsql.spark.errors import spark_errors
from dfsql.spark.physical import choose
from dfsql.spark.planned import PlannedBlock
from dfsql.spark.replay.panes import replay_panes
from dfsql.spark.values import FiringsRequest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.language.statement import Statement
    from dfsql.spark.planned import BlockView

COLUMNS = FIRINGS_COLUMNS


def firings_offset(stmt: Statement) -> int:
    """Where the word FIRINGS is (errors about EXPLAIN FIRINGS point at it): the
    statement's second top-level token."""
    tokens = stmt.scanned.tokens if stmt.scanned is not None else []
    top = [t for t in tokens if t.depth == 0][:2]
    return top[1].start if len(top) == 2 and top[1].is_word("FIRINGS") else 0


def refuse(stmt: Statement, message: str, hint: str) -> NotSupportedError:
    p = stmt.source.pos(firings_offset(stmt))
    return NotSupportedError(message, p.line, p.column, hint)


def key_names(plan: BlockView) -> list[str]:
    """The group keys' columns in the result: as the SELECT names them, else as written."""
    out = []
    for i, k in enumerate(plan.stages.group_keys):
        out.append(k.output_name or k.input_name or f"key_{i}")
    return out


def firings_result(plan: BlockView, stmt: Statement) -> tuple[DataFrame, PlannedBlock]:
    """The events of the statement's windowed block (see the module docstring)."""
    plan.check_clauses()
    plan.analyse_original()
    if plan.is_streaming():
        raise refuse(stmt, "EXPLAIN FIRINGS replays a bounded table, but this query reads a "
                     "stream", "store the stream's rows in a table and explain the query over "
                     "it, with PROCESSING TIME <arrival column>")
    if plan.clauses.processing_time is None:
        raise refuse(stmt, "EXPLAIN FIRINGS needs PROCESSING TIME: without it the table "
                     "arrives at once and each window fires one ON_TIME pane",
                     "add PROCESSING TIME <arrival column> to replay the table in arrival "
                     "order")
    residual, pushed = _split_where(plan, stmt.firings_where, stmt.firings_predicate)
    tz = plan.spark.conf.get("spark.sql.session.timeZone")
    with spark_errors(plan.src):
        physical = choose(plan)
        replayed = replay_panes(plan, physical, FiringsRequest(pushed, tz))
    df = in_order(plan, with_values(plan, replayed.panes, replayed.events), residual,
                  stmt.source)
    return df, PlannedBlock(plan, physical, replayed)


def in_order(plan: BlockView, df: DataFrame, where: tuple[int, str] | None,
             source) -> DataFrame:
    """The events narrowed by the statement's ``WHERE`` (offset in ``source``, text),
    in §7's order."""
    if where is not None:
        offset, text = where
        with spark_errors(source, lambda k: k + offset):
            df = df.where(text)
    names = key_names(plan)
    # one sorted partition: no sampling job for a range exchange (the events of a key or
    # two are few; the whole table's sort in one task is still a plain external sort)
    return df.repartition(1).sortWithinPartitions("at", *names, "window_start", "__seq") \
        .drop("__seq")


def _split_where(plan: BlockView, where: tuple[int, str] | None,
                 tree: exp.Expression | None):
    """(the predicate on the events, the conjuncts over plain-column group keys as a
    filter of the input stage, or None). ``tree``: the predicate as the statement's
    parser read it (None: Spark reports the mistake, positioned)."""
    if where is None or tree is None:
        return where, None
    column_of = {n.lower(): k.column for n, k in zip(key_names(plan), plan.stages.group_keys,
                                                     strict=True)
                 if k.input_name is not None}
    pushed = []
    for conj in (tree.flatten() if isinstance(tree, exp.And) else [tree]):
        cols = list(conj.find_all(exp.Column))
        if cols and all(c.name.lower() in column_of and not c.table for c in cols) and \
                not any(isinstance(n, exp.Subquery | exp.AggFunc) for n in conj.walk()):
            moved = conj.copy()
            for c in moved.find_all(exp.Column):
                c.replace(exp.column(column_of[c.name.lower()]))
            pushed.append(moved.sql("spark"))
    return where, (" AND ".join(f"({p})" for p in pushed) or None)


def _value_sql(plan: BlockView) -> str:
    """A pane's aggregates as the SELECT names them (``total=7, n=3``), in Spark SQL over
    the panes table."""
    named = {a.alias: a.output_name for a in plan.stages.aggregate_calls if a.output_name}
    calls = {a.alias: a.function.upper() for a in plan.stages.aggregate_calls}
    parts = []
    for _, alias in plan.stages.aggregates:
        name = named.get(alias) or f"{calls.get(alias, 'aggregate')}(...)"
        name = name.replace("'", "\\'")
        parts.append(f"concat('{name}=', coalesce(CAST(`{alias}` AS STRING), 'NULL'))")
    return f"concat_ws(', ', {', '.join(parts)})" if parts else "''"


def _time(col: str) -> str:
    """A TIMESTAMP column as a detail prints it: the time of day (with the date when it is
    not the event's own date); NULL (an infinite watermark) as -inf."""
    return (f"CASE WHEN {col} IS NULL THEN '-inf' WHEN to_date({col}) = to_date(`at`) "
            f"THEN date_format({col}, 'HH:mm:ss') ELSE date_format({col}, "
            "'yyyy-MM-dd HH:mm:ss') END")


def with_values(plan: BlockView, panes: DataFrame, ev: DataFrame) -> DataFrame:
    """The recorded events ``ev`` with the values their ``panes`` emitted, in the
    result's columns (and ``__seq``, the model's order of one key's events at one
    instant)."""
    from pyspark.sql import functions as F  # noqa: N812

    keys = list(plan.stages.key_columns)
    names = key_names(plan)
    panes = panes.select(
        *[F.col(k).alias(f"__p{i}") for i, k in enumerate(keys)],
        *[F.col(c).alias(f"__p_{c}") for c in PANE_COLUMNS
          if c not in ("pane_timing", "is_last")],
        F.expr(_value_sql(plan)).alias("__value"))
    cond = [ev[k].eqNullSafe(panes[f"__p{i}"]) for i, k in enumerate(keys)]
    cond += [ev["window_start"].eqNullSafe(panes["__p_window_start"]),
             ev["window_end"].eqNullSafe(panes["__p_window_end"]),
             ev["__ev_index"] == panes["__p_pane_index"], ev["at"] == panes["__p_emit_time"],
             (ev["event"] == F.lit("RETRACT")) == panes["__p_is_retraction"]]
    joined = ev.join(panes, cond, "left")
    reasons = ", ".join("'" + r.replace("'", "\\'") + "'" for r in DROP_REASONS)
    detail = (
        "CASE event "
        "WHEN 'FIRE' THEN concat(detail, '; emits ', __value) "
        "WHEN 'RETRACT' THEN concat('retracts ', __value, '; ', detail) "
        f"WHEN 'DROPPED' THEN concat(element_at(array({reasons}), CAST(__reason AS INT) + 1), "
        f"'; watermark ', {_time('__wm')}) "
        f"WHEN 'ELEMENT' THEN concat('event time ', coalesce({_time('__etime')}, 'NULL')) "
        f"WHEN 'LATE_ELEMENT' THEN concat('event time ', {_time('__etime')}, "
        f"'; late: its window ended at or before the watermark') "
        "ELSE detail END")
    return joined.select(
        *[F.col(k).alias(n) for k, n in zip(keys, names, strict=True)],
        "window_start", "window_end", "at", "event", F.col("__wm").alias("watermark"),
        F.col("__ev_index").alias("pane_index"), F.col("__ev_timing").alias("pane_timing"),
        F.expr(detail).alias("detail"), "__seq")
