"""Running the continuous-query statements (:mod:`dfsql.language.continuous`): one
registry per Spark application, so that any session — a Thrift client's, the shell's,
Python's — lists and stops the queries any other started.

The statements are run for :func:`dfsql.api.sql`, which passes its own ``start`` in: this
module sits below the API and does not import it (no cycle between the two)."""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from dfsql.errors import AnalysisError, DfsqlError, SourceError
from dfsql.language.continuous import ContinuousStatement
from dfsql.language.scan import Source
from dfsql.spark.sinks import TableSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Starter(Protocol):
    """How a continuous query starts its stream: :func:`dfsql.api.start`'s signature."""

    def __call__(self, text: str, sink: object = ..., checkpoint: str | None = ...,
                 trigger: dict | None = ..., name: str | None = ...,
                 spark: SparkSession | None = ...) -> object: ...


#: the name of dfsql's figures in a batch's progress (dfsql.spark.streaming.METRICS, not
#: imported: that module loads Spark's and numpy's, which ``import dfsql`` does not)
METRICS = "dfsql"


@dataclass
class Totals:
    """A query's figures over all its micro-batches so far, folded from Spark's progress
    reports (one per batch): a report says what its batch did, and the last one is
    often a batch without data (input 0, no dfsql figures), which SHOW must not take for
    the query's state.

    * input_rows: every batch's ``numInputRows``, summed;
    * watermark: the latest batch's that has one — dfsql's own (the executor's
      ``observedMetrics``), else Spark's ``eventTime.watermark`` (Spark's own operator);
    * state: the elements dfsql's executor retains (its batches' ``state_change``,
      summed: every bucket, also those the last batch did not run), or the rows Spark's
      own operator keeps (``stateOperators[].numRowsTotal`` of the latest batch).

    Spark keeps the last ``spark.sql.streaming.numRecentProgressUpdates`` reports (100):
    SHOW folds those it has not seen, so totals stay exact while SHOW runs at least that
    often."""

    last_batch: int = -1
    input_rows: int = 0
    watermark: str | None = None
    state: int | None = None

    def fold(self, progress: list) -> None:
        for p in progress:
            batch = int(p["batchId"])
            if batch <= self.last_batch:
                continue
            self.last_batch = batch
            self.input_rows += int(p.get("numInputRows") or 0)
            ours = (p.get("observedMetrics") or {}).get(METRICS)
            ours = ours.asDict() if hasattr(ours, "asDict") else (ours or {})
            spark_wm = (p.get("eventTime") or {}).get("watermark")
            if ours.get("watermark") is not None:
                self.watermark = str(ours["watermark"])
            elif spark_wm and not spark_wm.startswith("1970-01-01T00:00:00"):  # none yet
                self.watermark = spark_wm.replace("T", " ").rstrip("Z").removesuffix(".000")
            if "state_change" in ours:  # dfsql's executor (None: no bucket ran)
                self.state = (self.state or 0) + int(ours["state_change"] or 0)
            elif p.get("stateOperators"):
                self.state = sum(int(op.get("numRowsTotal") or 0)
                                 for op in p["stateOperators"])


@dataclass
class Running:
    name: str
    query: object  # pyspark StreamingQuery
    sink: str
    checkpoint: str
    text: str
    started: float
    totals: Totals = field(default_factory=Totals)


_RUNNING: dict[str, Running] = {}
_LOCK = threading.Lock()

SHOW_SCHEMA = ("name STRING, id STRING, status STRING, sink STRING, batches BIGINT, "
               "input_rows BIGINT, input_rows_per_second DOUBLE, "
               "processed_rows_per_second DOUBLE, watermark STRING, state_elements BIGINT, "
               "started TIMESTAMP")


def run(stmt: ContinuousStatement, text: str, spark: SparkSession, start: Starter) -> DataFrame:
    """CREATE (its query started with ``start``), SHOW or STOP STREAMING QUERY."""
    if stmt.kind == "show":
        return _show(spark)
    if stmt.kind == "stop":
        return _stop(stmt, text, spark)
    return _create(stmt, text, spark, start)


