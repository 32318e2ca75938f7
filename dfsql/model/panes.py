"""Panes: timing, is_last, accumulation modes, retractions and cover (docs/reference.md (trigger, emit, output-columns)).

The general driver keeps one :class:`WindowState` per live window (never one object per
element) and records every pane in a :class:`PaneLog` of plain int lists that become
numpy arrays at the end.

*Cover* is how aggregates are computed without carrying elements around: pane P covers
delta D when P's value includes every element whose first pane is D. A discarding pane
covers only itself; an accumulating pane covers every earlier pane of its window and of
every window merged into it, plus itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dfsql.model.clauses import Accumulation
from dfsql.model.triggers import Node
from dfsql.model.windows import I64

EARLY, ON_TIME, LATE = 0, 1, 2
TIMING_NAMES = ("EARLY", "ON_TIME", "LATE")
#: The timing of a row that restates a window's current value when a running query is
#: changed (ALTER STREAMING QUERY, docs/guides/streams.md#continuous-queries-as-statements): not a pane the trigger fired.
RESTATED = "RESTATED"

# Reasons an element instance was dropped (0: it was not).
DROP_NONE, DROP_EXPIRED, DROP_CLOSED, DROP_NULL_TIME = 0, 1, 2, 3
DROP_REASONS = ("", "window expired (watermark past window end + allowed lateness)",
                "window closed (its trigger is done)", "null event time")
#: The short reason a dropped row carries (LATE ROWS INTO's ``reason`` column).
DROP_TEXT = ("", "expired", "closed", "null event time")


def timing_of(watermark: int, end: int, created_late: bool, ontime_done: bool) -> int:
    """EARLY before the watermark passes the end; ON_TIME for the first pane after it of
    a window that existed before it passed; LATE otherwise (incl. windows born late)."""
    if watermark < end:
        return EARLY
    if not created_late and not ontime_done:
        return ON_TIME
    return LATE


@dataclass(eq=False)
class WindowState:
    """A live window of one key: its bounds, trigger and pane bookkeeping."""

    start: int
    end: int
    expiry: int  # end + allowed lateness (saturating): state kept while watermark < expiry
    trig: Node
    created_late: bool
    pending: list[int] = field(default_factory=list)  # element instances not yet emitted
    history: list[int] = field(default_factory=list)  # panes an accumulating pane covers
    retract: list[int] = field(default_factory=list)  # panes of merged-away windows
    pane_index: int = 0
    ontime_done: bool = False
    last_pane: int = -1
    alive: bool = True


class PaneLog:
    """Append-only record of panes, retractions and cover pairs for a whole run."""

    def __init__(self, accumulation: Accumulation, first_pane: np.ndarray) -> None:
        self.accumulation = accumulation
        self.first_pane = first_pane
        self.key: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.index: list[int] = []
        self.timing: list[int] = []
        self.is_last: list[bool] = []
        self.emit_time: list[int] = []
        self.retracted: list[int] = []
        self.retract_time: list[int] = []
        self.replacing: list[int] = []  # the pane whose emission retracts it
        self.cover_pane: list[int] = []
        self.cover_delta: list[int] = []

    def emit(self, w: WindowState, key: int, now: int, emit_time: int, watermark: int,
             is_last: bool) -> int:
        """Record one pane of ``w`` fired at processing time ``now``; returns its id."""
        timing = timing_of(watermark, w.end, w.created_late, w.ontime_done)
        if timing == ON_TIME:
            w.ontime_done = True
        pid = len(self.key)
        self.key.append(key)
        self.start.append(w.start)
        self.end.append(w.end)
        self.index.append(w.pane_index)
        self.timing.append(timing)
        self.is_last.append(is_last)
        self.emit_time.append(emit_time)
        w.pane_index += 1
        if self.accumulation is Accumulation.ACCUMULATING_AND_RETRACTING:
            olds = w.retract + ([w.last_pane] if w.last_pane >= 0 else [])
            self.retracted.extend(olds)
            self.retract_time.extend([emit_time] * len(olds))
            self.replacing.extend([pid] * len(olds))
            w.retract = []
        w.last_pane = pid
        if self.accumulation is Accumulation.DISCARDING:
            self.cover_pane.append(pid)
            self.cover_delta.append(pid)
        else:
            w.history.append(pid)
            self.cover_pane.extend([pid] * len(w.history))
            self.cover_delta.extend(w.history)
        if w.pending:
            self.first_pane[np.asarray(w.pending, I64)] = pid
            w.pending = []
        return pid


def absorb(ws: list[WindowState], accumulation: Accumulation) -> tuple[list[int], list[int], list[int]]:
    """Pending elements, cover history and retractions a merged window inherits."""
    pending: list[int] = []
    history: list[int] = []
    retract: list[int] = []
    for w in ws:
        pending += w.pending
        history += w.history
        retract += w.retract
        if accumulation is Accumulation.ACCUMULATING_AND_RETRACTING and w.last_pane >= 0:
            retract.append(w.last_pane)
        w.alive = False
    return pending, history, retract
