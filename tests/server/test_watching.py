"""Watching running queries over the endpoint (issue #56; docs/guides/watching.md): the
system tables through PyHive, each user seeing their own queries and an admin all; the
judge letting ``system.streaming_queries`` and ``system.streaming_progress`` be read and
nothing else under ``system``; ``/metrics`` scraped over HTTP, its counters equal to the
rows fed; and the progress of a query across ``kill -9`` and a ``--state-dir`` restart:
batch ids 0..N, no gap, no batch twice.

One real ``dfsql serve`` (PLAIN users, an admin, a state directory, ``--metrics-port
0``), killed and started once more on its state directory for the last test: servers
are expensive.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from pyhive import hive
from pyhive.exc import OperationalError

from dfsql.server.auth import hash_line
from tests.server.restarts import QUERY, ROOT, T0, _events, _group_alive, _wait, _write

PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "root": "root-pw"}
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


class _Served:
    """``dfsql serve`` with PLAIN users in a process group of its own (one SIGKILL ends
    its JVM and Python workers with it), and a connection per user."""

    def __init__(self, tmp: Path, life: int, *args: str) -> None:
        self.log = tmp / f"serve-{life}.log"
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable,
                   DFSQL_WAREHOUSE=str(tmp / "warehouse"),
                   DFSQL_SPARK_LOG=str(tmp / f"spark-{life}.log"))
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dfsql.cli", "serve", "--port", "0", "--auth",
                 "PLAIN", "--password-file", str(tmp / "users"), "--admin", "root",
                 "--data-root", str(tmp), "--metrics-port", "0", *args],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                start_new_session=True)
        while "dfsql serving" not in self.log.read_text():  # no deadline: a loaded JVM
            assert self.proc.poll() is None, self.log.read_text()
            time.sleep(0.2)
        banner = self.log.read_text()
        self.port = int(re.search(r"HiveServer2 on [^:\s]+:(\d+)", banner).group(1))
        self.metrics = re.search(r"metrics on (http://\S+/metrics)", banner).group(1)
        self.conns = {u: self.connect(u) for u in PASSWORDS}

    def connect(self, user: str, password: str | None = None) -> hive.Connection:
        return hive.connect(host="127.0.0.1", port=self.port, username=user, auth="CUSTOM",
                            password=password or PASSWORDS[user])

    def rows(self, user: str, statement: str) -> list[tuple]:
        cur = self.conns[user].cursor()
        cur.execute(statement)
        return cur.fetchall() if cur.description else []

    def refused(self, user: str, statement: str) -> tuple[str, str]:
        """(SQLSTATE, message) of a statement the server refuses."""
        with pytest.raises(OperationalError) as info:
            self.conns[user].cursor().execute(statement)
        status = info.value.args[0].status
        return status.sqlState, status.errorMessage

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)
        while _group_alive(self.proc.pid):
            time.sleep(0.05)


def scrape(url: str) -> dict[str, float]:
    """``/metrics`` as {``name{labels}``: value}, read as Prometheus reads it."""
    with urllib.request.urlopen(url, timeout=120) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("dfsql_")}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("watching").resolve()
    (tmp / "users").write_text("".join(hash_line(u, p, 1000) + "\n"
                                       for u, p in PASSWORDS.items()))
    src = tmp / "in"
    src.mkdir()
    _write(src / "part-0.parquet", _events(0, 60))
    _write(src / "part-1.parquet", _events(60, 120))
    server = _Served(tmp, 1, "--state-dir", str(tmp / "state"), "--stream", f"live={src}")
    for user in ("alice", "bob"):
        server.rows(user, f"CREATE STREAMING QUERY {user}_q AS {QUERY.format(t='live')}")
    for user in ("alice", "bob"):
        assert _wait(lambda u=user: server.rows(
            "root", f"SELECT input_rows FROM system.streaming_queries WHERE name = '{u}_q'"),
            [(120,)]) == [(120,)]
    yield server, tmp
    server.kill()


def test_each_user_sees_their_own_queries_and_an_admin_all(served):
    server, _ = served
    for user, want in (("alice", ["alice_q"]), ("bob", ["bob_q"]),
                       ("root", ["alice_q", "bob_q"])):
        shown = server.rows(user, "SELECT name, owner FROM system.streaming_queries "
                                  "ORDER BY name")
        assert shown == [(q, q[:-2]) for q in want], user
        progress = server.rows(user, "SELECT query, SUM(input_rows) FROM "
                                     "system.streaming_progress GROUP BY query ORDER BY query")
        assert progress == [(q, 120) for q in want], user
    # quoted and cased as Spark reads names; in a CTE, a join and a subquery
    assert server.rows("alice", "WITH p AS (SELECT * FROM `system`.`Streaming_Progress`) "
                                "SELECT DISTINCT q.name FROM p JOIN SYSTEM.streaming_queries q "
                                "ON q.name = p.query WHERE p.batch_id IN "
                                "(SELECT batch_id FROM system.streaming_progress)") == [
        ("alice_q",)]


@pytest.mark.parametrize("statement", [
    "INSERT INTO system.streaming_progress SELECT * FROM system.streaming_progress",
    "INSERT OVERWRITE TABLE system.streaming_queries SELECT * FROM system.streaming_queries",
    "CREATE TABLE system.streaming_progress AS SELECT 1 AS batch_id",
    "CREATE VIEW system.streaming_queries AS SELECT 'bob_q' AS name",
    "DROP TABLE system.streaming_queries",
    "CREATE DATABASE system",
    "CREATE DATABASE IF NOT EXISTS `SYSTEM`",
    "USE system",
    "SELECT * FROM system.other_table",
    "SELECT * FROM spark_catalog.system.streaming_progress",
    "ALTER TABLE system.streaming_progress ADD COLUMNS (x INT)",
])
def test_the_judge_refuses_every_other_use_of_system(served, statement):
    server, _ = served
    state, message = server.refused("alice", statement)
    assert state == "42501", (statement, message)
    assert "system" in message.lower(), message


def test_quoting_games_read_nothing_of_another_user(served):
    """One quoted part with a dot is one name: no such table; ``IDENTIFIER('…')`` is a
    name Spark resolves, in a database ``system`` no client can make; a generated view's
    name is no other statement's (dropped once planned, and in the client's own
    session)."""
    server, _ = served
    for statement in ("SELECT * FROM `system.streaming_progress`",
                      "SELECT * FROM IDENTIFIER('system.streaming_progress')",
                      "SELECT name FROM IDENTIFIER('system.streaming_queries') WHERE true",
                      "SELECT * FROM __dfsql_system_0", "SELECT * FROM __dfsql_system_1"):
        state, message = server.refused("alice", statement)
        assert state != "42501" and "TABLE_OR_VIEW_NOT_FOUND" in message, message
    # a one-part system table's name alone is no system table either
    state, message = server.refused("alice", "SELECT * FROM streaming_progress")
    assert "TABLE_OR_VIEW_NOT_FOUND" in message, message


def test_the_metrics_count_what_was_fed_and_the_endpoint(served):
    server, _ = served
    asked = time.time()
    before = scrape(server.metrics)
    answered = time.time()
    assert before['dfsql_input_rows_total{query="alice_q"}'] == 120
    assert before['dfsql_input_rows_total{query="bob_q"}'] == 120
    # every row of the feed is on time (arrival = event + 5 s, DELAY 10 SECONDS)
    assert before['dfsql_late_rows_total{query="alice_q"}'] == 0
    assert before['dfsql_dropped_rows_total{query="alice_q"}'] == 0
    # the frontier: the last arrival (2:04, its row not run yet: it waits for a later
    # one); the watermark: the largest event run (1:58, arrived 2:03) - 10 s = 1:48
    wm = before['dfsql_watermark_seconds{query="alice_q"}']
    assert wm == (T0 + timedelta(minutes=1, seconds=48)).timestamp()
    assert before['dfsql_frontier_seconds{query="alice_q"}'] - wm == 16
    # the lag: the wall clock at the scrape minus the watermark (docs/guides/watching.md)
    lag = before['dfsql_watermark_lag_seconds{query="alice_q"}']
    assert asked - wm <= lag <= answered - wm
    assert before["dfsql_sessions"] == 3  # alice's, bob's and root's connections
    with pytest.raises(Exception):  # noqa: B017 (PyHive's: the login refused)
        server.connect("alice", "wrong")
    server.refused("bob", "SELECT * FROM system.nothing")
    server.rows("bob", "SELECT 1")
    after = scrape(server.metrics)
    assert after["dfsql_login_failures_total"] == before["dfsql_login_failures_total"] + 1
    for outcome in ("error", "finished"):
        key = f'dfsql_statements_total{{outcome="{outcome}"}}'
        assert after[key] == before[key] + 1, outcome


def test_progress_goes_on_after_kill_9_without_gaps_or_doubles(served):
    """Killed, three more files written, started again on its state directory: each
    query's progress has every batch once, from 0, and its rows add up to what was fed."""
    server, tmp = served
    batches = {r[0]: r[1] for r in server.rows(
        "root", "SELECT query, COUNT(*) FROM system.streaming_progress GROUP BY query")}
    server.kill()
    src = tmp / "in"
    _write(src / "part-2.parquet", _events(120, 200))
    _write(src / "part-3.parquet", _events(200, 280))
    _write(src / "part-4.parquet", _events(280, 360))
    again = _Served(tmp, 2, "--state-dir", str(tmp / "state"))
    try:
        for q in ("alice_q", "bob_q"):
            assert _wait(lambda q=q: again.rows(
                "root", f"SELECT input_rows FROM system.streaming_queries WHERE name = '{q}'"),
                [(360,)]) == [(360,)]
            ids = [r[0] for r in again.rows(
                "root", f"SELECT batch_id FROM system.streaming_progress WHERE query = '{q}' "
                        "ORDER BY batch_id")]
            assert ids == list(range(len(ids))) and len(ids) > batches[q], (q, ids)
            [(rows,)] = again.rows("root", "SELECT SUM(input_rows) FROM "
                                           f"system.streaming_progress WHERE query = '{q}'")
            assert rows == 360
        metrics = scrape(again.metrics)
        assert metrics['dfsql_input_rows_total{query="alice_q"}'] == 360
    finally:
        served[0].proc = again.proc  # the fixture's kill ends this life
