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

from dfsql.errors import (
    AnalysisError,
    ClauseOrderError,
    DfsqlSyntaxError,
    DurationError,
    NotSupportedError,
    WindowedQueryError,
)
from dfsql.language.blocks import PLACEHOLDER, SparkWatermark, WindowedBlock
from dfsql.language.continuous import ContinuousStatement, parse_continuous
from dfsql.language.parse import DURATION_BOUND_HINT, duration_micros, parse_region
from dfsql.language.rewrite import parse_select, rewrite
from dfsql.language.scan import Scanned, Source, Token, blank, scan_text
from dfsql.language.tries import TriedWatermark, check_explained, split_tries
from dfsql.model import clauses as c

__all__ = ["PLACEHOLDER", "SparkWatermark", "Statement", "WindowedBlock", "parse_any",
           "parse_statement"]

# Words that end an extension region when met at the region's parenthesis depth.
_REGION_END = {
    "ORDER", "SORT", "CLUSTER", "DISTRIBUTE", "LIMIT", "OFFSET", "UNION", "INTERSECT",
    "EXCEPT", "MINUS",
}
# Words that end it but are out of order there (they belong before WINDOW).
_BEFORE_WINDOW = {"FROM", "WHERE", "GROUP", "HAVING", "SELECT", "LATERAL", "JOIN"}
_SQL_CLAUSE_WORDS = _REGION_END | _BEFORE_WINDOW | {"AS", "ON", "AND", "OR", "THEN", "ELSE", "END",
                                                    "WHEN", "IS", "IN", "NOT", "DESC", "ASC"}
_STRAY = {
    "TRIGGER": {"EVERY", "AFTER", "AT", "WATERMARK", "NEVER", "REPEAT", "ANY", "ALL", "("},
    "EMIT": {"ACCUMULATING", "DISCARDING"},
    "ALLOWED": {"LATENESS"},
    "PROCESSING": {"TIME"},
    "WATERMARK": {"DELAY", "FROM", "PERFECT", "PERCENTILE"},
}

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

    @property
    def windowed(self) -> bool:
        return bool(self.blocks)

    def spark_sql(self) -> str:
        """The statement as Spark will see its parts, offsets kept: every windowed
        block's extension region blanked, and an EXPLAIN FIRINGS or WATERMARK cut to its
        query (head and TRY list blanked). The endpoint judges this text with Spark's
        parser before any part of the statement runs."""
        chars = list(self.text)
        cuts = [b.region for b in self.blocks]
        if self.kind in ("explain_firings", "explain_watermark"):
            cuts.append((0, self.body_start))
        if self.tries_start >= 0:
            cuts.append((self.tries_start, len(self.text)))
        for r0, r1 in cuts:
            chars[r0:r1] = blank(self.text[r0:r1])
        return "".join(chars)

    @property
    def top(self) -> WindowedBlock | None:
        """The block that is the statement's own query, if the statement is windowed."""
        end = self.tries_start if self.tries_start >= 0 else len(self.text)
        for b in self.blocks:
            if b.span[0] <= self.body_start and b.span[1] >= len(self.text[:end].rstrip().rstrip(";")):
                return b
        return None


@dataclass
class _ViewHead:
    """``CREATE [OR REPLACE] [GLOBAL] [TEMP|TEMPORARY] VIEW [IF NOT EXISTS] name [(cols)]
    … AS``, read from the statement's depth-0 tokens."""

    name: str | None = None
    parts: tuple[Token, ...] = ()  # the name's parts as written (several: a qualified name)
    temporary: bool = False
    replace: bool = False
    if_not_exists: bool = False
    is_global: bool = False
    view_word: Token | None = None
    columns: Token | None = None  # the "(" of a column list
    body_start: int = 0
    as_word: Token | None = None

    def fields(self) -> dict:
        return {"view_name": self.name, "view_temporary": self.temporary,
                "view_replace": self.replace, "view_if_not_exists": self.if_not_exists,
                "view_global": self.is_global,
                "view_name_offset": self.parts[0].start if self.parts else -1,
                "view_name_end": self.parts[-1].end if self.parts else -1}


