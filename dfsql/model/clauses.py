"""The typed, immutable description of dfsql's extension clauses.

The paper's four questions each get a type: WHERE in event time (:class:`WindowSpec`),
WHEN in processing time (:class:`Trigger` trees and :class:`Watermark` forms), and HOW
refinements relate (:class:`Emit`). Trigger nodes carry the names of the formal trigger
specification (ElemCount, EndOfWindow, ..., OrFinally) so that code and tests read
like the specification, and print in that notation.

Every clause keeps the :class:`Pos` where it was written so that errors found later
(by Spark analysis or at run time) still point into the user's text.

Durations are whole microseconds (Spark's timestamp resolution); the model works on
int64 microseconds throughout.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

# --------------------------------------------------------------------------- positions


@dataclass(frozen=True)
class Pos:
    """A place in the user's query text: 1-based line and column, 0-based offset."""

    line: int = 1
    column: int = 1
    offset: int = 0


NOWHERE = Pos(0, 0, -1)


def line_col(pos: Pos | None) -> tuple[int | None, int | None]:
    """An error's (line, column) at ``pos``; (None, None) for no place (NOWHERE: a
    clause that was not written, a registered default)."""
    return (pos.line, pos.column) if pos is not None and pos.line else (None, None)


def _pos_field() -> Pos:
    return field(default=NOWHERE, compare=False, repr=False)  # type: ignore[return-value]


# --------------------------------------------------------------------------- durations

#: the language's time units (the grammar's ``unit`` terminals), largest first -> the short
#: name a Duration prints and :data:`MICROS_PER` measures them by
UNIT_SHORT = {"DAY": "d", "HOUR": "h", "MINUTE": "m", "SECOND": "s", "MILLISECOND": "ms"}
MICROS_PER = {
    "d": 86_400_000_000,
    "h": 3_600_000_000,
    "m": 60_000_000,
    "s": 1_000_000,
    "ms": 1_000,
    "us": 1,
}


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time in whole microseconds; prints in the largest exact unit (``1m``)."""

    micros: int

    def __str__(self) -> str:
        if self.micros == 0:
            return "0s"
        for unit, size in MICROS_PER.items():
            if self.micros % size == 0:
                return f"{self.micros // size}{unit}"
        return f"{self.micros}us"  # pragma: no cover - 'us' always divides

    @property
    def seconds(self) -> float:
        return self.micros / 1_000_000

    @classmethod
    def of(cls, value: float, unit: str) -> Duration:
        return cls(int(round(value * MICROS_PER[unit])))


#: The longest duration a query may name (docs/reference.md#durations: "a duration too large for a
#: TIMESTAMP is an error"): the span of Spark's TIMESTAMP range, 0001-01-01 to 9999-12-31,
#: 3,652,059 days. Any window, delay or lateness longer than every representable instant
#: apart is meaningless, and with it event time + size + lateness + delay stays below
#: 1.3e18 microseconds, far inside the int64 arithmetic of the model and of Spark's window().
MAX_DURATION_DAYS = 3_652_059
MAX_DURATION = Duration(MAX_DURATION_DAYS * MICROS_PER["d"])


# --------------------------------------------------------------------------- windows (WHERE)


@dataclass(frozen=True)
class WindowSpec:
    """Base of the window functions of docs/reference.md#window."""

    pos: Pos = _pos_field()

    @property
    def merging(self) -> bool:
        return False


@dataclass(frozen=True)
class GlobalWindows(WindowSpec):
    """The one global window (-inf, +inf)."""

    def __str__(self) -> str:
        return "GLOBAL"


@dataclass(frozen=True)
class FixedWindows(WindowSpec):
    """Tumbling windows ``[start, start+size)`` with ``start ≡ offset (mod size)``."""

    size: Duration = Duration(0)
    offset: Duration = Duration(0)

    def __str__(self) -> str:
        off = f", OFFSET {self.offset}" if self.offset.micros else ""
        return f"FIXED({self.size}{off})"


@dataclass(frozen=True)
class SlidingWindows(WindowSpec):
    """Hopping windows ``[s, s+size)`` with ``s ≡ offset (mod period)``."""

    size: Duration = Duration(0)
    period: Duration = Duration(0)
    offset: Duration = Duration(0)

    def __str__(self) -> str:
        off = f", OFFSET {self.offset}" if self.offset.micros else ""
        return f"SLIDING({self.size}, EVERY {self.period}{off})"


