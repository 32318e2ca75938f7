"""Shared fixtures: one SparkSession for the whole run and the temp views tests query.

Starting Spark costs seconds, so every test shares the session-scoped ``spark``. Views are
built with ``CREATE TEMP VIEW … AS SELECT … FROM VALUES`` (or a CSV read for the paper's
data) so building them starts no Python workers and costs milliseconds.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from pyspark.sql import SparkSession

from dfsql.continuous_queries import QUERIES
from dfsql.session import active_session, session, setting_while, stop_session

try:
    from jvm_archive import driver_flags  # tests/ is on the path (pytest, scripts in it)
except ImportError:  # imported as tests.conftest by a program run from the checkout
    from tests.jvm_archive import driver_flags

#: CI (CI=true, a fresh clone) runs every property test on Hypothesis' fixed examples, so
#: a red run is the same run again on any machine (and a developer's runs, which keep
#: exploring at random, find what it does not)
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")

# Every JVM that pyspark starts in this run (the run's sessions, and the shells, jobs and
# clients the tests start, which inherit the environment) compiles with C1 only: C2's
# compiler threads cost this 2-core machine more CPU than they win back (a shell's `-e`
# query: 10.9-13.5 s instead of 15.9-16.2 s; the run's own sessions, which live for the
# whole run, too: five stream and replay modules on two xdist workers took 176 s and
# 153 s with both compilers, 140 s and 136 s with C1), with one compiler thread and the
# serial collector (their heaps are small; the collector's parallel and concurrent
# threads compete for the same two cores: tests/spark/stream/test_stream_engine_clock.py alone
# 69 s instead of 73 s); and maps a class-data-sharing archive of Spark's classes
# (tests/jvm_archive.py: a driver's start and first query 10 s → 5 s), made by the run's
# first process before its workers start.
#
# Every JVM of the run shuffles into one partition rather than dfsql's default of 4, given
# as a user gives it: `--conf` to spark-submit, which dfsql.session() honours. So the
# run's own sessions (the `spark` fixture), the endpoint's sessions in this process
# (new sessions of the same context) and the JVMs the tests start (`dfsql serve`, the
# shells, the CLI, programs, notebook kernels) all plan on one. Measured side by side,
# the restart, terminal and CLI modules: 128 s and 122 s at 4, 110 s and 114 s at 1.
if "PYSPARK_SUBMIT_ARGS" not in os.environ:  # an xdist worker inherits its controller's
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        "--conf spark.sql.shuffle.partitions=1 --driver-java-options "
        f"'{driver_flags(make='PYTEST_XDIST_WORKER' not in os.environ)}' pyspark-shell")

# Every session of the run — this process's, and the shells, servers and jobs it starts —
# keeps its tables in a warehouse of its own (dfsql.warehouse), not in the checkout's
# ./spark-warehouse; each pytest process (an xdist worker too) gets one, removed at exit.
os.environ["DFSQL_WAREHOUSE"] = tempfile.mkdtemp(prefix="dfsql-test-warehouse-")
atexit.register(shutil.rmtree, os.environ["DFSQL_WAREHOUSE"], True)

PAPER_DATA = Path(__file__).resolve().parents[1] / "examples" / "paper"

#: Schemas of the paper's running example (timestamps are read in the session's UTC zone).
SCORES_SCHEMA = "key STRING, value BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP"
WATERMARKS_SCHEMA = "processing_time TIMESTAMP, watermark TIMESTAMP"

#: Small general tables for the plain-SQL fidelity corpus: name -> SQL body of the view.
#: They cover strings, ints, decimals, dates, timestamps, nulls, arrays, maps and structs.
SAMPLE_VIEWS: dict[str, str] = {
    "departments": """
        SELECT CAST(dept_id AS INT) AS dept_id, dept_name,
               CAST(budget AS DECIMAL(12,2)) AS budget, location
        FROM VALUES
          (10, 'Engineering', 500000.00, 'Berlin'),
          (20, 'Sales',       250000.50, 'London'),
          (30, 'Marketing',   120000.00, NULL),
          (40, 'Legal',        80000.00, 'Paris')
        AS t(dept_id, dept_name, budget, location)""",
    "employees": """
        SELECT CAST(emp_id AS INT) AS emp_id, name, CAST(dept_id AS INT) AS dept_id,
               CAST(manager_id AS INT) AS manager_id,
               CAST(salary AS DECIMAL(10,2)) AS salary, CAST(hire_date AS DATE) AS hire_date,
               skills, attrs, address
        FROM VALUES
          (1, 'Alice', 10, NULL, 120000.00, '2015-03-01', array('scala', 'sql', 'python'),
           map('level', 'senior', 'remote', 'no'), named_struct('city', 'Berlin', 'zip', '10115')),
          (2, 'Bob',   10, 1,     95000.50, '2018-07-15', array('python'),
           map('level', 'mid'), named_struct('city', 'Berlin', 'zip', '10117')),
          (3, 'Carol', 20, 1,     70000.00, '2019-01-10', array('excel', 'sql'),
           map('level', 'mid', 'remote', 'yes'), named_struct('city', 'London', 'zip', 'E1')),
          (4, 'Dan',   20, 3,     55000.25, '2021-11-30', CAST(array() AS ARRAY<STRING>),
           map('level', 'junior'), named_struct('city', 'London', 'zip', NULL)),
          (5, 'Eve',   30, 1,     82000.00, '2017-05-20', array('design', 'sql'),
           map('level', 'senior'), NULL),
          (6, 'Frank', NULL, 1,   40000.00, '2023-02-01', NULL,
           CAST(NULL AS MAP<STRING,STRING>), named_struct('city', 'Paris', 'zip', '75001')),
          (7, 'Grace', 10, 2,    105000.00, '2016-09-09', array('go', 'sql', 'rust'),
           map('level', 'senior', 'remote', 'yes'), named_struct('city', 'Munich', 'zip', '80331'))
        AS t(emp_id, name, dept_id, manager_id, salary, hire_date, skills, attrs, address)""",
    "orders": """
        SELECT CAST(order_id AS INT) AS order_id, CAST(emp_id AS INT) AS emp_id,
               CAST(amount AS DECIMAL(10,2)) AS amount, CAST(order_ts AS TIMESTAMP) AS order_ts,
               status, CAST(quantities AS ARRAY<INT>) AS quantities, payload
        FROM VALUES
          (100, 2, 250.00,  '2024-01-05 09:15:00', 'shipped',   array(1, 2),
           '{"channel":"web","tags":["a","b"],"rating":4}'),
          (101, 3, 99.99,   '2024-01-05 09:20:30', 'pending',   array(3),
           '{"channel":"store","tags":[],"rating":5}'),
          (102, 3, 1200.00, '2024-01-05 10:01:00', 'shipped',   array(1, 1, 1),
           '{"channel":"web","rating":3}'),
          (103, 4, NULL,    '2024-01-06 11:00:00', 'cancelled', NULL, NULL),
          (104, 2, 310.50,  '2024-01-06 11:04:59', 'shipped',   array(5, 0),
           '{"channel":"phone","tags":["c"]}'),
          (105, 9, 15.00,   '2024-01-07 23:59:59', 'pending',   array(2),
           '{"channel":"web","tags":["a"],"rating":2}'),
          (106, 7, 640.00,  '2024-01-07 08:00:00', 'shipped',   CAST(array() AS ARRAY<INT>),
           'not json')
        AS t(order_id, emp_id, amount, order_ts, status, quantities, payload)""",
}


#: The modules that take longest (a minute or more of a run here: ``--durations``), longest
#: first. They are collected first, so that pytest-xdist (whole modules to each worker,
#: ``--no-loadscope-reorder`` in ./dev) starts them first and the run does not end with one
#: long module on one worker while the others wait.
SLOW_MODULES = (
    "spark/stream/test_streaming.py",
    "shell/test_terminal.py",
    "test_distribution.py",
    "server/test_thrift.py",
    "spark/stream/test_stream_recovery.py",
    "spark/stream/test_stream_engine_clock.py",
    "spark/replay/test_replay_aggregates.py",
    "spark/stream/test_stream_soak.py",
    "test_catalog.py",
    "server/test_continuous_restart.py",
    "server/test_continuous_start.py",
    "test_docs.py",  # 182-228 s alone (loaded): the databases guide's worked example, 2 server lives
    "spark/stream/test_continuous_totals.py",
    "bench/test_nexmark_queries.py",  # about 110 s: every Nexmark query on 100k events
    "bench/test_nexmark_live.py",  # 57-180 s at load 5-20: q0 and q7 streamed, both sides
    "server/test_endpoint_guard.py",
    "server/test_endpoint_limits.py",
    "spark/stream/test_stream_inputs.py",
    "test_cli.py",
    "spark/test_flights.py",
    "spark/test_sampling_windows.py",
    "spark/test_time_types.py",
    "server/test_spark_death.py",
    "test_progress.py",
    "server/test_stream_flag.py",
    "server/test_endpoint_costs.py",
    "test_beeline_command.py",
    "server/test_watching.py",  # about 190 s: two lives of one dfsql serve
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    rank = {m: i for i, m in enumerate(SLOW_MODULES)}

    def module_rank(item: pytest.Item) -> int:
        try:
            return rank.get(item.path.resolve().relative_to(here).as_posix(), len(rank))
        except ValueError:
            return len(rank)

    items.sort(key=module_rank)  # stable: the order within a module and of the rest stays


#: The run's own session evaluates Spark's expressions interpreted, without generating and
#: compiling Java for each plan (Spark's own tests run both modes, which must give the same
#: rows): on the tests' small inputs Janino's compilation is most of a query's JVM time.
#: Five stream and replay modules, one process, alternating: 172 s and 173 s (CPU 228 s,
#: 231 s) with code generation, 154 s and 154 s (CPU 203 s, 205 s) without. Only this
#: session: the endpoint's sessions in this process (new sessions of its context) and
#: every JVM the tests start (servers, shells, the CLI, programs, the cluster) generate
#: code, as a user's do, so every path also runs that way somewhere in the suite. (In this
#: mode Spark's ``catalog.listTables`` cannot decode its own rows: the warehouse's view
#: sync, the shell's completion and the tests list names with SHOW VIEWS and SHOW TABLES,
#: which resolve no table; ``\d`` and the endpoint's metadata calls, which show each
#: table's type, are tested through sessions that generate code.)
INTERPRETED = {"spark.sql.codegen.wholeStage": "false",
               "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one SparkSession of the test run (``local[2]``), stopped at the end.

    Its queries shuffle into one partition rather than dfsql's default 4: a stream's
    micro-batch costs 150-300 ms per stateful Python task even without rows
    (benchmarks/RESULTS.md), and most tests check what the panes are, which does not
    depend on how keys spread (one partition: stream modules 15% and replay modules 5%
    faster, measured side by side). The tests that hold one path to another over keys
    spread across partitions (the stream and the replay over random keys, the replay and
    the model, the kernels and Spark's aggregates, the changelog order across
    partitions, a keyless replay's windows over tasks, the restarts, the soak) say
    ``@pytest.mark.shuffle_partitions(2)``."""
    s = session("local[2]")
    s.conf.set("spark.sql.shuffle.partitions", "1")  # also under a user's own arguments
    for key, value in INTERPRETED.items():
        s.conf.set(key, value)
    yield s
    stop_session()


