"""Windows on the processing-time clock itself: when a replay is the batch aggregation,
and at which instant each window's one pane is emitted (issue #55).

When the window's ON is the PROCESSING TIME expression, an element arriving at p has
event time p, and its window ``[s, e)`` holds p, so e > p. Under ``WATERMARK DELAY d``
(d >= 0, the default ``DELAY 0`` too) the watermark after the arrivals at p is the
largest arrival so far minus d, at most p (docs/reference.md#watermark): it has never
passed e when the element arrives, so no element is late, dropped or closed out
(docs/reference.md#allowed-lateness). With the default trigger and no allowed lateness,
or ``AT WATERMARK`` (docs/reference.md#trigger), each window then fires exactly once:
one ON_TIME, last pane holding all its elements — the batch aggregation's row — at the
first instant the watermark reaches the window's end (:func:`emit_instants`).

Not this rule: ``WATERMARK FROM`` (a table can run ahead of the clock and make elements
late), ``PERCENTILE`` (it rises with processing time between arrivals, so a window fires
between them: another instant), ``PERFECT`` (it looks ahead to the next arrival, so a
window fires at its last arrival: another instant), periodic or counting triggers (early
panes), and the default trigger with allowed lateness (its on-time pane is not the last
until the lateness has passed as well). Those keep the replay.
"""

from __future__ import annotations

import numpy as np

from dfsql.model import clauses as c
from dfsql.model.windows import I64, Grid, grid


def clock_grid(cl: c.Clauses) -> Grid | None:
    """The FIXED or SLIDING grid of a block whose processing-time replay is exactly the
    batch aggregation with each window's emit instant (see the module docstring); None
    when the block must be replayed."""
    g = grid(cl.window)
    if g is None or cl.on is None or cl.processing_time is None:
        return None
    if cl.on.sql.strip() != cl.processing_time.sql.strip():  # time is not the clock
        return None
    if not isinstance(cl.watermark, c.WatermarkDelay) or cl.watermark.delay.micros < 0:
        return None
    if cl.late_rows_into is not None:
        return None
    once = cl.trigger == c.EndOfWindow()
    if not once and not (cl.trigger == c.DEFAULT_TRIGGER and cl.allowed_lateness.micros == 0):
        return None
    return g


def floor_end(x, g: Grid, mod=np.mod):
    """The latest window end at or before x: the ends are ``start + size``, congruent to
    ``offset + size`` modulo the period (``mod``: a floor modulo; Spark's ``pmod``)."""
    return x - mod(x - (g.offset + g.size), g.period)


def arrival_group(arrival, g: Grid, delay: int, mod=np.mod):
    """The group of an arrival a: the latest window end e with a - delay >= e. The
    watermark after a (the largest arrival so far minus ``delay``) reaches exactly the
    window ends at or before this group's."""
    return floor_end(arrival - delay, g, mod)


def end_range(g: Grid, first: int, last: int) -> tuple[int, int]:
    """The window ends of every window that can hold an arrival in [first, last]: the
    first end after ``first`` and how many ends, one period apart, up to the end of the
    latest window holding ``last``."""
    e0 = int(floor_end(first, g)) + g.period
    e1 = int(g.last_start(last)) + g.size
    return e0, (e1 - e0) // g.period + 1


def emit_instants(ends: np.ndarray, groups: np.ndarray, firsts: np.ndarray,
                  last: int) -> np.ndarray:
    """Each window end's emit instant: the first arrival whose watermark reaches it (of
    the groups ``groups``, ascending, each with its first arrival ``firsts``: the first
    group at or after the end holds it), else the replay's end, its last arrival
    (docs/reference.md#processing-time: then the watermark moves to the end of time)."""
    ends = np.asarray(ends, I64)
    if len(groups) == 0:
        return np.full(len(ends), last, I64)
    j = np.searchsorted(groups, ends, side="left")
    return np.where(j < len(groups), firsts[np.minimum(j, len(groups) - 1)], last).astype(I64)
