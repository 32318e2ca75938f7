"""Statements that write a windowed result: CTAS, INSERT, CACHE TABLE (docs/reference.md#writing-results).

The planner hands over the statement's text with its windowed blocks replaced by the
views of their results, so Spark writes exactly the rows the query returns alone (a
replayed result: its whole changelog, retractions included). One thing Spark's session
catalog cannot do is ``CREATE OR REPLACE TABLE … AS`` for a file-format table (only v2
catalogs replace atomically); dfsql replaces it as ``DROP TABLE`` then ``CREATE TABLE``,
after the windowed blocks are planned, so a mistake in them leaves the old table in place.
``CACHE TABLE t AS q`` keeps q's text in Spark, which names the blocks' views (dropped
once the statement is planned): dfsql makes the temp view from q's DataFrame instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.language.scan import Token, name_end, splice
from dfsql.language.statement import Statement
from dfsql.spark import door
from dfsql.spark.catalog import database_tables
from dfsql.spark.errors import spark_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class _Head:
    """A write's head as the statement's top-level tokens say it."""

    cache: bool = False
    lazy: bool = False
    #: where the written table's (possibly qualified) name starts and ends in the text
    name: tuple[int, int] = (0, 0)
    #: CACHE's OPTIONS: the storage level asked for, as written
    level: str | None = None
    #: CREATE OR REPLACE / REPLACE TABLE: the span of the words before TABLE
    replace: tuple[int, int] | None = None


def _head(stmt: Statement) -> _Head:
    """``CACHE [LAZY] TABLE t [OPTIONS (…)]`` or ``[CREATE OR] REPLACE TABLE t``, read
    from the statement's tokens before its query (a comment, a quoted name or a string
    is never taken for a word of the head)."""
    tokens = stmt.scanned.tokens if stmt.scanned is not None else []
    head = [t for t in tokens if t.start < stmt.body_start]
    top = [t for t in head if t.depth == 0]
    if not top:
        return _Head()
    at = next((k for k, t in enumerate(top) if t.is_word("TABLE")), None)
    if at is None or at + 1 >= len(top):
        return _Head()
    end = name_end(top, at + 1)
    name = (top[at + 1].start, top[end - 1].end) if end > at + 1 else (0, 0)
    if top[0].is_word("CACHE"):
        return _Head(cache=True, lazy=top[1].is_word("LAZY"), name=name,
                     level=_storage_level(head, top, end))
    words = [t.upper for t in top[:at]]
    if words in (["CREATE", "OR", "REPLACE"], ["REPLACE"]):
        return _Head(name=name, replace=(top[0].start, top[at].start))
    return _Head(name=name)


def _storage_level(head: list[Token], top: list[Token], end: int) -> str | None:
    """``OPTIONS ('storageLevel' [=] 'LEVEL', …)``'s level (the key in any case)."""
    if end >= len(top) or not top[end].is_word("OPTIONS") or end + 1 >= len(top):
        return None
    opened = top[end + 1]
    inside = [t for t in head if t.start > opened.start and t.depth > opened.depth]
    for k, t in enumerate(inside[:-1]):
        if t.kind == "string" and t.text[1:-1].lower() == "storagelevel":
            value = inside[k + 2] if inside[k + 1].text == "=" and k + 2 < len(inside) \
                else inside[k + 1]
            level = value.text[1:-1]
            if value.kind == "string" and level.replace("_", "").isalnum():
                return level
    return None


def write(stmt: Statement, text: str, spark: SparkSession) -> DataFrame:
    """Run the write ``text`` (the statement over its windowed blocks' views)."""
    from pyspark.errors import AnalysisException

    into = database_tables.write_target(stmt, spark)
    if into is not None:  # a database table: the same rows, by COPY
        return database_tables.write(stmt, text, spark, into)
    head = _head(stmt)
    if head.cache:
        return _cache(stmt, text, head, spark)
    with spark_errors(stmt.source):
        try:
            return door.sql(spark, text)
        except AnalysisException as exc:
            if head.replace is None or "TABLE_OPERATION" not in (exc.getCondition() or ""):
                raise
    # the session catalog's file tables cannot be replaced in one step: drop, then create
    # (the head's words before TABLE become CREATE, offsets kept)
    with spark_errors(stmt.source):
        door.sql(spark, f"DROP TABLE IF EXISTS {text[head.name[0]:head.name[1]]}")
        return door.sql(spark, splice(text, [(*head.replace, "CREATE ")]))


def _cache(stmt: Statement, text: str, head: _Head, spark: SparkSession) -> DataFrame:
    """``CACHE [LAZY] TABLE t [OPTIONS (…)] AS q``: the temp view t of q's DataFrame,
    which keeps the windowed blocks' plans; :func:`finish` caches it. (q is the text
    with the head blanked: Spark's positions are the user's.)"""
    with spark_errors(stmt.source):
        door.sql(spark, splice(text, [(0, stmt.body_start, "")])).createTempView(
            text[head.name[0]:head.name[1]].strip("`"))
    return door.sql(spark, "SELECT 1 AS ok WHERE false").drop("ok")


def finish(stmt: Statement, spark: SparkSession) -> None:
    """After the statement's own views are dropped (dropping a view uncaches every plan
    over it): cache the view ``CACHE TABLE`` made, at the storage level asked, filled
    now unless LAZY — as Spark does."""
    from pyspark import StorageLevel

    head = _head(stmt)
    if not head.cache:
        return
    name = stmt.text[head.name[0]:head.name[1]].strip("`")
    with spark_errors(stmt.source):
        if head.level is not None:
            spark.catalog.cacheTable(name, getattr(StorageLevel, head.level.upper()))
        else:
            spark.catalog.cacheTable(name)
        if not head.lazy:
            door.table(spark, name).count()