@pytest.fixture(scope="module", autouse=True)
def _what_the_module_left_running() -> Iterator[None]:
    """What a module started in the run's JVM ends with it: its streams and continuous
    queries (a stream left running takes a core's share of micro-batches from every
    later module on the worker) and its global temporary views. Those live as long as
    the JVM, which an xdist worker shares across modules: an endpoint module's
    continuous query ``alice_live`` left its view behind, and the next module on that
    worker to CREATE ``alice_live`` was refused, the view being no client's of its server
    (CI, stop 64)."""
    before = _left(SparkSession.getActiveSession()) if _running() else (set(), set(), set())
    yield
    if not _running():
        return
    spark = SparkSession.getActiveSession()
    views, streams, queries = (now - then for now, then in zip(_left(spark), before, strict=True))
    for name in queries:
        r, _, _ = QUERIES.drop(name)
        if r is not None:
            r.query.stop()
    for q in spark.streams.active:
        if q.id in streams:
            q.stop()
    for name in views:
        spark.catalog.dropGlobalTempView(name)


def _left(spark: SparkSession) -> tuple[set[str], set[str], set[str]]:
    """The global temporary views of the run's JVM (``global_temp`` is one per JVM), the
    streams of the run's session and the process's continuous queries."""
    views = {r.viewName for r in spark.sql("SHOW VIEWS IN global_temp").collect()
             if r.namespace == "global_temp"}  # not the session's own temp views
    return views, {q.id for q in spark.streams.active}, {r.name for r in QUERIES.listed()[0]}


