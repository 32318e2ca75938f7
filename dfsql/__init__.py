"""dfsql: streaming SQL with the Dataflow model (windows, triggers, watermarks,
accumulation and retractions) on Apache Spark.

The query functions load lazily (PEP 562): Spark's Python workers import ``dfsql.model``
and the executors' modules (``dfsql.spark.replay.driver``, ``dfsql.spark.timelines``,
``dfsql.spark.stream.packing``, ``dfsql.spark.stream.buckets``), which runs this file, and must not pay for the parsers (lark,
sqlglot) that ``dfsql.api`` brings. ``dfsql.errors`` and ``dfsql.session`` import nothing
heavy, so they load at once (``dfsql.session`` must be bound to the function before anyone
imports the submodule of the same name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError
from dfsql.session import session  # pyspark is imported only when session() is called
from dfsql.version import __version__ as __version__  # re-exported

if TYPE_CHECKING:
    from dfsql.api import dropped_late, explain, register, sql, start
    from dfsql.connections import connection
    from dfsql.metrics import serve_metrics
    from dfsql.notebook import plot
    from dfsql.spark.catalog.parquet import read_parquet
    from dfsql.spark.stream.sinks import TableSink

__all__ = ["sql", "start", "explain", "register", "session", "dropped_late", "TableSink",
           "DfsqlError", "read_parquet", "plot", "connection", "serve_metrics"]

_FROM_API = frozenset({"sql", "start", "explain", "register", "dropped_late"})


def load_ipython_extension(ipython) -> None:
    """``%load_ext dfsql``: the ``%dfsql`` and ``%%dfsql`` magics (:mod:`dfsql.notebook`,
    imported only here, so ``import dfsql`` never needs IPython)."""
    from dfsql.notebook import load

    load(ipython)


def __getattr__(name: str) -> object:
    if name in _FROM_API:
        from dfsql import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    if name == "connection":  # a database named once (docs/guides/databases.md)
        from dfsql.connections import connection

        globals()[name] = connection
        return connection
    if name == "serve_metrics":  # Prometheus' /metrics (docs/guides/watching.md#metrics)
        from dfsql.metrics import serve_metrics

        globals()[name] = serve_metrics
        return serve_metrics
    if name == "TableSink":
        from dfsql.spark.stream.sinks import TableSink

        globals()[name] = TableSink
        return TableSink
    if name == "read_parquet":
        from dfsql.spark.catalog.parquet import read_parquet

        globals()[name] = read_parquet
        return read_parquet
    if name == "plot":  # the pane picture inline, in a notebook
        from dfsql.notebook import plot

        globals()[name] = plot
        return plot
    raise AttributeError(f"module 'dfsql' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _FROM_API | {"TableSink", "read_parquet", "plot", "connection",
                                            "serve_metrics"})
