"""The public API: ``sql``, ``explain``, ``register``.

Plain Spark SQL goes to ``spark.sql`` untouched (same DataFrame, same errors mapped to
DfsqlError). A statement with windowed blocks is planned by :mod:`dfsql.spark.planner`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.language import Statement, parse_statement
from dfsql.language.rewrite import rewrite
from dfsql.spark.errors import quiet_spark_loggers, spark_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Registration:
    """Defaults for the extension clauses of a registered source (LANGUAGE.md §8)."""

    name: str
    event_time: str | None = None
    processing_time: str | None = None
    watermark: str | None = None


_REGISTRY: dict[str, Registration] = {}


def _spark(spark: SparkSession | None) -> SparkSession:
    if spark is not None:
        return spark
    from dfsql.session import session

    return session()


def sql(text: str, spark: SparkSession | None = None) -> DataFrame:
    """Run one statement. Plain SQL returns exactly what ``spark.sql`` returns."""
    stmt = parse_statement(text)
    quiet_spark_loggers()
    if not stmt.windowed:
        s = _spark(spark)
        with spark_errors(stmt.source, text=text):
            return s.sql(text)
    s = _spark(spark)
    if stmt.kind == "explain":
        return s.createDataFrame([(explain_statement(stmt),)], "plan string")
    from dfsql.spark.planner import execute

    return execute(stmt, s, _REGISTRY)


def explain_statement(stmt: Statement) -> str:
    """The windowed blocks of a statement: clauses, trigger tree and the three stages."""
    if not stmt.windowed:
        return "plain Spark SQL: passed to Spark unchanged"
    out = []
    for b in stmt.blocks:
        st = rewrite(b, stmt.source)
        head = f"== windowed block {b.index}" + (" (the statement)" if b is stmt.top else
                                                  f" (registered as {b.view_name})")
        out.append(f"{head} ==\n{b.clauses}\n{st.explain()}")
    return "\n\n".join(out)


def explain(text: str) -> str:
    """Show how dfsql runs ``text``: per windowed block, its clauses, its trigger tree in
    the specification's notation, and the input / aggregate / output stages."""
    return explain_statement(parse_statement(text))


def dropped_late(df: DataFrame) -> int:
    """How many elements the windowed query behind ``df`` dropped as too late (beyond
    ALLOWED LATENESS, or after its trigger finished). LATE ROWS INTO keeps them as rows."""
    from dfsql.spark.planner import dropped_late as _dropped

    return _dropped(df)


def register(name: str, df: DataFrame, event_time: str | None = None,
             processing_time: str | None = None, watermark: str | None = None) -> None:
    """Register ``df`` as temp view ``name`` with defaults for ON / PROCESSING TIME /
    WATERMARK, so that queries over it may leave those clauses out."""
    df.createOrReplaceTempView(name)
    _REGISTRY[name.lower()] = Registration(name, event_time, processing_time, watermark)
