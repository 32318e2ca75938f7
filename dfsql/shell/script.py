"""Where statements end: at a ``;`` outside strings, quoted names and comments.

The shell accepts a line when what was typed ends a statement; a script (``-f``, a piped
file) is cut into statements the same way, each with the line it starts on so that an
error's position can be given in the file's own lines. Backslash commands end at the end
of their line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dfsql.errors import DfsqlError
from dfsql.language.scan import Source, scan


@dataclass(frozen=True)
class Piece:
    """One statement (or backslash command) of a script, and the line it starts on."""

    text: str
    line: int  # 1-based line of the script where ``text`` starts

    @property
    def is_command(self) -> bool:
        return self.text.startswith("\\")


def _semicolons(text: str) -> list[int] | None:
    """Offsets of the statement-ending semicolons, or None if the text cannot be scanned
    (an unterminated string or comment: the statement is not finished)."""
    try:
        tokens, _ = scan(Source(text))
    except DfsqlError:
        return None
    return [t.start for t in tokens if t.text == ";"]


def is_complete(text: str) -> bool:
    """Whether the shell should run what was typed: a backslash command, or SQL whose
    last token is a ``;``."""
    stripped = text.strip()
    if not stripped or stripped.startswith("\\"):
        return True
    cuts = _semicolons(text)
    if not cuts:
        return False
    try:
        tokens, _ = scan(Source(text[cuts[-1] + 1:]))
    except DfsqlError:
        return False
    return not tokens


def split(text: str) -> list[Piece]:
    """The statements and backslash commands of a script, in order, stripped. A line
    that starts with a backslash is a command and ends any statement before it. Text that
    cannot be scanned stays one piece, so that running it reports the mistake."""
    pieces: list[Piece] = []
    src = Source(text)
    pos, n = 0, len(text)
    while pos < n:
        start = pos + len(text[pos:]) - len(text[pos:].lstrip())
        if start >= n:
            break
        if text.startswith("\\", start):
            end = text.find("\n", start)
            end = n if end < 0 else end
            pieces.append(Piece(text[start:end].strip(), src.pos(start).line))
            pos = end + 1
            continue
        command = _COMMAND_LINE.search(text, start)
        limit = command.start() if command else n
        cuts = _semicolons(text[start:limit])
        end = start + cuts[0] if cuts else limit
        body = text[start:end]
        if _has_tokens(body):
            pieces.append(Piece(body.strip(), src.pos(start).line))
        pos = end + 1 if cuts else limit
    return pieces


_COMMAND_LINE = re.compile(r"^[ \t]*\\", re.MULTILINE)


def _has_tokens(text: str) -> bool:
    """Whether ``text`` holds anything but comments and white space."""
    try:
        tokens, _ = scan(Source(text))
    except DfsqlError:
        return True  # a mistake: let running it say so
    return bool(tokens)
