"""Notice when the Spark behind ``dfsql serve`` is gone (issue #24).

Every client session runs on one driver JVM. If that JVM dies (``kill -9``, a
``System.exit`` reached through SQL, the JVM's own exit on an out-of-memory error) the
Python server would keep accepting connections and fail every session with ``Connection
refused``: a zombie a supervisor cannot see. PySpark cannot start a second SparkContext
in a process whose first JVM died (its gateway, the ``SparkContext._active_spark_context``
class state and every session's Java objects point at the dead one), so the endpoint
does not restart Spark in place; it exits non-zero with a one-line reason and leaves the
restart to its supervisor (systemd, Kubernetes), which starts a clean process.

What is watched, four times a second:

* the driver JVM pyspark launched: its ``Popen`` handle (``gateway.proc``, the
  ``spark-submit`` command, which ``exec``\\ s the JVM, so its pid is the JVM's): an exit
  status is the reason;
* every few seconds, the JVM's SparkContext through py4j (``isStopped``): a JVM that lives
  on with its context stopped fails every statement as surely as a dead one; a broken
  py4j connection also covers a JVM this process did not launch
  (``PYSPARK_GATEWAY_PORT``, when ``spark-submit`` started the Python side).

Over Spark Connect (``--remote``, ``DFSQL_SPARK_REMOTE``) the JVM is the Connect server's
and keeping it alive is that server's supervisor's job: nothing is watched here.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from dfsql.session import spark_context

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dfsql.server")

#: ``dfsql serve``'s exit status when Spark died under it (sysexits' EX_UNAVAILABLE)
EXIT_SPARK_DIED = 69
#: Spark's exit code for an uncaught OutOfMemoryError (``SparkExitCode.OOM``)
SPARK_OOM_EXIT = 52


#: what a statement that was running when Spark died should tell its client (SQLSTATE
#: 08006, connection failure), rather than py4j's "Error while sending or receiving"
SPARK_GONE = ("Spark's JVM is gone (killed, exited or out of memory): this endpoint is "
              "stopping; reconnect once it is back", "08006")


def spark_gone(e: BaseException) -> bool:
    """Whether a statement failed because Spark's JVM went away: py4j's network errors,
    or a refused or reset socket to it (the JVM's gateway or result server), anywhere in
    the exception's chain; or py4j's bare "An error occurred while calling oN.m" (no Java
    exception: what a call gets when the JVM exits under it, as ``System.exit`` does)
    while the JVM this process launched has exited."""
    from py4j.protocol import Py4JError, Py4JNetworkError

    seen: set[int] = set()
    bare = False
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (Py4JNetworkError, ConnectionRefusedError, ConnectionResetError,
                            BrokenPipeError)):
            return True
        bare = bare or type(cur) is Py4JError
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    if not bare:
        return False
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return False
    try:  # the call fails a moment before the JVM is reaped
        proc.wait(1.0)
    except subprocess.TimeoutExpired:
        return False
    return True


def jvm_process(spark: SparkSession) -> subprocess.Popen | None:
    """The driver JVM this process launched, or None: Spark Connect (no local JVM), or a
    JVM pyspark did not launch itself (``PYSPARK_GATEWAY_PORT``)."""
    sc = spark_context(spark)
    if sc is None:
        return None
    return getattr(getattr(sc, "_gateway", None), "proc", None)


def exit_status_text(status: int) -> str:
    """A Popen return code in words: ``exit status 137, killed by SIGKILL``."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"exit status {128 - status}, killed by {name}"
    if status == SPARK_OOM_EXIT:
        return f"exit status {status}, out of memory"
    return f"exit status {status}"


class Watchdog:
    """A daemon thread that calls ``on_death(reason)`` once, when Spark is gone."""

    def __init__(self, proc: subprocess.Popen | None, sc, on_death: Callable[[str], None],
                 interval: float = 0.25, ping_every: int = 20) -> None:
        self.proc = proc  # the driver JVM, when this process launched it
        self.sc = sc  # its SparkContext (None over Spark Connect: nothing to watch)
        self.on_death = on_death
        # waitpid every quarter second costs nothing and narrows the moment a session can
        # still reach the server while Spark is already gone
        self.interval = interval
        self.ping_every = ping_every  # the py4j check, every this many intervals (5 s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dfsql-watchdog", daemon=True)

    @classmethod
    def of(cls, spark: SparkSession, on_death: Callable[[str], None]) -> Watchdog:
        """The watchdog of a session's Spark (see the module doc for what it watches)."""
        return cls(jvm_process(spark), spark_context(spark), on_death)

    @property
    def watching(self) -> bool:
        """False over Spark Connect (see the module doc)."""
        return self.sc is not None

    def start(self) -> Watchdog:
        if self.watching:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        tick = 0
        while not self._stop.wait(self.interval):
            tick += 1
            reason = self.check(ping=tick % self.ping_every == 0)
            if reason is not None and not self._stop.is_set():
                self.on_death(reason)
                return

    def check(self, ping: bool = True) -> str | None:
        """Why Spark is gone, or None while it serves."""
        if (reason := self._exited()) is not None:
            return reason
        if not ping or self.sc is None:
            return None
        try:
            jsc = self.sc._jsc
            stopped = jsc is None or jsc.sc().isStopped()
        except Exception as e:  # noqa: BLE001 (py4j: the JVM's socket is gone)
            if self.proc is not None:
                try:  # a dying JVM closes its socket a moment before it is reaped
                    self.proc.wait(2)
                except subprocess.TimeoutExpired:
                    pass
            detail = str(e).strip().splitlines()
            return self._exited() or ("lost the connection to Spark's JVM ("
                                      + (detail[0] if detail else type(e).__name__) + ")")
        if stopped:
            return "Spark's context was stopped (its JVM runs on but no job can)"
        return None

    def _exited(self) -> str | None:
        if self.proc is None:
            return None
        status = self.proc.poll()
        if status is None:
            return None
        return f"Spark's JVM (pid {self.proc.pid}) died ({exit_status_text(status)})"
