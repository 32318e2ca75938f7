"""Lark parse of the extension clauses (WINDOW … EMIT) into :mod:`clauses` objects.

The grammar lives in ``dfsql/grammar/dfsql.lark`` (read by :mod:`dfsql.language.vocabulary`).
A Transformer turns the parse tree into frozen dataclasses, desugaring docs/reference.md#trigger's trigger syntax into the nodes of the
trigger specification; nothing else touches the parse tree. Lark's exceptions are turned
into :class:`~dfsql.errors.DfsqlError` subclasses with the line and column in the user's
text and a hint (did-you-mean for misspelt keywords).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import NamedTuple

from lark import Token, Transformer, UnexpectedInput
from lark.exceptions import VisitError

from dfsql.errors import (
    AnalysisError,
    ClauseOrderError,
    DfsqlError,
    DurationError,
    TriggerError,
    UnknownKeywordError,
    WatermarkError,
)
from dfsql.language import scan as scanner
from dfsql.language.clause_errors import (
    LATE_ROWS,
    UNIT,
    lark_error,
    late_rows_alone,
    misspelt_clause_word,
)
from dfsql.language.costs import check_trigger_nodes, check_windows_per_row
from dfsql.language.scan import Source
from dfsql.language.vocabulary import CLAUSE_ORDER, KEYWORDS, parser
from dfsql.model import clauses as c

#: Largest row count of AFTER / EVERY n ROWS: counts are BIGINT (int64) in the model.
MAX_ROW_COUNT = 2**63 - 1

DURATION_BOUND_HINT = (f"a duration is at most {c.MAX_DURATION_DAYS} DAYS, the span of "
                       "Spark's TIMESTAMP range (0001-01-01 to 9999-12-31)")

_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")


def duration_micros(raw: str, unit: str) -> int:
    """``raw`` (a decimal number as written) of ``unit`` in whole microseconds, exactly
    (no float: a thousand-digit number must be reported as too long, not overflow).
    Raises ValueError when ``raw`` is not a plain decimal number (NaN, Infinity, 1e3)."""
    if not _DECIMAL.fullmatch(raw):
        raise ValueError(raw)
    value = Decimal(raw) * c.MICROS_PER[unit]
    return int(value.to_integral_value(ROUND_HALF_EVEN))


#: the field of a WATERMARK PERFECT clause's values that says where PERFECT is written
_PERFECT_AT = "perfect_at"


class _Dur(NamedTuple):
    """A parsed duration before its clause decides whether zero is valid there."""

    value: c.Duration
    token: Token  # where it was written: the number, or INTERVAL
    text: str  # as written, for messages: "0 MINUTES"


class _Builder(Transformer):
    """Parse tree → clause objects. ``src``/``base`` turn token offsets into positions;
    ``tokens``: the statement's tokens (offsets in ``src``), which an ON / PROCESSING TIME
    expression is read from (None: the expression is scanned on its own)."""

    def __init__(self, src: Source, base: int,
                 tokens: Sequence[scanner.Token] | None = None) -> None:
        super().__init__()
        self.src = src
        self.base = base
        self.tokens = tokens

    def _pos(self, tok) -> c.Pos:
        start = getattr(tok, "start_pos", None)
        if start is None:
            meta = getattr(tok, "meta", None)
            start = getattr(meta, "start_pos", 0) if meta is not None else 0
        return self.src.pos(self.base + (start or 0))

    def _err(self, cls: type, message: str, tok, hint: str | None = None) -> DfsqlError:
        p = self._pos(tok)
        return cls(message, p.line, p.column, hint)

    # ---------------------------------------------------------------- durations
    def unit(self, items):
        tok = items[0]
        return tok

    def duration(self, items):
        if len(items) == 3:  # INTERVAL n unit
            kw, num, unit = items
            raw = str(num).strip("'\"").strip()
        else:
            num, unit = items
            kw, raw = num, str(num)
        try:
            micros = duration_micros(raw, UNIT[unit.type])
        except ValueError:
            raise self._err(DurationError, f"bad duration {raw!r}", num,
                            "write a number and a unit, e.g. 5 MINUTES") from None
        return _Dur(c.Duration(micros), kw, f"{raw} {unit}")

    def _positive(self, item: _Dur, what: str) -> c.Duration:
        """A size, gap, period or processing-time delay: zero or less is an error (§2)."""
        if item.value.micros <= 0:
            raise self._err(DurationError, f"{what} must be positive, got {item.text}",
                            item.token, f"a {what} is > 0, e.g. 1 MINUTE")
        return self._bounded(item)

    def _non_negative(self, item: _Dur, what: str) -> c.Duration:
        """WATERMARK DELAY, ALLOWED LATENESS and OFFSET: zero is valid, their default (§2)."""
        if item.value.micros < 0:
            raise self._err(DurationError, f"{what} must not be negative, got {item.text}",
                            item.token, f"use 0 (the default) or more, e.g. {what} 0 SECONDS")
        return self._bounded(item)

    def _bounded(self, item: _Dur) -> c.Duration:
        if item.value.micros > c.MAX_DURATION.micros:
            raise self._err(DurationError, f"duration {item.text} is too long", item.token,
                            DURATION_BOUND_HINT)
        return item.value

    # ---------------------------------------------------------------- WINDOW
    def global_window(self, items):
        return c.GlobalWindows(pos=self._pos(items[0]))

    def fixed_window(self, items):
        durs = [i for i in items if isinstance(i, _Dur)]
        size = self._positive(durs[0], "window size")
        offset = self._non_negative(durs[1], "OFFSET") if len(durs) > 1 else c.Duration(0)
        if offset.micros >= size.micros:
            raise self._err(DurationError, "OFFSET must be smaller than the window size",
                            durs[1].token, f"use an offset below {size}")
        return c.FixedWindows(pos=self._pos(items[0]), size=size, offset=offset)

    def sliding_window(self, items):
        durs = [i for i in items if isinstance(i, _Dur)]
        size = self._positive(durs[0], "window size")
        period = self._positive(durs[1], "sliding period")
        offset = self._non_negative(durs[2], "OFFSET") if len(durs) > 2 else c.Duration(0)
        if offset.micros >= period.micros:
            raise self._err(DurationError, "OFFSET must be smaller than the sliding period",
                            durs[2].token, f"use an offset below {period}")
        at = self._pos(durs[1].token)
        check_windows_per_row(size.micros, period.micros, at.line, at.column)
        return c.SlidingWindows(pos=self._pos(items[0]), size=size, period=period, offset=offset)

    def session_window(self, items):
        durs = [i for i in items if isinstance(i, _Dur)]
        return c.SessionWindows(pos=self._pos(items[0]),
                                gap=self._positive(durs[0], "session gap"))

    def _expr(self, tok) -> c.Expr:
        """An ON / PROCESSING TIME expression; a misspelt clause keyword after it (which the
        grammar cannot tell from Spark SQL) is reported rather than kept as SQL, and so is
        LATE ROWS INTO without the ALLOWED LATENESS it belongs to."""
        text = str(tok)
        start = self.base + tok.start_pos
        late_rows = LATE_ROWS.search(text)
        if late_rows is not None:
            raise late_rows_alone(self.src, start + late_rows.start())
        bad = misspelt_clause_word(self._expr_tokens(start, text))
        if bad is not None:
            word, at, match = bad
            p = self.src.pos(at)
            raise UnknownKeywordError(f"unknown keyword {word}", p.line, p.column,
                                      f"did you mean {match}?")
        return c.Expr(text.strip(), self._pos(tok))

    def _expr_tokens(self, start: int, text: str) -> Sequence[scanner.Token]:
        """The tokens of the expression ``text`` written at ``start``: the statement's,
        or (a clause parsed on its own) its own scan, placed at ``start``."""
        if self.tokens is not None:
            lo = bisect.bisect_left(self.tokens, start, key=lambda t: t.start)
            hi = bisect.bisect_left(self.tokens, start + len(text), key=lambda t: t.start)
            return self.tokens[lo:hi]
        try:
            own, _ = scanner.scan(Source(text))
        except DfsqlError:
            return []
        return [scanner.Token(t.kind, t.text, t.start + start, t.end + start, t.depth)
                for t in own]

    def on_expr(self, items):
        return self._expr(items[1])

    def window_clause(self, items):
        on = items[2] if len(items) > 2 else None
        return ("WINDOW", items[0], {"window": items[1], "on": on})

    # ---------------------------------------------------------------- WATERMARK etc.
    def table_name(self, items):
        # a qualified name (db.t) is a QUALIFIED_NAME token, so that LATE ROWS INTO can
        # refuse it while WATERMARK FROM reads any table
        return Token("NAME" if len(items) == 1 else "QUALIFIED_NAME",
                     ".".join(str(i) for i in items), start_pos=items[0].start_pos)

    def watermark_delay(self, items):
        wm = c.WatermarkDelay(pos=self._pos(items[0]), delay=self._non_negative(items[2], "WATERMARK DELAY"))
        return ("WATERMARK", items[0], {"watermark": wm})

    def watermark_from(self, items):
        words = [getattr(i, "type", None) for i in items]
        writer = str(items[words.index("BY") + 1]) if "BY" in words else None
        idle = (self._positive(items[words.index("IDLE") + 2], "IDLE TIMEOUT")
                if "IDLE" in words else None)
        wm = c.WatermarkFrom(pos=self._pos(items[0]), table=str(items[2]), writer=writer,
                             idle_timeout=idle)
        return ("WATERMARK", items[0], {"watermark": wm})

    def watermark_perfect(self, items):
        # where PERFECT is written: the error of PERFECT without PROCESSING TIME is there
        return ("WATERMARK", items[0], {"watermark": c.WatermarkPerfect(pos=self._pos(items[0])),
                                        _PERFECT_AT: self._pos(items[1])})

    def watermark_percentile(self, items):
        q = float(items[2])
        if not 0 < q <= 100:
            raise self._err(WatermarkError, f"PERCENTILE must be in (0, 100], got {items[2]}",
                            items[2], "e.g. WATERMARK PERCENTILE 99")
        delay = self._non_negative(items[4], "DELAY") if len(items) > 4 else c.Duration(0)
        wm = c.WatermarkPercentile(pos=self._pos(items[0]), percentile=q, delay=delay)
        return ("WATERMARK", items[0], {"watermark": wm})

    def processing_clause(self, items):
        return ("PROCESSING TIME", items[0], {"processing_time": self._expr(items[2])})

    def lateness_clause(self, items):
        into = str(items[6]) if len(items) > 6 else None
        if into is not None and items[6].type == "QUALIFIED_NAME":
            last = into.rsplit(".", 1)[-1]
            raise self._err(AnalysisError, f"LATE ROWS INTO {into}: the late rows go to a temp "
                            "view, whose name cannot be qualified", items[6],
                            f"write one name, e.g. LATE ROWS INTO {last} (a temp view belongs "
                            "to the Spark session, not to a catalog or database)")
        return ("ALLOWED LATENESS", items[0],
                {"allowed_lateness": self._non_negative(items[2], "ALLOWED LATENESS"),
                 "late_rows_into": into})

    # ---------------------------------------------------------------- TRIGGER
    def _count(self, tok) -> int:
        try:
            n = int(str(tok))
        except ValueError:
            n = 0
        if n <= 0 or str(tok) != str(n):
            raise self._err(TriggerError, f"a row count must be a positive whole number, got {tok}",
                            tok)
        if n > MAX_ROW_COUNT:
            raise self._err(TriggerError, f"row count {tok} is too large", tok,
                            f"at most {MAX_ROW_COUNT} (a BIGINT)")
        return n

    def end_of_window(self, items):
        return c.EndOfWindow(pos=self._pos(items[0]))

    def at_watermark(self, items):
        pos = self._pos(items[0])
        early = next((i[1] for i in items if isinstance(i, tuple) and i[0] == "EARLY"), None)
        late = next((i[1] for i in items if isinstance(i, tuple) and i[0] == "LATE"), None)
        eow = c.EndOfWindow(pos=pos)
        first: c.Trigger = eow if early is None else c.OrFinally(pos=pos, main=c.repeat(early, pos),
                                                                  final=eow)
        if late is None:
            return first
        return c.AfterEach(pos=pos, subs=(first, c.repeat(late, pos)))

    def early_firing(self, items):
        return ("EARLY", items[1])

    def late_firing(self, items):
        return ("LATE", items[1])

    def after_rows(self, items):
        return c.ElemCount(pos=self._pos(items[0]), count=self._count(items[1]))

    def after_delay(self, items):
        return c.SinceEarliestElem(pos=self._pos(items[0]),
                                   delay=self._positive(items[1], "trigger delay"))

    def every_rows(self, items):
        pos = self._pos(items[0])
        return c.Repeat(pos=pos, sub=c.ElemCount(pos=pos, count=self._count(items[1])))

    def every_period(self, items):
        pos = self._pos(items[0])
        return c.Repeat(pos=pos, sub=c.AtPeriod(pos=pos,
                                                period=self._positive(items[1], "trigger period")))

    def never(self, items):
        return c.Never(pos=self._pos(items[0]))

    def any_of(self, items):
        subs = tuple(i for i in items if isinstance(i, c.Trigger))
        self._once_only(subs, "ANY", items[0])
        return c.AfterFirst(pos=self._pos(items[0]), subs=subs)

    def all_of(self, items):
        subs = tuple(i for i in items if isinstance(i, c.Trigger))
        self._once_only(subs, "ALL", items[0])
        return c.AfterAll(pos=self._pos(items[0]), subs=subs)

    def _once_only(self, subs, what: str, tok) -> None:
        for s in subs:
            if not s.is_once:
                raise TriggerError(
                    f"{what}(...) takes triggers that fire once; {s} repeats",
                    s.pos.line, s.pos.column,
                    f"put REPEAT outside: REPEAT {what}(...)",
                )

    def repeat(self, items):
        return c.repeat(items[1], self._pos(items[0]))

    def group(self, items):
        return items[0]

    def until_trigger(self, items):
        if len(items) == 1:
            return items[0]
        main, kw, final = items
        self._final_once(final, "UNTIL")
        return c.OrFinally(pos=self._pos(kw), main=c.repeat(main, main.pos), final=final)

    def finally_trigger(self, items):
        if len(items) == 1:
            return items[0]
        main, kw, final = items
        self._final_once(final, "FINALLY")
        return c.OrFinally(pos=self._pos(kw), main=main, final=final)

    def _final_once(self, final: c.Trigger, what: str) -> None:
        if not final.is_once:
            raise TriggerError(
                f"the trigger after {what} must fire once, but {final} repeats",
                final.pos.line, final.pos.column,
                f"{what} ends the trigger when its operand fires; drop REPEAT/EVERY there",
            )

    def trigger(self, items):
        subs = tuple(i for i in items if isinstance(i, c.Trigger))
        return subs[0] if len(subs) == 1 else c.AfterEach(pos=subs[0].pos, subs=subs)

    def trigger_clause(self, items):
        at = self._pos(items[0])
        check_trigger_nodes(items[1], at.line, at.column)
        return ("TRIGGER", items[0], {"trigger": items[1]})

    # ---------------------------------------------------------------- EMIT
    def emit_discarding(self, items):
        return ("EMIT", items[0], {"accumulation": c.Accumulation.DISCARDING})

    def emit_accumulating(self, items):
        mode = (c.Accumulation.ACCUMULATING_AND_RETRACTING if len(items) > 2
                else c.Accumulation.ACCUMULATING)
        return ("EMIT", items[0], {"accumulation": mode})

    def start(self, items):
        return items



def parse_region(src: Source, start: int, end: int,
                 tokens: Sequence[scanner.Token] | None = None) -> c.Clauses:
    """Parse ``src.text[start:end]`` (comments already blanked) into :class:`Clauses`;
    ``tokens``: the statement's tokens, so that nothing of it is scanned again."""
    return _assemble(parse_items(src, src.text[start:end], start, tokens), src, start)


