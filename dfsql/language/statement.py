"""Whole statements: find the windowed SELECTs in Spark SQL text.

A statement is Spark SQL in which some query blocks (the statement itself, a CTE body, a
subquery or a view body) carry the extension clauses. We find each extension region with
the position-keeping scanner, parse it with the Lark grammar, and cut the region out of
the text (blanked, so offsets and lines stay where the user wrote them). Blocks are
listed innermost first; an outer block sees an inner windowed block as a reference to
the view ``__dfsql_w<i>`` that the executor registers for the inner result. A statement
without any region is plain Spark SQL and is passed to Spark untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dfsql.errors import NotSupportedError, WindowedQueryError
from dfsql.language.blocks import PLACEHOLDER, SparkWatermark, WindowedBlock
from dfsql.language.costs import check_windowed_queries
from dfsql.language.heads import check_windowed_view, statement_kind
from dfsql.language.parse import parse_region
from dfsql.language.regions import find_regions, spark_watermarks
from dfsql.language.rewrite import parse_select, rewrite
from dfsql.language.scan import Scanned, Source, Token, scan_text, splice
from dfsql.language.statement_facts import StatementFacts, statement_facts
from dfsql.language.watermark_tries import TriedWatermark, check_explained, split_tries
from dfsql.model import clauses as c

__all__ = ["PLACEHOLDER", "SparkWatermark", "Statement", "WindowedBlock", "parse_statement"]


@dataclass(frozen=True)
class Statement:
    """A parsed statement: its text, its kind, and its windowed blocks (innermost first)."""

    text: str
    kind: str  # query | explain | explain_firings | explain_watermark | create_view | alter_view | write | other
    #: offset where the query proper starts (after EXPLAIN, CREATE VIEW … AS, or a write's
    #: head: CREATE [OR REPLACE] TABLE … AS, INSERT INTO/OVERWRITE …, CACHE TABLE … AS)
    body_start: int
    blocks: tuple[WindowedBlock, ...] = ()
    view_name: str | None = None
    view_temporary: bool = False
    source: Source = field(default=None, repr=False, compare=False)  # type: ignore[assignment]
    #: CREATE OR REPLACE … VIEW / CREATE … VIEW IF NOT EXISTS / CREATE GLOBAL TEMP VIEW
    view_replace: bool = False
    view_if_not_exists: bool = False
    view_global: bool = False
    #: where the view's name (as written, qualified or not) starts and ends in ``text``
    #: (-1 when not a CREATE VIEW)
    view_name_offset: int = -1
    view_name_end: int = -1
    #: EXPLAIN WATERMARK: the watermarks after TRY, and where TRY starts (the query ends)
    tries: tuple[TriedWatermark, ...] = ()
    tries_start: int = -1
    #: EXPLAIN FIRINGS … WHERE p: (offset of p, p's text); the WHERE is blanked in ``text``
    firings_where: tuple[int, str] | None = None
    #: p as sqlglot reads it, parsed with the statement (None when sqlglot cannot: Spark
    #: then reports the mistake, positioned)
    firings_predicate: exp.Expression | None = field(default=None, repr=False, compare=False)
    #: the statement as written, scanned (once): what ``dfsql.sql`` and the endpoint
    #: read of it besides the blocks (the views it names), without scanning it again
    scanned: Scanned | None = field(default=None, repr=False, compare=False)

    @property
    def written(self) -> str:
        """The statement's text as the user wrote it (``text`` may have a part blanked)."""
        return self.scanned.source.text if self.scanned is not None else self.text

    @property
    def windowed(self) -> bool:
        return bool(self.blocks)

    @cached_property
    def facts(self) -> StatementFacts:
        """The tables it reads (:mod:`dfsql.language.statement_facts`): found on first
        read, then read by everyone who asks."""
        return statement_facts(self)

    def spark_sql(self) -> str:
        """The statement as Spark will see its parts, offsets kept: every windowed
        block's extension region blanked, and an EXPLAIN FIRINGS or WATERMARK cut to its
        query (head and TRY list blanked). The endpoint judges this text with Spark's
        parser before any part of the statement runs."""
        cuts = [(*b.region, "") for b in self.blocks]
        if self.kind in ("explain_firings", "explain_watermark"):
            cuts.append((0, self.body_start, ""))
        if self.tries_start >= 0:
            cuts.append((self.tries_start, len(self.text), ""))
        return splice(self.text, cuts)

    @property
    def top(self) -> WindowedBlock | None:
        """The block that is the statement's own query, if the statement is windowed."""
        end = self.tries_start if self.tries_start >= 0 else len(self.text)
        for b in self.blocks:
            if b.span[0] <= self.body_start and b.span[1] >= len(self.text[:end].rstrip().rstrip(";")):
                return b
        return None


