"""Spark job progress for the CLI and REPL: one status line on stderr while work runs.

Spark's own console progress bar is off in dfsql's sessions (it interleaves with query
output); this reporter polls the status tracker instead and clears its line when done.
Over Spark Connect there is no status tracker, and nothing is shown.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import TextIO

from dfsql.session import spark_context


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
        if self.tracker is None:
            return None
        parts = []
        for sid in sorted(self.tracker.getActiveStageIds()):
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks")
        return f"[{'; '.join(parts)}]" if parts else None

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
