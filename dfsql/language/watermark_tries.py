"""``EXPLAIN WATERMARK <windowed query> TRY <watermark>[, <watermark> …]`` (docs/reference.md#explaining-time).

The statement is a windowed query followed by a list of watermarks to replay it under.
The list is cut off the statement (blanked, so the query keeps its offsets) before the
query's extension regions are found, and each watermark is parsed with the WATERMARK
clause's own grammar, positioned in the user's text; the query itself is then parsed
as any other statement.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dfsql.errors import DfsqlError, DfsqlSyntaxError, WatermarkError, WindowedQueryError
from dfsql.language.parse import parse_items
from dfsql.language.scan import Source, Token, splice
from dfsql.model import clauses as c

#: the words a watermark of docs/reference.md#watermark starts with (after WATERMARK)
FORMS = ("DELAY", "FROM", "PERFECT", "PERCENTILE")
_EXAMPLE = "e.g. TRY DELAY 30 SECONDS, PERCENTILE 99, PERFECT"


@dataclass(frozen=True)
class TriedWatermark:
    """One watermark of TRY: its text as written (spaces collapsed) and its clause."""

    text: str
    watermark: c.Watermark


def split_tries(src: Source, tokens: list[Token], cleaned: str
                ) -> tuple[list[Token], str, int, tuple[TriedWatermark, ...]]:
    """The statement's tokens and comment-blanked text without its TRY list, where the
    list starts, and the watermarks it names. TRY is the last word ``TRY`` at the
    statement's top level that a watermark follows (or nothing: then it says so)."""
    at = next((i for i in range(len(tokens) - 1, 0, -1)
               if tokens[i].depth == 0 and tokens[i].is_word("TRY")
               and not (tokens[i - 1].is_word("AS") or tokens[i - 1].text in (",", ".", "("))),
              None)  # not a column or alias called try
    if at is None:
        end = len(cleaned.rstrip().rstrip(";").rstrip())
        raise src.error(DfsqlSyntaxError, "EXPLAIN WATERMARK needs TRY and the watermarks "
                        "to replay the query under, after the query", end, _EXAMPLE)
    tries: list[TriedWatermark] = []
    piece: list[Token] = []
    last = tokens[at]
    for t in [*tokens[at + 1:], None]:
        if t is not None and t.depth == 0 and t.text == ";":
            t = None
        if t is None or (t.depth == 0 and t.text == ","):
            said = "TRY" if last is tokens[at] else "','"
            if not piece:
                raise src.error(DfsqlSyntaxError, f"expected a watermark after {said}",
                                last.end, _EXAMPLE)
            tries.append(parse_tried(src, cleaned, piece[0].start, piece[-1].end, said))
            if t is None:
                break
            piece, last = [], t
            continue
        piece.append(t)
    start = tokens[at].start
    return tokens[:at], splice(cleaned, [(start, len(cleaned), "")]), start, tuple(tries)


def parse_tried(src: Source, cleaned: str, start: int, end: int,
                after: str = "TRY") -> TriedWatermark:
    """``cleaned[start:end]``, a watermark as written after WATERMARK in a query, parsed
    with the clause grammar; its errors and its position are in the user's text
    (``after``: the word before it there, TRY or a comma)."""
    head = "WINDOW GLOBAL WATERMARK "
    try:  # parsed as the region head + text, placed so that the text keeps its offsets
        items = parse_items(Source(cleaned), head + cleaned[start:end], start - len(head))
    except DfsqlError as e:
        if " after WATERMARK" not in e.message:
            raise
        raise type(e)(e.message.replace(" after WATERMARK", f" after {after}"), e.line,
                      e.column, e.hint) from None
    extra = [(name, tok) for name, tok, _ in items[2:]]
    if extra:
        name, tok = extra[0]
        raise src.error(WatermarkError, f"TRY takes watermarks only, not {name}",
                        start - len(head) + tok.start_pos,
                        "write what follows WATERMARK in a query, separated by commas: "
                        + _EXAMPLE.removeprefix("e.g. TRY "))
    wm = items[1][2]["watermark"]
    return TriedWatermark(" ".join(src.text[start:end].split()),
                          replace(wm, pos=src.pos(start)))


def check_explained(src: Source, has_top: bool, body_start: int) -> None:
    """EXPLAIN WATERMARK explains one windowed query: the statement's own SELECT."""
    if not has_top:
        raise src.error(WindowedQueryError, "EXPLAIN WATERMARK explains a windowed query: "
                        "its own SELECT needs WINDOW and the clauses after it", body_start,
                        "e.g. EXPLAIN WATERMARK SELECT k, COUNT(*) FROM t GROUP BY k WINDOW "
                        "FIXED(1 MINUTE) ON ts PROCESSING TIME arrival TRY DELAY 30 SECONDS")
