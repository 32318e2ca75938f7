"""A windowed block's SELECT as sqlglot reads it, and what its nodes are: aggregate calls
(by type, or by Spark's name), calls of functions only the session knows, positions in
the user's text, lambda variables. The rewrite (:mod:`~dfsql.language.rewrite`), the
retractions' subtraction (:mod:`~dfsql.language.signed`) and the question put to Spark
(:mod:`~dfsql.spark.functions`) read the tree through these."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dfsql.errors import DfsqlSyntaxError, WindowedQueryError
from dfsql.language.blocks import WindowedBlock
from dfsql.language.scan import Source
from dfsql.model import clauses as c

# Spark's built-in aggregate functions that sqlglot parses as anonymous functions (the
# others are exp.AggFunc); tests/language/test_functions.py checks the list against the
# session's function registry. A name not here and not typed by sqlglot may still be an
# aggregate the user registered: the planner asks Spark (dfsql.spark.functions).
SPARK_AGGREGATES = frozenset({
    "histogram_numeric", "try_sum", "try_avg", "kurtosis", "skewness", "bit_and", "bit_or",
    "bit_xor", "every", "some", "any", "bool_or", "count_min_sketch", "hll_sketch_agg",
    "hll_union_agg", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept", "regr_r2",
    "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "collect_set", "var_pop", "var_samp",
    "variance", "stddev_pop", "stddev_samp", "std", "covar_pop", "covar_samp", "corr",
    "first_value", "last_value", "last", "min_by", "approx_percentile", "percentile_cont",
    "percentile_disc", "array_agg", "grouping", "grouping_id", "theta_sketch_agg",
    "approx_top_k_accumulate", "kll_sketch_agg_bigint", "kll_sketch_agg_double",
    "mean", "collect_union", "measure", "schema_of_variant_agg", "bitmap_and_agg",
    "bitmap_or_agg", "bitmap_construct_agg", "kll_sketch_agg_float", "kll_merge_agg_bigint",
    "kll_merge_agg_double", "kll_merge_agg_float", "theta_intersection_agg",
    "theta_union_agg", "tuple_sketch_agg_double", "tuple_sketch_agg_integer",
    "tuple_union_agg_double", "tuple_union_agg_integer", "tuple_intersection_agg_double",
    "tuple_intersection_agg_integer", "vector_avg", "vector_sum", "approx_top_k_combine",
})


def is_aggregate(node: exp.Expression, names: frozenset[str] = SPARK_AGGREGATES) -> bool:
    """An aggregate call: typed by sqlglot, or a function named in ``names``."""
    if isinstance(node, exp.AggFunc):
        return True
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower() in names
    if isinstance(node, exp.Any):
        # Spark's any(x) is bool_or; sqlglot reads it as the ANY of "x = ANY (subquery)"
        parent = node.parent
        return not isinstance(node.this, exp.Query | exp.Subquery) and not (
            isinstance(parent, exp.Predicate) and parent.args.get("expression") is node)
    return False


def unknown_calls(select: exp.Expression, names: frozenset[str] = SPARK_AGGREGATES,
                  ) -> list[exp.Anonymous]:
    """Calls of functions that neither sqlglot nor ``names`` know as aggregates: Spark
    scalar functions, or functions registered in the session (a UDAF among them)."""
    return [n for n in select.find_all(exp.Anonymous) if str(n.this).lower() not in names]


def parse_select(block: WindowedBlock, src: Source) -> exp.Select:
    """The block's SELECT as sqlglot reads it (a copy of the tree parsed with the
    statement, when there is one); a parse error is positioned in ``src``."""
    if block.select is not None:
        return block.select.copy()
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


def node_pos(node: exp.Expression, block: WindowedBlock, src: Source) -> c.Pos:
    for n in node.walk():
        meta = getattr(n, "meta", None) or {}
        if isinstance(n, exp.Identifier) and "start" in (n.meta or {}):
            return src.pos(block.span[0] + n.meta["start"])
        if "start" in meta:
            return src.pos(block.span[0] + meta["start"])
    return src.pos(block.span[0])


def lambda_vars(node: exp.Expression) -> set[str]:
    names: set[str] = set()
    for lam in node.find_all(exp.Lambda):
        for v in lam.expressions:
            names.add(v.name.lower())
    return names
