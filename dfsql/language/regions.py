"""Where a statement's extension clauses are: each region from a WINDOW that starts our
clause to the word that ends it, at its parenthesis depth; an extension clause word
outside any region, or a SQL clause after WINDOW, is the user's mistake. Also Spark's
relation clause ``WATERMARK col DELAY OF INTERVAL …``, which a windowed block takes as
its watermark."""

from __future__ import annotations

from dfsql.errors import ClauseOrderError, DfsqlSyntaxError, DurationError
from dfsql.language.blocks import SparkWatermark
from dfsql.language.parse import DURATION_BOUND_HINT, duration_micros
from dfsql.language.scan import Source, Token
from dfsql.language.vocabulary import CLAUSE_FOLLOWERS, UNIT_OF_SPELLING
from dfsql.model import clauses as c

# Words that end an extension region when met at the region's parenthesis depth.
_REGION_END = {
    "ORDER", "SORT", "CLUSTER", "DISTRIBUTE", "LIMIT", "OFFSET", "UNION", "INTERSECT",
    "EXCEPT", "MINUS",
}
# Words that end it but are out of order there (they belong before WINDOW).
_BEFORE_WINDOW = {"FROM", "WHERE", "GROUP", "HAVING", "SELECT", "LATERAL", "JOIN"}
_SQL_CLAUSE_WORDS = _REGION_END | _BEFORE_WINDOW | {"AS", "ON", "AND", "OR", "THEN", "ELSE", "END",
                                                    "WHEN", "IS", "IN", "NOT", "DESC", "ASC"}
#: a clause word and what may follow it, met outside a region: a stray clause (WINDOW
#: starts a region, :func:`_is_region_start`)
_STRAY = {word: after for word, after in CLAUSE_FOLLOWERS.items() if word != "WINDOW"}


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


def spark_watermarks(tokens: list[Token], src: Source) -> list[tuple[int, int, SparkWatermark]]:
    """Find ``WATERMARK col DELAY OF INTERVAL n unit`` relation clauses."""
    found = []
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
        key = UNIT_OF_SPELLING.get(unit.upper)
        if key is None:
            raise src.error(DfsqlSyntaxError, f"expected a time unit, got {unit.text}", unit.start)
        try:
            micros = duration_micros(raw, c.UNIT_SHORT[key])
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


def find_regions(tokens: list[Token], src: Source) -> list[tuple[int, int, int]]:
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
