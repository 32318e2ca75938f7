"""The language's words, read once from its grammar (``dfsql/grammar/dfsql.lark``): the
clauses and their order, the word each clause starts with, the words that may follow it,
the keywords, and the spellings of each time unit. A new clause or unit is written in the
grammar only; the parser, its error messages, the statement's regions and the shell's
highlighting all read it from here. (What a unit *is*, its length in microseconds, is
the model's: :data:`dfsql.model.clauses.UNIT_SHORT`.)"""

from __future__ import annotations

import functools
from importlib import resources

from lark import Lark
from lark.grammar import NonTerminal, Rule, Symbol


def _grammar_text() -> str:
    """The grammar, read from inside the installed package (``dfsql/grammar/dfsql.lark``;
    the checkout's top-level ``grammar/`` is a symlink to that folder), so a wheel or a
    non-editable install finds it wherever it runs."""
    return resources.files("dfsql").joinpath("grammar/dfsql.lark").read_text(encoding="utf-8")


@functools.cache
def parser() -> Lark:
    """The clauses' LALR parser (positions kept)."""
    return Lark(_grammar_text(), parser="lalr", propagate_positions=True,
                maybe_placeholders=False)


def _rules(name: str) -> list[Rule]:
    return [r for r in parser().rules if r.origin.name == name]


def _alternatives(pattern: str) -> list[str]:
    """The words of a keyword terminal's ``(?i:a|b|c)\\b`` pattern."""
    return pattern.removeprefix("(?i:").removesuffix(")\\b").split("|")


def _keywords() -> frozenset[str]:
    """Every terminal that is one whole word in any case."""
    return frozenset(t.name for t in parser().terminals
                     if t.pattern.value == f"(?i:{t.name})\\b")


def _unit_spellings() -> dict[str, tuple[str, ...]]:
    """Each unit terminal of the ``unit`` rule -> its spellings, upper case."""
    terms = [sym.name for r in _rules("unit") for sym in r.expansion]
    patterns = {t.name: t.pattern.value for t in parser().terminals}
    return {t: tuple(w.upper() for w in _alternatives(patterns[t])) for t in terms}


def _first(symbol: Symbol, seen: frozenset[str] = frozenset()) -> set[str]:
    """The terminals a ``symbol`` may start with (the grammar has no empty rules where
    clause words are followed)."""
    if not isinstance(symbol, NonTerminal):
        return {symbol.name}
    if symbol.name in seen:
        return set()
    out: set[str] = set()
    for r in _rules(symbol.name):
        if r.expansion:
            out |= _first(r.expansion[0], seen | {symbol.name})
    return out


def _word(terminal: str) -> str:
    """How a terminal is written: a keyword's name, a punctuation mark's text."""
    if terminal in KEYWORDS:
        return terminal
    return next(t.pattern.value for t in parser().terminals if t.name == terminal)


def _clause_words() -> tuple[list[str], dict[str, str], dict[str, frozenset[str]]]:
    """(the clauses' names in their order, e.g. ``PROCESSING TIME``; the terminal each
    starts with -> its name; that terminal -> the terminals that may follow it). A
    clause's name is the run of terminals every form of it starts with."""
    names, of_token, followers = [], {}, {}
    for alt in _rules("clause"):
        forms = [r.expansion for r in _rules(alt.expansion[0].name)]
        prefix: list[str] = []
        for syms in zip(*forms, strict=False):
            if len({s.name for s in syms}) != 1 or syms[0].name not in KEYWORDS:
                break
            prefix.append(syms[0].name)
        names.append(" ".join(prefix))
        of_token[prefix[0]] = names[-1]
        followers[prefix[0]] = frozenset(
            _word(t) for f in forms if len(f) > 1 for t in _first(f[1]))
    return names, of_token, followers


#: every keyword of the extension clauses
KEYWORDS = _keywords()
#: a unit terminal (``MILLISECOND``, ``SECOND``, …, the grammar's ``unit`` rule) -> its
#: spellings (``MILLISECONDS``, ``MILLISECOND``, ``MS``)
UNIT_SPELLINGS = _unit_spellings()
#: a unit's spelling -> its terminal
UNIT_OF_SPELLING = {w: t for t, ws in UNIT_SPELLINGS.items() for w in ws}
#: every spelling of a time unit
UNIT_WORDS = frozenset(UNIT_OF_SPELLING)
#: the spellings of a row count's unit (``AFTER 2 ROWS``)
ROW_WORDS = frozenset({"ROW", "ROWS"} & KEYWORDS)
_ORDER, _OF_TOKEN, _FOLLOWERS = _clause_words()
#: the clauses in the order a query writes them
CLAUSE_ORDER = tuple(_ORDER)
#: the word a clause starts with (its first terminal) -> the clause's name
CLAUSE_OF_TOKEN = dict(_OF_TOKEN)
#: the words a clause starts with
CLAUSE_WORDS = frozenset(CLAUSE_OF_TOKEN)
#: a clause's first word -> the words that may come next (``(`` for a parenthesis)
CLAUSE_FOLLOWERS = dict(_FOLLOWERS)
