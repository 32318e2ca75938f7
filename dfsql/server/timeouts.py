"""The endpoint's timeouts, behind one thread, as HiveServer2 has them: a statement's
deadline (the client's query timeout, or ``dfsql serve --statement-timeout`` when that is
shorter), and the idle sweeps that close an ended operation or a session with nothing
running once they went without a call for ``--idle-operation-timeout`` /
``--idle-session-timeout`` seconds. A handle swept away is remembered, so that a later
call with it is told why it is gone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from dfsql.server.operations import Operation, S, Session
from dfsql.server.tcli import ttypes as tt

log = logging.getLogger("dfsql.server")

#: how many swept handles are remembered, to say why a later call finds them gone
SWEPT_KEPT = 10_000
ENDED = (S.FINISHED_STATE, S.ERROR_STATE, S.CANCELED_STATE, S.CLOSED_STATE)


def run_until_deadline(op: Operation) -> None:
    """Run a synchronous statement (``runAsync`` false: the client waits on
    ExecuteStatement itself) so that its deadline answers the client even while it is
    planned: Spark's analysis and dfsql's planning run in the driver, where no job-group
    cancel reaches, and a thread in a py4j call cannot be interrupted (measured for #52:
    ``Thread.interrupt()`` of the JVM thread running ``sql()`` leaves the analysis to run
    to its end). So the statement runs on a thread of its own and the caller waits for the
    operation to end, which :meth:`Operation.time_out` does at the deadline; the thread
    runs on, its result discarded and its jobs cancelled as they start (the operation's
    ``_abandoned``, ``_cancel_group``). Without a deadline it runs here, as before."""
    if op.deadline is None:
        op.run()
        return
    threading.Thread(target=op.run, name=f"dfsql-statement-{op.group}", daemon=True).start()
    op.done.wait()


class Timeouts:
    """The deadlines and idle sweeps over the service's sessions and operations (the
    service's own dicts, read here, changed only through ``close_session`` and
    ``forget``)."""

    def __init__(self, statement_timeout: float, idle_session_timeout: float,
                 idle_operation_timeout: float, sessions: dict[bytes, Session],
                 operations: dict[bytes, Operation], close_session: Callable[[bytes], None],
                 forget: Callable[[Operation], None]) -> None:
        #: seconds (0: no limit): a statement's run, an ended operation's and a session's
        #: time without a call
        self.statement_timeout = statement_timeout
        self.idle_session_timeout = idle_session_timeout
        self.idle_operation_timeout = idle_operation_timeout
        self.sessions, self.operations = sessions, operations
        self.close_session, self.forget = close_session, forget
        #: GUID and secret of a swept handle -> why it went
        self._swept: OrderedDict[bytes, str] = OrderedDict()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a new deadline: the sweeper looks again
        self._sweeper = threading.Thread(target=self._sweep, name="dfsql-sweeper",
                                         daemon=True)

    def start(self) -> None:
        self._sweeper.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def set_deadline(self, op: Operation, client: float) -> None:
        """The statement's timeout, as HiveServer2 picks it: the client's queryTimeout,
        unless the server's --statement-timeout is shorter (or the client gave none)."""
        server = self.statement_timeout
        if server > 0 and (client <= 0 or client > server):
            seconds, source = server, f"{server:g} s timeout (dfsql serve --statement-timeout)"
        elif client > 0:
            seconds, source = client, f"{client:g} s timeout (the client's query timeout)"
        else:
            return
        op.timeout_source = source
        op.deadline = time.monotonic() + seconds
        self._wake.set()

    def why_gone(self, hid) -> str:
        """Why a handle is not found: the idle sweep's reason, told only to a caller that
        holds the whole handle (GUID and secret), else the same words for all."""
        key = (hid.guid or b"") + (hid.secret or b"") if hid else b""
        return self._swept.get(key, "closed, or from another server")

    def _sweep(self) -> None:
        """The one thread behind every timeout: it ends the statements whose deadline
        passed (their Spark jobs cancelled), and closes the operations and sessions that
        went without a call for longer than the idle timeouts, as HiveServer2 does: an
        ended operation (a running one is never idle), a session with nothing running."""
        idle = [t for t in (self.idle_session_timeout, self.idle_operation_timeout) if t > 0]
        # the idle sweeps look ten times per timeout, at most once a minute
        every = min([60.0] + [max(0.05, t / 10) for t in idle])
        while not self._stop.is_set():
            self._wake.clear()
            try:
                wait = self._sweep_once(every)
            except Exception:  # noqa: BLE001 (the sweeper must outlive one bad close)
                log.exception("the timeout sweep failed")
                wait = every
            self._wake.wait(max(0.01, wait))

    def _sweep_once(self, every: float) -> float:
        """One look at every operation and session; returns how long until the next."""
        now = time.monotonic()
        wait = every
        for op in list(self.operations.values()):
            if op.deadline is not None and not op.done.is_set():
                if now >= op.deadline:
                    op.time_out()
                else:
                    wait = min(wait, op.deadline - now)
            elif (self.idle_operation_timeout > 0 and op.state in ENDED
                  and now - op.used > self.idle_operation_timeout):
                self._sweep_operation(op)
        if self.idle_session_timeout > 0:
            for s in list(self.sessions.values()):
                if now - s.used > self.idle_session_timeout and not s.running():
                    self._remember(s.handle.sessionId, f"the session was closed after "
                                   f"{self.idle_session_timeout:g} s without a call "
                                   "(dfsql serve --idle-session-timeout)")
                    self.close_session(s.key)
        return wait

    def _sweep_operation(self, op: Operation) -> None:
        self._remember(op.handle.operationId, f"the operation was closed after "
                       f"{self.idle_operation_timeout:g} s without a call "
                       "(dfsql serve --idle-operation-timeout)")
        op.close()
        self.forget(op)

    def _remember(self, hid: tt.THandleIdentifier, why: str) -> None:
        self._swept[hid.guid + hid.secret] = why
        while len(self._swept) > SWEPT_KEPT:
            self._swept.popitem(last=False)
