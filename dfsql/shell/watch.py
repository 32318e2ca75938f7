"""``\\watch``: the live panes of a windowed query over a stream, as they fire.

The query runs into a :class:`dfsql.TableSink` — the current row of every live window,
each micro-batch's retractions deleting the rows they retract and its panes replacing
their window's row, in docs/reference.md#output-columns's order — and the shell redraws that table after
every batch, the rows the batch changed in bold, until Ctrl-C stops the query. With more
live windows than the terminal has rows, it draws the changed and the newest windows and
the status line, and says how many older windows it left out.

It takes the shell's session and console, not the shell: the shell imports this module,
never the other way round.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from dfsql import api
from dfsql.errors import DfsqlError, SourceError
from dfsql.shell.display import result_table
from dfsql.shell.jobs import CtrlC
from dfsql.spark.stream.sinks import TableSink

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession
    from rich.console import Console, RenderableType

#: how often Spark starts a micro-batch while watching
TRIGGER = {"processingTime": "1 second"}


def watch(spark: SparkSession, console: Console, text: str, name: str) -> None:
    """Run ``text`` into a table sink called ``name`` and redraw its live windows on
    ``console`` after every micro-batch, until Ctrl-C."""
    df = api.sql(text, spark)
    if not df.isStreaming:
        raise SourceError("\\watch shows a query over a stream, and this one reads bounded "
                          "tables", 1, 1, "run it as a statement (end it with ';'), or "
                          "\\load a directory with STREAM")
    sink = TableSink(name)
    query = api.start(text, sink=sink, trigger=TRIGGER, spark=spark)
    try:
        with CtrlC() as ctrl_c:
            _follow(console, query, sink, ctrl_c.pressed)
    finally:
        query.stop()
        spark.catalog.dropTempView(name)
    console.print(f"stopped after {sink.last_batch + 1} micro-batches", style="dim")


def _follow(console: Console, query, sink, stop: threading.Event) -> None:
    """Redraw until the query ends or ``stop`` is set (Ctrl-C)."""
    from rich.live import Live
    from rich.text import Text

    seen = -2
    before = None
    view = Text("waiting for the first micro-batch ... (Ctrl-C stops)", style="dim")
    with Live(view, console=console, refresh_per_second=4, transient=False) as live:
        while query.isActive and not stop.is_set():
            if sink.last_batch != seen and sink.current is not None:
                seen = sink.last_batch
                frame = _in_window_order(sink.current)
                live.update(screen_view(console, frame, before, seen))
                before = frame
            stop.wait(0.2)
    if query.exception() is not None:
        raise DfsqlError(f"the query stopped: {str(query.exception()).splitlines()[0]}")


def _in_window_order(frame: pd.DataFrame) -> pd.DataFrame:
    """The live windows oldest first (a TableSink keeps the rows a batch replaced last)."""
    order = [c for c in ("window_end", "window_start") if c in frame.columns]
    if not order:
        return frame.reset_index(drop=True)
    return frame.sort_values(order, kind="stable", na_position="first").reset_index(drop=True)


def _changed(frame: pd.DataFrame, before: pd.DataFrame | None) -> np.ndarray:
    """Which rows of ``frame`` the last batch changed: those not in ``before``, whole
    (compared as printed: a cell may be a list or a map, which pandas cannot join on)."""
    if before is None or not len(before):
        return np.ones(len(frame), dtype=bool)
    seen = before.astype(str).drop_duplicates().assign(__seen=True)
    merged = frame.astype(str).merge(seen, on=list(frame.columns), how="left")
    return merged["__seen"].isna().to_numpy()


def _shown(changed: np.ndarray, room: int) -> np.ndarray:
    """The rows that fit in ``room`` lines: the changed ones (the newest of them if they
    are too many), then the newest unchanged; in window order."""
    rows = np.arange(len(changed))
    picked = rows[changed][-room:] if room else rows[:0]
    rest = room - len(picked)
    newest = rows[~changed][-rest:] if rest else rows[:0]
    return np.sort(np.concatenate([picked, newest]))


def screen_view(console: Console, frame: pd.DataFrame, before: pd.DataFrame | None,
                batch: int) -> RenderableType:
    """One redraw: the table of live windows (``frame``, in window order; the rows not in
    ``before`` in bold) and a status line, within the console's height. With more windows
    than fit, the changed and the newest are shown, and the status says how many older
    ones are not: rich's Live would cut the bottom off, the rows that change and the
    status line with it."""
    from rich.console import Group
    from rich.text import Text

    ascii_only = not console.is_terminal
    columns = list(frame.columns)
    changed = _changed(frame, before)
    # the lines a table takes besides its rows (edges, names, rule): one row's, less one
    one_row = result_table(columns, [(None,) * len(columns)], ascii_only)
    header = len(console.render_lines(one_row, pad=False)) - 1
    room = max(0, console.height - header - 1)
    shown = _shown(changed, room) if len(frame) > room else np.arange(len(frame))
    part = frame.iloc[shown]
    cells = part.astype(object).where(part.notna(), None)
    table = result_table(columns, [tuple(r) for r in cells.to_numpy().tolist()], ascii_only)
    for i in np.flatnonzero(changed[shown]):
        table.rows[i].style = "bold"
    status = f"batch {batch}: {_count(len(frame), 'live window')}, {int(changed.sum())} changed"
    hidden = len(frame) - len(shown)
    if hidden:
        hidden_changed = int(changed.sum()) - int(changed[shown].sum())
        status += (f", {_count(hidden, 'older window')} not shown" if not hidden_changed
                   else f", {_count(hidden, 'window')} not shown ({hidden_changed} of them "
                   "changed)")
    return Group(table, Text(status + " (Ctrl-C stops)", style="dim"))


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")