def _running() -> bool:
    """Whether this process has started the run's session (modules without Spark do not
    start it for this)."""
    s = SparkSession.getActiveSession()
    return s is not None and not s.sparkContext._jsc.sc().isStopped()


@pytest.fixture(autouse=True)
def _the_runs_session_active(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that used the run's session leaves it the active one, as it found it: a
    DataFrame made from another session (``spark.newSession()``, as an endpoint
    connection's) makes that one active (PySpark: for the process, and in the JVM for
    its thread), and a later test's ``dfsql.session()`` would run on it, without the
    run's views."""
    yield
    if "spark" in request.fixturenames:
        spark = request.getfixturevalue("spark")
        if any(s is not spark for s in (active_session(), SparkSession.getActiveSession())):
            spark.createDataFrame([], "a INT")  # how PySpark marks a session active


@pytest.fixture(autouse=True)
def _shuffle_partitions(request: pytest.FixtureRequest) -> Iterator[None]:
    """``@pytest.mark.shuffle_partitions(n)`` (on a test or a module): the run's session
    plans on ``n`` shuffle partitions during the test (see :func:`spark`)."""
    marker = request.node.get_closest_marker("shuffle_partitions")
    if marker is None:
        yield
        return
    with setting_while(request.getfixturevalue("spark"), "spark.sql.shuffle.partitions",
                       str(marker.args[0])):
        yield


def wait_until(predicate, seconds: float = 30.0) -> bool:
    """Whether ``predicate()`` held within ``seconds`` (asked every 50 ms, once more at
    the end): a bound on a wait, generous enough for a loaded machine."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def register_paper_tables(spark: SparkSession) -> None:
    """The paper's running example as ``scores`` and ``paper_watermarks``."""
    (spark.read.option("header", True).schema(SCORES_SCHEMA)
     .csv(str(PAPER_DATA / "events.csv")).createOrReplaceTempView("scores"))
    (spark.read.option("header", True).schema(WATERMARKS_SCHEMA)
     .csv(str(PAPER_DATA / "watermarks.csv")).createOrReplaceTempView("paper_watermarks"))


def register_sample_tables(spark: SparkSession) -> None:
    """``employees``, ``departments`` and ``orders`` (see :data:`SAMPLE_VIEWS`)."""
    for name, body in SAMPLE_VIEWS.items():
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {body}")


def paper_stream_dir(path: Path) -> Path:
    """The paper's scores as parquet files, one per arrival minute (modified one second
    apart, in that order), and a last row an hour later with no event time (it belongs to
    no window: it moves the stream's frontier past the paper's last instant)."""
    import pandas as pd

    frame = pd.read_csv(PAPER_DATA / "events.csv",
                        parse_dates=["event_time", "arrival_time"])
    sentinel = frame.iloc[-1:].copy()
    sentinel["arrival_time"] += pd.Timedelta(hours=1)
    sentinel["event_time"] = pd.NaT
    frame = pd.concat([frame, sentinel], ignore_index=True)
    path.mkdir(parents=True, exist_ok=True)
    for i, (_, part) in enumerate(frame.groupby(frame["arrival_time"].dt.floor("min"))):
        part_file = path / f"part-{i:03d}.parquet"
        part.to_parquet(part_file, index=False, coerce_timestamps="us")
        modified_in_order(part_file, i)
    return path


def modified_in_order(part: Path, i: int) -> None:
    """Gives a stream's ``i``-th file the ``i``-th of modification times one second apart:
    a file source reads in modification-time order, and files written within one tick of
    the clock tie (read in any order: a later file's rows first)."""
    os.utime(part, (1_700_000_000 + i, 1_700_000_000 + i))


@pytest.fixture(scope="session")
def paper_tables(spark: SparkSession) -> list[str]:
    """Registers ``scores`` and ``paper_watermarks``; returns the view names."""
    register_paper_tables(spark)
    return ["scores", "paper_watermarks"]


@pytest.fixture(scope="session")
def sample_tables(spark: SparkSession, paper_tables: list[str]) -> list[str]:
    """Registers the paper's views and the general ones; returns all view names."""
    register_sample_tables(spark)
    return [*paper_tables, *SAMPLE_VIEWS]