def _view_head(first: list[Token], end: int) -> _ViewHead:
    head = _ViewHead()
    vi = next(k for k, t in enumerate(first) if t.is_word("VIEW"))
    head.view_word = first[vi]
    head.temporary = any(t.is_word("TEMP", "TEMPORARY") for t in first[:vi])
    head.replace = any(t.is_word("REPLACE") for t in first[:vi])
    head.is_global = any(t.is_word("GLOBAL") for t in first[:vi])
    k = vi + 1
    if k + 2 < len(first) and first[k].is_word("IF") and first[k + 1].is_word("NOT") \
            and first[k + 2].is_word("EXISTS"):
        head.if_not_exists = True
        k += 3
    parts: list[Token] = []
    while k < len(first) and first[k].kind in ("word", "quoted") and not first[k].is_word("AS"):
        parts.append(first[k])
        k += 1
        if k < len(first) and first[k].text == ".":
            k += 1
            continue
        break
    head.parts = tuple(parts)
    head.name = parts[-1].text.strip("`") if parts else None
    if k < len(first) and first[k].text == "(":
        head.columns = first[k]
        k = next((m + 1 for m in range(k + 1, len(first)) if first[m].text == ")"), len(first))
    # AS follows the name (or column list), possibly after COMMENT / TBLPROPERTIES / ...
    ai = k if k < len(first) and first[k].is_word("AS") else None
    if ai is None and k < len(first) and first[k].is_word("COMMENT", "TBLPROPERTIES",
                                                           "PARTITIONED", "WITH"):
        ai = next((m for m in range(k, len(first)) if first[m].is_word("AS")), None)
    head.body_start = first[ai + 1].start if ai is not None and ai + 1 < len(first) else end
    head.as_word = first[ai] if ai is not None else None
    return head


def _check_windowed_view(view: _ViewHead, src: Source) -> None:
    """A windowed view names its query's own columns (no column list); a temp view's name
    has one part. (A persistent one is kept in the catalog: :mod:`dfsql.spark.views`.)"""
    text = src.text
    after_view = view.view_word.end if view.view_word is not None else 0
    if not view.parts:
        raise src.error(DfsqlSyntaxError, "expected the view's name after VIEW", after_view,
                        "e.g. CREATE TEMP VIEW v AS SELECT …")
    if view.as_word is None:
        raise src.error(DfsqlSyntaxError, "expected AS and the view's query after its name",
                        view.parts[-1].end, f"e.g. CREATE TEMP VIEW {view.parts[-1].text} AS "
                        "SELECT …")
    name = view.parts[-1].text
    if len(view.parts) > 1 and view.temporary:
        written = text[view.parts[0].start:view.parts[-1].end]
        kw = text[view.view_word.start:view.view_word.end] if view.view_word else "VIEW"
        temp = next((w for w in ("TEMPORARY", "TEMP") if w in text[:view.parts[0].start].upper()),
                    "TEMP")
        raise src.error(AnalysisError, f"the temp view name {written} cannot be qualified",
                        view.parts[0].start, f"write CREATE {temp} {kw} {name} AS … (a temp "
                        "view belongs to the Spark session, not to a catalog or database)")
    if view.columns is not None:
        raise src.error(NotSupportedError, "a windowed view takes no column list",
                        view.columns.start, "name the columns with aliases in the SELECT "
                        "instead, e.g. SELECT k AS key, COUNT(*) AS cnt …")


def _next(tokens: list[Token], i: int) -> Token | None:
    return tokens[i + 1] if i + 1 < len(tokens) else None


