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
- **How it restarts**: ``open(spark, schema, key_names, name)`` runs before the query
  starts, so a sink reads back what it kept (its rows, its last committed batch id) from
  its own place — a path under ``--state-dir``, a table — and publishes what readers
  see before the first batch. The checkpoint itself belongs to Spark.
- **How ALTER restates it**: the changed query's sink is built over the old one's place
  (``TableSink(replaces=True, previous=...)``; a directory's
  :class:`~dfsql.spark.stream.restate.LoggedDirectory` with the old query's current
  rows retracted, :func:`~dfsql.spark.stream.restate.retractions`), and its first
  committed batch holds the restatement: the old query's current rows retracted and the
  new query's current rows, at the frontier. A database sink commits that first batch in
  one transaction, as it commits every batch.
- ``native(visible, name)``: a sink Spark writes itself (its memory or file sink) returns
  its writer; any other returns None and gets ``open`` and ``commit``. A query with a
  LATE ROWS INTO side sink always uses ``open`` and ``commit``.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Protocol, runtime_checkable

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

    def open(self, spark: SparkSession, schema: StructType, key_names: tuple[str, ...],
             name: str | None) -> None:
        """Before the query starts: resume from what the sink kept; ``schema``: the
        panes' columns; ``key_names``: the output columns that select a group key."""
        ...

    def commit(self, batch: DataFrame, batch_id: int) -> None:
        """Write one micro-batch's changes, once per ``batch_id``."""
        ...


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
