"""``dfsql.session()``: reuses the active session and creates sessions with dfsql's defaults.

The run shares one JVM (the ``spark`` fixture), so creation-time settings are checked on
that session, which ``session()`` created; which of dfsql's defaults a user's own Spark
settings replace is checked in a process of its own (a JVM's settings are fixed when it
starts); the precedence of URLs is checked on ``_target`` without starting another Spark.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from jvm_archive import driver_flags
from pyspark.sql import SparkSession

import dfsql
from dfsql.session import _target, session


def test_returns_the_active_session(spark: SparkSession) -> None:
    from dfsql.session import active_session

    assert active_session() is spark
    assert session() is spark
    assert session("local[1]") is spark  # an active session wins over any URL


def test_the_active_session_is_this_threads(spark: SparkSession) -> None:
    """Another thread's session making a DataFrame (as an endpoint's connection does for
    each result) marks it active for the whole Python process, in PySpark; dfsql's
    active session stays each thread's own: this thread's, and the other's in its own."""
    import threading

    from dfsql.api import _session_id
    from dfsql.session import active_session

    other = spark.newSession()
    seen: dict[str, str] = {}

    def elsewhere() -> None:
        other.createDataFrame([(1,)], "a INT").collect()
        seen["there"] = _session_id(active_session())

    spark.range(3).createOrReplaceTempView("only_in_the_tests_session")
    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    try:
        assert SparkSession.getActiveSession() is other  # PySpark's, for the process
        assert seen["there"] == _session_id(other)
        assert active_session() is spark and session() is spark
        # a statement without a session runs on this thread's (the view is only there)
        assert dfsql.sql("SELECT COUNT(*) AS n FROM only_in_the_tests_session").first().n == 3
    finally:
        spark.catalog.dropTempView("only_in_the_tests_session")


def test_package_level_session_stays_callable(spark: SparkSession) -> None:
    """Importing the submodule ``dfsql.session`` rebinds the package attribute of the same
    name; ``dfsql.session()`` must still be the function (the CLI calls it)."""
    importlib.import_module("dfsql.session")  # the import is what could shadow it

    assert callable(dfsql.session)
    assert dfsql.session() is spark


def test_workers_use_this_interpreter(spark: SparkSession) -> None:
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ.get("PYSPARK_DRIVER_PYTHON")
    worker = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable)
    assert worker.collect() == [sys.executable]


def test_ui_disabled(spark: SparkSession) -> None:
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.uiWebUrl is None


