"""A linear-time matcher for the regular expressions in metadata patterns.

Spark's Thrift server matches GetSchemas/GetTables/GetColumns/GetFunctions patterns as
Java regexes, so a client may send one; Python's backtracking ``re`` would then spend
time exponential in the name on ``(a+)+b`` while holding the GIL, stalling every user.
Here a pattern is parsed (Java's syntax, the regular part of it) into a Thompson NFA and
run as a set of states, one step per character, with the steps cached as a lazy DFA:
time O(states x name length) whatever the pattern, and at most :data:`MAX_STATES`
states. Constructs Java accepts but that are not regular or not supported here
(back-references, look-around, atomic groups, possessive quantifiers, inline flags,
``\\b``, ``\\p{..}``, nested or intersected classes) match nothing, as Spark's server
matches nothing for a pattern Java rejects; docs/guides/endpoint.md lists them.
"""

from __future__ import annotations

from collections.abc import Callable

from dfsql.server.limits import LimitError

#: the most NFA states one pattern may need (``a{500}`` needs 500): the cost bound of
#: matching one name is this times its length
MAX_STATES = 2000
#: the most cached DFA steps per pattern (then the cache starts over)
_CACHE_STEPS = 4096
#: what Java's ``.`` does not match (no DOTALL): its line terminators
_LINE_ENDS = frozenset("\n\r\u0085\u2028\u2029")
_CLASSES = {"d": "0123456789", "s": " \t\n\x0b\f\r",
            "w": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789"}
_CONTROL = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "a": "\x07", "e": "\x1b"}
_META_GROUP = {"=", "!", "<=", "<!", ">"}  # look-around and atomic groups


class Unsupported(Exception):
    """The pattern is no valid Java regex, or uses what this matcher does not support:
    it matches nothing."""


Pred = Callable[[str], bool]


def _in_set(chars: str | set[str]) -> Pred:
    s = frozenset(chars)
    return lambda c: c in s


