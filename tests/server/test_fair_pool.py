"""The async statements' threads, shared per user fairly (issue #52, item 8;
:mod:`dfsql.server.fair`): the order tasks start in, with no Spark."""

from __future__ import annotations

import threading

from dfsql.server.fair import FairPool
from tests.conftest import wait_until


class Gates:
    """Tasks that say they started and wait to be let go."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def task(self, name: str):
        gate = self.gates[name] = threading.Event()

        def run() -> None:
            with self._lock:
                self.started.append(name)
            gate.wait(30)

        return run

    def release(self, name: str) -> None:
        self.gates[name].set()


def test_a_user_with_nothing_running_starts_at_once_beside_a_full_pool():
    pool, g = FairPool(2), Gates()
    for i in range(5):
        pool.submit("a", g.task(f"a{i}"))
    # a's first on its own thread, two more on the shared two; two wait
    assert wait_until(lambda: len(g.started) == 3, 10)
    assert g.started == ["a0", "a1", "a2"] and pool.waiting("a") == 2
    pool.submit("b", g.task("b0"))
    assert wait_until(lambda: "b0" in g.started, 10)  # not behind a3 and a4
    assert pool.running("a") == 3 and pool.running("b") == 1
    for name in g.gates:
        g.release(name)
    assert wait_until(lambda: len(g.started) == 6 and pool.running("a") == 0, 10)
    assert sorted(g.started[4:]) == ["a3", "a4"]


def test_a_freed_shared_thread_goes_to_the_user_running_fewest():
    pool, g = FairPool(2), Gates()
    for i in range(4):
        pool.submit("a", g.task(f"a{i}"))
    pool.submit("b", g.task("b0"))
    assert wait_until(lambda: len(g.started) == 4, 10)  # a0 a1 a2, b0
    pool.submit("b", g.task("b1"))  # after a3, but b runs 1 and a 3
    g.release("a1")  # a shared thread frees
    assert wait_until(lambda: len(g.started) == 5, 10)
    assert g.started[-1] == "b1"
    assert pool.waiting("a") == 1 and pool.waiting("b") == 0
    for name in list(g.gates):
        g.release(name)
    assert wait_until(lambda: "a3" in g.started, 10)
    for name in list(g.gates):
        g.release(name)
    assert wait_until(lambda: pool.running("a") == pool.running("b") == 0, 10)


def test_a_failing_task_frees_its_thread_and_shutdown_drops_what_waits():
    pool, g = FairPool(0), Gates()  # no shared threads: one statement per user
    pool.submit("a", lambda: 1 / 0)
    pool.submit("a", g.task("a1"))
    assert wait_until(lambda: g.started == ["a1"], 10)
    pool.submit("a", g.task("a2"))
    pool.shutdown()
    g.release("a1")
    assert wait_until(lambda: pool.running("a") == 0, 10)
    assert g.started == ["a1"]
