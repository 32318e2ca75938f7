"""One statement's Spark work, cancellable with Ctrl-C and shown with a progress bar.

The work runs in a worker thread under its own Spark job group (a tag on Spark Connect),
while the shell's main thread waits. Ctrl-C then cancels that group only — PySpark's own
SIGINT handler would call ``cancelAllJobs`` and so also kill the continuous queries the
user started — and the shell returns to its prompt once the worker has let go. Ctrl-C is
noted, never raised (:class:`CtrlC`): the main thread spends its wait in Py4J calls (the
progress bar asks the status tracker), and a KeyboardInterrupt raised inside one closes
that Py4J connection mid-answer and logs a traceback. After a
second of work a progress bar shows each running stage's tasks (from the status tracker;
Spark Connect has none, so nothing is drawn there).
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from dfsql.session import cancel_until, spark_context
from dfsql.spark.progress import listening, stages

T = TypeVar("T")

#: seconds of work before the progress bar appears
PROGRESS_AFTER_S = 1.0
#: how long a cancelled statement may take to let go before the shell stops waiting
CANCEL_WAIT_S = 15.0

_groups = itertools.count(1)


class Cancelled(Exception):
    """The user pressed Ctrl-C while a statement ran; its Spark jobs were cancelled."""


class CtrlC:
    """While active in the main thread, Ctrl-C sets :attr:`pressed` instead of raising
    KeyboardInterrupt, so that no Py4J call is cut off mid-answer; the waiting loop asks
    :attr:`pressed` between its calls. Elsewhere (no signals there) it does nothing."""

    def __init__(self) -> None:
        self.pressed = threading.Event()
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, lambda _signum, _frame: self.pressed.set())
            self._installed = True
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous
                          if self._previous is not None else signal.default_int_handler)
            self._installed = False


class Job:
    """``fn`` run in a worker thread under a fresh job group of ``spark``."""

    def __init__(self, spark, fn: Callable[[], T], description: str = "") -> None:
        self.spark = spark
        self.fn = fn
        self.description = description[:200]
        self.group = f"dfsql-shell-{next(_groups)}"
        self.sc = spark_context(spark)
        self.result: Any = None
        self.error: BaseException | None = None
        self.cancelled = False
        #: the statement's phase lines (a backfill, ALTER's restatement), not yet shown
        self.heard: list[str] = []
        # set when the worker ends: Thread.is_alive() may wrongly say False after a
        # KeyboardInterrupt lands inside Thread.join (CPython before 3.13)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._work, daemon=True,
                                        name=f"dfsql-shell-job-{self.group}")

    def _work(self) -> None:
        try:
            if self.sc is not None:
                self.sc.setJobGroup(self.group, self.description, interruptOnCancel=True)
            else:
                self.spark.addTag(self.group)
            with listening(self.heard.append):
                self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            self.error = e
        finally:
            if self.sc is None:  # a job group dies with its (pinned) thread; a tag does not
                self.spark.removeTag(self.group)
            self._done.set()


    def run(self, progress_console=None) -> Any:
        """Run and wait. Raises what ``fn`` raised, or :class:`Cancelled` after Ctrl-C."""
        bar = None
        try:
            with CtrlC() as ctrl_c:
                self._thread.start()
                t0 = time.monotonic()
                while not self._done.wait(0.1):
                    if ctrl_c.pressed.is_set():
                        self._let_go()
                        raise Cancelled()
                    if progress_console is not None:
                        self._show_heard(progress_console)
                    if progress_console is not None and self.sc is not None:
                        if bar is None and time.monotonic() - t0 >= PROGRESS_AFTER_S:
                            bar = StageProgress(self.sc, self.group, progress_console)
                        if bar is not None:
                            bar.update()
        finally:
            if bar is not None:
                bar.close()
        if progress_console is not None:
            self._show_heard(progress_console)
        if self.error is not None:
            raise self.error
        return self.result

    def _show_heard(self, console) -> None:
        """The phase lines said since, above the bars."""
        while self.heard:
            console.print(self.heard.pop(0), style="dim", markup=False, highlight=False)

    def _let_go(self) -> None:
        """Cancel the group until the worker ends: a statement may start a next job
        after the first one is cancelled (a replay runs several)."""
        self.cancelled = True
        cancel_until(self.spark, self.group, self._done, CANCEL_WAIT_S)


class StageProgress:
    """A rich progress bar per running stage of one job group: completed / total tasks."""

    def __init__(self, sc, group: str, console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.tracker = sc.statusTracker()
        self.group = group
        self.progress = Progress(TextColumn("[bold blue]{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("tasks"),
                                 TimeElapsedColumn(), console=console, transient=True)
        self.tasks: dict[int, Any] = {}
        self.progress.start()

    def update(self) -> None:
        for st in stages(self.tracker, self.group):
            if st.id not in self.tasks and not st.started:
                continue  # not started (or skipped): no bar yet
            if st.id not in self.tasks:
                label = f"stage {st.id}" + (f" {st.name}" if st.name else "")
                self.tasks[st.id] = self.progress.add_task(label[:40], total=st.tasks)
            self.progress.update(self.tasks[st.id], completed=st.completed, total=st.tasks)

    def close(self) -> None:
        self.progress.stop()