class _Parser:
    """Java regex syntax (the regular part) to an AST: ("pred", test), ("cat", [..]),
    ("alt", [..]), ("rep", node, min, max or None), ("bol",), ("eol",)."""

    def __init__(self, src: str, ignore_case: bool) -> None:
        self.src, self.i, self.ignore_case = src, 0, ignore_case

    def test(self, positive: Pred, negated: bool = False) -> Pred:
        """``positive`` under Java's ``(?i)`` (an ASCII letter also matches as its other
        case), negated after the folding, as Java's ``[^a]`` matches neither a nor A."""
        if self.ignore_case:
            inner = positive

            def positive(c: str) -> bool:
                return inner(c) or (c.isascii() and c.isalpha() and inner(c.swapcase()))
        return (lambda c: not positive(c)) if negated else positive

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.src[j] if j < len(self.src) else ""

    def parse(self):
        node = self.alt()
        if self.i != len(self.src):  # an unmatched ')'
            raise Unsupported("unmatched )")
        return node

    def alt(self):
        branches = [self.cat()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.cat())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def cat(self):
        items: list = []
        while self.peek() not in ("", "|", ")"):
            atom = self.atom()
            if atom is None:  # \Q\E with nothing quoted
                continue
            items.extend(self.quantified(atom))
        return ("cat", items)

    def quantified(self, atom) -> list:
        c = self.peek()
        if atom[0] == "quote":  # a quantifier after \Q..\E takes its last character
            return atom[1][:-1] + self.quantified(atom[1][-1])
        if c not in ("*", "+", "?", "{"):
            return [atom]
        if atom[0] in ("bol", "eol"):
            raise Unsupported("a quantified anchor")
        self.i += 1
        lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(c, (0, 0))
        if c == "{":
            lo, hi = self.braces()
        if self.peek() == "?":  # lazy: the same set of whole matches
            self.i += 1
        elif self.peek() == "+":
            raise Unsupported("possessive quantifier")
        if self.peek() in ("*", "+", "?", "{"):
            raise Unsupported("dangling quantifier")
        return [("rep", atom, lo, hi)]

    def braces(self) -> tuple[int, int | None]:
        end = self.src.find("}", self.i)
        body = self.src[self.i:end] if end >= 0 else ""
        lo_s, comma, hi_s = body.partition(",")
        if end < 0 or not lo_s.isdigit() or (hi_s and not hi_s.isdigit()):
            raise Unsupported("illegal repetition")
        self.i = end + 1
        lo, hi = int(lo_s), (int(hi_s) if hi_s else None) if comma else int(lo_s)
        if hi is not None and hi < lo:
            raise Unsupported("illegal repetition range")
        return lo, hi

    def atom(self):
        c = self.peek()
        self.i += 1
        if c == "(":
            return self.group()
        if c == "[":
            return ("pred", self.char_class())
        if c == ".":
            return ("pred", lambda c: c not in _LINE_ENDS)
        if c == "^":
            return ("bol",)
        if c == "$":
            return ("eol",)
        if c in ("*", "+", "?", "{"):
            raise Unsupported("dangling meta character")
        if c == "\\":
            return self.escape(in_class=False)
        return ("pred", self.test(_in_set(c)))

    def group(self):
        if self.peek() == "?":
            if self.peek(1) == ":":
                self.i += 2
            elif self.peek(1) == "<" and self.peek(2).isalpha():  # (?<name>...)
                end = self.src.find(">", self.i)
                if end < 0 or not self.src[self.i + 2:end].isalnum():
                    raise Unsupported("bad group name")
                self.i = end + 1
            else:
                raise Unsupported("look-around, atomic group or inline flags")
        node = self.alt()
        if self.peek() != ")":
            raise Unsupported("unclosed group")
        self.i += 1
        return node

    def escape(self, in_class: bool):
        """After a backslash: a ("pred", test) outside a class, the test inside one (a
        single character as a one-character str, for ranges)."""
        c = self.peek()
        self.i += 1
        if c == "":
            raise Unsupported("trailing backslash")
        if c.lower() in _CLASSES:
            test = self.test(_in_set(_CLASSES[c.lower()]), negated=c.isupper())
            return test if in_class else ("pred", test)
        if c == "Q" and not in_class:
            end = self.src.find("\\E", self.i)
            end = len(self.src) if end < 0 else end
            text, self.i = self.src[self.i:end], min(end + 2, len(self.src))
            return ("quote", [("pred", self.test(_in_set(ch))) for ch in text]) if text else None
        ch = self.escaped_char(c)
        return ch if in_class else ("pred", self.test(_in_set(ch)))

    def escaped_char(self, c: str) -> str:
        if c in _CONTROL:
            return _CONTROL[c]
        if c in ("x", "u"):
            n = 2 if c == "x" else 4
            digits = self.src[self.i:self.i + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise Unsupported("bad hex escape")
            self.i += n
            return chr(int(digits, 16))
        if c == "0":  # \0n, \0nn, \0mnn (m at most 3)
            digits = ""
            while len(digits) < 3 and self.peek() in tuple("01234567"):
                digits += self.peek()
                self.i += 1
            if len(digits) == 3 and digits[0] > "3":
                digits, self.i = digits[:2], self.i - 1
            if not digits:
                raise Unsupported("bad octal escape")
            return chr(int(digits, 8))
        if c.isalnum():  # back-references, \b, \p{..}, \A ... and Java's illegal escapes
            raise Unsupported(f"\\{c}")
        return c

    def char_class(self) -> Pred:
        negated = self.peek() == "^"
        self.i += negated
        if self.peek() in ("]", ""):
            raise Unsupported("empty or unclosed class")
        tests: list[Pred] = []
        chars: set[str] = set()
        while self.peek() != "]":
            c = self.peek()
            if c == "" or c == "[" or (c == "&" and self.peek(1) == "&"):
                raise Unsupported("unclosed, nested or intersected class")
            self.i += 1
            item = self.escape(in_class=True) if c == "\\" else c
            if not isinstance(item, str):
                tests.append(item)
            elif self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.peek()
                self.i += 1
                hi = self.escape(in_class=True) if hi == "\\" else hi
                if not isinstance(hi, str) or hi < item:
                    raise Unsupported("illegal character range")
                tests.append(lambda ch, lo=item, up=hi: lo <= ch <= up)
            else:
                chars.add(item)
        self.i += 1
        tests.append(_in_set(chars))
        return self.test(lambda ch: any(t(ch) for t in tests), negated)


class _Nfa:
    """Thompson's construction: states as [op, arg, out, out2] with op "pred" (arg: the
    test), "split" (two epsilon arrows), "bol"/"eol" (an epsilon arrow taken at the start
    or end of the name) and "match"."""

    def __init__(self, ast) -> None:
        self.states: list[list] = [["match", None, -1, -1]]
        self.start = self.build(ast, 0)

    def new(self, op: str, arg=None, out: int = -1, out2: int = -1) -> int:
        if len(self.states) >= MAX_STATES:
            raise LimitError(
                f"the metadata pattern needs more than {MAX_STATES} states to match",
                hint="use a shorter pattern or fewer repetitions ({n} counts)")
        self.states.append([op, arg, out, out2])
        return len(self.states) - 1

    def build(self, node, nxt: int) -> int:
        """The first state of ``node``, whose matches continue at state ``nxt``."""
        kind = node[0]
        if kind == "pred":
            return self.new("pred", node[1], nxt)
        if kind in ("bol", "eol"):
            return self.new(kind, None, nxt)
        if kind == "cat":
            for item in reversed(node[1]):
                nxt = self.build(item, nxt)
            return nxt
        if kind == "alt":
            starts = [self.build(b, nxt) for b in node[1]]
            first = starts[-1]
            for s in reversed(starts[:-1]):
                first = self.new("split", None, s, first)
            return first
        _, body, lo, hi = node
        if hi is None:  # body{lo,}: lo copies, then a loop
            loop = self.new("split", None, -1, nxt)
            self.states[loop][2] = self.build(body, loop)
            nxt = loop
        else:
            for _ in range(hi - lo):
                nxt = self.new("split", None, self.build(body, nxt), nxt)
        for _ in range(lo):
            nxt = self.build(body, nxt)
        return nxt

    def closure(self, seeds, at_start: bool, at_end: bool) -> frozenset[int]:
        """The "pred" and "match" states reachable by epsilon arrows, and the "eol"
        states not yet passable (the end may come later)."""
        out, stack, seen = set(), list(seeds), set()
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            op, _, a, b = self.states[s]
            if op == "split":
                stack += (a, b)
            elif op == "bol":
                if at_start:
                    stack.append(a)
            elif op == "eol":
                if at_end:
                    stack.append(a)
                else:
                    out.add(s)
            else:
                out.add(s)
        return frozenset(out)


def compile_regex(src: str, ignore_case: bool = False) -> Callable[[str], bool]:
    """Whether a whole name matches Java regex ``src`` (``Matcher.matches()``), in time
    linear in the name; ``ignore_case`` is Java's ``(?i)``: ASCII letters only. A
    pattern Java rejects, or one using what this does not support, matches nothing; one
    over :data:`MAX_STATES` raises :class:`LimitError` (SQLSTATE 54000)."""
    try:
        nfa = _Nfa(_Parser(src, ignore_case).parse())
    except Unsupported:
        return lambda name: False
    states, cache = nfa.states, {}

    def step(current: frozenset[int], c: str) -> frozenset[int]:
        key = (current, c)
        got = cache.get(key)
        if got is None:
            if len(cache) >= _CACHE_STEPS:
                cache.clear()
            moved = [states[s][2] for s in current
                     if states[s][0] == "pred" and states[s][1](c)]
            got = cache[key] = nfa.closure(moved, False, False)
        return got

    def accepts(current: frozenset[int], at_start: bool) -> bool:
        return 0 in nfa.closure(current, at_start, True)

    initial = nfa.closure([nfa.start], True, False)

    def match(name: str) -> bool:
        current = initial
        for c in name:
            current = step(current, c)
            if not current:
                return False
        return accepts(current, name == "")

    return match
