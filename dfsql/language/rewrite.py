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
  (``__dfsql_panes``) with the pane columns of docs/reference.md#output-columns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dfsql.errors import AnalysisError, DfsqlSyntaxError, NotSupportedError, WindowedQueryError
from dfsql.language.blocks import WindowedBlock
from dfsql.language.facts import table_nodes
from dfsql.language.names import (
    EVENT_TIME,
    LATE_ROW,
    PANE_COLUMNS,
    PANES_TABLE,  # noqa: F401 - the table the output stage reads, named with the stages
    PROCESSING_TIME,
    SORT_COLUMNS,
)
from dfsql.language.scan import Source
from dfsql.language.select_tree import (
    SPARK_AGGREGATES,
    is_aggregate,
    lambda_vars,
    node_pos,
    parse_select,
    unknown_calls,
)
from dfsql.language.signed import signed_aggregates
from dfsql.language.stages import (
    AggregateCall,
    ClauseTrees,
    GroupKey,
    OutputStage,
    Stages,
    aggregate_call,
    column_name,
)
from dfsql.language.tree_positions import start_of
from dfsql.model import clauses as c
from dfsql.model.changelog import (
    CHANGELOG_GROUP,
    CHANGELOG_ORDER,
    KEYS,
    NEXT_PANE,
    OrderTerm,
)


def rewrite(block: WindowedBlock, src: Source, signed: bool = False,
            changelog: bool = False, late_rows: bool = False) -> Stages:
    """Split ``block`` into the input, aggregate and output stages.

    ``signed``: the block reads a changelog (an ACCUMULATING AND RETRACTING result) row
    by row, so its aggregates subtract retraction rows (:func:`signed_aggregates`).
    ``changelog``: the result is a changelog even without PROCESSING TIME (a stream on
    the engine's clock), so it gets §7's default order.
    ``late_rows``: the panes carry a stream's dropped rows in the hidden column
    :data:`~dfsql.language.names.LATE_ROW` (LATE ROWS INTO a side sink); the unordered
    output stage passes them through, past HAVING, for the sink to split off.

    :func:`~dfsql.language.parse_statement` rewrites every block once, to report SELECT
    mistakes before any Spark session exists, and keeps the stages in the block
    (:attr:`~WindowedBlock.checked`): they are returned as they are while the block's
    clauses and aggregates are the ones they were made for. Any other variant is made
    from the trees the block holds (its SELECT, its ON and PROCESSING TIME): nothing is
    parsed again.
    """
    checked = block.checked
    if checked is not None and not (signed or changelog or late_rows) and \
            checked[0] == block.clauses and checked[1] == block.aggregates:
        return checked[2]
    return _rewrite(block, src, signed, changelog, late_rows)


def _rewrite(block: WindowedBlock, src: Source, signed: bool = False,
             changelog: bool = False, late_rows: bool = False) -> Stages:
    select = parse_select(block, src)
    cl = block.clauses
    region_pos = src.pos(block.region[0])
    if cl.late_rows_into is not None:
        _check_late_rows_view(select, block, src)
    group_exprs = _group_exprs(select, block, src)

    names = SPARK_AGGREGATES | (block.aggregates or frozenset())
    if signed:
        signed_aggregates(select, block, src, names)
    items = list(select.expressions)

    def is_agg(node: exp.Expression) -> bool:
        return is_aggregate(node, names)

    # Functions Spark has not been asked about yet (at parse time): a mistake that may
    # depend on whether one is an aggregate is left for the planner to report.
    pending = frozenset() if block.aggregates is not None else frozenset(
        str(n.this).lower() for n in unknown_calls(select, names))
    keys = _group_keys(group_exprs, items, block, src, is_agg)
    having = select.args.get("having")
    order = select.args.get("order")
    aggs = _aggregates([*items, having, order], is_agg)
    if not aggs and not group_exprs and not pending:
        raise WindowedQueryError(
            "a windowed query must aggregate (GROUP BY and/or an aggregate function)",
            region_pos.line, region_pos.column,
            "add GROUP BY <key> and an aggregate such as COUNT(*) to the SELECT",
        )
    calls, input_cols = _aggregate_inputs(aggs, is_agg)
    key_cols = tuple(f"__k{i}" for i in range(len(keys)))
    out = _output_stage(select, items, keys, key_cols, aggs, block, src, pending,
                        changelog, late_rows)
    group_keys = tuple(GroupKey(col, k.sql("spark"), next(
        (out.names[j] for j, i in enumerate(items) if i.unalias() == k), None), column_name(k),
        None if (at := start_of(k)) is None else block.span[0] + at)
        for col, k in zip(key_cols, keys, strict=True))
    calls = tuple(replace(a, output_name=next(
        (out.names[j] for j, i in enumerate(items) if i.unalias() == g), None))
        for a, g in zip(calls, aggs, strict=True))
    inp, trees = _input_stage(select, keys, key_cols, input_cols, cl, block.trees)
    return Stages(
        input=inp,
        key_columns=key_cols,
        aggregates=tuple((a.sql, a.alias) for a in calls),
        output=out.stage,
        output_names=out.names,
        has_processing_time=cl.processing_time is not None,
        default_order=out.default_order,
        default_order_by=out.default_order_by,
        group_keys=group_keys,
        aggregate_calls=calls,
        clause_trees=trees,
        read_columns=tuple((alias, column.name) for column, alias in input_cols),
    )


