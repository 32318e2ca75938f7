"""The tables a parsed statement reads, its clauses included
(docs/reference.md#sources): the tree walk of :mod:`dfsql.language.facts` over the
statement's Spark text, plus the tables its dfsql clauses name. Kept apart from the
walk so that the rewrite and the stages, which the statement is made with, can read the
walk without a circle."""

from __future__ import annotations

from sqlglot import exp

from dfsql.language.continuous import ContinuousStatement
from dfsql.language.facts import tables_read
from dfsql.language.statement import Statement


def _parsed(text: str) -> exp.Expression | None:
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        return sqlglot.parse_one(text, read="spark") if text.strip() else None
    except ParseError:  # Spark reports the mistake, positioned, when it plans
        return None


def statement_reads(stmt: Statement) -> tuple[str, ...]:
    """The tables a parsed statement reads: those its Spark text names (the windowed
    clauses blanked, so ``LATE ROWS INTO v``, which is written, is not one) and each
    block's ``WATERMARK FROM`` table (docs/reference.md#watermark)."""
    body = stmt.spark_sql()
    if stmt.kind not in ("explain_firings", "explain_watermark"):
        body = " " * stmt.body_start + body[stmt.body_start:]
    tree = _parsed(body)
    out = list(tables_read(tree)) if tree is not None else []
    for b in stmt.blocks:
        table = getattr(b.clauses.watermark, "table", "")
        if table and table not in out:
            out.append(table)
    return tuple(out)


def continuous_reads(stmt: ContinuousStatement) -> tuple[str, ...]:
    """The tables a CREATE STREAMING QUERY reads: its query's (:func:`statement_reads`)
    and its history's (``BACKFILL FROM``, docs/guides/streams.md#continuous-queries-as-statements)."""
    out = list(statement_reads(stmt.statement)) if stmt.statement is not None else []
    history = stmt.backfill.sql if stmt.backfill is not None and stmt.backfill.sql else ""
    tree = _parsed(history)  # SELECT * FROM the relation, at the offsets written
    for name in tables_read(tree) if tree is not None else ():
        if name not in out:
            out.append(name)
    return tuple(out)
