"""Spark dies under ``dfsql serve`` (issue #24, item 2): the endpoint notices within
seconds, says why in one line and exits non-zero — never a process that accepts
connections and fails every session.

The end-to-end test starts ``dfsql serve`` as a command, kills its driver JVM (found as
the ``java`` child of the serve process in /proc) with SIGKILL, and times the exit. The
watchdog's own tests use real processes (``sleep``, ``sh -c 'exit 52'``) as the JVM and
the run's real SparkContext as the healthy case.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dfsql.server.watchdog import (
    EXIT_SPARK_DIED,
    Watchdog,
    exit_status_text,
    jvm_process,
    spark_gone,
)
from tests.server.restarts import ROOT, _free_port, _wait_for


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of the live children of ``pid``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
        if int(ppid) == pid and state != "Z":
            found.append((int(entry.name), comm))
    return found


# ------------------------------------------------------------------ the watchdog alone


def test_exit_status_in_words() -> None:
    assert exit_status_text(-signal.SIGKILL) == "exit status 137, killed by SIGKILL"
    assert exit_status_text(-signal.SIGTERM) == "exit status 143, killed by SIGTERM"
    assert exit_status_text(52) == "exit status 52, out of memory"
    assert exit_status_text(3) == "exit status 3"
    assert exit_status_text(-200) == "exit status 328, killed by signal 200"


def test_a_statement_that_lost_its_jvm_is_recognised() -> None:
    from py4j.protocol import Py4JError, Py4JNetworkError

    assert spark_gone(Py4JNetworkError("Error while sending or receiving"))
    assert spark_gone(ConnectionRefusedError(111, "Connection refused"))
    try:  # wrapped, as pyspark re-raises some
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError as inner:
            raise Py4JError("An error occurred while calling o42.sql") from inner
    except Py4JError as outer:
        assert spark_gone(outer)
    # a statement's own failure is not Spark dying
    assert not spark_gone(ValueError("bad"))


def test_a_bare_py4j_error_is_spark_gone_only_when_the_jvm_exited(monkeypatch) -> None:
    """``System.exit`` under a call: py4j answers "An error occurred while calling ..."
    with no network error in the chain; the JVM's exit decides."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext

    class Gateway:
        def __init__(self, proc) -> None:
            self.proc = proc

    bare = Py4JError("An error occurred while calling o115.getResult.")
    exited = subprocess.Popen(["sh", "-c", "exit 3"])
    exited.wait()
    monkeypatch.setattr(SparkContext, "_gateway", Gateway(exited))
    assert spark_gone(bare)
    alive = subprocess.Popen(["sleep", "60"])
    try:
        monkeypatch.setattr(SparkContext, "_gateway", Gateway(alive))
        assert not spark_gone(bare)
    finally:
        alive.kill()
        alive.wait()
    monkeypatch.setattr(SparkContext, "_gateway", None)  # no local JVM (Spark Connect)
    assert not spark_gone(bare)


def test_watchdog_reports_a_killed_process_once() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    reasons: list[str] = []
    called = threading.Event()

    def died(reason: str) -> None:
        reasons.append(reason)
        called.set()

    dog = Watchdog(proc, object(), died, interval=0.05).start()
    try:
        time.sleep(0.3)
        assert reasons == []  # alive: nothing said
        proc.kill()
        assert called.wait(5)
        time.sleep(0.3)  # and not again
        assert reasons == [f"Spark's JVM (pid {proc.pid}) died "
                           "(exit status 137, killed by SIGKILL)"]
    finally:
        dog.stop()
        proc.kill()
        proc.wait()


def test_watchdog_reads_an_out_of_memory_exit() -> None:
    proc = subprocess.Popen(["sh", "-c", "exit 52"])
    proc.wait()
    assert Watchdog(proc, None, lambda r: None).check(ping=False) == (
        f"Spark's JVM (pid {proc.pid}) died (exit status 52, out of memory)")