def _group_exprs(select: exp.Select, block: WindowedBlock, src: Source,
                 ) -> list[exp.Expression]:
    """GROUP BY's expressions as written; GROUPING SETS, ROLLUP and CUBE cannot be
    windowed."""
    grp = select.args.get("group")
    if grp is None:
        return []
    # sqlglot keeps GROUPING SETS / ROLLUP(...) / CUBE(...) among the expressions and
    # WITH ROLLUP / WITH CUBE in args.
    if any(grp.args.get(k) for k in ("grouping_sets", "cube", "rollup")) or any(
            isinstance(g, exp.GroupingSets | exp.Rollup | exp.Cube)
            for g in grp.expressions):
        at = block.grouping_at
        p = src.pos(at if at is not None else block.region[0])
        raise NotSupportedError("GROUPING SETS, ROLLUP and CUBE cannot be windowed",
                                p.line, p.column,
                                "group by plain keys in a windowed query")
    return list(grp.expressions)


def _group_keys(group_exprs: list[exp.Expression], items: list[exp.Expression],
                block: WindowedBlock, src: Source, is_agg) -> list[exp.Expression]:
    """The group keys: GROUP BY 1 / GROUP BY alias → the select expression."""
    aliases = {i.alias.lower(): i.unalias() for i in items if isinstance(i, exp.Alias)}
    keys: list[exp.Expression] = []
    for g in group_exprs:
        if isinstance(g, exp.Literal) and g.is_int:
            g = _ordinal_item(g, items, block, src, is_agg)
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() in aliases \
                and not is_agg(aliases[g.name.lower()]):
            g = aliases[g.name.lower()]
        keys.append(g)
    return keys


def _aggregates(parts: list[exp.Expression | None], is_agg) -> list[exp.Expression]:
    """The distinct aggregate calls of SELECT, HAVING and ORDER BY (``parts``), outermost
    only (not inside OVER), with their FILTER."""
    aggs: list[exp.Expression] = []
    for e in parts:
        if e is None:
            continue
        for node in e.walk():
            if is_agg(node) and not isinstance(node.parent, exp.Window):
                target = node.parent if isinstance(node.parent, exp.Filter) else node
                # identity, not equality, for nesting: SUM(x) FILTER (...) is not inside
                # a separate SUM(x) of the same SELECT
                if not any(target == a for a in aggs) and not any(
                        any(node is d for d in a.walk()) for a in aggs if a is not target):
                    aggs.append(target)
    # drop aggregates nested in another aggregate's arguments (Spark rejects those anyway)
    return [a for a in aggs if not any(
        a is not b and any(a is d for d in list(b.walk())[1:]) for b in aggs)]