def _matching_close(tokens: list[Token], open_idx: int) -> int:
    depth = tokens[open_idx].depth
    for j in range(open_idx + 1, len(tokens)):
        if tokens[j].text == ")" and tokens[j].depth == depth:
            return j
    return len(tokens) - 1


def parse_statement(text: str, scanned: Scanned | None = None) -> Statement:
    """Find and parse every windowed block of ``text``; see the module docstring.
    ``scanned``: ``text`` already scanned (:func:`~dfsql.language.scan.scan_text`)."""
    scanned = scanned or scan_text(text)
    stmt = _parse(text, scanned)
    return replace(stmt, scanned=scanned)


def _parse(text: str, scanned: Scanned) -> Statement:
    src, tokens, cleaned = scanned.source, scanned.tokens, scanned.cleaned
    kind, body_start, view = statement_kind(tokens, len(text))
    tried: dict = {}
    if kind == "explain_watermark":  # the TRY list is cut off: the query remains
        tokens, cleaned, start, tries = split_tries(src, tokens, cleaned)
        tried = {"tries": tries, "tries_start": start}
    firings_where = None
    if kind == "explain_firings":
        query, firings_where = _firings_where(scanned)
        if firings_where is not None:  # the query without the WHERE on its events
            return replace(_parse(query.source.text, query), kind=kind,
                           body_start=body_start, firings_where=firings_where,
                           firings_predicate=_predicate(firings_where[1]))
    regions = find_regions(tokens, src)
    if not regions:
        if kind == "explain_watermark":
            check_explained(src, False, body_start)
        return Statement(text, kind, body_start, (), source=src, **view.fields())
    if kind == "create_view":
        check_windowed_view(view, src)
    if kind == "alter_view":
        raise src.error(NotSupportedError, "ALTER VIEW … AS cannot take a windowed query", 0,
                        "write CREATE OR REPLACE VIEW v AS … (CREATE OR REPLACE TEMP VIEW for "
                        "a temp view): it keeps the view's clauses")
    # Parse each windowed SELECT once, and check it now (it must aggregate, no GROUPING
    # SETS, every column grouped or aggregated), so that a mistake there fails before any
    # Spark work starts; the blocks keep the parsed SELECT, the parsed ON and PROCESSING
    # TIME and the stages made of them, for the planner.
    blocks = []
    for b in _blocks(regions, tokens, src, cleaned, body_start):
        at = src.pos(b.region[0])  # each costs its planning: bounded before it is parsed
        check_windowed_queries(len(blocks) + 1, at.line, at.column)
        b = replace(b, select=parse_select(b, src))
        stages = rewrite(b, src)
        blocks.append(replace(b, trees=stages.clause_trees,
                              checked=(b.clauses, b.aggregates, stages)))
    stmt = Statement(text, kind, body_start, tuple(blocks), source=src, **view.fields(),
                     **tried)
    if kind == "explain_watermark":
        check_explained(src, stmt.top is not None, body_start)
    return stmt


def _firings_where(scanned: Scanned) -> tuple[Scanned, tuple[int, str] | None]:
    """``EXPLAIN FIRINGS <query> WHERE p``: the last WHERE outside parentheses after the
    query's WINDOW filters the events, not the query. Returns the statement with it
    blanked (offsets kept; its tokens are the statement's, not scanned again) and
    (offset of p, p)."""
    tokens, text = scanned.tokens, scanned.source.text
    first = [t for t in tokens if t.depth == 0]
    window = next((k for k, t in enumerate(first) if t.is_word("WINDOW")), None)
    where = [t for t in first[window + 1:] if t.is_word("WHERE")] if window is not None else []
    if not where:
        return scanned, None
    w = where[-1]
    end = len(text.rstrip().rstrip(";").rstrip())
    p = text[w.end:end]
    cut = splice(text, [(w.start, end, "")])
    cleaned = splice(scanned.cleaned, [(w.start, end, "")])
    kept = [t for t in tokens if not w.start <= t.start < end]
    return Scanned(Source(cut), kept, cleaned), (w.end + len(p) - len(p.lstrip()), p.strip())


def _predicate(text: str) -> exp.Expression | None:
    """EXPLAIN FIRINGS' WHERE as sqlglot reads it, or None."""
    try:
        return sqlglot.parse_one(text, read="spark")
    except SqlglotError:
        return None


