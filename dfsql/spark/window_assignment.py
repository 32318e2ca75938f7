"""The model's window assignment (docs/reference.md#window, :class:`dfsql.model.windows.Grid`),
rendered as Spark SQL: the one place Spark learns which windows an element belongs to.

The Grid's own arithmetic (latest start at or before t, the candidate starts, whether a
window holds t) runs here over :class:`Sql` values, which print the expression instead
of computing it; the batch plan (:func:`dfsql.spark.native_batch.batch_panes_sql`)
and the replay (:func:`dfsql.spark.replay.panes.by_window`) both take :func:`grid_sql`'s result.
"""

from __future__ import annotations

from dataclasses import dataclass

from dfsql.model import clauses as c
from dfsql.model.windows import grid


class Sql:
    """A Spark SQL expression the model's arithmetic renders into text: ``+``, ``-`` and
    ``>`` print the operation. A ``timestamp`` expression adds microseconds as an
    interval, so a comparison stays in the event time's own type (TIMESTAMP or
    TIMESTAMP_NTZ, as Spark's ``window()`` returns it)."""

    def __init__(self, text: str, timestamp: bool = False) -> None:
        self.text = text
        self.timestamp = timestamp

    def __str__(self) -> str:
        return self.text

    def _operand(self, other: Sql | int) -> str:
        if isinstance(other, Sql):
            return other.text
        return f"INTERVAL {other} MICROSECONDS" if self.timestamp else str(other)

    def __add__(self, other: Sql | int) -> Sql:
        return Sql(f"({self.text} + {self._operand(other)})", self.timestamp)

    def __sub__(self, other: Sql | int) -> Sql:
        return Sql(f"({self.text} - {self._operand(other)})", self.timestamp)

    def __gt__(self, other: Sql | int) -> Sql:  # type: ignore[override]
        return Sql(f"({self.text} > {self._operand(other)})")


def pmod(a: Sql, b: int) -> Sql:
    """Spark's floor modulo, the ``mod`` of :meth:`Grid.last_start`."""
    return Sql(f"pmod({a}, {b})")


@dataclass(frozen=True)
class GridSql:
    """A FIXED or SLIDING window spec's assignment in Spark SQL over one event time.

    ``group`` is what a batch or native stream aggregation groups by (Spark's
    ``window()``, whose starts are the grid's: the streaming engine needs that call
    for its watermark), ``start`` / ``end`` the window's bounds from it. A sampling grid
    first projects ``column`` AS `window` (the period-long window from the latest start
    at or before t) and keeps the rows where ``keep`` holds. ``starts`` is the array of
    the element's window starts in µs (a BIGINT array; empty in a gap), for a plan that
    sends an element once per window; ``last`` the latest start at or before t in µs
    (a FIXED element's one window)."""

    group: str
    start: str
    end: str
    column: str | None
    keep: str | None
    starts: str
    last: str


def _interval(micros: int) -> str:
    return f"'{micros} microseconds'"


def grid_sql(spec: c.WindowSpec, event_time: str) -> GridSql | None:
    """The model's assignment of ``spec`` over the column ``event_time``; None when the
    spec is not a grid (GLOBAL, SESSIONS)."""
    g = grid(spec)
    if g is None:
        return None
    t = Sql(f"unix_micros({event_time})")
    last = g.last_start(t, pmod)
    s = Sql("s")
    starts = (f"filter(sequence({last - g.steps_back()[0]}, {last}, {g.period}), "
              f"s -> {g.contains(s, t)})")
    if not g.samples:
        call = (f"window({event_time}, {_interval(g.size)}, {_interval(g.period)}, "
                f"{_interval(g.offset)})")
        return GridSql(call, "window.start", "window.end", None, None, starts, str(last))
    # Spark's window() wants slide <= size: take the period-long window from the latest
    # start (the grid's last_start), keep t only where the sampling window holds it.
    column = (f"window({event_time}, {_interval(g.period)}, {_interval(g.period)}, "
              f"{_interval(g.offset)})")
    start = Sql("`window`.start", timestamp=True)
    keep = g.contains(start, Sql(event_time, timestamp=True))
    return GridSql("`window`", str(start), str(start + g.size), column, str(keep), starts,
                   str(last))
