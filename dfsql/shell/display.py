"""What the shell prints: result tables and positioned errors.

A windowed result keeps its pane columns (docs/reference.md#output-columns); a retraction row is marked
with ``-`` in a leading column and drawn in red, an insertion with ``+``, and the pane
timing is coloured, so a changelog reads at a glance. On a terminal the table is drawn
with rich's box characters (and paged when taller than the screen); to a pipe or file it
is plain ASCII with no colour and no line wrapping, so scripts can read it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dfsql.errors import DfsqlError

TIMING_STYLE = {"EARLY": "yellow", "ON_TIME": "green", "LATE": "magenta"}


def make_console(terminal: bool | None = None, stderr: bool = False) -> Console:
    """A console for the shell: a terminal gets colour and its own width; anything else
    gets plain text as wide as the table needs."""
    import sys

    stream = sys.stderr if stderr else sys.stdout
    if terminal is None:
        terminal = stream.isatty()
    if terminal:
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, force_terminal=False, no_color=True,
                   width=100_000, soft_wrap=True)


def cell(value: Any) -> str:
    """A value as Spark SQL prints it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="microseconds" if value.microsecond
                               else "seconds")
    if isinstance(value, dt.date | decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, list | dict):
        return json.dumps(value, default=cell)
    if hasattr(value, "asDict"):  # a struct (pyspark Row)
        return json.dumps(value.asDict(recursive=True), default=cell)
    return str(value)


def result_table(columns: Sequence[str], rows: Sequence[Sequence[Any]],
                 ascii_only: bool, changelog: bool = False) -> Table:
    """The rows as a rich table; a changelog (the result of a retracting windowed query:
    the caller knows, a column named ``is_retraction`` alone does not say so) gets a
    leading ``+``/``-`` column and its retractions in red."""
    changelog = changelog and "is_retraction" in columns
    retract_at = list(columns).index("is_retraction") if changelog else -1
    timing_at = list(columns).index("pane_timing") if "pane_timing" in columns else -1
    table = Table(box=box.ASCII if ascii_only else box.SIMPLE_HEAVY, show_edge=ascii_only,
                  header_style="bold", pad_edge=True)
    if changelog:
        table.add_column("±" if not ascii_only else "+/-", justify="center", no_wrap=True)
    for name in columns:
        table.add_column(name, no_wrap=True)
    for row in rows:
        cells: list[Text | str] = []
        retraction = changelog and row[retract_at] is True
        for i, v in enumerate(row):
            style = "dim" if v is None else ""
            if i == timing_at and v in TIMING_STYLE:
                style = TIMING_STYLE[v]
            cells.append(Text(cell(v), style=style))
        if changelog:
            cells.insert(0, Text("-" if retraction else "+",
                                 style="bold red" if retraction else "bold green"))
        table.add_row(*cells, style="red" if retraction else None)
    return table


def print_result(console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                 more: bool, elapsed: float | None, page: bool = False,
                 warnings: Sequence[str] = (), changelog: bool = False) -> None:
    """The table, then ``N rows`` (and the time it took), then ``warnings`` (the rows the
    query dropped, :func:`dfsql.api.dropped_warnings`). ``more``: the result had more
    rows than were fetched; ``changelog``: mark its insertions and retractions."""
    if not columns:
        console.print("OK" + (f" ({elapsed:.2f} s)" if elapsed is not None else ""))
        print_warnings(console, warnings)
        return
    table = result_table(columns, rows, ascii_only=not console.is_terminal,
                         changelog=changelog)
    footer = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
    if more:
        footer = f"first {footer} shown (the result has more; \\maxrows N to fetch more)"
    if elapsed is not None:
        footer += f" ({elapsed:.2f} s)"
    if page and console.is_terminal and len(rows) + 6 > shutil.get_terminal_size().lines:
        os.environ.setdefault("LESS", "-RSFX")  # colours, no wrapping, quit if one screen
        with console.pager(styles=True):
            console.print(table)
            console.print(footer, style="dim")
            print_warnings(console, warnings)
        return
    console.print(table)
    console.print(footer, style="dim")
    print_warnings(console, warnings)


def print_warnings(console: Console, warnings: Sequence[str]) -> None:
    """Each warning on its own line, under the result (not in the pager's table)."""
    for line in warnings:
        console.print(Text(line, style="yellow"), soft_wrap=True)


def caret_lines(err: DfsqlError, text: str | None) -> list[str]:
    """The offending line of ``text`` and a caret under the error's column."""
    if text is None or err.line is None or err.column is None:
        return []
    lines = text.splitlines()
    if not 1 <= err.line <= len(lines):
        return []
    source = lines[err.line - 1].expandtabs(1)
    return [source, " " * (max(err.column, 1) - 1) + "^"]


def print_error(console: Console, err: DfsqlError, text: str | None = None,
                where: str = "", line_offset: int = 0) -> None:
    """``error: line L, col C: message``, the line with a caret, and the hint.
    ``line_offset`` moves the line number into a script's own lines (``where`` names the
    script)."""
    line = None if err.line is None else err.line + line_offset
    head = f"line {line}, col {err.column}: " if line is not None else ""
    out = Text()
    out.append("error: ", style="bold red")
    out.append(f"{where}{head}{err.message}")
    for ln in caret_lines(err, text):
        out.append("\n  " + ln, style="red" if ln.strip() == "^" else "")
    if err.hint:
        out.append("\n  hint: ", style="bold")
        out.append(err.hint)
    console.print(out, soft_wrap=True)