def _aggregate_inputs(aggs: list[exp.Expression], is_agg,
                      ) -> tuple[tuple[AggregateCall, ...], list[tuple[exp.Column, str]]]:
    """(each aggregate over the input columns, aliased ``__a<n>``, the columns the
    aggregates read and their input-stage aliases ``__c<j>``)."""
    col_alias: dict[str, str] = {}
    input_cols: list[tuple[exp.Column, str]] = []
    calls: list[AggregateCall] = []
    for n, a in enumerate(aggs):
        bound = lambda_vars(a)

        def to_input(node: exp.Expression, bound=bound) -> exp.Expression:
            if isinstance(node, exp.Column) and node.name.lower() not in bound:
                key = node.sql("spark")
                if key not in col_alias:
                    col_alias[key] = f"__c{len(col_alias)}"
                    input_cols.append((node.copy(), col_alias[key]))
                return exp.column(col_alias[key])
            return node

        calls.append(aggregate_call(a.transform(to_input, copy=True), f"__a{n}", is_agg))
    return tuple(calls), input_cols


@dataclass(frozen=True)
class _Output:
    """The output stage and what the executor needs to know of its order."""

    stage: OutputStage
    names: tuple[str, ...]
    default_order: bool
    default_order_by: tuple[str, ...] | None


def _output_stage(select: exp.Select, items: list[exp.Expression],
                  keys: list[exp.Expression], key_cols: tuple[str, ...],
                  aggs: list[exp.Expression], block: WindowedBlock, src: Source,
                  pending: frozenset[str], changelog: bool, late_rows: bool) -> _Output:
    """SELECT over keys, aggregates and pane columns, HAVING, ORDER BY (the user's or
    docs/reference.md#output-columns's) and LIMIT, over the table of panes."""
    def to_output(node: exp.Expression) -> exp.Expression:
        for n, a in enumerate(aggs):
            if node == a:
                return exp.column(f"__a{n}")
        for i, k in enumerate(keys):
            if node == k:
                return exp.column(key_cols[i])
        return node

    having = select.args.get("having")
    order = select.args.get("order")
    limit = select.args.get("limit")
    out_items: list[str] = []
    out_names: list[str] = []
    for i in items:
        name = i.alias_or_name if (isinstance(i, exp.Alias) or isinstance(i, exp.Column)) \
            else i.sql("spark")
        body = i.unalias().transform(to_output, copy=True)
        _check_grouped(body, block, src, key_cols, pending)
        out_items.append(f"{body.sql('spark')} AS `{name}`")
        out_names.append(name)
    named = {n.lower() for n in out_names}
    for pc in PANE_COLUMNS:
        if pc not in named:
            out_items.append(pc)
            out_names.append(pc)

    select_clause = ("SELECT DISTINCT " if select.args.get("distinct") else "SELECT ") \
        + ", ".join(out_items)
    where = None
    if having is not None:
        cond = having.this.transform(to_output, copy=True)
        _check_grouped(cond, block, src, key_cols, pending)
        where = cond.sql("spark")
    parts = [select_clause, *([f"WHERE {where}"] if where is not None else [])]
    default_order_by: tuple[str, ...] | None = None
    unordered: tuple[str, ...] | None = None
    if order is not None:
        # ORDER BY may name output aliases; keep names that are outputs as they are.
        ords = []
        for o in order.expressions:
            ords.append(o.transform(to_output, copy=True).sql("spark"))
        parts.append("ORDER BY " + ", ".join(ords))
    elif block.clauses.processing_time is not None or changelog:
        order_by = _changelog_order(select, items, keys, out_names, block.clauses)
        row_by_row = limit is None and not select.args.get("distinct") and not any(
            e.find(exp.Window) for e in [*items, *([having] if having is not None else [])])
        if row_by_row:
            # the executor sorts itself: the stage selects the hidden columns it sorts by
            hidden = [h for h in SORT_COLUMNS if h in order_by]
            unordered_where = where
            if late_rows:
                hidden.append(LATE_ROW)
                if where is not None:  # a late row passes HAVING, for the sink to split off
                    unordered_where = f"({where}) OR {LATE_ROW} IS NOT NULL"
            unordered = (", ".join([select_clause, *hidden]),
                         *([f"WHERE {unordered_where}"] if unordered_where is not None else []))
            default_order_by = order_by
        parts.append("ORDER BY " + ", ".join(order_by))
    if limit is not None:
        parts.append(limit.sql("spark").strip())
    return _Output(OutputStage(tuple(parts), unordered), tuple(out_names), order is None,
                   default_order_by)


