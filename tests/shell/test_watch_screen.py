"""``\\watch`` with more live windows than the terminal has rows (issue #51): what is on
the screen after a redraw holds the windows the batch changed, the newest windows, and the
status line (with how many older windows are not shown) — not the oldest windows with the
rest cut off below the screen.

The shell's redraw loop runs for real (rich's Live on a terminal console of 20 rows), fed a
sink that holds what :class:`dfsql.TableSink` would after two micro-batches; a small
terminal (cursor up, erase line, carriage return, new line, scrolling) replays what it
wrote, as a person's screen would show it."""

from __future__ import annotations

import io
import re
import threading

import pandas as pd
from rich.console import Console

from dfsql.shell.watch import _follow, screen_view

HEIGHT, WIDTH = 20, 120
#: how rich's Live starts a redraw: back to the first column, erase, (up, erase) ...
REDRAW = "\r\x1b[2K"
CONTROL = re.compile(r"\x1b\[(\d*)([A-Za-z])|\x1b\[\?\d+[hl]|\r|\n")


def screen(written: str, height: int) -> list[str]:
    """The ``height`` rows a terminal shows after ``written``: enough of VT100 for rich's
    Live (it moves up and erases the lines it drew, then draws the new frame)."""
    lines, row, col = [""], 0, 0

    def put(text: str) -> None:
        nonlocal col
        line = lines[row].ljust(col)
        lines[row] = line[:col] + text + line[col + len(text):]
        col += len(text)

    at = 0
    for m in CONTROL.finditer(written):
        put(written[at:m.start()])
        at = m.end()
        token = m.group(0)
        if token == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            col = 0
        elif m.group(2) == "A":  # cursor up, never above the screen's top row
            row = max(row - int(m.group(1) or 1), max(0, len(lines) - height))
        elif m.group(2) == "K":  # erase the line
            lines[row] = ""
    put(written[at:])
    return [ln.rstrip() for ln in lines[-height:]]


class _Sink:
    """What a TableSink holds: ``current`` (one row a live window) after ``last_batch``."""

    def __init__(self, current: pd.DataFrame, last_batch: int) -> None:
        self.current, self.last_batch = current, last_batch


class _Query:
    """Active for ``polls`` looks; after ``switch_at`` looks the sink moves on to its next
    batch; when it stops, what the console had written is kept, up to the last whole
    frame (leaving Live draws the whole of its last frame once more, uncut)."""

    def __init__(self, sink: _Sink, next_batch: pd.DataFrame, out: io.StringIO) -> None:
        self.sink, self.next_batch, self.out = sink, next_batch, out
        self.looks, self.written = 0, ""

    @property
    def isActive(self) -> bool:  # noqa: N802 - StreamingQuery's name
        self.looks += 1
        if self.looks == 4:
            self.sink.current, self.sink.last_batch = self.next_batch, 1
        if self.looks > 10:
            # up to the last redraw's start (rich's refresh thread may be drawing now)
            written = self.out.getvalue()
            self.written = written[:written.rfind(REDRAW)]
            return False
        return True

    def exception(self) -> None:
        return None


def _windows(totals: dict[int, int]) -> pd.DataFrame:
    """One row for each one-minute window ``i`` (starting 12:00 + i minutes), in the
    dict's order (a TableSink's: kept rows, then the rows a batch replaced or added)."""
    start = pd.Timestamp("2015-09-01 12:00:00")
    idx = list(totals)
    return pd.DataFrame({
        "key": ["k"] * len(idx),
        "total": [totals[i] for i in idx],
        "window_start": [start + pd.Timedelta(minutes=i) for i in idx],
        "window_end": [start + pd.Timedelta(minutes=i + 1) for i in idx],
    })


