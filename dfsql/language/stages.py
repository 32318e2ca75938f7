"""The stages of a windowed block (what :func:`dfsql.language.rewrite.rewrite` returns).

Besides the three Spark SQL stages, :class:`Stages` carries the group keys and the
aggregates as typed values (:class:`GroupKey`, :class:`AggregateCall`), so that the
executor's streams and sinks read the function, arguments, DISTINCT and FILTER of each
aggregate without parsing stage SQL again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from dfsql.language.facts import relation_name, table_nodes
from dfsql.language.names import IN_QUERY, PANES_TABLE
from dfsql.model import aggregates as model_aggregates
from dfsql.model import clauses as c

#: ON and PROCESSING TIME as parsed, once: (the clause's expression, its sqlglot tree)
ClauseTrees = tuple[tuple[c.Expr, exp.Expression], ...]


@dataclass(frozen=True)
class GroupKey:
    """One group key: projected by the input stage as ``column``."""

    column: str  # __k<i>
    sql: str  # the key expression, Spark SQL over the block's FROM
    output_name: str | None  # the output column that selects the key, if one does
    #: the column's name when the key is one unqualified column of the FROM (from the
    #: tree), else None
    input_name: str | None = field(default=None, compare=False)
    #: where the key was written (an offset in the statement), for an error about it
    at: int | None = field(default=None, compare=False)


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
    #: ``sql`` as a tree (FILTER included), for a caller that adds to it
    tree: exp.Expression | None = field(default=None, compare=False, repr=False)
    #: the output column that selects exactly this aggregate, if one does
    output_name: str | None = field(default=None, compare=False)
    #: per argument, its column's name when it is one unqualified column, else None
    argument_columns: tuple[str | None, ...] = field(default=(), compare=False)
    #: the FILTER condition's column's name when it is one unqualified column, else None
    filter_column: str | None = field(default=None, compare=False)

    @property
    def column(self) -> str | None:
        """The one argument when it is a plain input column (``__c<j>``), else None."""
        if len(self.arguments) == 1 and self.arguments[0].startswith("__c") \
                and self.arguments[0][3:].isdigit():
            return self.arguments[0]
        return None

    def filtered(self, condition: str) -> str:
        """``sql FILTER (WHERE condition)``, AND-ed with the aggregate's own FILTER if it
        has one: built on the call's tree (``condition``, a constant of the executor's,
        is parsed once per process)."""
        node = self.tree.copy() if self.tree is not None else _parsed(self.sql)
        extra = _parsed(condition)
        if isinstance(node, exp.Filter):
            where = node.expression
            where.set("this", exp.and_(exp.paren(where.this), extra))
        else:
            node = exp.Filter(this=node, expression=exp.Where(this=extra))
        return node.sql("spark")

    @property
    def star(self) -> bool:
        """``COUNT(*)``."""
        return self.function == "count" and self.arguments == ("*",)

    @property
    def decomposable(self) -> bool:
        """Whether partial results over deltas give its panes (the model's rule:
        :func:`dfsql.model.aggregates.decomposable`)."""
        return model_aggregates.decomposable(self.function, self.distinct, self.nested)


def aggregate_call(node: exp.Expression, alias: str,
                   is_aggregate: Callable[[exp.Expression], bool]) -> AggregateCall:
    """The typed parts of ``node``: an aggregate call (possibly ``… FILTER (WHERE …)``)
    over the input stage's columns."""
    cond = None
    cond_column = None
    inner = node
    if isinstance(node, exp.Filter):
        inner = node.this
        cond = node.expression.this.sql("spark")
        cond_column = column_name(node.expression.this)
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
                         tuple(a.sql("spark") for a in args), distinct, cond, nested, node,
                         argument_columns=tuple(column_name(a) for a in args),
                         filter_column=cond_column)


def column_name(node: exp.Expression) -> str | None:
    """The name of the column ``node`` is, when it is one unqualified column, else None."""
    return node.name if isinstance(node, exp.Column) and not node.table else None


@functools.lru_cache(maxsize=64)
def _parsed_once(sql: str) -> exp.Expression:
    import sqlglot

    return sqlglot.parse_one(sql, read="spark")


def _parsed(sql: str) -> exp.Expression:
    """``sql`` as a tree, a copy of the one parsed first (only constants come here)."""
    return _parsed_once(sql).copy()


def with_views(tree: exp.Expression, views: Mapping[str, str]) -> exp.Expression:
    """A copy of ``tree`` whose unqualified tables named in ``views`` read the view named
    there instead (an inner windowed block's result, as the executor registered it)."""
    return _tables_read_as(tree, lambda t: None if t.db else views.get(t.name))


def with_relations(tree: exp.Expression, relations: Mapping[str, str]) -> exp.Expression:
    """A copy of ``tree`` whose tables named (as :func:`relation_name` says) in
    ``relations`` read the view named there instead, their aliases kept (a continuous
    query's history standing in for its stream)."""
    return _tables_read_as(tree, lambda t: relations.get(relation_name(t)))


