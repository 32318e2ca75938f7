"""A batch block's panes as Spark's own aggregation (docs/reference.md#trigger: without PROCESSING
TIME a bounded table arrives at once, and every key and window fires one ON_TIME, last
pane, whatever the trigger: ``GROUP BY window()`` / ``session_window()``), and a stream
on the engine's clock compiled to the same aggregation
(:func:`dfsql.spark.stream.plan.native_panes`). The windows are the model's:
:func:`~dfsql.spark.window_assignment.grid_sql` renders FIXED and SLIDING, and
:func:`~dfsql.model.windows.closed_gap_sessions` says how Spark's sessions match §3's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.language.names import EVENT_TIME, SORT_COLUMNS
from dfsql.model import clauses as c
from dfsql.model.windows import closed_gap_sessions
from dfsql.spark.values import late_row_columns
from dfsql.spark.window_assignment import GridSql, grid_sql

if TYPE_CHECKING:
    from dfsql.spark.values import ReplayPlan


def batch_panes_sql(plan: ReplayPlan, inp: str, stream: bool = False,
                    ranked: bool = False, emit_times: str | None = None) -> str:
    """The panes of a batch block as Spark's own aggregation (every key and window one
    ON_TIME, last pane), over the input stage named (or parenthesised) ``inp``;
    with ``stream``, Spark's streaming aggregation in append mode (a watermarked
    streaming input, on the engine's clock: see :func:`dfsql.spark.stream.plan.native_panes`).
    A stream's panes, and with ``ranked`` any, carry the hidden §7 rank a changelog's
    order reads (0: one pane per window, nothing to order within it)."""
    keys = list(plan.stages.key_columns)
    w = plan.clauses.window
    g = grid_sql(w, EVENT_TIME)
    if isinstance(w, c.GlobalWindows):
        win_expr = None
        start = end = "CAST(NULL AS TIMESTAMP)"
    elif g is not None:
        # FIXED and SLIDING: the model's assignment, rendered for Spark; a sampling grid
        # (period > size) keeps only the elements a window holds: one in a gap is in no
        # window and not dropped (docs/reference.md#window).
        win_expr = g.group
        if g.column is not None:
            inp = _sampled(plan, inp, g)
    elif isinstance(w, c.SessionWindows) and closed_gap_sessions(w.gap.micros).gap == 0:
        # [t, t+1µs) merges only with equal times: a 1 µs FIXED window
        win_expr = f"window({EVENT_TIME}, '1 microseconds')"
    elif isinstance(w, c.SessionWindows):
        # Spark's session_window is closed at its gap; the model says which gap and
        # end shift give docs/reference.md#window's half-open sessions (model.windows)
        win_expr = (f"session_window({EVENT_TIME}, "
                    f"'{closed_gap_sessions(w.gap.micros).gap} microseconds')")
    else:  # pragma: no cover - the grammar has no other window
        raise AssertionError(w)
    if win_expr is not None:
        # Spark names the grouping column after the function: window / session_window.
        wcol = win_expr.split("(")[0].strip("`")
        start, end = f"{wcol}.start", f"{wcol}.end"
        if wcol == "session_window":
            shift = closed_gap_sessions(w.gap.micros).end_shift
            end = f"{end} + INTERVAL {shift} MICROSECOND"
        elif g is not None:
            start, end = g.start, g.end
    group = keys + ([win_expr] if win_expr else [])
    select = keys + [f"{start} AS window_start", f"{end} AS window_end"]
    select += [f"{sql} AS {alias}" for sql, alias in plan.stages.aggregates]
    # a stream's pane is emitted by the micro-batch whose watermark passes the window's
    # end: its processing time is that batch's timestamp (current_timestamp() is the
    # batch's, kept in the offset log, so a batch replayed after a crash gets the same)
    emit = "current_timestamp()" if stream else "CAST(NULL AS TIMESTAMP)"
    select += ["CAST(0 AS BIGINT) AS pane_index", "'ON_TIME' AS pane_timing",
               "true AS is_last", f"{emit} AS emit_time", "false AS is_retraction"]
    if stream or ranked:
        select.append(f"CAST(0 AS BIGINT) AS {SORT_COLUMNS[0]}")
    # a NULL event time belongs to no window (docs/reference.md#window): see null_time_rows_sql
    where = f" WHERE {EVENT_TIME} IS NOT NULL" if EVENT_TIME in input_columns(plan) else ""
    group_sql = f" GROUP BY {', '.join(group)}" if group else ""
    sql = f"SELECT {', '.join(select)} FROM {inp}{where}{group_sql}"
    if emit_times is not None:
        sql = _with_emit_times(sql, select, emit_times, plan.name("__dfsql_agg"))
    if isinstance(w, c.SessionWindows) and not stream:
        # The output stage's ORDER BY (docs/reference.md#output-columns) is a range exchange, whose
        # sampling job recomputes the stage below it: here the sort, MergingSessions and
        # aggregate over every element, which would then run twice. Shuffling the (much
        # smaller) panes first makes the sampler read that shuffle instead. (FIXED and
        # SLIDING: the stage is a final hash aggregate, cheaper to recompute than another
        # shuffle.) Hash on more than exactly the keys, or Spark drops the repartition
        # as already satisfied by the aggregate's own partitioning.
        # It also keeps Spark's RemoveRedundantAggregates away from the session
        # aggregate: under an aggregate on its grouping columns only (SELECT DISTINCT
        # key ...), Spark 4 drops it and returns one "session" per element.
        sql = (f"SELECT /*+ REPARTITION({', '.join([*keys, 'window_start'])}) */ * "
               f"FROM ({sql}) AS {plan.name('__dfsql_agg')}")
    return sql


#: the columns of :func:`batch_panes_sql`'s ``emit_times``: a window end, its emit instant
EMIT_END, EMIT_AT = "__dfsql_window_end", "__dfsql_emit_at"


def _with_emit_times(sql: str, select: list[str], emit_times: str, name: str) -> str:
    """The panes of ``sql`` (its SELECT list ``select``, emit_time NULL) with emit_time
    looked up by window end in the small relation ``emit_times``: a broadcast equi-join
    with one row per window end, so each pane matches exactly one."""
    names = [s.rsplit(" AS ", 1)[-1] for s in select]
    out = [f"timestamp_micros({emit_times}.{EMIT_AT}) AS emit_time" if n == "emit_time"
           else f"{name}.{n}" for n in names]
    return (f"SELECT /*+ BROADCAST({emit_times}) */ {', '.join(out)} FROM ({sql}) AS {name} "
            f"JOIN {emit_times} ON unix_micros({name}.window_end) = {emit_times}.{EMIT_END}")


def _sampled(plan: ReplayPlan, inp: str, g: GridSql) -> str:
    """The input ``inp`` with each element's period-long window as ``window``, keeping
    only the elements a sampling window holds (:func:`grid_sql`)."""
    name = plan.name("__dfsql_sampled")
    return (f"(SELECT * FROM (SELECT *, {g.column} AS `window` FROM {inp}) AS {name}_all "
            f"WHERE {g.keep}) AS {name}")


def input_columns(plan: ReplayPlan) -> tuple[str, ...]:
    """The input stage's column names, as the rewrite projects them (no Spark call)."""
    cols = [*plan.stages.key_columns]
    if plan.clauses.on is not None:
        cols.append(EVENT_TIME)
    return tuple(cols)


def null_time_rows_sql(plan: ReplayPlan, inp: str, timed: bool = True) -> str:
    """The batch path's dropped elements — the rows whose event time is NULL — as
    the replay's LATE ROWS INTO rows (in no window; no arrival time, no watermark: a
    batch input arrives all at once, before the watermark leaves -inf). Not ``timed``
    (GLOBAL without ON): none."""
    named = late_row_columns(plan)
    cols = [f"`{k}` AS `{n}`" for k, n in (*named.keys, *named.read)]
    time = EVENT_TIME if timed else "CAST(NULL AS TIMESTAMP)"
    return (f"SELECT {', '.join([*cols, ''])}CAST(NULL AS TIMESTAMP) AS window_start, "
            f"CAST(NULL AS TIMESTAMP) AS window_end, {time} AS event_time, "
            "CAST(NULL AS TIMESTAMP) AS arrival_time, 'null event time' AS reason, "
            f"CAST(NULL AS TIMESTAMP) AS watermark_at_arrival FROM {inp} "
            f"WHERE {f'{EVENT_TIME} IS NULL' if timed else 'false'}")
