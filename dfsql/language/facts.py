"""The tables a statement reads, as its text says (docs/reference.md#sources):
one home for the text-level answer, so the rewrite, the registered sources and backfill
read the same walk of the parsed tree rather than each walking it its own way.

Spark's analysed answer (views expanded by Spark, what the judge must see) stays in
:mod:`dfsql.spark.parsed_plan`; this module never asks a catalog."""

from __future__ import annotations

from sqlglot import exp


def relation_name(table: exp.Table) -> str:
    """A table node's name as Spark reads it (its parts, quoted where needed; "" for a
    table function or a path)."""
    if not isinstance(table.this, exp.Identifier):
        return ""
    return ".".join(p.sql("spark") for p in table.parts)


def table_nodes(tree: exp.Expression) -> tuple[exp.Table, ...]:
    """Every table node of ``tree``, in the order written (a CTE's name included: a
    reader that asks a catalog tells the two apart)."""
    return tuple(tree.find_all(exp.Table))


def _bound_by_cte(table: exp.Table) -> bool:
    """Whether an unqualified ``table`` names a CTE in scope: one of an enclosing WITH,
    defined before the CTE whose body holds ``table`` (a CTE does not see itself)."""
    if table.args.get("db"):
        return False
    name = table.name.lower()
    child: exp.Expression = table
    node = table.parent
    while node is not None:
        if isinstance(node, exp.With):
            for cte in node.expressions:
                if cte is child:
                    break
                if cte.alias_or_name.lower() == name:
                    return True
        else:
            with_ = node.args.get("with_") or node.args.get("with")
            if isinstance(with_, exp.With) and with_ is not child and \
                    any(cte.alias_or_name.lower() == name for cte in with_.expressions):
                return True
        child, node = node, node.parent
    return False


def written_at(table: exp.Table) -> int:
    """Where a table node's name starts in the text it was parsed from (-1: not known)."""
    return int(table.parts[0].meta.get("start", -1)) if table.parts else -1


def tables_read(tree: exp.Expression) -> tuple[str, ...]:
    """The tables ``tree`` reads, each once, in the order written, named as Spark reads
    them (:func:`relation_name`; a ``format.`path``` table by its parts): a CTE's own
    name where it is in scope is not a table read."""
    out: list[str] = []
    for table in sorted(table_nodes(tree), key=written_at):
        name = relation_name(table)
        if name and name not in out and not _bound_by_cte(table):
            out.append(name)
    return tuple(out)


def direct_relations(tree: exp.Expression) -> list[tuple[str, str]]:
    """The tables a SELECT reads directly — its FROM relation and joins, not subqueries
    — as (table name, the name its columns are qualified with)."""
    if isinstance(tree, exp.Subquery):
        tree = tree.this
    if not isinstance(tree, exp.Select):
        return []
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    relations = [tree.args.get("from_") or tree.args.get("from"), *(tree.args.get("joins") or [])]
    out = []
    for rel in relations:
        table = rel.this if rel is not None else None
        if isinstance(table, exp.Table) and not table.args.get("db") and \
                table.name.lower() not in ctes:
            out.append((table.name, table.alias_or_name))
    return out

