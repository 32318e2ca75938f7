"""``\\watch``: the live panes of a windowed query over a stream, as they fire.

The query runs into a :class:`dfsql.TableSink` — the current row of every live window,
each micro-batch's retractions deleting the rows they retract and its panes replacing
their window's row, in LANGUAGE.md §7's order — and the shell redraws that table after
every batch, the rows the batch changed in bold, until Ctrl-C stops the query.

It takes the shell's session and console, not the shell: the shell imports this module,
never the other way round.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import dfsql
from dfsql.errors import DfsqlError, SourceError
from dfsql.shell.display import result_table
from dfsql.shell.jobs import CtrlC

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

#: how often Spark starts a micro-batch while watching
TRIGGER = {"processingTime": "1 second"}


def watch(spark: SparkSession, console: Console, text: str, name: str) -> None:
    """Run ``text`` into a table sink called ``name`` and redraw its live windows on
    ``console`` after every micro-batch, until Ctrl-C."""
    df = dfsql.sql(text, spark)
    if not df.isStreaming:
        raise SourceError("\\watch shows a query over a stream, and this one reads bounded "
                          "tables", 1, 1, "run it as a statement (end it with ';'), or "
                          "\\load a directory with STREAM")
    sink = dfsql.TableSink(name)
    query = dfsql.start(text, sink=sink, trigger=TRIGGER, spark=spark)
    try:
        with CtrlC() as ctrl_c:
            _follow(console, query, sink, ctrl_c.pressed)
    finally:
        query.stop()
        spark.catalog.dropTempView(name)
    console.print(f"stopped after {sink.last_batch + 1} micro-batches", style="dim")


def _follow(console: Console, query, sink, stop: threading.Event) -> None:
    """Redraw until the query ends or ``stop`` is set (Ctrl-C)."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    seen = -2
    before: set[tuple] = set()
    view = Text("waiting for the first micro-batch ... (Ctrl-C stops)", style="dim")
    with Live(view, console=console, refresh_per_second=4, transient=False) as live:
        while query.isActive and not stop.is_set():
            if sink.last_batch != seen and sink.current is not None:
                seen = sink.last_batch
                frame = sink.current
                columns = list(frame.columns)
                cells = frame.astype(object).where(frame.notna(), None)
                rows = [tuple(r) for r in cells.to_numpy().tolist()]
                table = result_table(columns, rows, ascii_only=not console.is_terminal)
                changed = [i for i, r in enumerate(rows) if r not in before]
                for i in changed:
                    table.rows[i].style = "bold"
                before = set(rows)
                live.update(Group(table, Text(
                    f"batch {seen}: {len(rows)} live windows, {len(changed)} changed "
                    f"(Ctrl-C stops)", style="dim")))
            stop.wait(0.2)
    if query.exception() is not None:
        raise DfsqlError(f"the query stopped: {str(query.exception()).splitlines()[0]}")