def test_watch_keeps_the_newest_and_changed_windows_and_the_status_on_screen() -> None:
    # batch 0: windows 0..38, total 100 + i; batch 1: a late row revises window 5
    # (total 1005) and window 39 is new (total 139): the sink keeps the 37 others first
    first = {i: 100 + i for i in range(39)}
    second = {i: 100 + i for i in range(39) if i != 5} | {5: 1005, 39: 139}
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=WIDTH,
                      height=HEIGHT, legacy_windows=False)
    sink = _Sink(_windows(first), 0)
    query = _Query(sink, _windows(second), out)
    _follow(console, query, sink, threading.Event())
    assert query.written, "the redraw loop did not run"
    shown = screen(query.written, HEIGHT)
    assert "..." not in shown  # nothing cut off below the screen
    # the status line is the screen's last: 40 windows, 2 changed; on a 20-row screen the
    # table's header takes 2 rows (names, rule) and the status 1, so 17 windows fit: the
    # changed window 5 and the 16 newest (24..39); the 23 others (0..4, 6..23) are older
    assert shown[-1].startswith("batch 1: 40 live windows, 2 changed"), shown
    assert "23 older windows not shown" in shown[-1], shown
    rows = [ln.split() for ln in shown if "2015-09-01" in ln]
    minutes = [int(r[3].split(":")[1]) for r in rows]  # window_start's minute
    assert minutes == [5, *range(24, 40)]  # in window order, oldest of them first
    totals = {int(r[3].split(":")[1]): int(r[1]) for r in rows}
    assert totals[5] == 1005 and totals[39] == 139 and totals[24] == 124


def test_watch_shows_every_window_when_they_fit() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=WIDTH,
                      height=HEIGHT, legacy_windows=False)
    sink = _Sink(_windows({0: 100, 1: 101}), 0)
    query = _Query(sink, _windows({1: 101, 0: 100, 2: 7}), out)
    _follow(console, query, sink, threading.Event())
    shown = [ln for ln in screen(query.written, HEIGHT) if ln]
    assert shown[-1] == "batch 1: 3 live windows, 1 changed (Ctrl-C stops)"
    rows = [ln.split() for ln in shown if "2015-09-01" in ln]
    assert [(r[1], r[3]) for r in rows] == [("100", "12:00:00"), ("101", "12:01:00"),
                                            ("7", "12:02:00")]


def test_watch_with_more_changed_windows_than_rows_shows_the_newest_of_them() -> None:
    # 8 rows: header 2, status 1, so 5 windows fit; all 12 windows are new in batch 0:
    # the 5 newest (7..11) are shown, and the status counts the 7 changed ones left out
    console = Console(file=io.StringIO(), force_terminal=True, color_system=None,
                      width=WIDTH, height=8, legacy_windows=False)
    view = screen_view(console, _windows({i: i for i in range(12)}), None, 0)
    lines = ["".join(s.text for s in ln).rstrip() for ln in console.render_lines(view)]
    assert len(lines) == 8
    assert [int(ln.split()[3].split(":")[1]) for ln in lines[2:7]] == [7, 8, 9, 10, 11]
    assert lines[7] == ("batch 0: 12 live windows, 12 changed, 7 windows not shown "
                        "(7 of them changed) (Ctrl-C stops)")


def test_watch_compares_rows_whose_cells_are_lists() -> None:
    # a COLLECT_LIST column: lists, which a set or a pandas join cannot hold; 6 rows on
    # an ASCII console (top edge, names, rule, bottom edge: 4 lines), the status 1: 1 fits
    frame = _windows({0: 1, 1: 2}).assign(seen=[[1, 2], [3]])
    changed = _windows({0: 1, 1: 2}).assign(seen=[[1, 2], [3, 4]])
    console = Console(file=io.StringIO(), force_terminal=False, width=WIDTH, height=6)
    view = screen_view(console, changed, frame, 3)
    lines = ["".join(s.text for s in ln).rstrip() for ln in console.render_lines(view)]
    assert len(lines) == 6 and "[3, 4]" in lines[3]
    assert lines[5] == ("batch 3: 2 live windows, 1 changed, 1 older window not shown "
                        "(Ctrl-C stops)")
