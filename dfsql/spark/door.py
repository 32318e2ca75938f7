"""The one door through which dfsql reads a relation for a statement: every query text
dfsql hands Spark (:func:`sql`) and every table or view it opens by name (:func:`table`,
``WATERMARK FROM t``, ``TRY FROM t``, a stream's name) on a session goes through the
session's :class:`Door`.

In a program or the shell nothing is judged (:class:`Open`, the default): the door is
``spark.sql`` and ``spark.table``. The endpoint keeps a judging door on each client's
session (:func:`keep`; :mod:`dfsql.server.judge_door`), so that what dfsql reads for a
client passes the judgement the client's own text does, whichever call reads it — an
explicit seam in dfsql's code, not a replaced method of the session.

What dfsql reads besides, by path, are its own places, whose paths were judged with the
statement that named them: a continuous query's CHECKPOINT (its logs, its state store)
and INTO DIRECTORY (its panes), and the files a stream's checkpoint says it read.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Door(Protocol):
    """How a session's relations are read: a query text, or a table's name as Spark's
    ``spark.table`` parses it (a multipart identifier: ``format.`path``` included)."""

    def sql(self, spark: SparkSession, text: str) -> DataFrame: ...

    def table(self, spark: SparkSession, name: str) -> DataFrame: ...


class Open:
    """The door of a program's own session: Spark's, nothing judged."""

    def sql(self, spark: SparkSession, text: str) -> DataFrame:
        return spark.sql(text)

    def table(self, spark: SparkSession, name: str) -> DataFrame:
        return spark.table(name)


OPEN = Open()
#: the session's identity (:func:`_key`) -> its door, for the sessions that have one
_doors: dict[str, Door] = {}
_lock = threading.Lock()


def _key(spark: SparkSession) -> str:
    """The session as Spark knows it (several Python wrappers may stand for one): Spark
    Connect's session id, classic Spark's UUID."""
    sid = getattr(spark, "session_id", None)
    if isinstance(sid, str) and sid:
        return sid
    return str(spark._jsparkSession.sessionUUID())


def keep(spark: SparkSession, door: Door) -> None:
    """From now on ``spark``'s relations are read through ``door``."""
    with _lock:
        _doors[_key(spark)] = door


def release(spark: SparkSession) -> None:
    """``spark`` is closed: its door goes with it."""
    try:
        key = _key(spark)
    except Exception:  # noqa: BLE001 (a session whose JVM is gone has no door left)
        return
    with _lock:
        _doors.pop(key, None)


def of(spark: SparkSession) -> Door:
    """``spark``'s door (:data:`OPEN` when it was given none)."""
    if not _doors:  # a program's process: no py4j call
        return OPEN
    key = _key(spark)
    with _lock:
        return _doors.get(key, OPEN)


def sql(spark: SparkSession, text: str) -> DataFrame:
    """``spark.sql(text)``, through ``spark``'s door."""
    return of(spark).sql(spark, text)


def table(spark: SparkSession, name: str) -> DataFrame:
    """``spark.table(name)``, through ``spark``'s door."""
    return of(spark).table(spark, name)
