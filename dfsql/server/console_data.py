"""What the live console (:mod:`dfsql.server.console`) shows, read where SHOW STREAMING
QUERIES reads it: the registry of running queries (:data:`dfsql.continuous_queries.QUERIES`),
each query's progress log (:func:`dfsql.spark.stream.progress_log.read_log`: one record
per micro-batch) with the batches Spark has reported and the log has not written yet, the
table an ``INTO TABLE`` query keeps (its live windows, and the panes and retractions of
its latest batches: :attr:`dfsql.spark.stream.table_sink.TableSink.recent`), and
``EXPLAIN FIRINGS FOR STREAMING QUERY`` for one window (docs/guides/streams.md#why-has-a-query-produced-nothing).

Nothing here changes a query: the console is read-only. A user sees the queries they own;
an admin (``dfsql serve --admin``) sees every one (docs/guides/endpoint.md#users-and-what-is-theirs).
A query's log is read again only when a batch has committed since the last read (the
console polls every second; the log is files)."""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dfsql.api import sql
from dfsql.continuous_actors import Actor, acting_as
from dfsql.continuous_queries import QUERIES, Failed, Running
from dfsql.continuous_show import Totals, inputs_shown
from dfsql.errors import DfsqlError
from dfsql.model.pane_columns import PANE_COLUMNS
from dfsql.spark.stream import progress_log

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

#: the batches a query's charts cover (its latest)
SERIES = 120


@dataclass(frozen=True)
class Viewer:
    """Who looks: a logged-in user, and whether they are an admin."""

    user: str
    admin: bool = False

    def sees(self, owner: str | None) -> bool:
        """An admin sees every query; a user their own (a query with no owner, started
        by the process itself, is an admin's to watch)."""
        return self.admin or (owner is not None and owner == self.user)


@dataclass
class Watched:
    """One query as the console shows it: SHOW's figures and its latest batches'."""

    name: str
    owner: str | None
    status: str
    sink: str
    totals: Totals = field(default_factory=Totals)
    #: records of its latest batches (at most SERIES), oldest first
    series: list[dict] = field(default_factory=list)
    input_rate: float = 0.0
    dropped: int = 0  # late rows dropped, over every batch
    inputs: str | None = None
    held_by: str | None = None

    @property
    def last_batch(self) -> int | None:
        return self.series[-1]["batch_id"] if self.series else None

    @property
    def lag_seconds(self) -> float | None:
        """How far the watermark is behind the wall clock now (docs/guides/watching.md)."""
        return lag(dt.datetime.now(dt.timezone.utc), self.totals.watermark)


def lag(at: Any, watermark: Any) -> float | None:
    """Wall-clock time ``at`` minus the watermark in seconds (None when either is not
    known): the docs' watermark lag, the metric ``dfsql_watermark_lag_seconds``. ``at``
    is aware or Spark's UTC text (a batch record's ``at``); a naive watermark is local
    time, as the records' figures are."""
    a, w = _aware(at), _aware(watermark)
    return None if a is None or w is None else (a - w).total_seconds()


def _aware(value: Any) -> dt.datetime | None:
    """A record's time as an aware instant: a naive one is local time (dfsql's figures)."""
    t = progress_log.record_time(value)
    return t if t is None or t.tzinfo is not None else t.astimezone()


def visible(viewer: Viewer) -> tuple[list[Running], list[Failed]]:
    """The running and failed queries ``viewer`` may watch, by name."""
    running, failed = QUERIES.listed()
    return (sorted((r for r in running if viewer.sees(r.owner)), key=lambda r: r.name),
            sorted((f for f in failed if viewer.sees(f.owner)), key=lambda f: f.name))


def find(viewer: Viewer, name: str) -> Running | None:
    """The running query ``name``, if ``viewer`` may watch it (else None, as for a name
    no query has: the console does not tell others' names)."""
    running, _ = visible(viewer)
    return next((r for r in running if r.name == name), None)


