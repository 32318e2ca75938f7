"""The metadata pattern matcher (dfsql.server.patterns) runs in time linear in the name
and agrees with a backtracking regex wherever that one is safe to run (issue #52).

* catastrophic patterns (``(a+)+b``, ``(.+)+(.+)+!``) against 40-character names: a
  backtracking engine needs hours there, so a bound of seconds cannot flake;
* property: ``name_matcher`` equals the ``re``-based implementation it replaced
  (kept below as the reference) on safe JDBC/Hive patterns (literals, ``.``, ``.*``,
  ``*``, ``%``, ``_``, escapes, ``|``), and ``compile_regex`` equals ``re.fullmatch`` on
  small generated regexes of the regular syntax both share;
* Java's syntax where it differs from Python's, and patterns too large to match.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfsql.server.limits import LimitError
from dfsql.server.metadata import _JAVA_TRIM, _jdbc_to_hive, name_matcher
from dfsql.server.patterns import MAX_STATES, compile_regex

# --------------------------------------------------------------------------- reference


def _reference(pattern: str | None, kind: str):
    """name_matcher as it was before issue #52 (Python's ``re``): right, but exponential
    on nested quantifiers; safe on the patterns generated here."""
    if pattern is None or pattern == "":
        return lambda name: True

    def spark_filter(p: str):
        parts = []
        for sub in p.strip(_JAVA_TRIM).split("|"):
            try:
                parts.append(re.compile(sub.replace("*", ".*"), re.I | re.A))
            except re.error:
                continue
        return lambda name: any(rx.fullmatch(name) for rx in parts)

    if kind in ("schema", "table"):
        return spark_filter(_jdbc_to_hive(pattern))
    if kind == "function":
        return spark_filter(pattern)
    try:
        rx = re.compile(_jdbc_to_hive(pattern, ".*"))
    except re.error:
        return lambda name: False
    return lambda name: rx.fullmatch(name) is not None


# --------------------------------------------------------------------------- catastrophic

SLOW = [  # (pattern, kind, name): each hours in a backtracking engine
    ("(a+)+b", "table", "a" * 40),
    ("(a+)+b", "schema", "a" * 40),
    ("(.+)+(.+)+!", "function", "approx_count_distinct_" * 2),
    ("(a|aa)*c", "column", "a" * 40),
    ("(x*)*y", "column", "x" * 40),
    ("((a*)*)*b", "table", "a" * 40),
    ("(.*a){20}", "function", "a" * 19 + "b" * 21),
]


@pytest.mark.parametrize(("pattern", "kind", "name"), SLOW)
def test_catastrophic_patterns_answer_in_linear_time(pattern, kind, name):
    match = name_matcher(pattern, kind)
    started = time.monotonic()
    assert match(name) is False
    assert match(name[:-1] + "b") is (pattern == "(a+)+b" or pattern == "((a*)*)*b")
    assert time.monotonic() - started < 5  # milliseconds; hours before issue #52


def test_a_long_name_costs_linear_time():
    match = name_matcher("(.+)+(.+)+!", "function")
    started = time.monotonic()
    assert match("x" * 20_000 + "!") and not match("x" * 20_000)
    assert time.monotonic() - started < 10  # 2 x 20,000 steps of a handful of states


def test_a_pattern_over_the_state_limit_is_refused_as_too_costly():
    for pattern in (f"a{{{MAX_STATES}}}", "(a{1000}){1000000000}", "x" * (MAX_STATES + 5)):
        with pytest.raises(LimitError) as info:
            name_matcher(pattern, "table")
        assert info.value.sqlstate == "54000"
    assert name_matcher("a{100}", "table")("A" * 100)  # a bounded repetition is fine


# --------------------------------------------------------------------------- Java syntax

JAVA = [  # (regex, ignore_case, names that match, names that do not)
    ("a{2,3}", False, ["aa", "aaa"], ["a", "aaaa"]),
    ("a{2,}", False, ["aa", "aaaaa"], ["a"]),
    ("(?:ab)+", False, ["abab"], ["aba"]),
    ("(?<g>ab)c", False, ["abc"], ["ab"]),
    ("\\Qa.b\\E", False, ["a.b"], ["axb"]),       # quoted: literal
    ("\\Qa.b\\E+", False, ["a.bbb"], ["a.ba.b"]),  # a quantifier takes the last char
    ("x\\d+\\w\\s", False, ["x12_ "], ["x1_"]),
    ("[^a-c]x", False, ["dx", "Dx"], ["bx"]),
    ("[a-c]x", True, ["Bx", "bX"], ["dx"]),       # (?i): ASCII letters
    ("\u00e9", True, ["\u00e9"], ["\u00c9"]),     # not beyond ASCII, as Java's (?i)
    ("^ab$", False, ["ab"], ["abc"]),
    ("a^b", False, [], ["ab", "a^b"]),             # an anchor mid-name never holds
    ("a.b", False, ["a b", "a\tb"], ["a\nb", "a\rb", "a\u2028b"]),  # Java's line ends
    ("\\x41\\u0042\\0103", False, ["ABC"], []),
    ("a\\.b\\*", False, ["a.b*"], ["axb*"]),
    ("a]b}", False, ["a]b}"], []),                 # literal outside a class
    ("(a*)*b", False, ["b", "aab"], ["a", ""]),   # an empty loop ends
    ("((a|)+)*", False, ["", "aaa"], ["b"]),
    ("(a?){3}b", False, ["b", "aaab"], ["aaaab"]),
    # what Java rejects, or this matcher does not support: nothing
    ("a{", False, [], ["a{", "a"]),
    ("a**", False, [], ["aa"]),
    ("a*+", False, [], ["aa"]),                    # possessive
    ("(a)\\1", False, [], ["aa"]),                 # back-reference
    ("(?=a)a", False, [], ["a"]),                  # look-ahead
    ("(?i)a", False, [], ["a", "A"]),              # inline flags
    ("a\\b", False, [], ["a"]),                    # word boundary
    ("\\p{Lower}", False, [], ["a"]),
    ("[a[b]]", False, [], ["a", "b"]),             # nested class
    ("[a&&b]", False, [], ["a"]),                  # intersection
    ("[b-a]", False, [], ["a", "b"]),
    ("(ab", False, [], ["ab", "(ab"]),
    ("ab)", False, [], ["ab"]),
    ("\\", False, [], ["\\"]),
    ("\\y", False, [], ["y"]),                     # Java: illegal escape
]


@pytest.mark.parametrize(("regex", "ignore_case", "hits", "misses"), JAVA)
def test_java_regex_syntax(regex, ignore_case, hits, misses):
    match = compile_regex(regex, ignore_case)
    assert [n for n in hits if not match(n)] == []
    assert [n for n in misses if match(n)] == []


# --------------------------------------------------------------------------- properties

NAMES = st.text(alphabet="abAB_%.*x", max_size=10)
JDBC_TOKENS = st.sampled_from(["a", "b", "A", "x", "_", "%", ".", ".*", "*", "|",
                               "\\_", "\\%", "\\.", " "])
JDBC_PATTERNS = st.one_of(st.none(), st.lists(JDBC_TOKENS, max_size=8).map("".join))


@settings(max_examples=400, deadline=None)
@given(pattern=JDBC_PATTERNS, kind=st.sampled_from(["schema", "table", "column", "function"]),
       names=st.lists(NAMES, max_size=6))
def test_name_matcher_equals_the_re_reference_on_safe_patterns(pattern, kind, names):
    new, old = name_matcher(pattern, kind), _reference(pattern, kind)
    assert [new(n) for n in names] == [old(n) for n in names]


def _regexes(depth: int, loops: bool = True):
    """Small regexes in the syntax Java and Python share. ``re`` is the reference, so
    none may nest unbounded loops (``(a*)*``: exponential in ``re`` even on 8
    characters): a group takes only bounded quantifiers, and loops are on single
    characters; the nested loops are JAVA's cases and SLOW's above."""
    atom = st.sampled_from(["a", "b", "A", ".", "[ab]", "[^a]", "[a-c]", "\\.", "\\d"])
    quant = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,2}", "{0,}", "*?"])
    piece = st.tuples(atom, quant).map("".join)
    if depth > 0:
        inner = _regexes(depth - 1)
        group = st.one_of(inner.map(lambda r: f"({r})"),
                          st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"))
        bounded = st.sampled_from(["", "?", "{2}", "{1,2}", "{0,1}?"])
        piece = st.one_of(piece, st.tuples(group, bounded).map("".join))
    return st.lists(piece, min_size=1, max_size=3).map("".join)


@settings(max_examples=400, deadline=None)
@given(regex=_regexes(2), ignore_case=st.booleans(),
       names=st.lists(st.text(alphabet="abcAB.1", max_size=8), max_size=6))
def test_compile_regex_equals_re_fullmatch(regex, ignore_case, names):
    rx = re.compile(regex, re.I | re.A if ignore_case else 0)
    match = compile_regex(regex, ignore_case)
    assert [match(n) for n in names] == [rx.fullmatch(n) is not None for n in names]