def _is_region_start(tokens: list[Token], i: int) -> bool:
    """WINDOW that starts our clause, not Spark's window() or WINDOW w AS (...)."""
    nxt = _next(tokens, i)
    if nxt is None or nxt.kind != "word":
        return False
    if nxt.upper in _SQL_CLAUSE_WORDS:
        return False
    after = _next(tokens, i + 1)
    if after is not None and after.is_word("AS"):
        return False  # Spark's named window clause
    prev = tokens[i - 1] if i > 0 else None
    if prev is not None and (prev.text in (".", ",", "(") or prev.is_word("AS", "SELECT", "BY")):
        return False  # a column or alias called window
    return True


def _spark_watermark(tokens: list[Token], src: Source) -> list[tuple[int, int, SparkWatermark]]:
    """Find ``WATERMARK col DELAY OF INTERVAL n unit`` relation clauses."""
    found = []
    units = {"MILLISECOND": "ms", "SECOND": "s", "MINUTE": "m", "HOUR": "h", "DAY": "d"}
    for i, t in enumerate(tokens):
        if not t.is_word("WATERMARK") or i + 4 >= len(tokens):
            continue
        col, d, of = tokens[i + 1], tokens[i + 2], tokens[i + 3]
        if not (col.kind in ("word", "quoted") and d.is_word("DELAY") and of.is_word("OF")):
            continue
        j = i + 4
        if tokens[j].is_word("INTERVAL"):
            j += 1
        if j + 1 >= len(tokens):
            raise src.error(DfsqlSyntaxError, "expected an interval after DELAY OF", of.end)
        num, unit = tokens[j], tokens[j + 1]
        sign = ""
        if num.text in ("-", "+") and j + 2 < len(tokens) and unit.start == num.end:
            sign, num, unit = num.text, unit, tokens[j + 2]
        raw = sign + num.text.strip("'\"")
        start = num.start - len(sign)
        uname = unit.upper.rstrip("S") if unit.upper not in ("S", "MS") else unit.upper
        key = {"S": "SECOND", "MS": "MILLISECOND", "SEC": "SECOND", "MIN": "MINUTE",
               "H": "HOUR"}.get(uname, uname)
        if key not in units:
            raise src.error(DfsqlSyntaxError, f"expected a time unit, got {unit.text}", unit.start)
        try:
            micros = duration_micros(raw, units[key])
        except ValueError:
            raise src.error(DurationError, f"bad interval {raw}", start,
                            "write a number and a unit, e.g. 5 MINUTES") from None
        if micros < 0:
            raise src.error(DurationError, f"WATERMARK DELAY must not be negative, got {raw} "
                            f"{unit.text}", start, "use 0 or more, e.g. DELAY OF INTERVAL 0 SECONDS")
        if micros > c.MAX_DURATION.micros:
            raise src.error(DurationError, f"duration {raw} {unit.text} is too long", start,
                            DURATION_BOUND_HINT)
        dur = c.Duration(micros)
        name = col.text.strip("`")
        found.append((t.start, unit.end, SparkWatermark(name, dur, src.pos(t.start))))
    return found


def _matching_close(tokens: list[Token], open_idx: int) -> int:
    depth = tokens[open_idx].depth
    for j in range(open_idx + 1, len(tokens)):
        if tokens[j].text == ")" and tokens[j].depth == depth:
            return j
    return len(tokens) - 1


def parse_any(text: str, scanned: Scanned | None = None) -> ContinuousStatement | Statement:
    """``text`` scanned once and parsed: a continuous-query statement (CREATE / SHOW /
    STOP STREAMING QUERY), else a plain or windowed statement (:func:`parse_statement`).
    ``scanned``: ``text`` already scanned."""
    scanned = scanned or scan_text(text)
    continuous = parse_continuous(text, scanned)
    return continuous if continuous is not None else parse_statement(text, scanned)


