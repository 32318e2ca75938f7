"""A kept continuous query whose stream died because a Python worker did not start in
time is started again from its checkpoint, as START STREAMING QUERY would.

Spark waits a fixed 10 seconds for a Python worker it starts to connect back
(``PythonWorkerFactory``, not a setting). A stateful Python stream starts such a worker
on the driver when it starts; on a loaded machine (two cores, several JVMs starting) the
worker's imports alone can take longer, and Spark ends the stream with "Python worker
failed to connect back". Nothing in the query is wrong and nothing was written for the
batch that failed: its checkpoint and its sink's progress (a table's kept rows, a
database's progress row) say where it stands. A query kept in a state directory
(``dfsql serve --state-dir``) is therefore started again from there, after a short
pause, up to :data:`TRIES` times in a row; SHOW STREAMING QUERIES lists it as RUNNING
again, or, once the tries are spent, FAILED with Spark's reason, for START to retry.

Any other failure is the query's or its sink's, and stays as SHOW lists it."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from dfsql.continuous_queries import QUERIES
from dfsql.session import listen_once

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark's words for a Python worker that did not start in time
NOT_STARTED = ("Python worker failed to connect back",
               "Timed out while waiting for the Python worker to connect back")
#: times in a row a query is started again (a batch it commits since resets the count)
TRIES = 3
#: seconds before the n-th try: n times this
PAUSE = 2.0

_LOCK = threading.Lock()
#: query name -> (tries so far, batches it had committed at the last try)
_TRIED: dict[str, tuple[int, int]] = {}


def transient(exception: str | None) -> bool:
    """Whether a stream's failure is a Python worker that did not start in time."""
    return exception is not None and any(words in exception for words in NOT_STARTED)


def watch(spark: SparkSession) -> None:
    """Revive the kept queries of ``spark``'s streams from now on (once per session's
    stream manager; Spark Connect's streams are not watched)."""
    listen_once(spark, "revival", _listener)


def _listener():
    from pyspark.sql.streaming import StreamingQueryListener

    class Reviver(StreamingQueryListener):
        """Hands a transiently failed query to a thread of its own (never Spark's
        listener bus, which must not wait for a query to start)."""

        def onQueryStarted(self, event) -> None:  # noqa: N802 (Spark's names)
            pass

        def onQueryProgress(self, event) -> None:  # noqa: N802
            pass

        def onQueryIdle(self, event) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event) -> None:  # noqa: N802
            if transient(event.exception):
                threading.Thread(target=revive, args=(str(event.id),), daemon=True,
                                 name="dfsql-revive").start()

    return Reviver()


def revive(query_id: str) -> bool:
    """Start the kept query whose run ``query_id`` failed again, unless it was stopped
    or replaced meanwhile, or its tries are spent; whether it was started."""
    with QUERIES.lock:
        keeper = QUERIES.keeper
        found = [r for r in QUERIES.running.values()
                 if str(r.query.id) == query_id]  # type: ignore[attr-defined]
    if keeper is None or not found:
        return False
    name = found[0].name
    batches = _committed(found[0])
    with _LOCK:
        tries, at = _TRIED.get(name, (0, -1))
        tries = 1 if batches > at else tries + 1  # a batch committed since: a new run
        if tries > TRIES:
            return False
        _TRIED[name] = (tries, batches)
    time.sleep(PAUSE * tries)
    with QUERIES.starting:
        with QUERIES.lock:
            current = QUERIES.running.get(name)
        if current is not found[0] or current.query.isActive:  # type: ignore[attr-defined]
            return False  # stopped, started again or replaced meanwhile
        return keeper.start_again(name) is None


def _committed(r) -> int:
    """The batches the query's latest run reported (its progress), or -1."""
    progress = r.query.lastProgress  # type: ignore[attr-defined]
    return int(progress.get("batchId", -1)) if progress else -1