class _Context:
    """What the watchdog reads of a SparkContext: ``_jsc`` (None once stopped from Python,
    as pyspark leaves it) and, through it, the JVM's ``sc().isStopped()``."""

    def __init__(self, jsc) -> None:
        self._jsc = jsc


class _JavaContext:
    def __init__(self, stopped: bool = False, error: Exception | None = None) -> None:
        self.stopped, self.error = stopped, error

    def sc(self) -> _JavaContext:
        if self.error is not None:
            raise self.error
        return self

    def isStopped(self) -> bool:  # noqa: N802 (Java's name)
        return self.stopped


def test_a_stopped_context_or_a_lost_gateway_is_reported() -> None:
    from py4j.protocol import Py4JNetworkError

    def check(sc) -> str | None:
        return Watchdog(None, sc, lambda r: None).check(ping=True)

    assert check(_Context(_JavaContext())) is None
    assert check(_Context(None)) == check(_Context(_JavaContext(stopped=True))) == (
        "Spark's context was stopped (its JVM runs on but no job can)")
    assert check(_Context(_JavaContext(error=Py4JNetworkError("Answer from Java side is "
                                                              "empty")))) == (
        "lost the connection to Spark's JVM (Answer from Java side is empty)")
    # between pings only the process is looked at
    assert Watchdog(None, _Context(None), lambda r: None).check(ping=False) is None


def test_a_lost_gateway_names_the_exit_when_the_jvm_is_known() -> None:
    """py4j notices first (the socket closes), the process is reaped a moment later: the
    reason is still the exit status."""
    from py4j.protocol import Py4JNetworkError

    proc = subprocess.Popen(["sh", "-c", "sleep 0.3; exit 3"])
    sc = _Context(_JavaContext(error=Py4JNetworkError("Error while sending or receiving")))
    assert Watchdog(proc, sc, lambda r: None).check(ping=True) == (
        f"Spark's JVM (pid {proc.pid}) died (exit status 3)")


def test_nothing_is_watched_without_a_context() -> None:
    """Spark Connect: no SparkContext here, the JVM is the Connect server's."""
    dog = Watchdog(None, None, lambda r: pytest.fail(r)).start()
    assert not dog.watching
    assert dog.check() is None


def test_a_healthy_spark_is_not_reported(spark) -> None:
    """The run's real Spark: its JVM found, alive, and its context answers the ping."""
    proc = jvm_process(spark)
    if proc is None:
        pytest.skip("this run's JVM was not launched by this process")
    assert proc.poll() is None
    assert Watchdog.of(spark, lambda r: None).check(ping=True) is None


# ------------------------------------------------------------------ dfsql serve


