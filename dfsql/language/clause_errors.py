"""The clause parser's error messages: a Lark exception, or a clause word misspelt inside
an ON / PROCESSING TIME expression, as a :class:`~dfsql.errors.DfsqlError` at the user's
line and column, with a hint (a did-you-mean for a misspelt keyword)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from lark import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from dfsql.errors import (
    ClauseOrderError,
    DfsqlError,
    DfsqlSyntaxError,
    DurationError,
    MissingOperandError,
    UnknownKeywordError,
)
from dfsql.language import vocabulary
from dfsql.language.expected_words import TERMINAL_TEXT, describe_expected, what_may_follow
from dfsql.language.scan import Source, Token
from dfsql.language.vocabulary import CLAUSE_ORDER, CLAUSE_WORDS, ROW_WORDS, UNIT_WORDS
from dfsql.model import clauses as c

#: the grammar's unit terminals and the model's unit of each
UNIT = c.UNIT_SHORT
#: every spelling of a unit a duration or a row count may end with
UNIT_SPELLINGS = UNIT_WORDS | ROW_WORDS
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|'[^']*'|\S")

# Words that may come right after an operand inside an ON / PROCESSING TIME expression.
_SQL_OPERAND_FOLLOWERS = {
    "AND", "OR", "NOT", "IS", "IN", "LIKE", "ILIKE", "RLIKE", "BETWEEN", "CASE", "WHEN",
    "THEN", "ELSE", "END", "AS", "DIV", "NULL", "ESCAPE", "INTERVAL",
}

#: LATE ROWS INTO where a clause may start (it belongs to ALLOWED LATENESS)
LATE_ROWS = re.compile(r"(?i)\bLATE\s+ROWS\s+INTO\b")


def late_rows_alone(src: Source, offset: int) -> DfsqlError:
    """LATE ROWS INTO written without ALLOWED LATENESS before it: the grammar reads it as
    part of the clause before (an ON or PROCESSING TIME expression, a duration)."""
    return src.error(DfsqlSyntaxError, "LATE ROWS INTO belongs to ALLOWED LATENESS", offset,
                     "write ALLOWED LATENESS <duration> LATE ROWS INTO <view>, e.g. ALLOWED "
                     "LATENESS 0 SECONDS LATE ROWS INTO late_rows (the rows dropped as late)")


def misspelt_clause_word(tokens: Sequence[Token]) -> tuple[str, int, str] | None:
    """(word, its offset, clause keyword) for a word after a complete operand at the top
    level of an expression's ``tokens`` that is close to a clause keyword (``ts EMITT
    ...``), else None. The tokens are the statement's own (the scanner's, once)."""
    top = tokens[0].depth if tokens else 0
    for k in range(1, len(tokens)):
        prev, tok = tokens[k - 1], tokens[k]
        nxt = tokens[k + 1] if k + 1 < len(tokens) else None
        if tok.kind != "word" or tok.depth != top:
            continue
        if prev.text == "." or prev.upper in _SQL_OPERAND_FOLLOWERS or prev.kind == "op" \
                or prev.text in ("(", ","):
            continue
        if nxt is not None and nxt.text in ("(", "."):
            continue
        match = difflib.get_close_matches(tok.upper, sorted(CLAUSE_WORDS), n=1, cutoff=0.8)
        if match:
            return tok.text, tok.start, match[0]
    return None


def lark_error(err: UnexpectedInput, src: Source, base: int, region: str,
               keywords: frozenset[str]) -> DfsqlError:
    """Map a Lark exception to a DfsqlError at the right place with a useful message
    (``keywords``: every keyword of the grammar)."""
    offset = base + (getattr(err, "pos_in_stream", None) or 0)
    expected: set[str] = set(getattr(err, "expected", None) or getattr(err, "allowed", None) or [])
    parser = getattr(err, "interactive_parser", None)
    if parser is not None:  # exactly what fits here: LALR's lookahead sets of merged
        expected = set(parser.accepts()) - {"$END"}  # states name more (',' after a delay)
    expected = what_may_follow(err, expected)
    if isinstance(err, UnexpectedToken) and err.token.type == "$END":
        offset = base + len(region.rstrip())
    # The token just before the failure makes "after ..." in the message.
    prev_text = region[: offset - base].rstrip()
    tail = _WORDS.findall(prev_text)[-2:]
    if len(tail) == 2 and tail[-1] == "(":
        after = "".join(tail)
    else:
        after = tail[-1] if tail else ""
    tail = [t for t in tail if t != "("] or tail
    where = f" after {after}" if after else ""
    expected_keywords = {e for e in expected if e.isupper() and e not in TERMINAL_TEXT}
    if expected & set(UNIT):
        expected_keywords |= {spellings[0] for spellings in vocabulary.UNIT_SPELLINGS.values()}

    got = None
    if isinstance(err, UnexpectedToken):
        got = err.token
        if got.type in ("EXPR", "NAME"):
            m = _WORDS.match(str(got))
            got = m.group(0) if m else str(got)
    elif isinstance(err, UnexpectedCharacters):
        m = _WORDS.match(region, offset - base)
        got = m.group(0) if m else region[offset - base : offset - base + 1]

    late_rows = LATE_ROWS.match(region, offset - base)
    if late_rows is not None:
        return late_rows_alone(src, offset)
    last_word = tail[-1].upper() if tail else ""
    if last_word in ("TRIGGER", "UNTIL", "FINALLY", "THEN", "EARLY", "LATE", "REPEAT") and (
        got is None or getattr(got, "type", "") == "$END" or str(got).upper() in
        ("EMIT", "UNTIL", "FINALLY", "THEN", ")", ",")
    ):
        return src.error(MissingOperandError, f"{last_word} needs a trigger after it", offset,
                         f"e.g. {last_word} WATERMARK")

    got_text = "" if got is None else str(got)
    if {"NUMBER", "INTERVAL"} <= expected and got_text.upper() in UNIT_SPELLINGS - {"ROW", "ROWS"}:
        return src.error(DurationError, f"a duration needs a number before {got_text}{where}",
                         offset, f"e.g. 5 {got_text}")
    if got_text and got_text[0].isalpha() and expected & set(UNIT):
        # A number was followed by something that is not a unit: a bad duration.
        match = difflib.get_close_matches(got_text.upper(), sorted(UNIT_SPELLINGS), n=1,
                                          cutoff=0.6)
        rows = " or ROWS" if "ROWS" in expected else ""
        return src.error(DurationError, f"unknown time unit {got_text}{where}", offset,
                         f"did you mean {match[0]}?" if match else
                         f"expected a time unit{rows}: MILLISECONDS, SECONDS, MINUTES, HOURS "
                         "or DAYS")
    if got_text and got_text[0].isalpha() and expected_keywords:
        match = difflib.get_close_matches(got_text.upper(), sorted(expected_keywords), n=1,
                                          cutoff=0.6)
        upper = got_text.upper()
        if upper in CLAUSE_WORDS and upper not in expected_keywords:
            return src.error(ClauseOrderError, f"unexpected {upper} here{where}", offset,
                             "the clauses come in the order " + ", ".join(CLAUSE_ORDER))
        if match:
            return src.error(UnknownKeywordError, f"unknown keyword {got_text}{where}", offset,
                             f"did you mean {match[0]}?")
        return src.error(
            UnknownKeywordError if got_text.upper() not in keywords else DfsqlSyntaxError,
            f"expected {describe_expected(expected)}{where}, got {got_text}", offset,
        )
    if isinstance(err, UnexpectedToken) and err.token.type == "$END":
        return src.error(DfsqlSyntaxError, f"expected {describe_expected(expected)}{where}",
                         offset, "the query ends too early")
    return src.error(DfsqlSyntaxError,
                     f"expected {describe_expected(expected)}{where}"
                     + (f", got {got_text}" if got_text else ""), offset)


