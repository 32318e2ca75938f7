"""A block that reads a changelog subtracts its retractions (docs/reference.md#emit): its
aggregates rewritten over the changelog's rows, in the block's SELECT tree."""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

from dfsql.errors import NotSupportedError
from dfsql.language.blocks import WindowedBlock
from dfsql.language.scan import Source
from dfsql.language.select_tree import is_aggregate, node_pos

#: The changelog column that marks a retraction row (docs/reference.md#emit, #output-columns).
RETRACTION = "is_retraction"

# Each aggregate over a changelog as a template over its argument ``__x`` (the rows'
# values, NULL where the aggregate's own FILTER drops the row), parsed once per process.
_SIGN = f"CASE WHEN {RETRACTION} THEN -1 ELSE 1 END"
_COUNTED = f"CASE WHEN __x IS NOT NULL THEN {_SIGN} END"
_PLUS_MINUS = f"SUM(CASE WHEN {RETRACTION} THEN -(__x) ELSE __x END)"
# MIN and MAX: over the values whose net count (insertions - retractions) is positive
_PAIRS = f"collect_list(named_struct('v', __x, 's', {_COUNTED})) FILTER (WHERE __x IS NOT NULL)"
_LEFT = (f"filter(array_distinct(transform({_PAIRS}, y -> y.v)), v -> "
         f"aggregate(filter({_PAIRS}, y -> y.v = v), 0L, (acc, y) -> acc + y.s) > 0)")
_SIGNED = {
    "sum": _PLUS_MINUS,
    "count": (f"(COUNT(__x) FILTER (WHERE NOT {RETRACTION}) - "
              f"COUNT(__x) FILTER (WHERE {RETRACTION}))"),
    "avg": f"({_PLUS_MINUS} / NULLIF(SUM({_COUNTED}), 0))",
    "min": f"array_min({_LEFT})",
    "max": f"array_max({_LEFT})",
}


@functools.lru_cache(maxsize=16)
def _template(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="spark")


def _filled(template: str, parts: dict[str, exp.Expression]) -> exp.Expression:
    """The template's tree with each placeholder column (``__x``…) replaced by a copy of
    its part: a tree transform, nothing of the user's query is parsed again."""
    def fill(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.table and n.name in parts:
            return parts[n.name].copy()
        return n

    return _template(template).transform(fill)


def signed_aggregates(select: exp.Select, block: WindowedBlock, src: Source,
                       names: frozenset[str]) -> None:
    """Make the aggregates of a block that reads a changelog subtract its retractions.

    docs/reference.md#emit: a downstream over an ACCUMULATING AND RETRACTING result sees every
    pane and retraction at its emit_time, and its aggregates subtract what is retracted.
    SUM adds a retraction's value negated; COUNT counts insertions minus retractions;
    AVG is their quotient; MIN and MAX are taken over what is left of the multiset
    (values whose insertions outnumber their retractions). An aggregate's own FILTER
    applies to both. Other aggregates cannot subtract: a positioned error says so.
    """
    def signed(node: exp.Expression) -> exp.Expression:
        agg = node.this if isinstance(node, exp.Filter) else node
        if agg.find(exp.Distinct) is not None or not isinstance(
                agg, exp.Sum | exp.Count | exp.Avg | exp.Min | exp.Max):
            p = node_pos(agg, block, src)
            raise NotSupportedError(
                f"{agg.sql('spark')} cannot subtract the retractions of the changelog it "
                "reads", p.line, p.column,
                "over an ACCUMULATING AND RETRACTING input use SUM, COUNT, AVG, MIN or MAX "
                "(without DISTINCT), or make the input EMIT ACCUMULATING")
        arg = agg.this
        x = exp.Literal.number(1) if arg is None or isinstance(arg, exp.Star) \
            else exp.paren(arg.copy(), copy=False)
        if isinstance(node, exp.Filter):  # the aggregate's own FILTER: as if the row were absent
            x = _filled("CASE WHEN __cond THEN __x END",
                        {"__cond": node.expression.this, "__x": x})
        return _filled(_SIGNED[type(agg).__name__.lower()], {"__x": x})

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
