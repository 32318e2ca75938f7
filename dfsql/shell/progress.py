"""Spark job progress for the CLI and REPL: one status line on stderr while work runs.

Spark's own console progress bar is off in dfsql's sessions (it interleaves with query
output); this reporter polls the status tracker instead (read by
:mod:`dfsql.spark.progress`, which the shell's bars and the endpoint share) and clears
its line when done.
Over Spark Connect there is no status tracker, and nothing is shown.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import TextIO

from dfsql.session import spark_context
from dfsql.spark.progress import stage_line, stages


class Progress(threading.Thread):
    """Polls ``spark.sparkContext.statusTracker()`` and draws ``[stage 3: 2/4 tasks]``."""

    def __init__(self, spark, out: TextIO | None = None, interval: float = 0.3) -> None:
        super().__init__(daemon=True)
        self.out = out or sys.stderr
        self.interval = interval
        self._stop = threading.Event()
        self._shown = False
        sc = spark_context(spark)
        self.tracker = None if sc is None else sc.statusTracker()

    def line(self) -> str | None:
        text = stage_line(stages(self.tracker))  # the reading: dfsql.spark.progress
        return None if text is None else f"[{text}]"

    def run(self) -> None:
        while not self._stop.wait(self.interval):
            text = self.line()
            if text:
                self.out.write("\r" + text[:100].ljust(100))
                self.out.flush()
                self._shown = True

    def stop(self) -> None:
        self._stop.set()
        self.join(timeout=2)
        if self._shown:
            self.out.write("\r" + " " * 100 + "\r")
            self.out.flush()


@contextmanager
def progress(spark, enabled: bool = True):
    """Show Spark job progress on stderr while the block runs (only on a terminal)."""
    if not enabled or not sys.stderr.isatty():
        yield
        return
    p = Progress(spark)
    p.start()
    try:
        yield
    finally:
        p.stop()
