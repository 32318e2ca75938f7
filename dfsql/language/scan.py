"""A position-keeping scanner for whole statements.

Spark SQL is parsed by sqlglot (and finally by Spark); this scanner only needs to know
where words, strings, comments and parentheses are, so that the extension clauses can be
found without being fooled by a string literal or comment that happens to contain
``TRIGGER``, and so that every error can name a line and column.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from dfsql.errors import DfsqlSyntaxError
from dfsql.model.clauses import Pos


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # word | number | string | quoted | punct | op
    text: str
    start: int
    end: int
    depth: int  # parenthesis depth *outside* this token (a "(" has the depth it opens from)

    @property
    def upper(self) -> str:
        return self.text.upper()

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and (not words or self.text.upper() in words)


class Source:
    """The statement text with offset → line/column conversion."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self._line_starts.append(i + 1)

    def pos(self, offset: int) -> Pos:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset)
        return Pos(line, offset - self._line_starts[line - 1] + 1, offset)

    def error(self, cls: type, message: str, offset: int, hint: str | None = None):
        p = self.pos(offset)
        return cls(message, p.line, p.column, hint)


def blank(text: str) -> str:
    """Replace every character but newlines with a space (keeps offsets and lines)."""
    return "".join(ch if ch == "\n" else " " for ch in text)


def _comment_end(text: str, i: int) -> int:
    """Offset just past the block comment opening at ``i``; Spark nests ``/* */``."""
    depth, j, n = 0, i, len(text)
    while j < n:
        if text.startswith("/*", j):
            depth += 1
            j += 2
        elif text.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    return -1


@dataclass(frozen=True)
class Scanned:
    """A statement scanned once (:func:`scan_text`), for every parser that reads it
    (continuous-query statements, windowed statements): nothing scans it again."""

    source: Source
    tokens: list[Token]  # read only
    cleaned: str  # the text with comments blanked


def scan_text(text: str) -> Scanned:
    """:func:`scan` of ``text``, with its :class:`Source`."""
    src = Source(text)
    tokens, cleaned = scan(src)
    return Scanned(src, tokens, cleaned)


def scan(src: Source) -> tuple[list[Token], str]:
    """Tokens of the statement (comments dropped) and the text with comments blanked.

    Raises DfsqlSyntaxError for an unterminated string or comment and for unbalanced
    parentheses, pointing at the offending character.
    """
    text = src.text
    n = len(text)
    i = 0
    depth = 0
    opens: list[int] = []
    tokens: list[Token] = []
    cleaned = list(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if text.startswith(("--", "/*"), i):
            j = _comment(src, i)
            cleaned[i:j] = blank(text[i:j])
            i = j
            continue
        if ch == "(":
            tokens.append(Token("punct", ch, i, i + 1, depth))
            opens.append(i)
            depth += 1
            i += 1
            continue
        if ch == ")":
            if not opens:
                raise src.error(DfsqlSyntaxError, "unbalanced parentheses: ')' without '('", i,
                                "remove it or add the matching '('")
            opens.pop()
            depth -= 1
            tokens.append(Token("punct", ch, i, i + 1, depth))
            i += 1
            continue
        kind, j = _lexeme(src, i)
        tokens.append(Token(kind, text[i:j], i, j, depth))
        i = j
    if opens:
        raise src.error(DfsqlSyntaxError, "unbalanced parentheses: '(' is never closed",
                        opens[-1], "add the matching ')'")
    return tokens, "".join(cleaned)


def _comment(src: Source, i: int) -> int:
    """Offset just past the comment (``--`` to the line's end, or ``/* */``) at ``i``."""
    text = src.text
    if text.startswith("--", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    j = _comment_end(text, i)
    if j < 0:
        raise src.error(DfsqlSyntaxError, "unterminated comment", i, "close it with */")
    return j


def _raw(text: str, i: int) -> bool:
    """Whether the quote at ``i`` opens a raw string (``r'…'``, ``R"…"``: Spark reads a
    backslash in it as itself, and the first quote ends it), so that this scanner ends
    it where Spark does."""
    return i > 0 and text[i - 1] in "rR" and not (
        i > 1 and (text[i - 2].isalnum() or text[i - 2] == "_"))


def _lexeme(src: Source, i: int) -> tuple[str, int]:
    """The kind and end of the token (not a parenthesis or comment) starting at ``i``."""
    text, n, ch = src.text, len(src.text), src.text[i]
    if ch in "'\"":
        j = i + 1
        escapes = not _raw(text, i)
        while j < n and text[j] != ch:
            j += 2 if escapes and text[j] == "\\" else 1
        if j >= n:
            raise src.error(DfsqlSyntaxError, "unterminated string literal", i,
                            f"close it with {ch}")
        return "string", j + 1
    if ch == "`":
        j = text.find("`", i + 1)
        if j < 0:
            raise src.error(DfsqlSyntaxError, "unterminated quoted name", i, "close it with `")
        return "quoted", j + 1
    if ch.isalpha() or ch == "_":
        j = i + 1
        while j < n and (text[j].isalnum() or text[j] == "_"):
            j += 1
        return "word", j
    if ch.isdigit():
        j = i + 1
        while j < n and (text[j].isalnum() or text[j] in "._"):
            j += 1
        return "number", j
    return ("punct" if ch in ",;." else "op"), i + 1


def splice(text: str, edits: list[tuple[int, int, str]], keep_offsets: bool = True) -> str:
    """``text`` with each span ``[start, end)`` of ``edits`` (spans the scanner found, not
    overlapping) replaced by its new text: the one place SQL text is cut and joined.

    ``keep_offsets``: a new text shorter than its span is padded with the span blanked
    (its newlines kept), so every offset after it still points where the user wrote it
    and Spark's error positions map straight back; a longer one takes the blanks that
    follow the span (as many as there are). Without it the new texts are put in as they
    are (the caller maps positions itself)."""
    out, at = [], 0
    for start, end, new in sorted(edits):
        if start < at:
            raise ValueError(f"overlapping spans at {start}")
        out.append(text[at:start])
        if keep_offsets and len(new) <= end - start:
            new += blank(text[start + len(new):end])
        elif keep_offsets:
            room = len(text[end:]) - len(text[end:].lstrip(" "))
            end += min(room, len(new) - (end - start))
        out.append(new)
        at = end
    out.append(text[at:])
    return "".join(out)


def quoted_name(name: str) -> str:
    """``name`` as a Spark SQL identifier: in backticks, a backtick in it doubled."""
    return "`" + name.replace("`", "``") + "`"


def name_end(tokens: list[Token], k: int) -> int:
    """The index just past the (possibly qualified) name that starts at ``tokens[k]``
    (``db . t`` included), or ``k`` when no name starts there."""
    end = k
    while end < len(tokens) and tokens[end].kind in ("word", "quoted"):
        end += 1
        if end + 1 < len(tokens) and tokens[end].text == "." and \
                tokens[end + 1].kind in ("word", "quoted"):
            end += 1
            continue
        break
    return end