def _changelog_order(select: exp.Select, items: list[exp.Expression],
                     keys: list[exp.Expression], out_names: list[str],
                     cl: c.Clauses) -> tuple[str, ...]:
    """docs/reference.md#output-columns's changelog order as ORDER BY items, rendered from the model's
    definition (:data:`dfsql.model.changelog.CHANGELOG_ORDER`). Without merging the row a
    retraction sorts with is its window's next pane (``NEXT_PANE``), which SQL reads off
    the row; where windows merge it is another window's pane, so the replay ranks the rows
    within one emit time and key (``changelog_ranks``, hidden SORT_COLUMNS).
    A batch result (no PROCESSING TIME) has no order, as any Spark SQL result without
    ORDER BY."""
    keys_order = [f"`{out_names[j]}`" for j, i in enumerate(items)
                  if any(i.unalias() == k for k in keys)]
    distinct = bool(select.args.get("distinct"))
    retracting = cl.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING
    if retracting and not distinct and cl.window.merging:
        return (*_order_items(CHANGELOG_GROUP, keys_order, False), *SORT_COLUMNS)
    # (SELECT DISTINCT can only sort by what it selects: a retraction by its own pane)
    return _order_items(CHANGELOG_ORDER, keys_order, retracting and not distinct)


def _order_items(terms: tuple[OrderTerm, ...], keys_order: list[str],
                 next_pane: bool) -> tuple[str, ...]:
    """ORDER BY items for the model's order ``terms``: a retraction's replacing row read
    as its window's next pane (``next_pane``) or as itself; a repeated item once."""
    out: list[str] = []
    for t in terms:
        if t.column == KEYS:
            out += keys_order
            continue
        item = t.column
        step = NEXT_PANE.get(t.column, 0) if t.replacing and next_pane else 0
        if step:
            item += f" + {'' if step == 1 else f'{step} * '}CAST(is_retraction AS INT)"
        item += " DESC" if t.descending else ""
        if item not in out:
            out.append(item)
    return tuple(out)


def _input_stage(select: exp.Select, keys: list[exp.Expression], key_cols: tuple[str, ...],
                 input_cols: list[tuple[exp.Column, str]], cl: c.Clauses,
                 trees: ClauseTrees) -> tuple[exp.Select, ClauseTrees]:
    """The user's FROM/JOIN/WHERE (and CTEs), projecting the keys, the event and
    processing times and the columns the aggregates read; and the trees of ON and
    PROCESSING TIME (``trees`` holds those parsed before)."""
    inp = select.copy()
    for arg in ("group", "having", "order", "limit", "distinct", "qualify", "offset"):
        inp.set(arg, None)
    exprs = [exp.alias_(k.copy(), key_cols[i]) for i, k in enumerate(keys)]
    exprs += [exp.alias_(column, alias) for column, alias in input_cols]
    if not exprs and cl.on is None and cl.processing_time is None:
        exprs = [exp.alias_(exp.Literal.number(1), "__one")]
    used: list[tuple[c.Expr, exp.Expression]] = []
    for expr, alias, clause in ((cl.on, EVENT_TIME, "ON"),
                                (cl.processing_time, PROCESSING_TIME, "PROCESSING TIME")):
        if expr is None:
            continue
        tree = next((t for e, t in trees if e == expr), None)
        if tree is None:
            tree = _clause_tree(expr, alias, clause)
        used.append((expr, tree))
        exprs.insert(len(keys) + (alias == PROCESSING_TIME and cl.on is not None),
                     exp.alias_(tree.copy(), alias))
    inp.set("expressions", exprs)
    return inp, tuple(used)


