"""What a syntax error says was expected where it happened: Lark's expected terminals in
words, narrowed to what the language allows there (:mod:`dfsql.language.parse`'s errors)."""

from __future__ import annotations

from lark import Token, UnexpectedInput

from dfsql.language.vocabulary import CLAUSE_OF_TOKEN, CLAUSE_ORDER, UNIT_SPELLINGS

# How the grammar's terminals read in an error message.
TERMINAL_TEXT = {
    "NUMBER": "a number",
    "EXPR": "an expression",
    "NAME": "a name",
    "STRING": "a string",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "DOT": "'.'",
    "$END": "the end of the query",
    **{unit: "a time unit" for unit in UNIT_SPELLINGS},
}


#: what ends the extension clauses in a statement (dfsql.language.statement cuts the region
#: there): the grammar never sees them, so a mistake after a complete clause names them
_AFTER_CLAUSES = {"ORDER BY", "LIMIT", "$END"}


def what_may_follow(err: UnexpectedInput, expected: set[str]) -> set[str]:
    """Where a new clause may start, Lark expects every clause keyword (the grammar reads
    ``clause+`` and checks their order afterwards): keep only those after the clause the
    error is in, and add what ends the clauses — so that ``EMIT DISCARDING ORDR BY``
    suggests ORDER BY, not WINDOW."""
    starters = expected & set(CLAUSE_OF_TOKEN)
    state = getattr(getattr(err, "interactive_parser", None), "parser_state", None)
    if not starters or state is None:
        return expected
    current = None
    for item in state.value_stack:  # [earlier clauses (one tree), this clause's items]
        if isinstance(item, Token) and item.type in CLAUSE_OF_TOKEN:
            current = CLAUSE_OF_TOKEN[item.type]
            break
    if current is None:
        return expected
    rank = CLAUSE_ORDER.index(current)
    late = {t for t in starters if CLAUSE_ORDER.index(CLAUSE_OF_TOKEN[t]) > rank}
    return (expected - starters) | late | _AFTER_CLAUSES


def describe_expected(expected: set[str]) -> str:
    words = []
    if {"NUMBER", "INTERVAL"} <= expected:  # both start a duration
        expected = (expected - {"NUMBER", "INTERVAL"}) | {"a duration"}
    for name in sorted(expected, key=lambda n: (n in ("a duration", "$END"), n)):
        if name.startswith("__"):
            continue
        text = TERMINAL_TEXT.get(name, name.replace("_", " "))
        if text not in words:
            words.append(text)
    if not words:
        return "something else"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]
