"""The owner in what a client reads about its objects: DESCRIBE … EXTENDED gains an
``Owner`` row, SHOW TABLES an ``owner`` column (empty where no client created it), from
the server's registry (:mod:`dfsql.server.object_owners`). Spark's in-memory catalog has
no owner to show: dfsql's is the only honest one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def described(spark: SparkSession, df: DataFrame, owner: str | None) -> DataFrame:
    """DESCRIBE … EXTENDED's rows, and ('Owner', owner, '') last when it has one."""
    if owner is None or df.columns[:2] != ["col_name", "data_type"]:
        return df
    return df.union(spark.createDataFrame([("Owner", owner, "")], df.schema))


def tables_shown(df: DataFrame, owners: dict[str, str]) -> DataFrame:
    """SHOW TABLES' rows with ``owner``: the client who created each one, else ''."""
    from pyspark.sql import functions as F

    if df.columns[:2] != ["namespace", "tableName"]:
        return df
    if not owners:
        return df.withColumn("owner", F.lit(""))
    pairs = [F.lit(x) for kv in sorted(owners.items()) for x in kv]
    key = F.lower(F.concat_ws(".", F.col("namespace"), F.col("tableName")))
    return df.withColumn("owner", F.coalesce(F.try_element_at(F.create_map(*pairs), key),
                                             F.lit("")))
