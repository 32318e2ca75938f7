"""Ctrl-C while a shell statement runs: the main thread waits in Py4J calls (the progress
bar asks Spark's status tracker ten times a second), and a SIGINT landing in one of them
must cancel the statement's jobs without cutting that Py4J answer off — which used to
break the connection and print Py4J's KeyboardInterrupt traceback (CI, stop 39)."""

from __future__ import annotations

import io
import logging
import os
import signal
import threading
import time

import pytest
from rich.console import Console

from dfsql.shell.jobs import Cancelled, CtrlC, Job

SLOW = ("SELECT COUNT(*) FROM (SELECT reflect('java.lang.Thread', 'sleep', "
        "CAST(500 AS BIGINT)) AS r FROM range(0, 200, 1, 200)) WHERE r IS NULL")

def test_ctrl_c_is_noted_not_raised() -> None:
    assert threading.current_thread() is threading.main_thread()  # signals land only there
    before = signal.getsignal(signal.SIGINT)
    with CtrlC() as ctrl_c:
        os.kill(os.getpid(), signal.SIGINT)
        assert ctrl_c.pressed.wait(5)  # and no KeyboardInterrupt reached this frame
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_during_progress_cancels_and_leaves_py4j_whole(spark, caplog) -> None:
    """Presses arrive every 7 ms for a second, so many of them land while the main
    thread is inside a status-tracker call; the statement is cancelled, no Py4J
    connection is torn, and the session answers at once afterwards."""
    assert threading.current_thread() is threading.main_thread()
    console = Console(file=io.StringIO(), force_terminal=True)
    job = Job(spark, lambda: spark.sql(SLOW).collect(), "slow")
    stop = threading.Event()

    def press() -> None:
        time.sleep(2.0)  # past PROGRESS_AFTER_S: the bar is drawing
        for _ in range(150):
            if stop.is_set():
                return
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.007)

    presser = threading.Thread(target=press, daemon=True)
    caplog.set_level(logging.INFO)
    before = signal.getsignal(signal.SIGINT)
    t0 = time.monotonic()
    with CtrlC():  # presses after the statement ends land here, not in pytest
        presser.start()
        try:
            with pytest.raises(Cancelled):
                job.run(progress_console=console)
        finally:
            stop.set()
            presser.join()
    assert time.monotonic() - t0 < 60  # 200 tasks of 0.5 s on two cores: 50 s uncancelled
    assert job.cancelled
    assert not [r for r in caplog.records if "KeyboardInterrupt" in r.getMessage()]
    assert spark.sql("SELECT 6 * 7 AS answer").collect()[0].answer == 42
    assert signal.getsignal(signal.SIGINT) is before


def test_a_statements_phase_lines_print_above_the_bars(spark) -> None:
    """Issue #51: what a backfill or ALTER says while it runs (dfsql.spark.progress.say,
    on the statement's worker thread) reaches the shell's console, once."""
    from dfsql.spark.progress import say

    console = Console(file=io.StringIO(), force_terminal=False, width=120)

    def work():
        say("backfill: replaying the history of scores_live from scores_history")
        return [tuple(r) for r in spark.sql("SELECT 1 AS x").collect()]

    assert Job(spark, work, "phases").run(progress_console=console) == [(1,)]
    assert console.file.getvalue().splitlines() == [
        "backfill: replaying the history of scores_live from scores_history"]
