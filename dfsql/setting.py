"""A Spark setting changed for a block and restored after it: the one save/restore
of a setting dfsql changes on a session it does not own.

A module of its own, below :mod:`dfsql.session` (which offers it by that name) and the
catalog (:mod:`dfsql.warehouse`, which the session attaches), so both read the one
definition without a circle."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def setting_while(spark, key: str, value: str | None) -> Iterator[None]:
    """The session on ``key`` = ``value`` inside the block, then on what it was before
    (unset if it was); ``None`` changes nothing. A query takes its own copy of the
    settings when it starts, so this picks the settings of one query's start."""
    before = spark.conf.get(key, None) if value is not None else None
    if value is None or before == value:
        yield
        return
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