@dataclass(frozen=True)
class SessionWindows(WindowSpec):
    """Proto-windows ``[t, t+gap)`` merged per key (the paper's MergeWindows)."""

    gap: Duration = Duration(0)

    @property
    def merging(self) -> bool:
        return True

    def __str__(self) -> str:
        return f"SESSIONS(GAP {self.gap})"


# --------------------------------------------------------------------------- triggers (WHEN)


@dataclass(frozen=True)
class Trigger:
    """A node of the trigger specification's grammar.

    ``children`` is the tuple of sub-triggers (empty for leaves) so that generic code
    (restart, rewind, further, printing) can walk any tree the same way.
    """

    pos: Pos = _pos_field()

    @property
    def children(self) -> tuple[Trigger, ...]:
        return ()

    @property
    def is_once(self) -> bool:
        """True for the specification's OnceTrigger: fires at most once, then is done."""
        return True

    def __str__(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class ElemCount(Trigger):
    """Ready when the pane holds at least ``count`` elements."""

    count: int = 1

    def __str__(self) -> str:
        return f"ElemCount({self.count})"


@dataclass(frozen=True)
class EndOfWindow(Trigger):
    """Ready when the watermark has passed the end of the window."""


@dataclass(frozen=True)
class SinceEarliestElem(Trigger):
    """Ready ``delay`` of processing time after the pane's earliest element arrived."""

    delay: Duration = Duration(0)

    def __str__(self) -> str:
        return f"SinceEarliestElem({self.delay})"


@dataclass(frozen=True)
class AtPeriod(Trigger):
    """Ready at the next processing-time multiple of ``period`` after the pane's first
    element (aligned to the epoch, as the paper's periodic trigger)."""

    period: Duration = Duration(0)

    def __str__(self) -> str:
        return f"AtPeriod({self.period})"


@dataclass(frozen=True)
class Never(Trigger):
    """Never ready: only the closing pane fires."""


@dataclass(frozen=True)
class _Composite(Trigger):
    subs: tuple[Trigger, ...] = ()

    @property
    def children(self) -> tuple[Trigger, ...]:
        return self.subs

    def __str__(self) -> str:
        return f"{type(self).__name__}({', '.join(str(c) for c in self.subs)})"


@dataclass(frozen=True)
class AfterFirst(_Composite):
    """Ready when any sub-trigger is ready; then done."""


@dataclass(frozen=True)
class AfterAll(_Composite):
    """Ready when every sub-trigger is ready; then done."""


@dataclass(frozen=True)
class AfterEach(_Composite):
    """The sub-triggers in sequence: ready when the first one not yet done is ready."""

    @property
    def is_once(self) -> bool:
        return all(c.is_once for c in self.subs)


@dataclass(frozen=True)
class Repeat(Trigger):
    """Fire whenever ``sub`` is ready, then restart it; never done."""

    sub: Trigger = field(default_factory=EndOfWindow)

    @property
    def children(self) -> tuple[Trigger, ...]:
        return (self.sub,)

    @property
    def is_once(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"Repeat({self.sub})"


@dataclass(frozen=True)
class OrFinally(Trigger):
    """``main.orFinally(final)``: fire as ``main`` does until ``final`` is ready, fire then
    and be done. ``final`` counts every element since the window began, not since main's
    last firing (the specification's orFinally subtlety)."""

    main: Trigger = field(default_factory=Never)
    final: Trigger = field(default_factory=EndOfWindow)

    @property
    def children(self) -> tuple[Trigger, ...]:
        return (self.main, self.final)

    @property
    def is_once(self) -> bool:
        return self.main.is_once

    def __str__(self) -> str:
        return f"OrFinally({self.main}, {self.final})"


DEFAULT_TRIGGER: Trigger = Repeat(EndOfWindow())


def repeat(t: Trigger, pos: Pos = NOWHERE) -> Trigger:
    """``Repeat`` that collapses ``Repeat(Repeat(x))`` to ``Repeat(x)`` (docs/reference.md#trigger)."""
    return t if isinstance(t, Repeat) else Repeat(pos=pos, sub=t)


# --------------------------------------------------------------------------- watermarks


@dataclass(frozen=True)
class Watermark:
    """Base of the WATERMARK forms of docs/reference.md#watermark."""

    pos: Pos = _pos_field()


@dataclass(frozen=True)
class WatermarkDelay(Watermark):
    """Heuristic watermark: max event time seen so far minus ``delay``."""

    delay: Duration = Duration(0)
    from_relation: bool = field(default=False, compare=False)  # Spark's FROM t WATERMARK ...

    def __str__(self) -> str:
        return f"DELAY {self.delay}"


@dataclass(frozen=True)
class WatermarkFrom(Watermark):
    """An explicit watermark series in a table; per writer with ``writer`` set."""

    table: str = ""
    writer: str | None = None
    idle_timeout: Duration | None = None

    def __str__(self) -> str:
        s = f"FROM {self.table}"
        if self.writer:
            s += f" BY {self.writer}"
        if self.idle_timeout is not None:
            s += f" IDLE TIMEOUT {self.idle_timeout}"
        return s


@dataclass(frozen=True)
class WatermarkPerfect(Watermark):
    """The oracle: the smallest event time not yet arrived."""

    def __str__(self) -> str:
        return "PERFECT"


@dataclass(frozen=True)
class WatermarkPercentile(Watermark):
    """Processing time minus the q-th percentile of observed delays, minus ``delay``."""

    percentile: float = 100.0
    delay: Duration = Duration(0)

    def __str__(self) -> str:
        d = f" DELAY {self.delay}" if self.delay.micros else ""
        return f"PERCENTILE {self.percentile:g}{d}"


DEFAULT_WATERMARK: Watermark = WatermarkDelay()


# --------------------------------------------------------------------------- emit (HOW)


class Accumulation(enum.Enum):
    """How the panes of one window relate (the paper's refinement modes)."""

    DISCARDING = "DISCARDING"
    ACCUMULATING = "ACCUMULATING"
    ACCUMULATING_AND_RETRACTING = "ACCUMULATING AND RETRACTING"

    def __str__(self) -> str:
        return self.value


# --------------------------------------------------------------------------- the clauses


@dataclass(frozen=True)
class Expr:
    """An expression of the user's (event time, processing time) as Spark SQL text."""

    sql: str
    pos: Pos = _pos_field()

    def __str__(self) -> str:
        return self.sql


@dataclass(frozen=True)
class Clauses:
    """The extension clauses of one windowed query, defaults filled in.

    ``*_given`` records whether the user wrote the clause, because some rules depend on
    it (e.g. ON may be omitted when the source was registered with an event time).
    """

    window: WindowSpec
    on: Expr | None = None
    watermark: Watermark = DEFAULT_WATERMARK
    processing_time: Expr | None = None
    allowed_lateness: Duration = Duration(0)
    late_rows_into: str | None = None
    trigger: Trigger = DEFAULT_TRIGGER
    accumulation: Accumulation = Accumulation.ACCUMULATING
    pos: Pos = _pos_field()
    watermark_given: bool = field(default=False, compare=False)
    trigger_given: bool = field(default=False, compare=False)
    emit_given: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return "\n".join(text for _, text in self.lines())

    def lines(self, said: Callable[[str, str, object], str] | None = None
              ) -> list[tuple[str, str]]:
        """One line per clause in force, each under the field it starts with (``window``,
        ``watermark``, ``processing_time``, ``allowed_lateness``, ``trigger``,
        ``accumulation``): the one rendering EXPLAIN's clauses-in-force section marks up.
        ``said(field, keyword, value)`` writes the ON, WATERMARK and PROCESSING TIME
        clauses (by default ``keyword value``), so a registered default can say so."""
        said = said or (lambda _field, keyword, value: f"{keyword} {value}")
        window = f"WINDOW {self.window}"
        if self.on is not None:
            window += f" {said('on', 'ON', self.on)}"
        parts = [("window", window), ("watermark", said("watermark", "WATERMARK",
                                                         self.watermark))]
        if self.processing_time is not None:
            parts.append(("processing_time", said("processing_time", "PROCESSING TIME",
                                                  self.processing_time)))
        lat = f"ALLOWED LATENESS {self.allowed_lateness}"
        if self.late_rows_into:
            lat += f" LATE ROWS INTO {self.late_rows_into}"
        parts += [("allowed_lateness", lat), ("trigger", f"TRIGGER {self.trigger}"),
                  ("accumulation", f"EMIT {self.accumulation}")]
        return parts
