"""The types a parsed statement and the SELECT rewrite share.

:mod:`~dfsql.language.statement` finds windowed blocks and :mod:`~dfsql.language.rewrite`
splits each block's SELECT into stages; both need the block itself. It lives here, in a
module that imports neither of them, so that statement can check every block with the
rewrite at parse time without an import cycle (statement → rewrite → blocks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dfsql.language.scan import splice
from dfsql.model import clauses as c

if TYPE_CHECKING:
    from sqlglot import exp

    from dfsql.language.stages import ClauseTrees, Stages

#: The name an outer block's SQL reads an inner windowed block's result by, until the
#: executor names that result for one statement (:func:`executor_view`).
PLACEHOLDER = "__dfsql_w{}"


def executor_view(index: int, uid: str) -> str:
    """The temp view under which the executor registers block ``index``'s result for the
    statement run ``uid`` (unique, so that statements planned side by side in one Spark
    session, and Spark Connect plans that name views, never read each other's)."""
    return f"__dfsql_{uid}_w{index}"


@dataclass(frozen=True)
class SparkWatermark:
    """Spark's relation clause ``FROM t WATERMARK col DELAY OF INTERVAL …``."""

    column: str
    delay: c.Duration
    pos: c.Pos


@dataclass(frozen=True)
class WindowedBlock:
    """One windowed query block.

    ``sql`` is the block's Spark SQL with the extension region blanked and inner windowed
    blocks replaced by their placeholder views; offsets in it match ``span[0]`` onwards in
    the statement text, so positions found in it map straight back to the user's text.

    ``aggregates`` names the functions of the SELECT that the Spark session knows as
    aggregates although dfsql cannot tell from their name (user-defined aggregates, see
    :mod:`dfsql.spark.functions`); None until the planner has asked Spark, and while
    it is None a mistake that depends on such a function is not reported yet.

    ``select`` is ``sql`` as sqlglot parsed it, once, when the statement was parsed
    (None for a block made by hand): every rewrite of the block starts from a copy of it
    rather than parsing ``sql`` again. It takes no part in equality or hashing.
    """

    index: int
    span: tuple[int, int]
    region: tuple[int, int]
    sql: str
    clauses: c.Clauses
    inner: tuple[int, ...] = ()
    spark_watermark: SparkWatermark | None = None
    aggregates: frozenset[str] | None = None
    select: exp.Select | None = field(default=None, compare=False, repr=False)
    #: where in ``sql`` each inner block's placeholder name starts (one per ``inner``)
    inner_at: tuple[int, ...] = ()
    #: ON and PROCESSING TIME parsed (by the statement's rewrite, or with a registered
    #: source's defaults), keyed by the clause's expression: no rewrite parses them again
    trees: ClauseTrees = field(default=(), compare=False, repr=False)
    #: the stages the statement's parser made of the block, with the clauses and
    #: aggregates they were made for (:func:`~dfsql.language.rewrite.rewrite` returns them
    #: while the block's are the same)
    checked: tuple[c.Clauses, frozenset[str] | None, Stages] | None = field(
        default=None, compare=False, repr=False)
    #: where the statement writes GROUPING SETS / ROLLUP / CUBE in the block, and LATE
    #: ROWS INTO's view name (read from the scanner's tokens, for errors' positions)
    grouping_at: int | None = field(default=None, compare=False, repr=False)
    late_rows_at: int | None = field(default=None, compare=False, repr=False)

    @property
    def view_name(self) -> str:
        return PLACEHOLDER.format(self.index)

    def views(self, uid: str) -> dict[str, str]:
        """Each inner block's placeholder name → its view in the statement run ``uid``."""
        return {PLACEHOLDER.format(i): executor_view(i, uid) for i in self.inner}

    def sql_for(self, uid: str) -> str:
        """``sql`` reading the inner blocks' results under their views in run ``uid``.

        The longer name takes the blanks that follow the placeholder (an inner block's
        text, blanked), so offsets after it still match the user's text."""
        return splice(self.sql, [(at, at + len(PLACEHOLDER.format(i)), executor_view(i, uid))
                                 for i, at in zip(self.inner, self.inner_at, strict=True)])