def _check_late_rows_view(select: exp.Select, block: WindowedBlock, src: Source) -> None:
    """LATE ROWS INTO names a temp view that the query creates; naming a table the query
    reads would replace that table, for this and every later query of the session."""
    name = block.clauses.late_rows_into.strip("`")
    if name.lower() not in {t.name.lower() for t in table_nodes(select) if not t.db}:
        return
    at = block.late_rows_at
    p = src.pos(at if at is not None else block.region[0])
    raise AnalysisError(f"LATE ROWS INTO {name} would replace a table this query reads",
                        p.line, p.column,
                        f"keep the late rows in a view of their own, e.g. LATE ROWS INTO "
                        f"{name}_late")


def _clause_tree(expr: c.Expr, alias: str, clause: str) -> exp.Expression:
    """The ON / PROCESSING TIME expression (Spark SQL kept as text) parsed, once, as one
    expression (read as the input stage's ``expr AS alias``); anything else is the
    user's mistake, at the clause."""
    try:
        node = sqlglot.parse_one(f"{expr.sql} AS {alias}", read="spark")
    except ParseError as e:
        err = e.errors[0] if e.errors else {}
        raise DfsqlSyntaxError(f"cannot parse the {clause} expression {expr.sql}: "
                               f"{err.get('description', 'invalid expression')}",
                               expr.pos.line, expr.pos.column,
                               f"{clause} takes one Spark SQL expression, e.g. {clause} ts"
                               ) from None
    if not isinstance(node, exp.Alias) or node.alias != alias:
        raise DfsqlSyntaxError(f"the {clause} expression {expr.sql} is not one expression",
                               expr.pos.line, expr.pos.column,
                               f"{clause} takes one Spark SQL expression, e.g. {clause} ts")
    return node.this


def _ordinal_item(lit: exp.Literal, items: list[exp.Expression], block: WindowedBlock,
                  src: Source, is_agg) -> exp.Expression:
    """``GROUP BY n``: the n-th SELECT item (1-based), as Spark's groupByOrdinal reads it;
    out of range or an aggregate is Spark's analysis error, here positioned at ``n``."""
    n = int(lit.name)
    p = node_pos(lit, block, src)
    if not 1 <= n <= len(items):
        raise AnalysisError(f"GROUP BY position {n} is not in the select list", p.line,
                            p.column, f"positions count the SELECT items from 1 to {len(items)}")
    item = items[n - 1].unalias()
    if any(is_agg(node) for node in item.walk()):
        keys = [str(k + 1) for k, i in enumerate(items)
                if not any(is_agg(node) for node in i.walk())]
        raise AnalysisError(
            f"GROUP BY position {n} is the aggregate {item.sql('spark')}", p.line, p.column,
            "group by the positions of keys, e.g. GROUP BY " + ", ".join(keys) if keys else
            "a query grouped by nothing but aggregates needs no GROUP BY")
    return item


def _inside_call(node: exp.Expression, names: frozenset[str]) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Anonymous) and str(parent.this).lower() in names:
            return True
        parent = parent.parent
    return False


def _check_grouped(body: exp.Expression, block: WindowedBlock, src: Source,
                   key_cols: tuple[str, ...], pending: frozenset[str] = frozenset()) -> None:
    """A column left in the output stage must be a key, an aggregate or a window column
    (or an argument of a ``pending`` function, which may turn out to be an aggregate)."""
    allowed = set(key_cols) | {f"__a{i}" for i in range(1000)} | set(PANE_COLUMNS)
    bound = lambda_vars(body)
    for col in body.find_all(exp.Column):
        name = col.name
        if name in allowed or name.lower() in PANE_COLUMNS or name.lower() in bound:
            continue
        if col.find_ancestor(exp.Window) is not None:
            continue
        if pending and _inside_call(col, pending):
            continue
        p = node_pos(col, block, src)
        raise WindowedQueryError(
            f"{col.sql('spark')} is neither grouped nor aggregated",
            p.line, p.column,
            f"add {col.sql('spark')} to GROUP BY or wrap it in an aggregate such as MAX(...)",
        )
