"""A block that reads a changelog subtracts its retractions (LANGUAGE.md §6): its
aggregates rewritten over the changelog's rows, in the block's SELECT tree."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from dfsql.errors import NotSupportedError
from dfsql.language.blocks import WindowedBlock
from dfsql.language.scan import Source
from dfsql.language.select_tree import is_aggregate, node_pos

#: The changelog column that marks a retraction row (LANGUAGE.md §6, §7).
RETRACTION = "is_retraction"


def signed_aggregates(select: exp.Select, block: WindowedBlock, src: Source,
                       names: frozenset[str]) -> None:
    """Make the aggregates of a block that reads a changelog subtract its retractions.

    LANGUAGE.md §6: a downstream over an ACCUMULATING AND RETRACTING result sees every
    pane and retraction at its emit_time, and its aggregates subtract what is retracted.
    SUM adds a retraction's value negated; COUNT counts insertions minus retractions;
    AVG is their quotient; MIN and MAX are taken over what is left of the multiset
    (values whose insertions outnumber their retractions). An aggregate's own FILTER
    applies to both. Other aggregates cannot subtract: a positioned error says so.
    """
    r = RETRACTION

    def signed(node: exp.Expression) -> exp.Expression:
        agg = node.this if isinstance(node, exp.Filter) else node
        cond = node.expression.this.sql("spark") if isinstance(node, exp.Filter) else None
        if agg.find(exp.Distinct) is not None or not isinstance(
                agg, exp.Sum | exp.Count | exp.Avg | exp.Min | exp.Max):
            p = node_pos(agg, block, src)
            raise NotSupportedError(
                f"{agg.sql('spark')} cannot subtract the retractions of the changelog it "
                "reads", p.line, p.column,
                "over an ACCUMULATING AND RETRACTING input use SUM, COUNT, AVG, MIN or MAX "
                "(without DISTINCT), or make the input EMIT ACCUMULATING")
        arg = agg.this
        x = "1" if arg is None or isinstance(arg, exp.Star) else f"({arg.sql('spark')})"
        if cond is not None:  # the aggregate's own FILTER: as if the row were absent
            x = f"CASE WHEN {cond} THEN {x} END"
        sign = f"CASE WHEN {r} THEN -1 ELSE 1 END"
        counted = f"CASE WHEN {x} IS NOT NULL THEN {sign} END"
        if isinstance(agg, exp.Sum):
            sql = f"SUM(CASE WHEN {r} THEN -({x}) ELSE {x} END)"
        elif isinstance(agg, exp.Count):
            sql = (f"(COUNT({x}) FILTER (WHERE NOT {r}) - "
                   f"COUNT({x}) FILTER (WHERE {r}))")
        elif isinstance(agg, exp.Avg):
            sql = (f"(SUM(CASE WHEN {r} THEN -({x}) ELSE {x} END) / "
                   f"NULLIF(SUM({counted}), 0))")
        else:
            # values whose net count (insertions - retractions) is positive
            pairs = f"collect_list(named_struct('v', {x}, 's', {counted})) FILTER " \
                    f"(WHERE {x} IS NOT NULL)"
            left = (f"filter(array_distinct(transform({pairs}, y -> y.v)), v -> "
                    f"aggregate(filter({pairs}, y -> y.v = v), 0L, "
                    f"(acc, y) -> acc + y.s) > 0)")
            sql = f"{'array_min' if isinstance(agg, exp.Min) else 'array_max'}({left})"
        return sqlglot.parse_one(sql, read="spark")

    def walk(e: exp.Expression | None) -> None:
        if e is None:
            return
        for node in list(e.find_all(exp.Expression)):
            if node.parent is None and node is not e:
                continue  # replaced already
            if is_aggregate(node, names) and not isinstance(node.parent, exp.Filter) \
                    and node.find_ancestor(exp.Window) is None:
                node.replace(signed(node))
            elif isinstance(node, exp.Filter) and is_aggregate(node.this, names):
                node.replace(signed(node))

    items = []
    for item in select.expressions:
        if not isinstance(item, exp.Alias | exp.Column):  # keep the name Spark would give
            item = exp.alias_(item, item.sql("spark"), quoted=True)
        walk(item)
        items.append(item)
    select.set("expressions", items)
    having = select.args.get("having")
    walk(having.this if having is not None else None)