def _blocks(regions: list[tuple[int, int, int]], tokens: list[Token], src: Source,
            cleaned: str, body_start: int) -> tuple[WindowedBlock, ...]:
    """Parse each region and work out its block (innermost first)."""
    csrc = Source(cleaned)
    spark_wms = spark_watermarks(tokens, src)
    raw_blocks = []
    for start, end, depth in regions:
        clauses = parse_region(csrc, start, end, tokens)
        if depth == 0:
            b0 = body_start
            b1 = len(cleaned.rstrip().rstrip(";").rstrip())
        else:
            open_idx = max(k for k, t in enumerate(tokens)
                           if t.text == "(" and t.depth == depth - 1 and t.start < start)
            b0 = tokens[open_idx].end
            b1 = tokens[_matching_close(tokens, open_idx)].start
        raw_blocks.append((b0, b1, start, end, clauses))

    # Two regions in one block: a set operation over windowed SELECTs.
    spans = [(b[0], b[1]) for b in raw_blocks]
    for k, s in enumerate(spans):
        if s in spans[:k]:
            raise src.error(WindowedQueryError,
                            "each windowed SELECT of a set operation needs its own parentheses",
                            raw_blocks[k][2], "write (SELECT … WINDOW …) UNION ALL (SELECT …)")

    # Innermost first: a block nested in another's span comes before it.
    order = sorted(range(len(raw_blocks)), key=lambda k: raw_blocks[k][1] - raw_blocks[k][0])
    blocks: list[WindowedBlock] = []
    for idx, k in enumerate(order):
        b0, b1, r0, r1, clauses = raw_blocks[k]
        edits = [(r0, r1, "")]  # the extension region, blanked
        inside = [p for p in blocks if b0 <= p.span[0] and p.span[1] <= b1]
        inner = [p.index for p in inside
                 if not any(q is not p and q.span[0] <= p.span[0] and p.span[1] <= q.span[1]
                            for q in inside)]
        inner_at = []
        for i in inner:
            p0, p1 = blocks[i].span
            edits.append((p0, p1, f"SELECT * FROM {blocks[i].view_name}"))
            inner_at.append(p0 - b0 + len("SELECT * FROM "))
        sw = None
        for w0, w1, wm in spark_wms:
            if b0 <= w0 < b1 and not any(blocks[i].span[0] <= w0 < blocks[i].span[1]
                                         for i in inner):
                edits.append((w0, w1, ""))
                sw = wm
        if sw is not None and not clauses.watermark_given:
            clauses = _with(clauses, watermark=c.WatermarkDelay(pos=sw.pos, delay=sw.delay,
                                                                from_relation=True))
        if sw is not None and clauses.on is None:
            clauses = _with(clauses, on=c.Expr(f"`{sw.column}`", sw.pos))
        sql = splice(cleaned, edits)[b0:b1]
        skip = [(r0, r1), *(blocks[i].span for i in inner)]
        blocks.append(WindowedBlock(idx, (b0, b1), (r0, r1), sql, clauses, tuple(inner), sw,
                                    inner_at=tuple(inner_at),
                                    grouping_at=_grouping_at(tokens, b0, b1, skip),
                                    late_rows_at=_late_rows_at(tokens, r0, r1)))
    return tuple(blocks)


def _grouping_at(tokens: list[Token], b0: int, b1: int,
                 skip: list[tuple[int, int]]) -> int | None:
    """Where the block (``b0``–``b1``, without the spans in ``skip``) first writes
    GROUPING SETS, ROLLUP or CUBE, which cannot be windowed (for the error's position)."""
    for k, t in enumerate(tokens):
        if not b0 <= t.start < b1 or any(s0 <= t.start < s1 for s0, s1 in skip):
            continue
        if t.is_word("ROLLUP", "CUBE") or (
                t.is_word("GROUPING") and k + 1 < len(tokens) and tokens[k + 1].is_word("SETS")):
            return t.start
    return None


def _late_rows_at(tokens: list[Token], r0: int, r1: int) -> int | None:
    """Where the view name of LATE ROWS INTO is written in the region ``r0``–``r1``."""
    for k in range(len(tokens) - 3):
        late, rows, into, name = tokens[k:k + 4]
        if r0 <= late.start < r1 and late.is_word("LATE") and rows.is_word("ROWS") and \
                into.is_word("INTO"):
            return name.start
    return None


def _with(cl: c.Clauses, **changes) -> c.Clauses:
    return replace(cl, **changes)

