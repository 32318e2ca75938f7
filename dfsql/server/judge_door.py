"""The endpoint's door (:mod:`dfsql.spark.door`): what dfsql reads for a client passes the
judge (:class:`dfsql.server.judge.Judge`) whichever call reads it — a query text dfsql
built, or a relation it opens by name. The names a client's statement hands dfsql to
open itself, outside the Spark SQL of its blocks (``WATERMARK FROM t``, ``TRY FROM t``),
are the statement's facts (:attr:`dfsql.language.statement_facts.StatementFacts.named`),
judged before anything is planned.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the text a name is judged in: what ``spark.table(name)`` reads (Spark parses the
#: name as a multipart identifier, ``format.`path``` included: ResolveSQLOnFile)
HEAD = "SELECT * FROM "


class _Judging(Protocol):
    """What the door asks of :class:`dfsql.server.judge.Judge`."""

    def check(self, spark: SparkSession, text: str) -> None: ...

    def check_name(self, spark: SparkSession, name: str) -> None: ...

    def check_scans(self, spark: SparkSession, df: DataFrame, trusted: object) -> None: ...

    @property
    def owners(self) -> _Owners: ...


class _Owners(Protocol):
    """What a text's success records of the objects it makes, drops or renames
    (:class:`dfsql.server.judge_owners.OwnerRule`)."""

    def planning(self) -> AbstractContextManager[list[tuple]]: ...

    def done(self, spark: SparkSession | None, planned: list[tuple],
             df: DataFrame | None) -> DataFrame | None: ...


class JudgedDoor:
    """A client session's door: each text and each name judged, then Spark's own call
    (the class's method: a session's instance attributes are no door), then the files
    Spark's analysed plan of it scans, before it runs (``trusted``: the operator's temp
    views, as the session had them when it was handed to the client)."""

    def __init__(self, judge: _Judging, trusted: object) -> None:
        self.judge = judge
        self.trusted = trusted

    def sql(self, spark: SparkSession, text: str) -> DataFrame:
        owners = self.judge.owners
        with owners.planning() as planned:  # what its success records
            self.judge.check(spark, text)
            df = type(spark).sql(spark, text)
            self.judge.check_scans(spark, df, self.trusted)
            done = owners.done(spark, planned, df)
        assert done is not None  # a result given is a result returned
        return done

    def table(self, spark: SparkSession, name: str) -> DataFrame:
        self.judge.check_name(spark, name)
        df = type(spark).table(spark, name)
        self.judge.check_scans(spark, df, self.trusted)
        return df