class Logs:
    """Each query's records, read again from its log only when Spark has reported a
    batch the last read did not have."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._read: dict[str, tuple[int | None, dict | None, list[dict]]] = {}
        self._lock = threading.Lock()

    def records(self, r: Running) -> tuple[dict | None, list[dict]]:
        reported = {}
        for p in r.query.recentProgress:  # type: ignore[attr-defined]
            record = progress_log.batch_record(p)
            if record is not None:
                reported[record["batch_id"]] = record
        latest = max(reported, default=None)
        with self._lock:
            seen = self._read.get(r.checkpoint)
        if seen is None or seen[0] != latest:
            base, logged = progress_log.read_log(self.spark, r.checkpoint)
            with self._lock:
                self._read[r.checkpoint] = seen = (latest, base, logged)
        _, base, logged = seen
        by_batch = {rec["batch_id"]: rec for rec in logged}
        by_batch.update({b: rec for b, rec in reported.items() if b not in by_batch})
        return base, [by_batch[b] for b in sorted(by_batch)]


def watched(r: Running, logs: Logs) -> Watched:
    """``r`` with its figures (SHOW's status words: docs/guides/streams.md#continuous-queries-as-statements)."""
    q = r.query
    status = "RUNNING" if q.isActive else "STOPPED"  # type: ignore[attr-defined]
    error = q.exception() if not q.isActive else None  # type: ignore[attr-defined]
    if error is not None:
        status = "FAILED: " + (str(error).strip().splitlines() or ["?"])[0]
    elif getattr(r.sink_object, "retrying", None):
        status = f"RETRYING {r.sink}: {r.sink_object.retrying}"
    base, records = logs.records(r)
    totals = Totals.of(base, records)
    p = q.lastProgress or {}  # type: ignore[attr-defined]
    dropped = sum(int((rec.get("dfsql") or {}).get("late_dropped") or 0) for rec in records)
    inputs, held = inputs_shown(totals)
    return Watched(r.name, r.owner, status, r.sink, totals, records[-SERIES:],
                   float(p.get("inputRowsPerSecond", 0.0) or 0.0), dropped, inputs, held)


def failed_row(f: Failed) -> Watched:
    return Watched(f.name, f.owner, f"FAILED: {f.reason}", f.sink)


def figure(record: dict, name: str) -> Any:
    """One of dfsql's figures of a batch record (None where the batch has none)."""
    return (record.get("dfsql") or {}).get(name)


@dataclass
class Windows:
    """A query's live windows (its table's current rows) and the panes and retractions
    its latest batches emitted, as pandas frames with the result's columns."""

    current: pd.DataFrame | None
    recent: pd.DataFrame | None
    keys: list[str]
    value: str | None

    @property
    def live(self) -> int:
        return 0 if self.current is None else len(self.current)


def windows(r: Running) -> Windows | None:
    """The live windows of an ``INTO TABLE`` query (its sink keeps them), else None (a
    directory or a database keeps them where the console does not read)."""
    sink = r.sink_object
    current = getattr(sink, "current", None)
    if not getattr(sink, "keeps_current_rows", False):
        return None
    recent = getattr(sink, "recent", None)
    frame = current if current is not None else recent
    if frame is None:
        return Windows(None, None, [], None)
    cols = [c for c in frame.columns if c not in PANE_COLUMNS and not c.startswith("__")]
    numeric = [c for c in cols if frame[c].dtype.kind in "iuf"]
    value = numeric[0] if numeric else (cols[-1] if cols else None)
    keys = cols[: cols.index(value)] if value is not None else []
    return Windows(current, recent, keys, value)


def firings(spark: SparkSession, viewer: Viewer, r: Running, start: str, end: str,
            key: dict[str, str]) -> tuple[list[str], list[tuple]]:
    """EXPLAIN FIRINGS FOR STREAMING QUERY's rows for the window [start, end) of the
    key ``key`` (each key column's value as text), run as ``viewer`` (its owner's or an
    admin's, as over the endpoint); ``start``/``end`` must be instants (they go into the
    statement's WHERE)."""
    s, e = progress_log.record_time(start), progress_log.record_time(end)
    if s is None or e is None:
        raise DfsqlError(f"not a window: [{start}, {end})",
                         hint="window_start and window_end are instants")
    text = (f"EXPLAIN FIRINGS FOR STREAMING QUERY {r.name} WHERE window_start = "
            f"TIMESTAMP '{s.isoformat(' ')}' AND window_end = TIMESTAMP '{e.isoformat(' ')}'")
    with acting_as(Actor(viewer.user, viewer.admin)):
        frame = sql(text, spark).toPandas()
    for k, v in key.items():
        if k in frame.columns:
            frame = frame[frame[k].astype(str) == v]
    return list(frame.columns), list(frame.itertuples(index=False, name=None))
