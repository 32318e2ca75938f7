"""``dfsql serve`` stops on SIGTERM (issue #52), as a supervisor (systemd, Kubernetes)
stops a service: it stops accepting, ends every session and its running statements
(their Spark jobs cancelled), stops the continuous queries and the SparkContext, and
exits 0; the driver JVM it launched goes with it.

Without a handler Python dies at once on SIGTERM and leaves its JVM to notice the closed
pipe of its standard input and run ``System.exit``: its shutdown hooks (Spark's own
``SparkContext.stop``) then run in a JVM that may be busy for minutes in a statement's
analysis, its heap full (the #52 report: 4.7 GB, no answer for 5+ minutes). So the
handler stops the server in the main thread (a signal is handled there, between the
bytecodes of ``serve_forever``'s short waits, never inside a py4j call of a statement's
thread), and a backstop ends both processes after :data:`GRACE` seconds should a step
of the stop hang on what is left of Spark: the JVM killed, then this process.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

from dfsql.server.watchdog import jvm_process

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dfsql.server.server import Server

log = logging.getLogger("dfsql.server")

#: seconds the orderly stop may take before the backstop kills the JVM and exits
GRACE = 15.0
#: the exit status when the backstop had to end it (128 + SIGTERM, as a shell reports it)
EXIT_TERMINATED = 143


def stop_on_sigterm(server: Server, spark: SparkSession) -> None:
    """From now on SIGTERM stops ``server`` (SIGINT stays Python's KeyboardInterrupt,
    which ``serve_forever`` takes the same way): ``serve_forever`` returns once it has
    stopped, and the caller then ends Spark (:func:`end_spark`)."""
    proc = jvm_process(spark)

    def on_term(signum: int, _frame) -> None:
        print(f"dfsql serve: stopping on {signal.Signals(signum).name}", file=sys.stderr,
              flush=True)
        backstop = threading.Timer(GRACE, _kill, (proc,))
        backstop.daemon = True
        backstop.start()
        server.request_stop()

    signal.signal(signal.SIGTERM, on_term)


def end_spark(spark: SparkSession, seconds: float = 5.0) -> None:
    """Stop the SparkContext and see the JVM this process launched exit: its standard
    input closed (the JVM's own cue to exit), then killed if it has not within
    ``seconds``."""
    proc = jvm_process(spark)
    try:
        spark.stop()
    except Exception:  # noqa: BLE001 (a JVM already gone: nothing to stop)
        log.debug("stopping Spark failed", exc_info=True)
    if proc is None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(seconds)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait(seconds)


def _kill(proc: subprocess.Popen | None) -> None:
    """The backstop: the orderly stop hung. The JVM first (never left orphaned), then
    this process, whatever its threads are blocked in."""
    print(f"dfsql serve: the stop took over {GRACE:g} s; killing Spark's JVM and exiting "
          f"with status {EXIT_TERMINATED}", file=sys.stderr, flush=True)
    if proc is not None:
        try:
            proc.kill()
            proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
    os._exit(EXIT_TERMINATED)