def parse_items(src: Source, region: str, base: int,
                tokens: Sequence[scanner.Token] | None = None,
                ) -> list[tuple[str, Token, dict]]:
    """The clauses of ``region`` as (clause name, its first token, its fields), not yet
    checked for order or completeness; ``base``: where ``region`` starts in ``src``
    (positions of tokens and errors are ``src``'s); ``tokens``: the statement's."""
    try:
        return _Builder(src, base, tokens).transform(parser().parse(region))
    except VisitError as e:  # a DfsqlError raised inside the transformer
        if isinstance(e.orig_exc, DfsqlError):
            raise e.orig_exc from None
        raise
    except UnexpectedInput as e:
        raise lark_error(e, src, base, region, KEYWORDS) from None


def _assemble(items: list, src: Source, base: int) -> c.Clauses:
    seen: dict[str, Token] = {}
    fields: dict = {}
    last_rank = -1
    last_name = ""
    for name, tok, values in items:
        rank = CLAUSE_ORDER.index(name)
        pos = src.pos(base + tok.start_pos)
        if name in seen:
            prev = src.pos(base + seen[name].start_pos)
            raise ClauseOrderError(f"duplicate {name} clause", pos.line, pos.column,
                                   f"{name} was already given at line {prev.line}, col {prev.column}")
        if rank < last_rank:
            raise ClauseOrderError(f"{name} must come before {last_name}", pos.line, pos.column,
                                   "the clauses come in the order " + ", ".join(CLAUSE_ORDER))
        seen[name] = tok
        last_rank, last_name = rank, name
        fields.update(values)
    perfect_at = fields.pop(_PERFECT_AT, None)
    if "WINDOW" not in seen:
        first = items[0][1]
        p = src.pos(base + first.start_pos)
        raise ClauseOrderError(f"{items[0][0]} needs a WINDOW clause before it", p.line, p.column,
                               "start the extension clauses with WINDOW ...")
    wm = fields.get("watermark")
    if isinstance(wm, c.WatermarkPerfect) and "PROCESSING TIME" not in seen:
        p = perfect_at or wm.pos
        raise WatermarkError("WATERMARK PERFECT needs PROCESSING TIME", p.line, p.column,
                             "the perfect watermark looks ahead in a replayed table: add "
                             "PROCESSING TIME <arrival column>, or use WATERMARK DELAY d")
    wtok = seen["WINDOW"]
    return c.Clauses(
        pos=src.pos(base + wtok.start_pos),
        watermark_given="WATERMARK" in seen,
        trigger_given="TRIGGER" in seen,
        emit_given="EMIT" in seen,
        **fields,
    )


def parse_clauses(text: str) -> c.Clauses:
    """Parse extension-clause text on its own (``WINDOW ... EMIT ...``).

    Used by :func:`dfsql.language.model_run.run` and by tests; comments are allowed.
    """
    tokens, cleaned = scanner.scan(Source(text))
    return parse_region(Source(cleaned), 0, len(cleaned), tokens)
