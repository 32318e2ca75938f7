"""Prometheus metrics of the continuous queries, the streams :func:`dfsql.start` watches
(a name and a checkpoint) and the endpoint (docs/guides/watching.md#metrics),
served by the maintained ``prometheus_client`` library (``pip install
'dfsql-spark[metrics]'``): ``dfsql serve --metrics-port P``, or :func:`serve_metrics` in
Python.

A custom collector reads, at each scrape, the records ``system.streaming_progress``
reads (:func:`dfsql.system_tables.query_records`): one truth, and counters that are
exact — each one is its query's records summed (the folded ones too), so it equals what
the query's batches did, across restarts. After ALTER, the rows and batches count every
version (as SHOW STREAMING QUERIES does); the other counters start again with the new
version (its new checkpoint), which Prometheus' ``rate`` reads as a reset."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.continuous_queries import QUERIES
from dfsql.errors import DfsqlError
from dfsql.session import active_session
from dfsql.system_tables import (
    dropped_rows,
    late_rows,
    query_records,
    state_after,
    watermark_of,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: the endpoint's figures at a scrape (dfsql serve): sessions open, operations running,
#: statements by outcome, failed logins
EndpointFigures = Callable[[], tuple[int, int, dict[str, int], int]]
#: the label of every per-query metric
LABEL = "query"


@dataclass
class _Sums:
    input_rows: int = 0
    late_rows: int = 0
    dropped_rows: int = 0
    panes: int = 0
    retractions: int = 0
    batches: int = 0
    seconds: float = 0.0


def query_figures(spark: SparkSession | None, r) -> tuple[_Sums, dict]:
    """A running query's counters (its records summed) and its latest gauges."""
    base, records = query_records(spark, r, recent=False)
    # an ALTERed query's earlier versions: their rows and batches (SHOW's figures)
    s = _Sums(input_rows=int((base or {}).get("input_rows") or 0),
              batches=int((base or {}).get("batches") or 0))
    state, latest = None, {}
    for rec in records:
        ours = rec.get("dfsql") or {}
        s.input_rows += int(rec["input_rows"])
        s.late_rows += late_rows(rec)
        s.dropped_rows += dropped_rows(rec)
        s.panes += int(ours.get("panes") or 0)
        s.retractions += int(ours.get("retractions") or 0)
        s.batches += int(rec.get("folded", 1))
        s.seconds += (rec.get("duration_ms") or 0) / 1000.0
        state = state_after(rec, state)
        wm = watermark_of(rec)
        if wm is not None:
            latest["watermark"] = wm.timestamp()
        if ours.get("frontier") is not None:
            latest["frontier"] = _seconds(ours["frontier"])
    if state is not None:
        latest["state"] = state
    return s, latest


def _seconds(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


class Collector:
    """The metrics at scrape time (``prometheus_client``'s custom collector protocol)."""

    def __init__(self, spark: SparkSession | None = None,
                 endpoint: EndpointFigures | None = None) -> None:
        self.spark = spark
        self.endpoint = endpoint

    def describe(self) -> list:
        return []  # no scrape at registration: the families are known at collect

    def collect(self) -> Iterator:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            SummaryMetricFamily,
        )

        c = {n: CounterMetricFamily(f"dfsql_{n}", h, labels=[LABEL]) for n, h in (
            ("input_rows", "rows the query read"),
            ("late_rows", "rows that arrived behind the watermark and were kept (their "
                          "window within its allowed lateness)"),
            ("dropped_rows", "rows not processed: too late, after the window's trigger "
                             "finished, or without an event time"),
            ("panes", "panes the query emitted"),
            ("retractions", "retractions the query emitted"))}
        g = {n: GaugeMetricFamily(f"dfsql_{n}", h, labels=[LABEL]) for n, h in (
            ("watermark_seconds", "the latest batch's watermark (Unix time)"),
            ("frontier_seconds", "the query's clock: its inputs' latest processing time "
                                 "(Unix time)"),
            ("watermark_lag_seconds", "wall clock minus watermark: how far the "
                                      "watermark trails now"),
            ("state_elements", "elements (rows) the query's state keeps"))}
        duration = SummaryMetricFamily("dfsql_batch_duration_seconds",
                                       "micro-batches and their time", labels=[LABEL])
        running, _ = QUERIES.listed()
        for r in sorted(running + QUERIES.streams(), key=lambda r: r.name):
            try:
                s, latest = query_figures(self.spark, r)
            except Exception:  # noqa: BLE001 (a checkpoint gone meanwhile: left out)
                continue
            for n in c:
                c[n].add_metric([r.name], getattr(s, n))
            duration.add_metric([r.name], s.batches, s.seconds)
            if "watermark" in latest:
                g["watermark_seconds"].add_metric([r.name], latest["watermark"])
            if "frontier" in latest:
                g["frontier_seconds"].add_metric([r.name], latest["frontier"])
            if "watermark" in latest:
                g["watermark_lag_seconds"].add_metric(
                    [r.name], time.time() - latest["watermark"])
            if "state" in latest:
                g["state_elements"].add_metric([r.name], latest["state"])
        yield from c.values()
        yield from g.values()
        yield duration
        if self.endpoint is not None:
            yield from self._endpoint(GaugeMetricFamily, CounterMetricFamily)

    def _endpoint(self, gauge, counter) -> Iterator:
        sessions, running, outcomes, failures = self.endpoint()  # type: ignore[misc]
        yield gauge("dfsql_sessions", "client sessions open", value=sessions)
        yield gauge("dfsql_operations_running", "statements running now", value=running)
        by = counter("dfsql_statements", "statements run, by outcome", labels=["outcome"])
        for outcome in ("finished", "error", "cancelled"):
            by.add_metric([outcome], outcomes.get(outcome, 0))
        yield by
        yield counter("dfsql_login_failures", "logins refused (a wrong password, or "
                      "locked by back-off)", value=failures)


@dataclass
class MetricsServer:
    """A running ``/metrics`` server; :meth:`close` stops it."""

    host: str
    port: int
    _server: object
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()  # type: ignore[attr-defined]
        self._server.server_close()  # type: ignore[attr-defined]
        self._thread.join(5)


def serve_metrics(port: int, host: str = "127.0.0.1", spark: SparkSession | None = None,
                  endpoint: EndpointFigures | None = None) -> MetricsServer:
    """Serve the metrics at ``http://host:port/metrics`` (port 0: a free one, read from
    the returned server's ``port``) from a thread of this process, until :meth:`close`;
    ``spark``: the session that reads the checkpoints (by default this thread's).
    Bound to 127.0.0.1 unless ``host`` says otherwise: the figures name every query."""
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise DfsqlError("the metrics need prometheus_client",
                         hint="pip install 'dfsql-spark[metrics]'") from None
    registry = CollectorRegistry(auto_describe=False)
    # the caller's session reads a checkpoint on another file system (HDFS, S3)
    spark = spark if spark is not None else active_session()
    registry.register(Collector(spark, endpoint))  # type: ignore[arg-type]
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        raise DfsqlError(f"cannot serve the metrics on {host}:{port}: {e.strerror or e}",
                         hint="choose another --metrics-port") from None
    return MetricsServer(host, server.server_address[1], server, thread)