def _tables_read_as(tree: exp.Expression, view_of: Callable[[exp.Table], str | None],
                    ) -> exp.Expression:
    """A copy of ``tree`` whose tables read the view ``view_of`` names (None: as they
    are), unqualified, their aliases kept."""
    tree = tree.copy()
    for table in table_nodes(tree):
        view = view_of(table)
        if view is not None:
            table.set("catalog", None)
            table.set("db", None)
            table.set("this", exp.to_identifier(view))
    return tree


@dataclass(frozen=True)
class OutputStage:
    """The output stage as its clauses — SELECT first, then WHERE (HAVING), ORDER BY,
    LIMIT — without FROM, so that it reads the panes from whatever holds them (a view or
    a subquery): :meth:`sql` is the one place the stage is put together."""

    clauses: tuple[str, ...]
    #: the same without §7's default ORDER BY, selecting the hidden columns it sorts by
    #: (None unless the stage is a row-by-row projection and filter)
    unordered: tuple[str, ...] | None = None

    def sql(self, source: str = PANES_TABLE, ordered: bool = True) -> str:
        """The stage over the panes in ``source`` (a table name, or ``(subquery) AS x``)."""
        parts = self.clauses if ordered else self.unordered
        if parts is None:
            raise ValueError("this output stage has no unordered form")
        return "\n".join([parts[0], f"FROM {source}", *parts[1:]])


@dataclass(frozen=True)
class Stages:
    """The three Spark SQL stages of one windowed block."""

    #: the input stage, a sqlglot tree (inner blocks read under their placeholder names)
    input: exp.Select = field(compare=False, repr=False)
    key_columns: tuple[str, ...]
    aggregates: tuple[tuple[str, str], ...]  # (Spark SQL over input columns, alias)
    output: OutputStage
    output_names: tuple[str, ...]
    has_processing_time: bool
    default_order: bool
    #: docs/reference.md#output-columns's default order (ORDER BY items), when the output stage has an
    #: unordered form (``output.unordered``) so the executor may order the panes itself.
    default_order_by: tuple[str, ...] | None = None
    #: The group keys (one per ``key_columns``) and the aggregates (one per
    #: ``aggregates``), typed.
    group_keys: tuple[GroupKey, ...] = ()
    aggregate_calls: tuple[AggregateCall, ...] = ()
    #: the trees of ON and PROCESSING TIME the input stage projects (kept by the block,
    #: so that no later rewrite parses them again)
    clause_trees: ClauseTrees = field(default=(), compare=False, repr=False)
    #: the columns of the FROM the aggregates read: (the input stage's ``__c<j>``, the
    #: column's own name), for LATE ROWS INTO's rows
    read_columns: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def input_sql(self) -> str:
        """The input stage's Spark SQL, inner blocks under their placeholder names."""
        return self.input.sql("spark")

    def input_sql_for(self, views: Mapping[str, str], timed: bool = False) -> str:
        """The input stage reading inner blocks' results under ``views``' names; ``timed``:
        :attr:`timed_input`'s."""
        tree = self.timed_input if timed else self.input
        if views:
            return with_views(tree, views).sql("spark")
        return tree.sql("spark") if timed else self.input_sql

    @functools.cached_property
    def timed_input(self) -> exp.Select:
        """The input stage of a block that runs in processing time (a replay or a
        stream): time belongs to the input (docs/reference.md#processing-time), so every row the FROM
        reads, after its joins and before WHERE, drives the watermark, the clock and the
        replay's end, and WHERE only says which rows enter windows. The WHERE becomes
        the projected flag :data:`~dfsql.language.names.IN_QUERY` (a NULL condition
        keeps no row, as in WHERE). Without a WHERE, the input stage itself."""
        where = self.input.args.get("where")
        if where is None:
            return self.input
        tree = self.input.copy()
        tree.set("where", None)
        flag = exp.func("COALESCE", exp.paren(where.this.copy()), exp.false())
        tree.set("expressions", [*tree.expressions, exp.alias_(flag, IN_QUERY)])
        return tree

    @property
    def filters_input(self) -> bool:
        """Whether the block has a WHERE: its timed input then carries the flag."""
        return self.input.args.get("where") is not None

    @property
    def output_sql(self) -> str:
        return self.output.sql()

    @property
    def output_sql_unordered(self) -> str | None:
        return self.output.sql(ordered=False) if self.output.unordered else None

    @property
    def key_output_names(self) -> tuple[str, ...]:
        """The output columns that select a group key (a live window's identity in a
        table sink, beside window_start and window_end)."""
        return tuple(k.output_name for k in self.group_keys if k.output_name)

    @property
    def unselected_keys(self) -> tuple[GroupKey, ...]:
        """The group keys no output column selects: a table of current rows cannot tell
        their windows apart."""
        return tuple(k for k in self.group_keys if not k.output_name)

    def explain(self) -> str:
        aggs = ",\n  ".join(f"{sql} AS {alias}" for sql, alias in self.aggregates)
        inp = self.input_sql
        if self.has_processing_time and self.filters_input:
            inp = (f"{self.timed_input.sql('spark')}\n-- every row above drives time (the "
                   f"watermark, the clock, the replay's end); {IN_QUERY} says which enter "
                   "windows")
        return (f"-- input stage\n{inp}\n"
                f"-- aggregates (per key, window and pane)\n  {aggs}\n"
                f"-- output stage\n{self.output_sql}")
