"""The SELECT of a windowed block, split into three Spark SQL stages (sqlglot).

* **input** — FROM / JOIN / WHERE of the user's query, projecting the group keys
  (``__k0``…), the event time (``__event_time``), the processing time
  (``__processing_time``) and every column that an aggregate reads (``__c0``…). Spark
  does all of that work before any window is decided.
* **aggregates** — each distinct aggregate call of SELECT / HAVING / ORDER BY, rewritten
  over the input columns (``SUM(__c0) AS __a0``); DISTINCT, FILTER and any Spark
  aggregate function are kept as written, so Spark computes every aggregate.
* **output** — the SELECT expressions over keys, aggregate results and
  window_start / window_end, then HAVING, ORDER BY and LIMIT, over the table of panes
  (``__dfsql_panes``) with the pane columns of LANGUAGE.md §7.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dfsql.errors import DfsqlSyntaxError, NotSupportedError, WindowedQueryError
from dfsql.language import clauses as c
from dfsql.language.scan import Source
from dfsql.language.statement import WindowedBlock

PANES_TABLE = "__dfsql_panes"
EVENT_TIME = "__event_time"
PROCESSING_TIME = "__processing_time"
PANE_COLUMNS = ("window_start", "window_end", "pane_index", "pane_timing", "is_last",
                "emit_time", "is_retraction")
#: Hidden columns of a retracting replay's panes table that place each row in §7's order:
#: the window_start and pane_index of the row a retraction sorts with (the pane that
#: replaces it); an insertion's own. Read by the default ORDER BY, never selected.
SORT_COLUMNS = ("__sort_window_start", "__sort_pane_index")

# Spark aggregate functions that sqlglot parses as anonymous functions.
SPARK_AGGREGATES = {
    "histogram_numeric", "try_sum", "try_avg", "kurtosis", "skewness", "bit_and", "bit_or",
    "bit_xor", "every", "some", "any", "bool_or", "count_min_sketch", "hll_sketch_agg",
    "hll_union_agg", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept", "regr_r2",
    "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "collect_set", "var_pop", "var_samp",
    "variance", "stddev_pop", "stddev_samp", "std", "covar_pop", "covar_samp", "corr",
    "first_value", "last_value", "last", "min_by", "approx_percentile", "percentile_cont",
    "percentile_disc", "array_agg", "grouping", "grouping_id", "theta_sketch_agg",
    "approx_top_k_accumulate", "kll_sketch_agg_bigint", "kll_sketch_agg_double",
}


_GROUPING = re.compile(r"(?i)\b(?:GROUPING\s+SETS|ROLLUP|CUBE)\b")


@dataclass(frozen=True)
class Stages:
    """The three Spark SQL stages of one windowed block."""

    input_sql: str
    key_columns: tuple[str, ...]
    aggregates: tuple[tuple[str, str], ...]  # (Spark SQL over input columns, alias)
    output_sql: str
    output_names: tuple[str, ...]
    has_processing_time: bool
    default_order: bool
    #: LANGUAGE.md §7's default order (ORDER BY items) and the output stage without it,
    #: when that stage is a row-by-row projection and filter (no DISTINCT, LIMIT or window
    #: function), so the executor may order the panes itself. Else None.
    default_order_by: tuple[str, ...] | None = None
    output_sql_unordered: str | None = None

    def explain(self) -> str:
        aggs = ",\n  ".join(f"{sql} AS {alias}" for sql, alias in self.aggregates)
        return (f"-- input stage\n{self.input_sql}\n"
                f"-- aggregates (per key, window and pane)\n  {aggs}\n"
                f"-- output stage\n{self.output_sql}")


def _is_aggregate(node: exp.Expression) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower() in SPARK_AGGREGATES
    return False


def _parse_select(block: WindowedBlock, src: Source) -> exp.Select:
    try:
        tree = sqlglot.parse_one(block.sql, read="spark")
    except ParseError as e:
        err = e.errors[0] if e.errors else {}
        # sqlglot's line/col are 1-based within the block text.
        line, col = err.get("line"), err.get("col")
        offset = block.span[0]
        if line is not None and col is not None:
            lines = block.sql.split("\n")
            offset += sum(len(x) + 1 for x in lines[: line - 1]) + max(col - 1, 0)
        p = src.pos(offset)
        raise DfsqlSyntaxError(f"cannot parse the SELECT: {err.get('description', e)}",
                               p.line, p.column) from None
    if isinstance(tree, exp.Subquery):
        tree = tree.this
    if not isinstance(tree, exp.Select):
        p = src.pos(block.region[0])
        raise WindowedQueryError("WINDOW must follow a single SELECT (not a set operation)",
                                 p.line, p.column,
                                 "put the windowed SELECT in parentheses or a CTE")
    return tree


def _node_pos(node: exp.Expression, block: WindowedBlock, src: Source) -> c.Pos:
    for n in node.walk():
        meta = getattr(n, "meta", None) or {}
        if isinstance(n, exp.Identifier) and "start" in (n.meta or {}):
            return src.pos(block.span[0] + n.meta["start"])
        if "start" in meta:
            return src.pos(block.span[0] + meta["start"])
    return src.pos(block.span[0])


def _lambda_vars(node: exp.Expression) -> set[str]:
    names: set[str] = set()
    for lam in node.find_all(exp.Lambda):
        for v in lam.expressions:
            names.add(v.name.lower())
    return names


def rewrite(block: WindowedBlock, src: Source) -> Stages:
    """Split ``block`` into the input, aggregate and output stages.

    Cached per block and source: :func:`~dfsql.language.parse_statement` rewrites every
    block once to report SELECT mistakes before any Spark session exists, and the planner
    then gets the same (immutable) stages without parsing the SELECT again.
    """
    return _rewrite_cached(block, src)


@functools.lru_cache(maxsize=256)
def _rewrite_cached(block: WindowedBlock, src: Source) -> Stages:
    return _rewrite(block, src)


def _rewrite(block: WindowedBlock, src: Source) -> Stages:
    select = _parse_select(block, src)
    cl = block.clauses
    region_pos = src.pos(block.region[0])

    if select.args.get("group") is not None:
        grp = select.args["group"]
        # sqlglot keeps GROUPING SETS / ROLLUP(...) / CUBE(...) among the expressions and
        # WITH ROLLUP / WITH CUBE in args.
        if any(grp.args.get(k) for k in ("grouping_sets", "cube", "rollup")) or any(
                isinstance(g, exp.GroupingSets | exp.Rollup | exp.Cube)
                for g in grp.expressions):
            m = _GROUPING.search(block.sql)
            p = src.pos(block.span[0] + m.start()) if m else region_pos
            raise NotSupportedError("GROUPING SETS, ROLLUP and CUBE cannot be windowed",
                                    p.line, p.column,
                                    "group by plain keys in a windowed query")
        group_exprs = list(grp.expressions)
    else:
        group_exprs = []

    items = list(select.expressions)
    # GROUP BY 1 / GROUP BY alias → the select expression.
    aliases = {i.alias.lower(): i.unalias() for i in items if isinstance(i, exp.Alias)}
    keys: list[exp.Expression] = []
    for g in group_exprs:
        if isinstance(g, exp.Literal) and g.is_int:
            g = items[int(g.name) - 1].unalias()
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() in aliases \
                and not _is_aggregate(aliases[g.name.lower()]):
            g = aliases[g.name.lower()]
        keys.append(g)

    having = select.args.get("having")
    order = select.args.get("order")
    limit = select.args.get("limit")

    # Aggregates of SELECT, HAVING and ORDER BY, outermost only (not inside OVER).
    aggs: list[exp.Expression] = []

    def collect(e: exp.Expression | None) -> None:
        if e is None:
            return
        for node in e.walk():
            if _is_aggregate(node) and not isinstance(node.parent, exp.Window):
                target = node.parent if isinstance(node.parent, exp.Filter) else node
                # identity, not equality, for nesting: SUM(x) FILTER (...) is not inside
                # a separate SUM(x) of the same SELECT
                if not any(target == a for a in aggs) and not any(
                        any(node is d for d in a.walk()) for a in aggs if a is not target):
                    aggs.append(target)

    for i in items:
        collect(i)
    collect(having)
    collect(order)
    # drop aggregates nested in another aggregate's arguments (Spark rejects those anyway)
    aggs = [a for a in aggs if not any(
        a is not b and any(a is d for d in list(b.walk())[1:]) for b in aggs)]

    if not aggs and not group_exprs:
        raise WindowedQueryError(
            "a windowed query must aggregate (GROUP BY and/or an aggregate function)",
            region_pos.line, region_pos.column,
            "add GROUP BY <key> and an aggregate such as COUNT(*) to the SELECT",
        )

    # Columns read by the aggregates → __c<j> in the input stage.
    col_alias: dict[str, str] = {}
    input_cols: list[tuple[str, str]] = []
    agg_sql: list[tuple[str, str]] = []
    for n, a in enumerate(aggs):
        bound = _lambda_vars(a)

        def to_input(node: exp.Expression, bound=bound) -> exp.Expression:
            if isinstance(node, exp.Column) and node.name.lower() not in bound:
                key = node.sql("spark")
                if key not in col_alias:
                    col_alias[key] = f"__c{len(col_alias)}"
                    input_cols.append((key, col_alias[key]))
                return exp.column(col_alias[key])
            return node

        agg_sql.append((a.transform(to_input, copy=True).sql("spark"), f"__a{n}"))

    key_cols = tuple(f"__k{i}" for i in range(len(keys)))

    def to_output(node: exp.Expression) -> exp.Expression:
        for n, a in enumerate(aggs):
            if node == a:
                return exp.column(f"__a{n}")
        for i, k in enumerate(keys):
            if node == k:
                return exp.column(key_cols[i])
        return node

    out_items: list[str] = []
    out_names: list[str] = []
    for i in items:
        name = i.alias_or_name if (isinstance(i, exp.Alias) or isinstance(i, exp.Column)) \
            else i.sql("spark")
        body = i.unalias().transform(to_output, copy=True)
        _check_grouped(body, block, src, key_cols)
        out_items.append(f"{body.sql('spark')} AS `{name}`")
        out_names.append(name)
    named = {n.lower() for n in out_names}
    for pc in PANE_COLUMNS:
        if pc not in named:
            out_items.append(pc)
            out_names.append(pc)

    parts = [("SELECT DISTINCT " if select.args.get("distinct") else "SELECT ")
             + ", ".join(out_items), f"FROM {PANES_TABLE}"]
    if having is not None:
        cond = having.this.transform(to_output, copy=True)
        _check_grouped(cond, block, src, key_cols)
        parts.append(f"WHERE {cond.sql('spark')}")
    default_order = order is None
    default_order_by: tuple[str, ...] | None = None
    output_sql_unordered: str | None = None
    if order is not None:
        # ORDER BY may name output aliases; keep names that are outputs as they are.
        ords = []
        for o in order.expressions:
            ords.append(o.transform(to_output, copy=True).sql("spark"))
        parts.append("ORDER BY " + ", ".join(ords))
    elif cl.processing_time is not None:
        # LANGUAGE.md §7: a changelog ordered by emit_time, keys, window_start and
        # pane_index; a retraction sorts immediately before the row that replaces it
        # (hidden SORT_COLUMNS), several in their own window_start order. A batch result
        # (no PROCESSING TIME) has no order, as any Spark SQL result without ORDER BY.
        keys_order = [f"`{out_names[j]}`" for j, i in enumerate(items)
                      if any(i.unalias() == k for k in keys)]
        distinct = bool(select.args.get("distinct"))
        if cl.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING and not distinct:
            order_by = ("emit_time", *keys_order, *SORT_COLUMNS, "is_retraction DESC",
                        "window_start")
        else:  # (SELECT DISTINCT can only sort by what it selects)
            order_by = ("emit_time", *keys_order, "window_start", "pane_index",
                        "is_retraction DESC")
        row_by_row = limit is None and not distinct and not any(
            e.find(exp.Window) for e in [*items, *([having] if having is not None else [])])
        if row_by_row:
            # the executor sorts itself: the stage selects the hidden columns it sorts by
            hidden = [h for h in SORT_COLUMNS if h in order_by]
            unordered = list(parts)
            unordered[0] = ", ".join([parts[0], *hidden])
            default_order_by, output_sql_unordered = order_by, "\n".join(unordered)
        parts.append("ORDER BY " + ", ".join(order_by))
    if limit is not None:
        parts.append(limit.sql("spark").strip())
    output_sql = "\n".join(parts)

    # The input stage: the user's FROM/JOIN/WHERE (and CTEs), projecting what is needed.
    inp = select.copy()
    for arg in ("group", "having", "order", "limit", "distinct", "qualify", "offset"):
        inp.set(arg, None)
    proj = [f"{k.sql('spark')} AS {key_cols[i]}" for i, k in enumerate(keys)]
    if cl.on is not None:
        proj.append(f"{cl.on.sql} AS {EVENT_TIME}")
    if cl.processing_time is not None:
        proj.append(f"{cl.processing_time.sql} AS {PROCESSING_TIME}")
    proj += [f"{sql} AS {alias}" for sql, alias in input_cols]
    if not proj:
        proj = ["1 AS __one"]
    inp.set("expressions", [sqlglot.parse_one(p, read="spark") for p in proj])
    return Stages(
        input_sql=inp.sql("spark"),
        key_columns=key_cols,
        aggregates=tuple(agg_sql),
        output_sql=output_sql,
        output_names=tuple(out_names),
        has_processing_time=cl.processing_time is not None,
        default_order=default_order,
        default_order_by=default_order_by,
        output_sql_unordered=output_sql_unordered,
    )


def _check_grouped(body: exp.Expression, block: WindowedBlock, src: Source,
                   key_cols: tuple[str, ...]) -> None:
    """A column left in the output stage must be a key, an aggregate or a window column."""
    allowed = set(key_cols) | {f"__a{i}" for i in range(1000)} | set(PANE_COLUMNS)
    bound = _lambda_vars(body)
    for col in body.find_all(exp.Column):
        name = col.name
        if name in allowed or name.lower() in PANE_COLUMNS or name.lower() in bound:
            continue
        if col.find_ancestor(exp.Window) is not None:
            continue
        p = _node_pos(col, block, src)
        raise WindowedQueryError(
            f"{col.sql('spark')} is neither grouped nor aggregated",
            p.line, p.column,
            f"add {col.sql('spark')} to GROUP BY or wrap it in an aggregate such as MAX(...)",
        )
