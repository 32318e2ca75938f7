"""One client's long tasks leave task slots for the others (issue #52, item 8): ``dfsql
serve`` as a command (its own Spark, as an operator starts it: the test run's Spark is
``local[2]``), one user's ``range(200000) CROSS JOIN range(200000)`` holding its two
long tasks, and another user's ``SELECT 1`` and small queries over a table answered
beside it. On ``local[2]`` they waited for one of the join's tasks to end (56 s in the
issue, minutes on a loaded machine); ``dfsql serve`` now runs more task threads than
cores (``--task-slots``, :data:`dfsql.session.SERVE_TASK_SLOTS`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

from dfsql.server.auth import hash_line
from tests.conftest import wait_until
from tests.server.restarts import ROOT, _free_port, _wait_for

PASSWORD = "s3cret"
JOIN = "SELECT count(*) FROM range(200000) a CROSS JOIN range(200000) b"


def _connect(port: int, user: str):
    from pyhive import hive

    return hive.connect(host="127.0.0.1", port=port, auth="CUSTOM", username=user,
                        password=PASSWORD)


def _join_tasks_running(cur) -> int:
    """The running tasks of the join's stage (its two tasks; the broadcast's is one)."""
    rows = cur.poll(get_progress_update=True).progressUpdateResponse.rows or []
    return max((int(r[5]) for r in rows if r[3] == "2"), default=0)


def _answer(conn, statement: str, seconds: float = 15.0) -> tuple[list, float]:
    """``statement``'s rows and how long it took, failing past ``seconds`` (async: a
    statement stuck behind the join must fail the test, not hang it)."""
    from TCLIService import ttypes as tt

    cur = conn.cursor()
    t0 = time.monotonic()
    cur.execute(statement, async_=True)
    done = (tt.TOperationState.FINISHED_STATE, tt.TOperationState.ERROR_STATE)
    finished = wait_until(lambda: cur.poll().operationState in done, seconds)
    took = time.monotonic() - t0
    if not finished:
        cur.cancel()
    assert finished, f"{statement!r} not answered within {took:.0f} s"
    return cur.fetchall(), took


def test_a_trivial_statement_beside_a_join_holding_two_long_tasks(tmp_path):
    users = tmp_path / "users"
    users.write_text("".join(hash_line(u, PASSWORD, iterations=1000) + "\n"
                             for u in ("hog", "bob")))
    port = _free_port()
    log = tmp_path / "serve.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               DFSQL_WAREHOUSE=str(tmp_path / "warehouse"),
               DFSQL_SPARK_LOG=str(tmp_path / "spark.log"))
    for var in ("DFSQL_SPARK_MASTER", "DFSQL_SPARK_REMOTE"):  # the default master
        env.pop(var, None)
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dfsql.cli", "serve", "--port",
                                 str(port), "--auth", "PLAIN", "--password-file", str(users)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    conns = []
    try:
        _wait_for(log, "dfsql serving", proc, 300)
        bob = _connect(port, "bob")
        conns.append(bob)
        warm = bob.cursor()  # the JVM's first statements compile: not what is timed
        warm.execute("CREATE TABLE small USING parquet AS SELECT id FROM range(1000)")
        for statement in ("SELECT 1 AS one", "SELECT count(*) FROM small"):
            warm.execute(statement)
            warm.fetchall()
        hog = _connect(port, "hog")
        conns.append(hog)
        cur = hog.cursor()
        cur.execute(JOIN, async_=True)
        # both its tasks running (each is half the join: minutes)
        assert wait_until(lambda: _join_tasks_running(cur) == 2, 120), log.read_text()
        took = {}
        rows, took["SELECT 1"] = _answer(bob, "SELECT 1 AS one")
        assert rows == [(1,)]
        rows, took["count"] = _answer(bob, "SELECT count(*), sum(id) FROM small")
        assert rows == [(1000, 499500)]
        rows, took["group"] = _answer(bob, "SELECT id % 3 AS k, count(*) AS n FROM small "
                                           "GROUP BY id % 3 ORDER BY k")
        assert rows == [(0, 334), (1, 333), (2, 333)]
        print("\nbeside the join's two tasks: " + ", ".join(
            f"{k} {v:.2f} s" for k, v in took.items()))
        assert _join_tasks_running(cur) == 2  # the join still holds its two
        cur.cancel()
    finally:
        for c in conns:
            with contextlib.suppress(Exception):
                c.close()
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
