"""Where a connection past ``--max-connections`` waits for a slot (issue #52, item 11).

Closing every connection past the cap at once let 100 half-open sockets (connected,
never logging in) refuse a real client's only attempt for as long as they were held,
and an attacker who re-opened them as the login timeout closed them kept everyone out.
Now a connection that finds every slot taken is accepted and held here, unserved (no
thread, no read: a socket), and let in as slots free, **in arrival order**: sockets
re-opened after a client came wait behind it, so it is let in at the first slots the
login timeout frees. Its own login timeout starts when it is let in; it waits at most
``hold`` seconds (the login timeout) before it is closed, as a refusal was.

What waits is bounded: ``capacity`` connections in all (``--max-connections``: the
server's sockets stay within twice its cap), and half of them from one address, so one
host cannot fill the room ahead of everyone either.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable


class Lobby:
    """Connections waiting for a slot, oldest first."""

    def __init__(self, hold: float, capacity: int,
                 on_expired: Callable[[socket.socket, object], None]) -> None:
        self.hold = hold
        self.capacity = max(1, capacity)
        self.per_address = max(1, capacity // 2)
        self._on_expired = on_expired  # closes (and logs) one left waiting too long
        self._queue: deque[tuple[float, socket.socket, object]] = deque()
        self._from: dict[str, int] = {}  # address -> connections of its waiting
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()

    def __len__(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        threading.Thread(target=self._reap, name="dfsql-lobby", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        with self._lock:
            waiting, self._queue = list(self._queue), deque()
            self._from.clear()
        for _, conn, _ in waiting:
            _close(conn)

    def wait(self, conn: socket.socket, peer) -> bool:
        """Hold ``conn`` until a slot frees; False: the room (or its address's share of
        it) is full, and the caller refuses it."""
        host = _host(peer)
        with self._lock:
            if len(self._queue) >= self.capacity or \
                    self._from.get(host, 0) >= self.per_address:
                return False
            self._queue.append((time.monotonic() + self.hold, conn, peer))
            self._from[host] = self._from.get(host, 0) + 1
        self._wake.set()
        return True

    def next(self) -> tuple[socket.socket, object] | None:
        """The connection waiting longest (None: none waits)."""
        with self._lock:
            if not self._queue:
                return None
            _, conn, peer = self._queue.popleft()
            self._left(peer)
        return conn, peer

    def _left(self, peer) -> None:
        host = _host(peer)
        left = self._from.get(host, 0) - 1
        if left > 0:
            self._from[host] = left
        else:
            self._from.pop(host, None)

    def _reap(self) -> None:
        """Close the connections that waited ``hold`` seconds (the oldest first: all
        wait the same time, so the queue's head is always the next due)."""
        while not self._stop.is_set():
            self._wake.clear()  # before looking: a connection added after is seen
            late: list[tuple[socket.socket, object]] = []
            now = time.monotonic()
            with self._lock:
                while self._queue and self._queue[0][0] <= now:
                    _, conn, peer = self._queue.popleft()
                    self._left(peer)
                    late.append((conn, peer))
                due = self._queue[0][0] if self._queue else None
            for conn, peer in late:
                self._on_expired(conn, peer)
            self._wake.wait(None if due is None else max(0.01, due - time.monotonic()))


def _host(peer) -> str:
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


def _close(conn: socket.socket) -> None:
    try:
        conn.close()
    except OSError:
        pass
