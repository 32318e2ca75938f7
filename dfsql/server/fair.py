"""The threads async statements run on, shared fairly among users (issue #52, item 8).

One shared first-come-first-served pool of 8 threads let one user, within every
per-user limit (sessions times operations per session), fill it with slow statements:
another user's ``SELECT 1`` waited in the queue 57-60 s, once until its own statement
timeout killed it before it ran. Now:

* a user with nothing running gets a thread at once, beside the shared ones: a user's
  first statement never waits for another user's (the threads this adds are at most
  the users with an operation running, each bounded by ``--max-connections`` and
  ``--max-sessions-per-user``);
* a user's further statements share ``workers`` threads (``dfsql serve``'s 8); when one
  frees, it goes to the waiting user running the fewest statements (ties: the one
  waiting longest), not to the oldest request, so a user with many waiting does not keep
  a user with few waiting behind them;
* each user's own statements run in the order they came.

What one running statement costs in Spark's task slots is the scheduler's business
(FAIR pools and the endpoint's task slots: :mod:`dfsql.server.limits`).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable

log = logging.getLogger("dfsql.server")

#: the default of ``Server(workers=...)``: the threads a user's second and later
#: statements share
WORKERS = 8


class FairPool:
    """Runs ``submit``'s callables on threads, per user fairly (the module's doc)."""

    def __init__(self, workers: int = WORKERS) -> None:
        self.workers = max(0, workers)
        self._lock = threading.Lock()
        self._queues: dict[str, deque[tuple[int, Callable[[], object]]]] = {}
        self._running: dict[str, int] = {}  # user -> statements running
        self._shared = 0  # shared threads in use
        self._order = itertools.count()  # arrival order, for ties
        self._closed = False

    def submit(self, user: str, task: Callable[[], object]) -> None:
        """Run ``task`` for ``user`` as soon as the rules let it."""
        with self._lock:
            if self._closed:
                return
            self._queues.setdefault(user, deque()).append((next(self._order), task))
            started = self._next()
        if started is not None:
            self._thread(*started)

    def running(self, user: str) -> int:
        """The user's statements running now (for tests and the log)."""
        return self._running.get(user, 0)

    def waiting(self, user: str) -> int:
        """The user's statements waiting for a thread."""
        queue = self._queues.get(user)
        return len(queue) if queue else 0

    def shutdown(self) -> None:
        """Drop what waits; what runs ends on its own (its session's close cancels it)."""
        with self._lock:
            self._closed = True
            self._queues.clear()

    # ---------------------------------------------------------------- inside
    def _next(self) -> tuple[str, bool, Callable[[], object]] | None:
        """The next task a thread may start (its user, whether it takes a shared
        thread, the task), accounted as running; None: none may. Called locked."""
        best: tuple[int, int, str] | None = None
        for user, queue in self._queues.items():
            have = self._running.get(user, 0)
            if have and self._shared >= self.workers:
                continue  # a second statement, and no shared thread free
            key = (have, queue[0][0], user)
            if best is None or key < best:
                best = key
        if best is None:
            return None
        have, _, user = best
        queue = self._queues[user]
        _, task = queue.popleft()
        if not queue:
            del self._queues[user]
        shared = have > 0
        self._shared += shared
        self._running[user] = have + 1
        return user, shared, task

    def _thread(self, user: str, shared: bool, task: Callable[[], object]) -> None:
        threading.Thread(target=self._work, args=(user, shared, task), daemon=True,
                         name="dfsql-op").start()

    def _work(self, user: str, shared: bool, task: Callable[[], object]) -> None:
        """Run ``task``, then whatever may start next on this thread: every other one
        that may start now gets a thread of its own."""
        while True:
            try:
                task()
            except BaseException:  # noqa: BLE001 (an operation keeps its own error)
                log.exception("an operation's thread failed")
            with self._lock:
                left = self._running.get(user, 0) - 1
                if left > 0:
                    self._running[user] = left
                else:
                    self._running.pop(user, None)
                self._shared -= shared
                nxt = None if self._closed else self._next()
                more = [] if nxt is None else list(iter(self._next, None))
            for started in more:
                self._thread(*started)
            if nxt is None:
                return
            user, shared, task = nxt
