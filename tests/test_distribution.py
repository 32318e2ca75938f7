"""The same dfsql queries, unchanged, on a Spark standalone cluster and over Spark Connect.

For each mode a module-scoped fixture starts the Spark side on 127.0.0.1 (a standalone
master with two 1-core/1 GB workers, or ``sbin/start-connect-server.sh``), runs
``tests/distribution_helpers.py`` in a fresh interpreter whose only configuration is
``DFSQL_SPARK_MASTER`` or ``DFSQL_SPARK_REMOTE``, and stops every process it started
before the tests look at the report — also when start-up or the client fails.

Each query's rows must equal the expected values of the paper's example and the rows the
same query gives in local mode (a new session on the test run's local SparkSession).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distribution_helpers import (
    PAPER,
    STREAM_FIGURE,
    ClientRun,
    connect_server,
    run_all,
    run_client,
    standalone_cluster,
)
from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

MODES = ("cluster", "connect")


@dataclass
class ModeRun:
    """One mode's Spark side (URL, start-up time) and the client's report."""

    mode: str
    url: str
    start_seconds: float
    client: ClientRun
    total_seconds: float

    @property
    def report(self) -> dict[str, Any]:
        return self.client.report

    def query(self, name: str) -> dict[str, Any]:
        assert "fatal" not in self.report, self.report["fatal"]
        return self.report["queries"][name]


def _start(mode: str, tmp: Path) -> ModeRun:
    t0 = time.monotonic()
    if mode == "cluster":
        with standalone_cluster(tmp) as started:
            client = run_client(started.env, {
                "DFSQL_SPARK_MASTER": started.url,
                # The driver runs in the client; the executors do the work.
                "DFSQL_SPARK_DRIVER_MEMORY": "1g",
            })
    else:
        with connect_server(tmp) as started:
            client = run_client(started.env, {"DFSQL_SPARK_REMOTE": started.url})
    run = ModeRun(mode, started.url, started.start_seconds, client, time.monotonic() - t0)
    print(f"\n[{mode}] {run.url}: Spark side up in {run.start_seconds:.1f} s, client "
          f"{client.seconds:.1f} s, whole mode {run.total_seconds:.1f} s", file=sys.stderr)
    return run


@pytest.fixture(scope="module", params=MODES)
def mode_run(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModeRun]:
    yield _start(request.param, tmp_path_factory.mktemp(f"dfsql-{request.param}"))


@pytest.fixture(scope="module")
def local_results(spark: SparkSession) -> dict[str, dict[str, Any]]:
    """The same queries in local mode, in a new session (its own temp views) of the run's
    local SparkSession, with dfsql's session time zone."""
    local = spark.newSession()
    local.conf.set("spark.sql.session.timeZone", "UTC")
    return run_all(local)


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(str(r.get(k)) for k in sorted(r)))


def _ok(result: dict[str, Any]) -> list[dict[str, Any]]:
    assert result["ok"], result.get("traceback") or result
    return _sorted(result["rows"])


T = "2015-09-01 {}"


def _pane(total: int, start: str | None, end: str | None) -> dict[str, Any]:
    return {"key": "k", "total": total,
            "window_start": None if start is None else T.format(start),
            "window_end": None if end is None else T.format(end),
            "pane_index": 0, "pane_timing": "ON_TIME", "is_last": True, "emit_time": None,
            "is_retraction": False}


EXPECTED: dict[str, list[dict[str, Any]]] = {
    "plain": [{"key": "k", "n": 10, "total": 51}],
    "fig06": [_pane(51, None, None)],
    "fig10": [_pane(14, "12:00:00", "12:02:00"), _pane(22, "12:02:00", "12:04:00"),
              _pane(3, "12:04:00", "12:06:00"), _pane(12, "12:06:00", "12:08:00")],
    "sessions": [_pane(39, "12:00:30", "12:05:00"), _pane(12, "12:06:30", "12:08:50")],
}

