"""The system tables (docs/guides/watching.md#system-tables): ``system.streaming_queries``
(SHOW STREAMING QUERIES' rows) and ``system.streaming_progress`` (one row per query and
micro-batch, from each query's progress log, :mod:`dfsql.spark.stream.progress_log`).

Each is read as a database table is (:mod:`dfsql.spark.catalog.database_tables`): right
before a statement is planned its rows are made and registered under a generated temp
view, which the statement's text is rewritten to read
(:func:`dfsql.spark.catalog.views.expand`), so any SQL runs over them and they are as
current as the statement. Over the endpoint a user's rows are those of their own queries,
an admin's every query's (:func:`dfsql.continuous_actors.actor`). The metrics
(:mod:`dfsql.metrics`) read the same records (:func:`query_records`).
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import TYPE_CHECKING

from dfsql.continuous_actors import actor
from dfsql.continuous_queries import QUERIES, Failed, Running
from dfsql.continuous_show import current_records, show_queries
from dfsql.spark.stream import progress_log as log

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA_NAME = "system"
QUERIES_TABLE, PROGRESS_TABLE = "streaming_queries", "streaming_progress"
TABLES = (QUERIES_TABLE, PROGRESS_TABLE)
PROGRESS_SCHEMA = ("query STRING, batch_id BIGINT, at TIMESTAMP, input_rows BIGINT, "
                   "late_rows BIGINT, dropped_rows BIGINT, panes BIGINT, retractions BIGINT, "
                   "watermark TIMESTAMP, frontier TIMESTAMP, state_elements BIGINT, "
                   "duration_ms BIGINT")
#: the generated views' prefix: no name a user writes starts so (and each is unique)
VIEW_PREFIX = "__dfsql_system_"
_numbers = itertools.count()


def table_of(parts: list[str]) -> str | None:
    """The system table a name's parts (unquoted) name, or None."""
    if len(parts) == 2 and parts[0].lower() == SCHEMA_NAME and parts[1].lower() in TABLES:
        return parts[1].lower()
    return None


def view_of(spark: SparkSession, parts: list[str]) -> str | None:
    """The temp view of the rows of the system table the name ``parts`` names, or None
    (:func:`dfsql.spark.catalog.views.expand` calls it for every table a statement reads)."""
    table = table_of(parts)
    return None if table is None else read_view(spark, table)


def visible() -> tuple[list[Running], list[Failed]]:
    """The queries the current statement's user sees: their own over the endpoint, every
    one for an admin and for this process itself (Python, the shell)."""
    running, failed = QUERIES.listed()
    who = actor()
    if who.user is None or who.admin:
        return running, failed
    return ([r for r in running if r.owner == who.user],
            [f for f in failed if f.owner == who.user])


def read_view(spark: SparkSession, table: str) -> str:
    """The rows of ``table`` now, registered as a new temp view; its name."""
    running, failed = visible()
    if table == QUERIES_TABLE:
        rows = show_queries(spark, running, failed)
    else:
        rows = spark.createDataFrame(
            [row for r in sorted(running, key=lambda r: r.name) for row in progress_rows(
                spark, r)], PROGRESS_SCHEMA)
    view = f"{VIEW_PREFIX}{next(_numbers)}"
    rows.createOrReplaceTempView(view)
    return view


def query_records(spark: SparkSession | None, r: Running,
                  recent: bool = True) -> tuple[dict | None, list[dict]]:
    """(the earlier versions' figures, every record of the query's current version;
    ``recent``: :func:`~dfsql.continuous_show.current_records`')."""
    return current_records(spark, r.query, r.checkpoint, recent)


def progress_rows(spark: SparkSession | None, r: Running) -> list[tuple]:
    """``system.streaming_progress``' rows of the running query ``r``: the last
    :func:`~dfsql.spark.stream.progress_log.kept` batches of its current version, each
    with the elements its state holds after it (the state changes summed, the folded
    batches' too)."""
    _, records = query_records(spark, r)
    if not records:
        return []
    first = records[-1]["batch_id"] - log.kept(r.checkpoint) + 1
    out, state = [], None
    for rec in records:
        state = state_after(rec, state)
        if rec.get("folded") or rec["batch_id"] < first:
            continue
        ours = rec.get("dfsql") or {}
        if rec.get("lost"):  # killed between its commit and its record: figures unknown
            out.append((r.name, rec["batch_id"], *[None] * 10))
            continue
        out.append((r.name, rec["batch_id"], log.record_time(rec.get("at"), utc=True),
                    rec["input_rows"], late_rows(rec), dropped_rows(rec),
                    ours.get("panes") or 0, ours.get("retractions") or 0,
                    watermark_of(rec), log.record_time(ours.get("frontier")), state,
                    rec.get("duration_ms")))
    return out


def state_after(rec: dict, before: int | None) -> int | None:
    """The elements the query's state holds after the batch of ``rec``: dfsql's executor's
    (its state changes, summed), or the rows Spark's own operator keeps."""
    ours = rec.get("dfsql") or {}
    if "state_change" in ours:
        return (before or 0) + int(ours["state_change"] or 0)
    return rec.get("spark_state") if rec.get("spark_state") is not None else before


def late_rows(rec: dict) -> int:
    """Rows that arrived behind the watermark and were kept: their window was still
    within its lateness (Spark's own operator keeps none: it drops them)."""
    return int((rec.get("dfsql") or {}).get("late_kept") or 0)


def dropped_rows(rec: dict) -> int:
    """Rows not processed: too late for a window, after its trigger finished, or without
    an event time (dfsql's executor), or dropped by Spark's own operator's watermark."""
    ours = rec.get("dfsql") or {}
    if ours.get("late_dropped") is not None:
        return int(ours["late_dropped"])
    return int(rec.get("spark_dropped") or 0)


def watermark_of(rec: dict) -> datetime | None:
    """The batch's watermark: dfsql's executor's, else Spark's (written in UTC)."""
    ours = rec.get("dfsql") or {}
    if ours.get("watermark") is not None:
        return log.record_time(ours["watermark"])
    return log.record_time(rec.get("spark_watermark"), utc=True)

