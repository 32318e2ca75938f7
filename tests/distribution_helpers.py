"""Run dfsql against a real Spark standalone cluster and a Spark Connect server.

Two halves:

* **server side** (used by ``tests/test_distribution.py``): start a standalone master and
  two workers, or a Spark Connect server, from the ``pyspark`` package on 127.0.0.1 with
  free ports, and always stop them again (every process is started in its own process
  group and killed by that group, so nothing outlives a failing test);
* **client side** (``python tests/distribution_helpers.py``): a fresh interpreter whose
  only Spark is the one ``dfsql.session()`` finds through ``DFSQL_SPARK_MASTER`` /
  ``DFSQL_SPARK_REMOTE``. It registers the paper's tables, runs the same queries the local
  tests run and prints one JSON document (after :data:`MARKER`) with the rows of each
  query or the error it raised, plus what kind of session it was.

The pytest process already owns a local SparkSession (and ``dfsql.session()`` honours an
active session first), so a separate process is the only honest way to get a cluster or
Connect session.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "examples" / "paper"
MARKER = "DFSQL-DISTRIBUTION-RESULT "

#: The queries every mode runs: name -> SQL text (figure files are read from disk).
PLAIN_SQL = "SELECT key, COUNT(*) AS n, SUM(value) AS total FROM scores GROUP BY key"
SESSIONS_SQL = """SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW SESSIONS(GAP 1 MINUTE) ON event_time"""
#: An unknown column in a windowed query: dfsql must name line 1, the column of ``nope``.
BAD_WINDOWED_SQL = """SELECT key, SUM(nope) AS total
FROM scores
GROUP BY key
WINDOW FIXED(2 MINUTES) ON event_time"""
#: An unknown column in plain SQL (goes to Spark, error mapped back to a position).
BAD_PLAIN_SQL = "SELECT key,\n       nope FROM scores"


# --------------------------------------------------------------------------- client side
def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _session_info(spark: Any) -> dict[str, Any]:
    """What kind of session ``dfsql.session()`` made: class, master, executors."""
    info: dict[str, Any] = {"class": f"{type(spark).__module__}.{type(spark).__qualname__}"}
    try:
        info["master"] = spark.conf.get("spark.master")
    except Exception as exc:  # noqa: BLE001 - report, do not fail the run
        info["master_error"] = repr(exc)
    if not info["class"].startswith("pyspark.sql.connect"):
        sc = spark.sparkContext
        info["context_master"] = sc.master
        # Executors registered with the driver (the driver itself is not counted).
        deadline = time.monotonic() + 30
        while True:
            joined = sc._jsc.sc().getExecutorIds().mkString(",")  # a Scala Seq
            ids = [i for i in str(joined).split(",") if i]
            if len(ids) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        info["executor_ids"] = sorted(str(i) for i in ids)
        info["driver_pid"] = os.getpid()
        info["task_pids"] = sorted(set(
            sc.parallelize(range(8), 4).map(lambda _: os.getpid()).collect()))
    return info


def _run_query(spark: Any, text: str) -> dict[str, Any]:
    import dfsql

    t0 = time.monotonic()
    try:
        df = dfsql.sql(text, spark)
        rows = [_jsonable(r.asDict(recursive=True)) for r in df.collect()]
        return {"ok": True, "columns": list(df.columns), "rows": rows,
                "seconds": round(time.monotonic() - t0, 3)}
    except dfsql.DfsqlError as exc:
        return {"ok": False, "dfsql_error": True, "type": type(exc).__name__,
                "line": exc.line, "column": exc.column, "message": exc.message,
                "seconds": round(time.monotonic() - t0, 3)}
    except Exception as exc:  # noqa: BLE001 - the test reports the exact failure
        return {"ok": False, "dfsql_error": False, "type": type(exc).__name__,
                "message": str(exc)[:2000], "traceback": traceback.format_exc()[-6000:],
                "seconds": round(time.monotonic() - t0, 3)}


def _statement(path: Path) -> str:
    from dfsql.cli import _statements

    return _statements(path)[0]


def client_main() -> int:
    """Run every query in the session ``dfsql.session()`` makes; print the JSON report."""
    import dfsql
    from dfsql.cli import register_paper_tables

    t0 = time.monotonic()
    out: dict[str, Any] = {}
    try:
        spark = dfsql.session()
        out["session_seconds"] = round(time.monotonic() - t0, 3)
        out["session"] = _session_info(spark)
        register_paper_tables(spark)
        queries = {
            "plain": PLAIN_SQL,
            "fig06": _statement(PAPER / "fig06_batch_global.sql"),
            "fig10": _statement(PAPER / "fig10_fixed_batch.sql"),
            "sessions": SESSIONS_SQL,
            "bad_windowed": BAD_WINDOWED_SQL,
            "bad_plain": BAD_PLAIN_SQL,
        }
        out["queries"] = {name: _run_query(spark, text) for name, text in queries.items()}
        spark.stop()
    except Exception:  # noqa: BLE001 - set-up failure: report it as data
        out["fatal"] = traceback.format_exc()[-6000:]
    out["total_seconds"] = round(time.monotonic() - t0, 3)
    print(MARKER + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(client_main())
