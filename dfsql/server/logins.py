"""Back-off after failed logins (``--auth PLAIN``), per user and per client address.

Every password check costs a PBKDF2 hash (200 000 rounds, a tenth of a second of CPU):
a client that sends wrong passwords as fast as it can keeps both cores hashing, and a
real login waits its turn (113 failures in 25 s took a real login from 1.3 s to 18 s;
no lock was held, the CPU was: with 16 threads hashing on 2 cores another user's SASL
login took 3.4 s instead of 0.12 s). So a login is refused at once, before any hash,
while its user or its client address is locked:

* each attempt counts against its user and its address before the hash (so that many
  attempts at once cannot all pass the count); a success takes its user's count back
  to nothing and its own count off the address's;
* the ``user_free``-th failure in a row of a user locks that user for ``base`` seconds,
  each further one doubles that, up to ``cap``; ``address_free`` failures from one
  address lock the address alike (a higher number: one address may serve many users);
* a count is forgotten ``forget`` seconds after its last failure.

HiveServer2 has nothing of the kind. The lock of a user holds whoever tries it (an
attacker can keep a user out for ``cap`` seconds at a time: the price of not letting
them guess); other users' logins, and the connections' threads, are not held by it: a
refusal answers at once, and the check runs on the connection's own thread.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dfsql.server import tallies

#: failures before a user / an address is locked, the first lock, the longest (s), and
#: when a count with no failure since is forgotten (s)
USER_FREE, ADDRESS_FREE, BASE, CAP, FORGET = 3, 20, 1.0, 60.0, 900.0
#: the most users and addresses counted at once (beyond: the stalest are dropped)
KEPT = 100_000


class LoginRefused(Exception):
    """A login refused without a check: its user or address is locked (the message says
    which, and for how long)."""


@dataclass
class _Count:
    failures: int = 0
    until: float = 0.0  # locked until (monotonic)
    last: float = 0.0  # the last attempt (monotonic)


class Backoff:
    """Who may try a password now (:meth:`admit`), and what came of it."""

    def __init__(self, user_free: int = USER_FREE, address_free: int = ADDRESS_FREE,
                 base: float = BASE, cap: float = CAP, forget: float = FORGET,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.user_free, self.address_free = user_free, address_free
        self.base, self.cap, self.forget = base, cap, forget
        self.clock = clock
        self._counts: dict[tuple[str, str | bytes], _Count] = {}
        self._lock = threading.Lock()  # held for a look-up, never across a hash

    def admit(self, user: str, address: str) -> None:
        """Count an attempt by ``user`` from ``address``, or raise :class:`LoginRefused`
        (counting nothing) while either is locked."""
        now = self.clock()
        with self._lock:
            u, a = self._get(_user_key(user), now), self._get(("address", address), now)
            for count, what in ((u, f"user {user[:64]!r}"), (a, f"address {address}")):
                if count.until > now:
                    raise LoginRefused(f"too many failed logins for {what}: try again in "
                                       f"{math.ceil(count.until - now)} s")
            self._fail(u, self.user_free, now)
            self._fail(a, self.address_free, now)

    def succeeded(self, user: str, address: str) -> None:
        """The password was right: the user's failures are forgotten, and this attempt
        no longer counts against the address (its earlier failures still do)."""
        with self._lock:
            self._counts.pop(_user_key(user), None)
            a = self._counts.get(("address", address))
            if a is not None:
                a.failures = max(0, a.failures - 1)
                if a.failures < self.address_free:
                    a.until = 0.0

    def _get(self, key: tuple[str, str | bytes], now: float) -> _Count:
        count = self._counts.get(key)
        if count is not None and count.until <= now and now - count.last > self.forget:
            count = None  # long quiet: a new count
        if count is None:
            if len(self._counts) >= KEPT:
                self._drop(now)
            count = self._counts[key] = _Count()
        return count

    def _fail(self, count: _Count, free: int, now: float) -> None:
        count.failures += 1
        count.last = now
        if count.failures >= free:
            count.until = now + min(self.cap, self.base * 2 ** min(64, count.failures - free))

    def _drop(self, now: float) -> None:
        """Make room: the counts not locked go, the stalest first, half of them at most."""
        idle = sorted((c.last, k) for k, c in self._counts.items() if c.until <= now)
        for _, k in idle[:max(1, len(self._counts) // 2)]:
            del self._counts[k]


class Logins:
    """A password check behind a :class:`Backoff`: ``check(user, password, address)``."""

    def __init__(self, check: Callable[[str, str], bool], backoff: Backoff | None = None,
                 ) -> None:
        self._check = check
        self.backoff = backoff or Backoff()

    def check(self, user: str, password: str, address: str) -> bool:
        """Whether the password is ``user``'s; :class:`LoginRefused` while locked."""
        try:
            self.backoff.admit(user, address)
        except LoginRefused:
            tallies.login_failed()
            raise
        ok = self._check(user, password)
        if ok:
            self.backoff.succeeded(user, address)
        else:
            tallies.login_failed()
        return ok


def _user_key(user: str) -> tuple[str, bytes]:
    """A user's count's key: a digest of the name, so that a client sending names of 64 kB
    (SASL's limit) sets aside 16 bytes each, not the names."""
    return "user", hashlib.blake2b(user.encode("utf-8", "replace"), digest_size=16).digest()


def host_of(peer: str) -> str:
    """The address of a ``host:port`` peer (``[::1]:5`` and ``::1:5`` alike)."""
    return peer.rsplit(":", 1)[0].strip("[]") if ":" in peer else peer
