"""Progress of long work, read in one place for every interface: the running stages of
Spark's jobs (from the SparkContext's status tracker) and dfsql's own phase lines (a
backfill, ALTER STREAMING QUERY's restatement), said by the code doing the work to
whoever listens on its thread.

The shell draws the stages as rich bars (:mod:`dfsql.shell.jobs`); the endpoint returns
them as an operation's log, each line when a client asks for the log (no thread:
:class:`LogLines`), and as GetOperationStatus's progress update
(:mod:`dfsql.server.progress_update`, beeline's bar); ``dfsql.sql`` and ``dfsql.start``
in a terminal draw one line on stderr (:mod:`dfsql.spark.progress_bar`). Over Spark Connect there is no status tracker:
only the phase lines are said.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dfsql.session import spark_context

#: the Spark setting that turns the progress bar of dfsql.sql and dfsql.start off
#: ("false"); the bar is drawn only when stderr is a terminal
PROGRESS_CONF = "dfsql.progress"


@dataclass(frozen=True)
class Stage:
    """One stage of a running Spark job, as the status tracker reports it."""

    job: int
    id: int
    name: str
    tasks: int
    completed: int
    active: int
    failed: int

    @property
    def started(self) -> bool:
        """Whether any of its tasks has run (a stage not started, or skipped, has none)."""
        return self.active > 0 or self.completed > 0

    def text(self) -> str:
        return f"job {self.job} stage {self.id}: {self.completed}/{self.tasks} tasks"


def stages(tracker, group: str | None = None) -> list[Stage]:
    """The stages, with tasks, of the running jobs of job group ``group`` (of every
    running job with None), in stage order: a few Py4J calls, asked only when someone
    looks."""
    if tracker is None:
        return []
    jobs = tracker.getActiveJobsIds() if group is None else tracker.getJobIdsForGroup(group)
    of: dict[int, int] = {}
    for job_id in jobs:
        job = tracker.getJobInfo(job_id)
        if job is not None and job.status == "RUNNING":
            for sid in job.stageIds:
                of.setdefault(sid, job_id)
    found = []
    for sid in sorted(of):
        info = tracker.getStageInfo(sid)
        if info is None or info.numTasks == 0:
            continue
        found.append(Stage(of[sid], sid, (info.name or "").split(" at ")[0], info.numTasks,
                           info.numCompletedTasks, info.numActiveTasks,
                           info.numFailedTasks))
    return found


def stage_line(running: list[Stage]) -> str | None:
    """One line of the started stages: ``job 2 stage 3: 4/8 tasks; job 2 stage 4: 0/4
    tasks`` (None when none has started)."""
    started = [s.text() for s in running if s.started]
    return "; ".join(started) if started else None


def tracker_of(spark):
    """The status tracker of ``spark``'s SparkContext (None on Spark Connect)."""
    sc = spark_context(spark)
    return None if sc is None else sc.statusTracker()


# --------------------------------------------------------------------------- phases

_local = threading.local()


@contextmanager
def listening(hear: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, the phase lines said on this thread (:func:`say`) go to
    ``hear`` too (listeners nest: an outer one still hears; one already listening —
    a statement run inside another — hears each line once)."""
    outer = getattr(_local, "hear", ())
    _local.hear = outer if hear in outer else (*outer, hear)
    try:
        yield
    finally:
        _local.hear = outer


def say(line: str) -> None:
    """A phase of long work (``backfill: …``, ``ALTER: …``) for whoever listens on this
    thread: the endpoint's operation log, a terminal's progress bar. Nothing when no one
    listens."""
    for hear in getattr(_local, "hear", ()):
        hear(line)


def listened() -> bool:
    """Whether anyone listens on this thread (a phase line costing work to make — a
    count — is made only then)."""
    return bool(getattr(_local, "hear", ()))


class LogLines:
    """One statement's progress as log lines, made when a client asks for them: the
    phase lines said since the last ask, then the stages of its job group when they
    changed. No thread: nothing is read while no one asks."""

    def __init__(self, spark, group: str) -> None:
        self.spark = spark
        self.tracker = None  # asked of Spark at the first look
        self.group = group
        self._phases: list[str] = []
        self._last: str | None = None
        self._lock = threading.Lock()

    def hear(self, line: str) -> None:
        with self._lock:
            self._phases.append(line)

    def stages(self) -> list[Stage]:
        """Its job group's running stages now."""
        if self.tracker is None:
            self.tracker = tracker_of(self.spark)
        return stages(self.tracker, self.group)

    @property
    def gave_stages(self) -> bool:
        return self._last is not None

    def take(self, running: bool = True) -> list[str]:
        """The lines not given yet (``running``: the stages too, as they are now)."""
        with self._lock:
            lines, self._phases = self._phases, []
        if running:
            now = stage_line(self.stages())
            if now is not None and now != self._last:
                self._last = now
                lines.append(now)
        return lines