def _create(stmt: ContinuousStatement, text: str, spark: SparkSession,
            start: Starter) -> DataFrame:
    src = Source(text)
    assert stmt.name is not None
    with _LOCK:
        old = _RUNNING.get(stmt.name)
        if old is not None and old.query.isActive:  # type: ignore[attr-defined]
            raise src.error(DfsqlError, f"a continuous query named {stmt.name} is running",
                            stmt.name_offset, f"STOP STREAMING QUERY {stmt.name} first, or "
                                              "choose another name")
    checkpoint = stmt.checkpoint or tempfile.mkdtemp(prefix=f"dfsql-{stmt.name}-")
    if stmt.sink == "directory":
        sink: object = stmt.path
        where = f"directory {stmt.path}"
    else:
        sink = TableSink(stmt.name, global_view=True)
        where = f"table global_temp.{stmt.name}"
    try:
        query = start(stmt.query, sink=sink, checkpoint=checkpoint, name=stmt.name,
                      spark=spark)
    except SourceError as e:
        if e.line == 1 and e.column == 1:  # "not over a stream": point at the query
            p = src.pos(stmt.query_offset)
            raise SourceError(e.message.replace("dfsql.start runs",
                                                "CREATE STREAMING QUERY runs"),
                              p.line, p.column, e.hint) from None
        raise
    if isinstance(sink, TableSink):
        sink.publish_empty(spark, query.panes_schema)
    with _LOCK:
        _RUNNING[stmt.name] = Running(stmt.name, query, where, checkpoint, text, time.time())
    return spark.createDataFrame([(stmt.name, str(query.id), where, checkpoint)],
                                 "name STRING, id STRING, sink STRING, checkpoint STRING")


def _stop(stmt: ContinuousStatement, text: str, spark: SparkSession) -> DataFrame:
    assert stmt.name is not None
    with _LOCK:
        r = _RUNNING.pop(stmt.name, None)
    if r is None:
        raise Source(text).error(AnalysisError, f"no continuous query named {stmt.name}",
                                 stmt.name_offset, "SHOW STREAMING QUERIES lists them")
    r.query.stop()  # type: ignore[attr-defined]
    return spark.createDataFrame([(r.name, "STOPPED")], "name STRING, status STRING")


def _show(spark: SparkSession) -> DataFrame:
    from datetime import datetime, timezone

    rows = []
    with _LOCK:
        running = list(_RUNNING.values())
    for r in sorted(running, key=lambda r: r.started):
        q = r.query
        status = "RUNNING" if q.isActive else "STOPPED"  # type: ignore[attr-defined]
        error = q.exception() if not q.isActive else None  # type: ignore[attr-defined]
        if error is not None:
            status = "FAILED: " + (str(error).strip().splitlines() or ["?"])[0]
        t = r.totals
        t.fold(q.recentProgress)  # type: ignore[attr-defined]
        p = q.lastProgress or {}  # type: ignore[attr-defined]
        rows.append((r.name, str(q.id), status, r.sink,  # type: ignore[attr-defined]
                     t.last_batch + 1, t.input_rows,
                     float(p.get("inputRowsPerSecond", 0.0) or 0.0),
                     float(p.get("processedRowsPerSecond", 0.0) or 0.0),
                     t.watermark, t.state,
                     datetime.fromtimestamp(r.started, timezone.utc).replace(tzinfo=None)))
    return spark.createDataFrame(rows, SHOW_SCHEMA)


def stop_all() -> None:
    """Stop every continuous query (a server shutting down)."""
    with _LOCK:
        running = list(_RUNNING.values())
        _RUNNING.clear()
    for r in running:
        try:
            r.query.stop()  # type: ignore[attr-defined]
        except Exception:
            pass
