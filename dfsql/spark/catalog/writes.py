"""Statements that write a windowed result: CTAS, INSERT, CACHE TABLE (LANGUAGE.md §8a).

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

import re
from typing import TYPE_CHECKING

from dfsql.language.statement import Statement
from dfsql.spark.errors import spark_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: a name in SQL text, backticked or not, and one qualified by database (and catalog)
NAME = r"(?:`[^`]*`|[\w$]+)"
QUALIFIED_NAME = rf"{NAME}(?:\s*\.\s*{NAME})*"
#: CREATE OR REPLACE TABLE name / REPLACE TABLE name, up to the name's end
_REPLACE_HEAD = re.compile(rf"^(\s*)(CREATE\s+OR\s+REPLACE|REPLACE)(\s+TABLE\s+)({QUALIFIED_NAME})",
                           re.IGNORECASE)
#: CACHE [LAZY] TABLE name [OPTIONS ('storageLevel' 'LEVEL')] [AS]
_CACHE_HEAD = re.compile(rf"^\s*CACHE\s+(LAZY\s+)?TABLE\s+({NAME})\s*(?:OPTIONS\s*\((.*?)\)\s*)?",
                         re.IGNORECASE | re.DOTALL)
_STORAGE_LEVEL = re.compile(r"""['"]storageLevel['"]\s*=?\s*['"](\w+)['"]""", re.IGNORECASE)


def write(stmt: Statement, text: str, spark: SparkSession) -> DataFrame:
    """Run the write ``text`` (the statement over its windowed blocks' views)."""
    from pyspark.errors import AnalysisException

    cache = _CACHE_HEAD.match(text)
    if cache is not None:
        return _cache(stmt, text, cache, spark)
    with spark_errors(stmt.source):
        try:
            return spark.sql(text)
        except AnalysisException as exc:
            head = _REPLACE_HEAD.match(text)
            if head is None or "TABLE_OPERATION" not in (exc.getCondition() or ""):
                raise
    # the session catalog's file tables cannot be replaced in one step: drop, then create
    with spark_errors(stmt.source):
        spark.sql(f"DROP TABLE IF EXISTS {head.group(4)}")
        return spark.sql(head.group(1) + "CREATE" + head.group(3) + text[head.end(3):])


def _cache(stmt: Statement, text: str, head: re.Match, spark: SparkSession) -> DataFrame:
    """``CACHE [LAZY] TABLE t [OPTIONS (…)] AS q``: the temp view t of q's DataFrame,
    which keeps the windowed blocks' plans; :func:`finish` caches it."""
    with spark_errors(stmt.source):
        spark.sql(text[stmt.body_start:].rstrip().rstrip(";")).createTempView(
            head.group(2).strip("`"))
    return spark.sql("SELECT 1 AS ok WHERE false").drop("ok")


def finish(stmt: Statement, spark: SparkSession) -> None:
    """After the statement's own views are dropped (dropping a view uncaches every plan
    over it): cache the view ``CACHE TABLE`` made, at the storage level asked, filled
    now unless LAZY — as Spark does."""
    from pyspark import StorageLevel

    head = _CACHE_HEAD.match(stmt.text)
    if head is None:
        return
    name = head.group(2).strip("`")
    level = _STORAGE_LEVEL.search(head.group(3) or "")
    with spark_errors(stmt.source):
        if level is not None:
            spark.catalog.cacheTable(name, getattr(StorageLevel, level.group(1).upper()))
        else:
            spark.catalog.cacheTable(name)
        if not head.group(1):
            spark.table(name).count()
