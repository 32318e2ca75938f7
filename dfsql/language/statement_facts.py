"""What a parsed statement reads, found once (docs/reference.md#sources): the tree walk
of :mod:`dfsql.language.facts` over the statement's Spark text, plus the tables its
dfsql clauses name. :attr:`Statement.facts <dfsql.language.statement.Statement.facts>`
and :attr:`ContinuousStatement.facts <dfsql.language.continuous.ContinuousStatement.facts>`
hold the answer, computed on first read; the server's record of a continuous query's
streams and the endpoint's judge read it there rather than each finding the names again.

Kept apart from the walk so that the rewrite and the stages, which the statement is
made with, can read the walk without a circle; and it names neither statement class
(they import it): a statement is read through :class:`Parsed`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from sqlglot import exp

from dfsql.language.facts import tables_read
from dfsql.model import clauses as c

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dfsql.language.blocks import WindowedBlock
    from dfsql.language.scan import Scanned, Token
    from dfsql.language.watermark_tries import TriedWatermark


@dataclass(frozen=True)
class StatementFacts:
    """The tables a statement reads: those its Spark text names (a CTE's own name where
    it is in scope is none) and those its dfsql clauses name, with where each is
    written.

    The text's tables are found when first asked: the endpoint's judge reads only
    ``named``, and finding ``tables`` parses the text, which a statement the judge
    passes to ``dfsql.sql`` is not parsed for again."""

    #: (name, offset of the name in the text as written; -1: not found there) of each
    #: table a clause names for dfsql to read: every block's ``WATERMARK FROM``, every
    #: ``TRY … FROM`` (docs/reference.md#watermark); repeats kept
    named: tuple[tuple[str, int], ...] = ()
    #: the tables a continuous query's history reads (``BACKFILL FROM``'s relation,
    #: docs/guides/streams.md#continuous-queries-as-statements)
    history: tuple[str, ...] = ()
    #: the Spark text whose tables ``tables`` are (offsets as written, clauses blanked)
    body: str = field(default="", repr=False, compare=False)

    @cached_property
    def tables(self) -> tuple[str, ...]:
        """The tables its Spark text reads, each once, in the order written (a CTE's own
        name where it is in scope is none: :func:`~dfsql.language.facts.tables_read`)."""
        tree = _parsed(self.body)
        return tables_read(tree) if tree is not None else ()

    @property
    def reads(self) -> tuple[str, ...]:
        """Every table read, each once: the text's, the clauses', the history's."""
        return tuple(dict.fromkeys((*self.tables, *(n for n, _ in self.named),
                                    *self.history)))


class Parsed(Protocol):
    """What the facts read of a :class:`~dfsql.language.statement.Statement`."""

    @property
    def kind(self) -> str: ...
    @property
    def body_start(self) -> int: ...
    @property
    def blocks(self) -> tuple[WindowedBlock, ...]: ...
    @property
    def tries(self) -> tuple[TriedWatermark, ...]: ...
    @property
    def scanned(self) -> Scanned | None: ...
    @property
    def written(self) -> str: ...
    def spark_sql(self) -> str: ...


def _parsed(text: str) -> exp.Expression | None:
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        return sqlglot.parse_one(text, read="spark") if text.strip() else None
    except ParseError:  # Spark reports the mistake, positioned, when it plans
        return None


def statement_facts(stmt: Parsed) -> StatementFacts:
    """A parsed statement's facts: the tables its Spark text names (the windowed
    clauses blanked, so ``LATE ROWS INTO v``, which is written, is not one) and those
    its clauses name to read."""
    body = stmt.spark_sql()
    if stmt.kind not in ("explain_firings", "explain_watermark"):
        body = " " * stmt.body_start + body[stmt.body_start:]
    froms = [b.clauses.watermark for b in stmt.blocks] + [t.watermark for t in stmt.tries]
    tokens = stmt.scanned.tokens if stmt.scanned is not None else []
    named = tuple((wm.table, _name_after_from(tokens, wm)) for wm in froms
                  if isinstance(wm, c.WatermarkFrom))
    return StatementFacts(named, body=body)


def _name_after_from(tokens: Sequence[Token], wm: c.WatermarkFrom) -> int:
    """The offset of the name after the FROM at or after the clause's place (WATERMARK
    in a query, FROM in a TRY list)."""
    for i, t in enumerate(tokens):
        if t.start >= wm.pos.offset and t.is_word("FROM") and i + 1 < len(tokens):
            return tokens[i + 1].start
    return -1


def with_history(query: StatementFacts, history_sql: str | None) -> StatementFacts:
    """A continuous query's facts: its query's, and the tables its history (``BACKFILL
    FROM``'s relation, read by ``history_sql`` at the offsets written) reads."""
    tree = _parsed(history_sql or "")
    return replace(query, history=tables_read(tree)) if tree is not None else query