#: The position dfsql must report for each bad query (line, column of ``nope``).
BAD: dict[str, tuple[int, int]] = {"bad_windowed": (1, 17), "bad_plain": (2, 8)}


def test_session_is_really_distributed(mode_run: ModeRun) -> None:
    assert "fatal" not in mode_run.report, mode_run.report["fatal"]
    info = mode_run.report["session"]
    if mode_run.mode == "cluster":
        assert info["class"] == "pyspark.sql.session.SparkSession"
        assert info["context_master"] == mode_run.url
        assert info["master"] == mode_run.url
        assert len(info["executor_ids"]) == 2, info  # one executor per worker
        # Python tasks ran in the executors' workers, not in the driver process.
        assert info["driver_pid"] not in info["task_pids"]
    else:
        assert info["class"] == "pyspark.sql.connect.session.SparkSession"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_query_rows(mode_run: ModeRun, local_results: dict[str, dict[str, Any]],
                    name: str) -> None:
    rows = _ok(mode_run.query(name))
    assert rows == _sorted(EXPECTED[name])
    assert rows == _ok(local_results[name])  # exactly what local mode gives
    assert mode_run.query(name)["columns"] == local_results[name]["columns"]


def test_replayed_query_same_as_local(mode_run: ModeRun,
                                      local_results: dict[str, dict[str, Any]]) -> None:
    """Figure 14 (discarding) goes through the replay driver (mapInArrow, Python in the
    executors): seven panes whose totals partition the ten values, as in local mode."""
    rows = _ok(mode_run.query("fig14_discarding"))
    assert rows == _ok(local_results["fig14_discarding"])
    assert len(rows) == 7
    assert sum(r["total"] or 0 for r in rows if not r["is_retraction"]) == 51


def test_stream_started_by_dfsql_start(mode_run: ModeRun) -> None:
    """``dfsql.start`` plans a stream once and starts it the same way on a cluster and over
    Spark Connect (whose plans name the statement's temp views, analysed again when the
    stream starts): Figure 14 streamed a file per arrival minute gives the figure's panes
    and retractions (a memory sink keeps no order: compared as sets of rows)."""
    result = mode_run.report["stream"]
    assert result["ok"], result.get("traceback") or result
    figure = next(f for f in json.loads((PAPER / "figures.json").read_text())["figures"]
                  if f["name"] == STREAM_FIGURE)
    want = [r for r in figure["expected"] if r["emit_time"] is not None]
    assert any(r["is_retraction"] for r in want)
    assert _sorted(result["rows"]) == _sorted(want)


def test_a_change_needs_the_application_itself(mode_run: ModeRun) -> None:
    """ALTER STREAMING QUERY reads the stream's plan and checkpoint where the Spark
    application runs: on a cluster (the driver is the client) the change takes effect;
    over Spark Connect it is refused, placed at the changed query, which keeps running."""
    result = mode_run.report["alter"]
    if mode_run.mode == "cluster":
        assert result == {"ok": True, "version": 2}, result
    else:
        assert result["dfsql_error"], result
        assert "Spark Connect" in result["message"]
        # and a query INTO TABLE, whose sink runs in the client, is refused at its name
        assert result["table"].startswith("1:24 INTO TABLE is not supported over Spark "
                                          "Connect"), result["table"]
        # at the changed query's SELECT, under the figure's comment line
        assert (result["line"], result["column"]) == (2, 1)


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_query_is_a_dfsql_error(mode_run: ModeRun,
                                    local_results: dict[str, dict[str, Any]],
                                    name: str) -> None:
    result = mode_run.query(name)
    assert not result["ok"]
    assert result["dfsql_error"], result.get("traceback") or result
    assert (result["line"], result["column"]) == BAD[name]
    assert "`nope`" in result["message"]
    local = local_results[name]
    assert (result["type"], result["line"], result["column"]) == \
        (local["type"], local["line"], local["column"])