def parse_statement(text: str, scanned: Scanned | None = None) -> Statement:
    """Find and parse every windowed block of ``text``; see the module docstring.
    ``scanned``: ``text`` already scanned (:func:`~dfsql.language.scan.scan_text`)."""
    scanned = scanned or scan_text(text)
    src, tokens, cleaned = scanned.source, scanned.tokens, scanned.cleaned
    kind, body_start, view = _kind(tokens, len(text))
    tried: dict = {}
    if kind == "explain_watermark":  # the TRY list is cut off: the query remains
        tokens, cleaned, start, tries = split_tries(src, tokens, cleaned)
        tried = {"tries": tries, "tries_start": start}
    firings_where = None
    if kind == "explain_firings":
        text, firings_where = _firings_where(tokens, text)
        if firings_where is not None:  # the query without the WHERE on its events
            return replace(parse_statement(text), kind=kind, body_start=body_start,
                           firings_where=firings_where)
    regions = _regions(tokens, src)
    if not regions:
        if kind == "explain_watermark":
            check_explained(src, False, body_start)
        return Statement(text, kind, body_start, (), source=src, **view.fields())
    if kind == "create_view":
        _check_windowed_view(view, src)
    if kind == "alter_view":
        raise src.error(NotSupportedError, "ALTER VIEW … AS cannot take a windowed query", 0,
                        "write CREATE OR REPLACE VIEW v AS … (CREATE OR REPLACE TEMP VIEW for "
                        "a temp view): it keeps the view's clauses")
    # Parse each windowed SELECT once, and check it now (it must aggregate, no GROUPING
    # SETS, every column grouped or aggregated), so that a mistake there fails before any
    # Spark work starts; the blocks keep the parsed SELECT for later rewrites.
    blocks = []
    for b in _blocks(regions, tokens, src, cleaned, body_start):
        b = replace(b, select=parse_select(b, src))
        rewrite(b, src)
        blocks.append(b)
    stmt = Statement(text, kind, body_start, tuple(blocks), source=src, **view.fields(),
                     **tried)
    if kind == "explain_watermark":
        check_explained(src, stmt.top is not None, body_start)
    return stmt


def _kind(tokens: list[Token], end: int) -> tuple[str, int, _ViewHead]:
    """The statement's kind, where its query body starts, and its CREATE VIEW head."""
    kind, body_start, view = "query", 0, _ViewHead()
    first = [t for t in tokens if t.depth == 0]
    if len(first) > 1 and first[0].is_word("EXPLAIN") and first[1].is_word("WATERMARK"):
        kind = "explain_watermark"
        body_start = first[2].start if len(first) > 2 else end
    elif len(first) > 1 and first[0].is_word("EXPLAIN") and first[1].is_word("FIRINGS"):
        kind = "explain_firings"  # LANGUAGE.md §8b
        body_start = first[2].start if len(first) > 2 else end
    elif first and first[0].is_word("EXPLAIN"):
        kind = "explain"
        k = 1
        while k < len(first) and first[k].is_word("EXTENDED", "FORMATTED", "CODEGEN", "COST",
                                                   "LOGICAL"):
            k += 1
        body_start = first[k].start if k < len(first) else end
    elif first and first[0].is_word("CREATE") and any(t.is_word("VIEW") for t in first[:7]):
        kind = "create_view"
        view = _view_head(first, end)
        body_start = view.body_start
    elif len(first) > 2 and first[0].is_word("ALTER") and first[1].is_word("VIEW"):
        kind = "alter_view"
        body_start = next((first[k + 1].start for k in range(2, len(first) - 1)
                           if first[k].is_word("AS")), end)
    elif first and (write_at := _write_body(first, tokens)) is not None:
        kind, body_start = "write", write_at
    elif first and not first[0].is_word("SELECT", "WITH", "FROM", "VALUES", "TABLE") and \
            first[0].text != "(":
        kind = "other"
    return kind, body_start, view


