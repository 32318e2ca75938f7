"""The progress bar of ``dfsql.sql`` and ``dfsql.start`` in a terminal: one line on
stderr, ``[job 2 stage 3: 4/8 tasks]``, while Spark jobs run for longer than a second,
and dfsql's phase lines (a backfill, ALTER's restatement) printed above it.

Only when stderr is a terminal (a pipe, a log file, a notebook — whose stderr is not one —
get nothing, and no thread starts) and the session's ``dfsql.progress`` is not
``false``. One daemon thread per process, started by the first statement that may draw:
it asks the status tracker for running jobs twice a second (a DataFrame's actions run
after ``dfsql.sql`` has returned, so the bar cannot watch only the call). The shell and
``dfsql serve`` turn it off (:func:`disable`): the shell draws its own bars, and a server's
terminal is not its clients'.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, TextIO

from dfsql.session import spark_context
from dfsql.spark.progress import PROGRESS_CONF, listening, stage_line, stages

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: seconds a job runs before the bar shows it (short statements draw nothing)
AFTER_S = 1.0
#: seconds between two looks at the status tracker
INTERVAL_S = 0.5
WIDTH = 100

_lock = threading.Lock()
_bar: Bar | None = None
_allowed = True


class Bar(threading.Thread):
    """The drawing thread: running stages of every job of the SparkContext."""

    def __init__(self, sc, out: TextIO) -> None:
        super().__init__(daemon=True, name="dfsql-progress-bar")
        self.sc = sc  # a later SparkContext (after spark.stop()) gets a bar of its own
        self.tracker = sc.statusTracker()
        self.ended = False
        self.out = out
        self.on = threading.Event()
        self.on.set()
        self._shown = False
        self._since: float | None = None
        self._write = threading.Lock()

    def run(self) -> None:
        while not self.ended:
            self.on.wait()
            time.sleep(INTERVAL_S)
            try:
                self.draw(stage_line(stages(self.tracker)))
            except Exception:  # noqa: BLE001 - the context stopped: the bar ends with it
                self.draw(None)
                return

    def draw(self, text: str | None) -> None:
        now = time.monotonic()
        if text is None or not self.on.is_set():
            self._since = None
            with self._write:
                self._clear()
            return
        self._since = self._since or now
        if now - self._since < AFTER_S:
            return
        with self._write:
            self.out.write("\r" + f"[{text}]"[:WIDTH].ljust(WIDTH))
            self.out.flush()
            self._shown = True

    def say(self, line: str) -> None:
        """A phase line, above the bar."""
        with self._write:
            self._clear()
            self.out.write(line + "\n")
            self.out.flush()

    def _clear(self) -> None:
        if self._shown:
            self.out.write("\r" + " " * WIDTH + "\r")
            self.out.flush()
            self._shown = False


def disable() -> None:
    """No bar in this process (the shell, the endpoint)."""
    global _allowed
    _allowed = False
    if _bar is not None:
        _bar.on.clear()


def watching(session: Callable[[], SparkSession]):
    """Around a statement of ``dfsql.sql`` / ``dfsql.start``: the bar drawn while
    Spark's jobs run (from now on, for the DataFrame's actions too), and the
    statement's phase lines printed. Nothing — one ``isatty`` — when stderr is not a
    terminal; ``session`` (the statement's SparkSession) is asked for only when it is."""
    if not _allowed or not _tty():
        return nullcontext()
    bar = _bar_for(session())
    return nullcontext() if bar is None else listening(bar.say)


def _tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def _bar_for(spark) -> Bar | None:
    """The process's bar, started, or paused when the session's setting says false."""
    global _bar
    try:
        off = str(spark.conf.get(PROGRESS_CONF, "true")).strip().lower() == "false"
    except Exception:  # noqa: BLE001 - a session that cannot answer: the default
        off = False
    with _lock:
        if off:
            if _bar is not None:
                _bar.on.clear()
            return None
        sc = spark_context(spark)
        if sc is None:  # Spark Connect: no stages to draw
            return None
        if _bar is None or not _bar.is_alive() or _bar.sc is not sc:
            if _bar is not None:  # the old one's context stopped: it ends
                _bar.ended = True
                _bar.on.set()
            _bar = Bar(sc, sys.stderr)
            _bar.start()
        _bar.on.set()
        return _bar
