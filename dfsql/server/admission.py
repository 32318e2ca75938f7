"""Who holds a connection slot, and for how long before logging in (issue #31): the
login timeout and the per-user connection cap.

``--max-connections`` counts every open connection, logged in or not, so 100 sockets that
send four bytes and stop locked every real client out for ``--idle-connection-timeout``
(an hour). A connection now has ``--login-timeout`` seconds (HiveServer2's
``hive.server2.thrift.login.timeout``: 20) from when it is let in (one past the cap
waits for a slot first, as long again at most: :mod:`dfsql.server.lobby`) to log in —
finish the SASL handshake, or, without SASL, have its first call read whole; over HTTP,
have its first request read whole and its credentials accepted. Past that one thread
shuts its socket, whatever the client trickles meanwhile (a deadline, not a socket
timeout a byte a second would renew). After the login ``--idle-connection-timeout`` applies as before,
and a user (SASL's or HTTP Basic's; NOSASL has none) may hold at most
``--max-connections-per-user`` connections, so one account cannot take every slot
either.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

log = logging.getLogger("dfsql.server")

#: the defaults of ``dfsql serve --login-timeout / --max-connections-per-user``
LOGIN_TIMEOUT, MAX_CONNECTIONS_PER_USER = 20.0, 20


class Admission:
    """The login deadlines of the connections not yet logged in, and the connections
    each logged-in user holds."""

    def __init__(self, login_timeout: float, per_user: int) -> None:
        self.login_timeout = login_timeout
        self.per_user = per_user
        self._pending: dict[socket.socket, tuple[float, str]] = {}  # -> (deadline, peer)
        self._users: dict[str, int] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.login_timeout > 0:
            self._thread = threading.Thread(target=self._reap, name="dfsql-login-timeout",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def arrived(self, conn: socket.socket, peer: str) -> None:
        """A connection was let in (given a slot): its login deadline starts now."""
        if self.login_timeout > 0:
            with self._lock:
                self._pending[conn] = (time.monotonic() + self.login_timeout, peer)

    def logged_in(self, conn: socket.socket, user: str) -> str | None:
        """The connection logged in as ``user`` ("": no user, NOSASL): its deadline ends.
        Returns why it may not stay (the user's connections at the limit), else None."""
        with self._lock:
            self._pending.pop(conn, None)
            if not user:
                return None
            have = self._users.get(user, 0)
            if self.per_user > 0 and have >= self.per_user:
                return (f"user {user[:64]!r} already has {have} connections open, the "
                        "limit (dfsql serve --max-connections-per-user)")
            self._users[user] = have + 1
        return None

    def left(self, conn: socket.socket, user: str | None) -> None:
        """The connection ended (``user``: the one it counted for, if any)."""
        with self._lock:
            self._pending.pop(conn, None)
            if user:
                left = self._users.get(user, 0) - 1
                if left > 0:
                    self._users[user] = left
                else:
                    self._users.pop(user, None)

    def _reap(self) -> None:
        """Shut the sockets whose deadline passed (their threads then end them); a
        new connection's deadline is always the latest, so waiting for the earliest
        known one is enough."""
        while not self._stop.is_set():
            now = time.monotonic()
            late: list[tuple[socket.socket, str]] = []
            with self._lock:
                for conn, (deadline, peer) in list(self._pending.items()):
                    if deadline <= now:
                        del self._pending[conn]
                        late.append((conn, peer))
                nxt = min((d for d, _ in self._pending.values()),
                          default=now + self.login_timeout)
            for conn, peer in late:
                log.info("closed the connection from %s: not logged in within %g s "
                         "(--login-timeout)", peer, self.login_timeout)
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._wake.wait(max(0.01, nxt - time.monotonic()))