def _write_body(first: list[Token], tokens: list[Token]) -> int | None:
    """Where the query of a statement that writes a query's rows starts (an offset), or
    None: ``CREATE [OR REPLACE] TABLE … AS q``,
    ``REPLACE TABLE … AS q``, ``INSERT INTO|OVERWRITE [TABLE] t … q``, ``CACHE [LAZY]
    TABLE t [OPTIONS (…)] [AS] q`` (LANGUAGE.md §8a: a windowed query stands there with
    the meaning it has alone)."""
    words = [t.upper if t.kind == "word" else t.text for t in first[:6]]
    if words[:1] == ["CREATE"] and "TABLE" in words or words[:2] == ["REPLACE", "TABLE"]:
        return next((first[k + 1].start for k in range(1, len(first) - 1)
                     if first[k].is_word("AS") and _starts_query(first[k + 1], tokens)), None)
    if words[:2] in (["INSERT", "INTO"], ["INSERT", "OVERWRITE"]) or \
            words[:2] == ["CACHE", "TABLE"] or words[:3] == ["CACHE", "LAZY", "TABLE"]:
        start = words.index("TABLE") + 2 if words[0] == "CACHE" else 3
        return next((t.start for t in first[start:] if _starts_query(t, tokens)), None)
    return None


def _starts_query(t: Token, tokens: list[Token]) -> bool:
    """``t`` starts a query: SELECT, WITH, FROM, VALUES, TABLE, or ``(`` before SELECT/WITH."""
    if t.text == "(":
        nxt = next((u for u in tokens if u.start >= t.end), None)
        return nxt is not None and nxt.is_word("SELECT", "WITH")
    return t.is_word("SELECT", "WITH", "FROM", "VALUES", "TABLE")


def _firings_where(tokens: list[Token], text: str) -> tuple[str, tuple[int, str] | None]:
    """``EXPLAIN FIRINGS <query> WHERE p``: the last WHERE outside parentheses after the
    query's WINDOW filters the events, not the query. Returns the text with it blanked
    (offsets kept) and (offset of p, p)."""
    first = [t for t in tokens if t.depth == 0]
    window = next((k for k, t in enumerate(first) if t.is_word("WINDOW")), None)
    where = [t for t in first[window + 1:] if t.is_word("WHERE")] if window is not None else []
    if not where:
        return text, None
    w = where[-1]
    end = len(text.rstrip().rstrip(";").rstrip())
    p = text[w.end:end]
    return text[:w.start] + blank(text[w.start:end]) + text[end:], \
        (w.end + len(p) - len(p.lstrip()), p.strip())


def _regions(tokens: list[Token], src: Source) -> list[tuple[int, int, int]]:
    """The extension regions (start offset, end offset, depth); an extension clause word
    outside any region, or a SQL clause after WINDOW that belongs before it, is the
    user's mistake."""
    regions: list[tuple[int, int, int]] = []
    consumed_until = -1
    for i, t in enumerate(tokens):
        if t.start < consumed_until:
            continue
        if t.is_word("WINDOW") and _is_region_start(tokens, i):
            end = _region_end(tokens, i, src)
            regions.append((t.start, end, t.depth))
            consumed_until = end
            continue
        _check_stray(tokens, i, regions, src)
    return regions


def _region_end(tokens: list[Token], i: int, src: Source) -> int:
    """Where the region that starts at the WINDOW token ``tokens[i]`` ends."""
    t = tokens[i]
    j = i + 1
    while j < len(tokens):
        u = tokens[j]
        if u.depth < t.depth or (u.text == ")" and u.depth == t.depth - 1):
            break
        if u.depth == t.depth and (u.text == ";" or (u.kind == "word" and (
                u.upper in _REGION_END or u.upper in _BEFORE_WINDOW))):
            if not (u.is_word("FROM") and tokens[j - 1].is_word("WATERMARK")):
                break
        j += 1
    end_tok = tokens[j] if j < len(tokens) else None
    if end_tok is not None and end_tok.kind == "word" and end_tok.upper in _BEFORE_WINDOW:
        word = "GROUP BY" if end_tok.upper == "GROUP" else end_tok.upper
        raise src.error(ClauseOrderError, f"{word} must come before WINDOW",
                        end_tok.start, "WINDOW and the clauses after it follow GROUP BY "
                                       "and HAVING, and precede ORDER BY and LIMIT")
    return tokens[j - 1].end


