"""The stages of a windowed block (what :func:`dfsql.language.rewrite.rewrite` returns).

Besides the three Spark SQL stages, :class:`Stages` carries the group keys and the
aggregates as typed values (:class:`GroupKey`, :class:`AggregateCall`), so that the
executor's streams and sinks read the function, arguments, DISTINCT and FILTER of each
aggregate without parsing stage SQL again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from dfsql.model.aggregates import HOWS

#: The aggregates a pane can be computed from partial results of (LANGUAGE.md §6), when
#: without DISTINCT and without another aggregate inside: the model's kernels.
DECOMPOSABLE = frozenset(HOWS)


@dataclass(frozen=True)
class GroupKey:
    """One group key: projected by the input stage as ``column``."""

    column: str  # __k<i>
    sql: str  # the key expression, Spark SQL over the block's FROM
    output_name: str | None  # the output column that selects the key, if one does


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate of the block, ``sql AS alias`` over the input stage's columns."""

    sql: str  # as in Stages.aggregates (FILTER included)
    alias: str  # __a<n>
    function: str  # lower-case Spark name: "sum", "count", "collect_list", ...
    arguments: tuple[str, ...]  # each argument's Spark SQL ("*" for COUNT(*)), no DISTINCT
    distinct: bool
    filter: str | None  # the condition of the aggregate's own FILTER (WHERE ...)
    nested: bool  # another aggregate call inside its arguments

    @property
    def column(self) -> str | None:
        """The one argument when it is a plain input column (``__c<j>``), else None."""
        if len(self.arguments) == 1 and self.arguments[0].startswith("__c") \
                and self.arguments[0][3:].isdigit():
            return self.arguments[0]
        return None

    @property
    def star(self) -> bool:
        """``COUNT(*)``."""
        return self.function == "count" and self.arguments == ("*",)

    @property
    def decomposable(self) -> bool:
        """SUM, COUNT, MIN, MAX or AVG without DISTINCT or a nested aggregate."""
        return self.function in DECOMPOSABLE and not self.distinct and not self.nested


def aggregate_call(node: exp.Expression, alias: str,
                   is_aggregate: Callable[[exp.Expression], bool]) -> AggregateCall:
    """The typed parts of ``node``: an aggregate call (possibly ``… FILTER (WHERE …)``)
    over the input stage's columns."""
    cond = None
    inner = node
    if isinstance(node, exp.Filter):
        inner = node.this
        cond = node.expression.this.sql("spark")
    function = inner.sql("spark").split("(", 1)[0].strip().lower()
    distinct = False
    args: list[exp.Expression] = []
    if isinstance(inner, exp.Anonymous):
        args = list(inner.expressions)
    else:
        for k in inner.arg_types:
            v = inner.args.get(k)
            args += v if isinstance(v, list) else [v] if isinstance(v, exp.Expression) else []
    if args and isinstance(args[0], exp.Distinct):
        distinct = True
        args = [*args[0].expressions, *args[1:]]
    nested = any(d is not inner and is_aggregate(d) for d in inner.walk())
    return AggregateCall(node.sql("spark"), alias, function,
                         tuple(a.sql("spark") for a in args), distinct, cond, nested)


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
    #: The group keys (one per ``key_columns``) and the aggregates (one per
    #: ``aggregates``), typed.
    group_keys: tuple[GroupKey, ...] = ()
    aggregate_calls: tuple[AggregateCall, ...] = ()

    @property
    def key_output_names(self) -> tuple[str, ...]:
        """The output columns that select a group key (a live window's identity in a
        table sink, beside window_start and window_end)."""
        return tuple(k.output_name for k in self.group_keys if k.output_name)

    def explain(self) -> str:
        aggs = ",\n  ".join(f"{sql} AS {alias}" for sql, alias in self.aggregates)
        return (f"-- input stage\n{self.input_sql}\n"
                f"-- aggregates (per key, window and pane)\n  {aggs}\n"
                f"-- output stage\n{self.output_sql}")
