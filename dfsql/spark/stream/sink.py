"""The seam every sink of a live stream goes through (docs/reference.md#output-columns).

A reader adding a sink (a database ``INTO TABLE`` / ``INTO CHANGELOG``, say) writes one
module with one class of this protocol and its tests; ``start_stream``
(:mod:`dfsql.spark.stream.sinks`) drives every sink through these methods alone, and
:func:`dfsql.spark.stream.sinks.as_sink` is the one place that turns a user's sink
argument into a :class:`Sink`.

- **A micro-batch's changes**: ``commit(batch, batch_id)`` is handed one bounded
  DataFrame, the panes and retractions of one micro-batch in docs/reference.md#output-columns's
  changelog order (when ``changelog_order``), the hidden sort columns dropped, and the
  batch's id, which Spark numbers from the checkpoint on.
- **How they commit**: a batch id is committed once. Spark replays the last batch after
  a crash with the same id: a sink that can be exactly once keeps the last id it
  committed beside its rows and skips a replayed id (a database sink: a progress row
  written in the same transaction as the batch's rows).
- **How it restarts**: ``open(spark, schema, row_key, name)`` runs before the query
  starts, so a sink reads back what it kept (its rows, its last committed batch id) from
  its own place — a path under ``--state-dir``, a table — and publishes what readers
  see before the first batch. The checkpoint itself belongs to Spark.
- **How ALTER restates it**: a sink that can be restated is also :class:`Restatable`:
  ``restated(how)`` returns the changed query's sink built over its own place
  (a :class:`~dfsql.spark.stream.table_sink.TableSink` the table replacing it; a
  directory the next :class:`~dfsql.spark.stream.restate.LoggedDirectory`, with the old
  query's current rows retracted), and what the keeper records so that a restart builds
  the same sink again (:class:`Restated`). Its first committed batch holds the
  restatement: the old query's current rows retracted and the new query's current rows,
  at the frontier. A database sink commits that first batch in one transaction, as it
  commits every batch. :func:`restated` is the one call ALTER makes (a sink that is not
  :class:`Restatable` is refused there), and
  :func:`~dfsql.spark.stream.sinks.statement_into` the one place CREATE STREAMING
  QUERY's ``INTO`` words become a sink (a fresh start, a restart, a changed version's).
- ``native(visible, name)``: a sink Spark writes itself (its memory or file sink) returns
  its writer; any other returns None and gets ``open`` and ``commit``. A query with a
  LATE ROWS INTO side sink always uses ``open`` and ``commit``.
- ``keeps_current_rows`` (optional, False when absent): a sink that keeps one row per
  ``row_key``; a query whose SELECT leaves out a group key is refused before it starts
  (:func:`dfsql.streaming.start_planned`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter
    from pyspark.sql.types import StructType


@runtime_checkable
class Sink(Protocol):
    """Where a live stream's micro-batches go (see the module doc)."""

    #: whether ``commit`` needs the batch in changelog order (one sorting task)
    changelog_order: bool

    def native(self, visible: DataFrame, name: str | None) -> DataStreamWriter | None:
        """Spark's own sink for the visible stream, or None: ``open`` and ``commit``."""
        ...

    def open(self, spark: SparkSession, schema: StructType, row_key: tuple[str, ...],
             name: str | None) -> None:
        """Before the query starts: resume from what the sink kept; ``schema``: the
        panes' columns; ``row_key``: the output columns that identify a window's row
        (the group keys, then window_start and window_end unless the window is GLOBAL)."""
        ...

    def commit(self, batch: DataFrame, batch_id: int) -> None:
        """Write one micro-batch's changes, once per ``batch_id``."""
        ...


@dataclass(frozen=True)
class ReaderRows:
    """A sink restated by retractions, as ALTER reads it: the old query's rows as a
    reader of the sink sees them, a changelog (``is_retraction``, pane columns), whose
    current row of each window the restatement retracts."""

    #: how ALTER's progress and refusals name the sink
    where: str
    #: its rows, read when the old query has stopped
    read: Callable[[SparkSession], DataFrame]


@dataclass(frozen=True)
class Restatement:
    """What ALTER STREAMING QUERY hands a running query's sink, stopped at its last
    completed micro-batch, to build the changed query's sink over the same place
    (docs/guides/streams.md#continuous-queries-as-statements)."""

    spark: SparkSession
    #: the query's name
    name: str
    #: the old query's checkpoint (its committed batches)
    checkpoint: str
    #: the changed version's own place with a keeper (a table's rows, a directory's
    #: retractions kept for a restart before its first batch commits); None: no keeper
    place: str | None
    #: the old query's current rows retracted (pandas, the sink's columns), for a sink
    #: restated by retractions (:class:`ReaderRows`; None: the change restates it whole)
    retractions: Callable[[], Any] | None
    #: ``(message, hint)`` → the error that refuses the change, placed at the query's name
    #: (the old query then runs on unchanged)
    refuse: Callable[[str, str], BaseException]


class Restated(NamedTuple):
    """The changed query's sink, and what the keeper records so that a restart builds it
    again (:func:`~dfsql.spark.stream.sinks.statement_into`): a directory's log entry its
    first batch is written as, a database table's first progress id (None: nothing)."""

    sink: Sink
    log_base: int | None = None


@runtime_checkable
class Restatable(Protocol):
    """A sink ALTER STREAMING QUERY can restate (see the module doc)."""

    def restated(self, how: Restatement) -> Restated:
        """The changed query's sink over this sink's place (raise ``how.refuse(...)``
        when it cannot be restated now)."""
        ...


def restated(sink: object, how: Restatement) -> Restated:
    """The changed query's sink over ``sink``'s place; refused for a sink that cannot be
    restated (a memory, console or callable sink: no CREATE STREAMING QUERY writes one)."""
    if not isinstance(sink, Restatable):
        raise how.refuse(f"{how.name} writes into a sink ALTER STREAMING QUERY cannot "
                         "restate", "STOP the query and CREATE the changed one")
    return sink.restated(how)


#: A micro-batch cancelled while Spark computes it (its query stopped: ALTER STREAMING
#: QUERY, STOP) fails in ``toPandas`` as it must, and pyspark then warns with Spark's whole
#: Java stack, printed into the user's program. The batch runs again from the checkpoint,
#: or never, as the stop decides: the warning says nothing a user can act on, and the
#: error itself still raises. (A filter for the process: ``catch_warnings`` around each
#: call is not thread-safe, and batches of several queries convert at once.)
QUIET = "toPandas attempted Arrow optimization"
warnings.filterwarnings("ignore", message=QUIET, category=UserWarning)


def batch_rows(batch: DataFrame):
    """A micro-batch's rows in pandas (see the filter above)."""
    return batch.toPandas()