def _check_stray(tokens: list[Token], i: int, regions: list[tuple[int, int, int]],
                 src: Source) -> None:
    """An extension clause word (TRIGGER EVERY, EMIT ACCUMULATING, ...) outside a region:
    after ORDER BY / LIMIT, or without WINDOW."""
    t = tokens[i]
    stray = _STRAY.get(t.upper) if t.kind == "word" else None
    prev = tokens[i - 1] if i > 0 else None
    if stray and prev is not None and (prev.text in (",", ".", "(") or prev.is_word(
            "SELECT", "AS", "DISTINCT", "BY", "ON", "AND", "OR", "NOT", "WHEN", "THEN",
            "ELSE", "CASE")):
        stray = None  # a column or alias that happens to be called watermark, emit, ...
    if not stray:
        return
    nxt = _next(tokens, i)
    if nxt is not None and (nxt.upper in stray or nxt.text in stray) and not (
            t.is_word("WATERMARK") and nxt.kind in ("word", "quoted")
            and (_next(tokens, i + 1) or nxt).is_word("DELAY")
            and (_next(tokens, i + 2) or nxt).is_word("OF")):
        word = {"ALLOWED": "ALLOWED LATENESS", "PROCESSING": "PROCESSING TIME"}.get(
            t.upper, t.upper)
        prior = [r for r in regions if r[2] == t.depth]
        if prior:
            raise src.error(ClauseOrderError, f"{word} must come before ORDER BY / LIMIT",
                            t.start, "the extension clauses follow WINDOW directly")
        raise src.error(ClauseOrderError, f"{word} needs a WINDOW clause before it",
                        t.start, "add e.g. WINDOW FIXED(1 MINUTE) ON <event time> first")


def _blocks(regions: list[tuple[int, int, int]], tokens: list[Token], src: Source,
            cleaned: str, body_start: int) -> tuple[WindowedBlock, ...]:
    """Parse each region and work out its block (innermost first)."""
    csrc = Source(cleaned)
    spark_wms = _spark_watermark(tokens, src)
    raw_blocks = []
    for start, end, depth in regions:
        clauses = parse_region(csrc, start, end)
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
        body = list(cleaned)
        body[r0:r1] = blank(cleaned[r0:r1])
        inside = [p for p in blocks if b0 <= p.span[0] and p.span[1] <= b1]
        inner = [p.index for p in inside
                 if not any(q is not p and q.span[0] <= p.span[0] and p.span[1] <= q.span[1]
                            for q in inside)]
        inner_at = []
        for i in inner:
            p0, p1 = blocks[i].span
            repl = f"SELECT * FROM {blocks[i].view_name}"
            body[p0:p1] = repl + blank(cleaned[p0:p1])[len(repl):]
            inner_at.append(p0 - b0 + len("SELECT * FROM "))
        sw = None
        for w0, w1, wm in spark_wms:
            if b0 <= w0 < b1 and not any(blocks[i].span[0] <= w0 < blocks[i].span[1]
                                         for i in inner):
                body[w0:w1] = blank(cleaned[w0:w1])
                sw = wm
        if sw is not None and not clauses.watermark_given:
            clauses = _with(clauses, watermark=c.WatermarkDelay(pos=sw.pos, delay=sw.delay,
                                                                from_relation=True))
        if sw is not None and clauses.on is None:
            clauses = _with(clauses, on=c.Expr(f"`{sw.column}`", sw.pos))
        sql = "".join(body)[b0:b1]
        blocks.append(WindowedBlock(idx, (b0, b1), (r0, r1), sql, clauses, tuple(inner), sw,
                                    inner_at=tuple(inner_at)))
    return tuple(blocks)


def _with(cl: c.Clauses, **changes) -> c.Clauses:
    return replace(cl, **changes)

