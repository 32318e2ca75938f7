"""The calls :mod:`dfsql.continuous` is given by :mod:`dfsql.api` to plan, start, change
and explain continuous queries: it sits below the API and does not import it (no cycle
between the two), so it names their signatures here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.continuous import Backfill
    from dfsql.language.scan import Source
    from dfsql.language.statement import Statement
    from dfsql.spark.stream.alter import Change


class Explainer(Protocol):
    """How a running query's windows are read from its state: the signature of
    :func:`dfsql.api.explain_running` (None: Spark's own operator runs it)."""

    def __call__(self, query: Statement | str, checkpoint: str,
                 where: tuple[int, str] | None, source: Source,
                 spark: SparkSession) -> DataFrame | None: ...


class Alterer(Protocol):
    """How ALTER STREAMING QUERY is checked and its history made: the signature of
    :func:`dfsql.api.alter_running`."""

    def __call__(self, query: Statement | str, old: Statement | str, checkpoint: str,
                 history: Backfill | None, source: Source, at: int, spark: SparkSession,
                 directory: str | None = None) -> Change: ...


class Starter(Protocol):
    """How a continuous query starts its stream: :func:`dfsql.api.start`'s signature."""

    def __call__(self, text: str | Statement, sink: object = ..., checkpoint: str | None = ...,
                 trigger: dict | None = ..., name: str | None = ...,
                 spark: SparkSession | None = ..., backfill: object = ...) -> object: ...