def test_serve_exits_when_its_jvm_is_killed(tmp_path) -> None:
    from pyhive import hive

    port = _free_port()
    log = tmp_path / "serve.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               DFSQL_WAREHOUSE=str(tmp_path / "warehouse"),
               DFSQL_SPARK_LOG=str(tmp_path / "spark.log"))
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dfsql.cli", "serve", "--port", str(port),
                                 "--auth", "NOSASL"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        _wait_for(log, "dfsql serving", proc, 120)
        conn = hive.connect(host="127.0.0.1", port=port, auth="NOSASL")
        cur = conn.cursor()
        cur.execute("SELECT 40 + 2 AS answer")
        assert cur.fetchall() == [(42,)]

        # a statement in flight when the JVM dies: it must end (with an error), not hang
        outcome: list[BaseException | object] = []

        def long_query() -> None:
            c = hive.connect(host="127.0.0.1", port=port, auth="NOSASL").cursor()
            try:
                c.execute("SELECT count(*) FROM range(100000000000)")
                outcome.append(c.fetchall())
            except BaseException as e:  # noqa: BLE001 (what the client saw is the point)
                outcome.append(e)

        runner = threading.Thread(target=long_query, daemon=True)
        runner.start()
        time.sleep(3)  # its job is running
        assert runner.is_alive()

        java = [pid for pid, comm in _children(proc.pid) if comm == "java"]
        assert len(java) == 1, _children(proc.pid)
        jvm = java[0]
        killed = time.monotonic()
        os.kill(jvm, signal.SIGKILL)
        status = proc.wait(30)
        took = time.monotonic() - killed
        print(f"\nSIGKILL of Spark's JVM → dfsql serve exited {status} after {took:.2f} s")
        assert status == EXIT_SPARK_DIED == 69
        assert took < 120  # the watchdog looks every 0.25 s; generous for a loaded machine

        lines = log.read_text().splitlines()
        reason = (f"dfsql serve: Spark's JVM (pid {jvm}) died (exit status 137, killed by "
                  f"SIGKILL); exiting with status 69")
        assert lines.count(reason) == 1, lines
        assert not any("Traceback" in line for line in lines), lines

        runner.join(30)
        assert not runner.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], Exception), outcome
        print(f"the statement in flight got: {outcome[0]!r}"[:400])
        assert "Spark's JVM is gone" in str(outcome[0])

        # nothing listens any more: a supervisor's restart can take the port
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert not Path(f"/proc/{jvm}").exists()  # reaped, no zombie left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


#: a legitimate statement slow to plan (Spark's analyser builds a projection per window:
#: six windows at the --max-windows-per-row bound, tens of seconds on a loaded machine)
SLOW_TO_PLAN = "SELECT COUNT(*) FROM (" + " UNION ALL ".join(
    f"SELECT window(ts, '1000 seconds', '1 second') AS w, {i} AS i FROM VALUES "
    "(TIMESTAMP '2026-01-01 00:00:00') AS t(ts)" for i in range(6)) + ") AS q"


def test_serve_stops_on_sigterm_while_a_statement_is_planned(tmp_path) -> None:
    """SIGTERM, as a supervisor stops a service: the server stops accepting, ends its
    sessions and Spark, and exits 0 within seconds, with its JVM gone, even while a
    client's statement is stuck in Spark's analysis (a py4j call no cancel reaches)."""
    from pyhive import hive

    port = _free_port()
    log = tmp_path / "serve.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               DFSQL_WAREHOUSE=str(tmp_path / "warehouse"),
               DFSQL_SPARK_LOG=str(tmp_path / "spark.log"))
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dfsql.cli", "serve", "--port", str(port),
                                 "--auth", "NOSASL", "--statement-timeout", "600"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        _wait_for(log, "dfsql serving", proc, 120)
        java = [pid for pid, comm in _children(proc.pid) if comm == "java"]
        assert len(java) == 1, _children(proc.pid)
        outcome: list[BaseException | object] = []
        # connected (its USE run) and warmed before: the slow part is the statement's
        c = hive.connect(host="127.0.0.1", port=port, auth="NOSASL").cursor()
        c.execute("SELECT 1 AS one")
        assert c.fetchall() == [(1,)]

        def planned() -> None:
            try:
                c.execute(SLOW_TO_PLAN)
                outcome.append(c.fetchall())
            except BaseException as e:  # noqa: BLE001 (what the client saw is the point)
                outcome.append(e)

        runner = threading.Thread(target=planned, daemon=True)
        runner.start()
        time.sleep(4)  # in Spark's analysis
        assert runner.is_alive() and not outcome
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        status = proc.wait(60)
        took = time.monotonic() - sent
        print(f"\nSIGTERM mid-planning → dfsql serve exited {status} after {took:.2f} s")
        assert took < 30, took
        deadline = time.monotonic() + 10
        while Path(f"/proc/{java[0]}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{java[0]}").exists(), "the JVM outlived the server"
        assert status == 0, log.read_text()
        assert "stopping on SIGTERM" in log.read_text()
        runner.join(30)
        assert not runner.is_alive() and len(outcome) == 1
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