def test_timezone_utc(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    row = spark.sql("SELECT CAST(TIMESTAMP '2015-09-01 12:00:00' AS LONG) AS s").first()
    assert row is not None and row.s == 1441108800


def test_arrow(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"


#: what a new process's dfsql.session() and a new session of its context hold
_SETTINGS_PROGRAM = """
import json, dfsql
spark = dfsql.session()
keys = ["spark.sql.shuffle.partitions", "spark.sql.session.timeZone",
        "spark.sql.execution.arrow.maxBytesPerBatch", "spark.scheduler.mode",
        "spark.sql.streaming.pollingDelay"]
print(json.dumps({"session": [spark.conf.get(k) for k in keys],
                  "new_session": [spark.newSession().conf.get(k) for k in keys],
                  "warehouse": spark.conf.get("spark.sql.warehouse.dir"),
                  "accumulator_socket": spark.sparkContext._accumulatorServer.server_address,
                  "worker_rows": spark.range(3).mapInArrow(lambda b: b, "id LONG").count()}))
"""


def test_the_users_spark_settings_win_over_dfsqls_defaults(tmp_path: Path) -> None:
    """A setting given the way Spark takes it — ``--conf`` to spark-submit (through
    ``PYSPARK_SUBMIT_ARGS``) or ``spark-defaults.conf`` — wins over dfsql's default, in
    the session and in every new session of its context (the endpoint's); the settings
    the user does not give keep dfsql's defaults (4 shuffle partitions, the Arrow batch
    limit); the warehouse, where dfsql keeps its catalog, is not a default. dfsql's
    defaults used to win whatever the user configured."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.sql.session.timeZone  America/New_York\n"
        f"spark.sql.warehouse.dir  {tmp_path / 'not-dfsqls'}\n")
    # the run's JVM flags (tests/jvm_archive.py), without the run's own partitions
    env = {**os.environ, "SPARK_CONF_DIR": str(conf_dir), "PYSPARK_SUBMIT_ARGS":
           f"--conf spark.scheduler.mode=FIFO --driver-java-options "
           f"'{driver_flags(make=False)}' pyspark-shell"}
    run = subprocess.run([sys.executable, "-c", _SETTINGS_PROGRAM], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    expected = ["4", "America/New_York", "2147483647", "FIFO", "100ms"]
    got = json.loads(run.stdout.splitlines()[-1])
    assert (got["session"], got["new_session"]) == (expected, expected)
    # not a default: the warehouse is dfsql's (DFSQL_WAREHOUSE), where its catalog is kept
    assert got["warehouse"].removeprefix("file:").rstrip("/") == \
        str(Path(os.environ["DFSQL_WAREHOUSE"]).resolve())
    # Python workers on Unix sockets (a default too): the driver's accumulator socket
    # file, which PySpark removes only when the context stops, is gone with the program
    assert got["worker_rows"] == 3
    assert isinstance(got["accumulator_socket"], str), got["accumulator_socket"]
    assert not Path(got["accumulator_socket"]).exists()


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets here")
def test_python_workers_on_unix_sockets(spark: SparkSession) -> None:
    """dfsql's sessions talk to their Python workers over Unix sockets, not TCP on the
    loopback (a stream's micro-batch round-trips to its stateful processor)."""
    assert spark.sparkContext.getConf().get("spark.python.unix.domain.socket.enabled") == \
        "true"
    path = Path(spark.sparkContext._accumulatorServer.server_address)
    assert path.is_socket()
    assert spark.range(5).mapInArrow(lambda b: b, "id LONG").count() == 5


def test_local_master(spark: SparkSession) -> None:
    assert spark.sparkContext.master == "local[2]"


@pytest.mark.parametrize(("master", "env", "expected"), [
    (None, {}, ("master", "local[2]")),
    (None, {"DFSQL_SPARK_MASTER": "spark://h:7077"}, ("master", "spark://h:7077")),
    (None, {"DFSQL_SPARK_REMOTE": "sc://h:15002", "DFSQL_SPARK_MASTER": "spark://h:7077"},
     ("remote", "sc://h:15002")),
    ("local[1]", {"DFSQL_SPARK_REMOTE": "sc://h:15002"}, ("master", "local[1]")),
    ("sc://localhost:15002", {}, ("remote", "sc://localhost:15002")),
], ids=["default", "env_master", "env_remote_beats_master", "arg_beats_env", "arg_remote"])
def test_target_precedence(monkeypatch: pytest.MonkeyPatch, master: str | None,
                           env: dict[str, str], expected: tuple[str, str]) -> None:
    monkeypatch.delenv("DFSQL_SPARK_REMOTE", raising=False)
    monkeypatch.delenv("DFSQL_SPARK_MASTER", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert _target(master) == expected


def test_shared_views(spark: SparkSession, sample_tables: list[str]) -> None:
    """The fixtures' views exist with the schemas other tests rely on."""
    assert set(sample_tables) == {"scores", "paper_watermarks", "employees", "departments",
                                  "orders"}
    assert spark.table("scores").schema.simpleString() == (
        "struct<key:string,value:bigint,event_time:timestamp,arrival_time:timestamp>")
    assert spark.table("paper_watermarks").schema.simpleString() == (
        "struct<processing_time:timestamp,watermark:timestamp>")
    total = spark.sql("SELECT SUM(value) AS t, MIN(event_time) AS m FROM scores").first()
    assert total is not None and total.t == 51
    assert str(total.m) == "2015-09-01 12:00:30"


def test_cancelling_a_statement_stops_the_jobs_it_would_start_next(spark) -> None:
    """One statement runs several Spark jobs in turn (a replay: its timeline, then its
    panes). A cancel that stops only the running job lets the statement's thread start
    the next one (the endpoint's timeout let a statement's later jobs run to the end):
    ``cancel_until`` stops those too. Each job here would take 40 s on two cores."""
    import threading
    import time

    from dfsql.session import cancel_until

    slow = ("SELECT COUNT(*) FROM (SELECT reflect('java.lang.Thread', 'sleep', "
            "CAST(1000 AS BIGINT)) AS r FROM range(0, 80, 1, 80)) WHERE r IS NULL")
    group = "dfsql-test-cancel-next"
    outcomes: list[str] = []
    finished = threading.Event()

    def statement() -> None:
        spark.sparkContext.setJobGroup(group, "two jobs in turn", interruptOnCancel=True)
        try:
            for _ in range(2):
                try:
                    spark.sql(slow).collect()
                    outcomes.append("ran")
                except Exception:  # noqa: BLE001 - the cancelled job's error
                    outcomes.append("cancelled")
        finally:
            spark.sparkContext.setJobGroup(None, None)  # type: ignore[arg-type]
            finished.set()

    tracker = spark.sparkContext.statusTracker()
    worker = threading.Thread(target=statement)
    t0 = time.monotonic()
    worker.start()
    while not tracker.getJobIdsForGroup(group):  # the first job runs
        time.sleep(0.05)
        assert time.monotonic() - t0 < 120
    cancel_until(spark, group, finished)
    worker.join(120)
    assert not worker.is_alive()
    assert outcomes == ["cancelled", "cancelled"]
    assert time.monotonic() - t0 < 30  # neither ran its 40 s


def test_dfsql_leaves_the_users_settings_as_they_were(spark: SparkSession,
                                                     tmp_path: Path) -> None:
    """Every setting dfsql changes on the user's session for a statement is put back
    (docs/reference.md#processing-time's replay, a Parquet
    file with nanosecond times read by dfsql.read_parquet): the session's settings after
    are the ones before, key for key."""
    import pandas as pd

    spark.createDataFrame(
        [("a", 1, "2024-01-01 00:00:10", "2024-01-01 00:00:20")],
        "key STRING, value BIGINT, event_time STRING, arrival_time STRING",
    ).selectExpr("key", "value", "CAST(event_time AS TIMESTAMP) AS event_time",
                 "CAST(arrival_time AS TIMESTAMP) AS arrival_time"
                 ).createOrReplaceTempView("settings_events")
    nanos = tmp_path / "nanos.parquet"
    pd.DataFrame({"t": pd.to_datetime(["2024-01-01 00:00:00.000000001"])}).to_parquet(nanos)
    query = "SELECT key, SUM(value) AS total FROM {t} GROUP BY key WINDOW FIXED(1 MINUTE) " \
            "ON event_time"
    before = dict(spark.conf.getAll)

    assert dfsql.sql(query.format(t="settings_events"), spark).count() == 1  # a batch
    replay = query.format(t="settings_events") + " PROCESSING TIME arrival_time"
    assert dfsql.sql(replay, spark).count() == 1
    assert dfsql.read_parquet(nanos, spark).count() == 1

    after = dict(spark.conf.getAll)
    assert {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys()
            if before.get(k) != after.get(k)} == {}
