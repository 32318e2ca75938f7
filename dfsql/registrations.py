"""The owner of :func:`dfsql.register`'s registrations: each belongs to its SparkSession
(a registered source is a temp view of one session, and so are its defaults; the
endpoint's clients each have a session of their own) and goes when that session stops,
so a process that opens and stops sessions does not keep their defaults forever."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dfsql.language.registered import Registration


def session_id(spark: SparkSession) -> str:
    """A session's identity as Spark knows it (the Python object may be one of several
    wrappers of the same session): Spark Connect's session id, classic Spark's UUID."""
    sid = getattr(spark, "session_id", None)
    if isinstance(sid, str) and sid:
        return sid
    return str(spark._jsparkSession.sessionUUID())


def stopped(spark: SparkSession) -> bool:
    """Whether ``spark`` has stopped: Spark Connect says so (``is_stopped``); a classic
    session's context has no JVM context left once stopped."""
    said = getattr(spark, "is_stopped", None)
    if isinstance(said, bool):
        return said
    sc = getattr(spark, "_sc", None)
    return sc is not None and getattr(sc, "_jsc", None) is None


class Registrations:
    """The registrations of each live session, by its id (the id, not the Python object:
    wrappers of one session share them). The session is held beside them only to see it
    stop: every read and write first drops the registrations of stopped sessions."""

    def __init__(self) -> None:
        self._by_session: dict[str, tuple[SparkSession, dict[str, Registration]]] = {}
        self._lock = threading.Lock()

    def of(self, spark: SparkSession | None) -> dict[str, Registration]:
        """The registrations of ``spark`` (empty for None, or a session without any)."""
        if spark is None:
            return {}
        with self._lock:
            self._prune()
            held = self._by_session.get(session_id(spark))
        return {} if held is None else held[1]

    def add(self, spark: SparkSession, reg: Registration) -> None:
        """Record ``reg`` in ``spark``'s registrations (a name registered again wins)."""
        with self._lock:
            self._prune()
            sid = session_id(spark)
            held = self._by_session.setdefault(sid, (spark, {}))
            held[1][reg.name.lower()] = reg

    def sessions(self) -> int:
        """How many sessions hold registrations now (stopped ones pruned first)."""
        with self._lock:
            self._prune()
            return len(self._by_session)

    def _prune(self) -> None:
        for sid in [sid for sid, (s, _) in self._by_session.items() if stopped(s)]:
            del self._by_session[sid]


#: this process's registrations (:func:`dfsql.register`), for its whole life
REGISTRATIONS = Registrations()
