"""Create or reuse the SparkSession dfsql runs on.

Which Spark, in order of precedence:

1. the session active in this thread (:func:`active_session`) — a notebook, a test
   fixture or an application that built its own session keeps it, with its own settings;
   dfsql never reconfigures a session it did not create;
2. the ``master`` argument (a ``sc://host:port`` URL means Spark Connect);
3. ``DFSQL_SPARK_REMOTE`` — a Spark Connect URL, ``SparkSession.builder.remote(...)``;
4. ``DFSQL_SPARK_MASTER`` — a cluster master URL (``spark://…``, ``yarn``, ``k8s://…``);
5. ``local[2]`` — two cores is enough for the small inputs dfsql's tests and demo use and
   leaves the rest of the machine to the Python side.

Every setting below is a default: one the user's own Spark configuration gives
(``spark-defaults.conf``, ``--conf`` to spark-submit or in ``PYSPARK_SUBMIT_ARGS``) wins,
as it would in Spark (:func:`_users_settings`); ``spark.driver.memory`` has its own
variable, and the warehouse is always dfsql's, where it keeps its catalog. Over Spark
Connect the SQL settings are set as before: the server owns its configuration, and a
client cannot tell which of its values were given.

Why each setting (for sessions dfsql creates):

* ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` = ``sys.executable`` — otherwise Spark's
  Python workers start whatever ``python3`` is on ``PATH``, which lacks dfsql's
  dependencies (or is another minor version, which PySpark refuses).
* ``spark.ui.enabled=false`` — the web UI costs start-up time and a port; nobody looks at
  it in tests or the CLI, and parallel test runs would fight over port 4040.
* ``spark.ui.showConsoleProgress=false`` — progress bars interleave with query output.
* ``spark.sql.shuffle.partitions=4`` — the default 200 makes every aggregation over a
  ten-row table schedule 200 tasks; 4 matches ``local[2]`` and small data.
* ``spark.sql.session.timeZone=UTC`` — event and processing times are read and shown in
  UTC, so results (and the paper's figures) do not depend on the machine's zone.
* ``spark.sql.execution.arrow.pyspark.enabled=true`` — ``toPandas``/``createDataFrame``
  from pandas go through Arrow, which the streaming executor relies on for speed.
* ``spark.sql.execution.arrow.maxBytesPerBatch=2147483647`` — at Spark's 64 MB default
  the Arrow writer that feeds ``mapInArrow`` measures its batch's size after *every row*
  (``ArrowWriter.sizeInBytes``, which walks the vectors); ``Int.MaxValue`` is the value
  Spark treats as "no byte limit" and skips that call. Batches are still cut at
  ``maxRecordsPerBatch`` (10,000) rows. Measured on 4M rows into the replay driver: about
  0.75 µs of JVM CPU per row less (3 s of the 4M replay benchmark's CPU).
* ``spark.sql.streaming.pollingDelay=100ms`` — a stream with nothing new to read asks
  its source again after this delay (Spark's default, 10 ms, lists a file source's
  directory a hundred times a second): an idle continuous query over a file stream cost
  8.4-8.6 s of JVM CPU per 30 s at 10 ms and 2.9-3.0 s at 100 ms (measured, one query,
  2 cores), while a file that arrives is read at most 0.1 s later — less than a
  micro-batch of the bucket processor takes (150-300 ms). Rows that keep arriving are
  read without any delay: Spark waits only when a trigger found nothing new.
* ``spark.scheduler.mode=FAIR`` — the endpoint (``dfsql serve``) gives each client
  session a scheduler pool of its own, and only a FAIR context honours pools: under
  Spark's FIFO default a free task slot goes to the oldest job's next task, so one
  client's statement of many tasks holds every other client's ``SELECT 1`` until it
  ends. A job outside any pool (the shell, a program) runs in the default pool, first
  come first served as before. The mode is fixed when the context starts.
* ``spark.python.unix.domain.socket.enabled=true`` (where the platform has Unix sockets)
  — the JVM and its Python workers (a replay's Arrow batches, a stream's stateful
  processor and its round trips to the state server) talk over Unix sockets instead of
  TCP on the loopback: a stream's one-row micro-batch on one shuffle partition took
  305-342 ms against 361-414 ms (benchmarks/RESULTS.md). The socket files are in the
  JVM's temp directory, mode 0755 (only their owner can connect); the driver's
  accumulator socket, which PySpark removes only when the context stops, is removed at
  exit (:func:`_remove_accumulator_socket_at_exit`).
* ``spark.log.level=WARN`` — Spark's INFO chatter on stderr hides dfsql's own messages;
  as a config (rather than ``setLogLevel`` afterwards) it applies from JVM start.
* The JVM's standard error goes to :data:`SPARK_LOG` (``$TMPDIR/dfsql-spark-<uid>.log``;
  ``DFSQL_SPARK_LOG`` names another file, ``-`` keeps the terminal): what the JVM and the
  Python workers it starts print there — the JDK's incubator-module and log4j start-up
  lines, WARN lines such as ``Failed to cancel job group``, PySpark's
  ``TransformWithStateInPandas Python worker …`` lines, which its worker writes to
  stderr unconditionally (no log level covers them) — would otherwise interleave with
  the shell's, the demo's, ``dfsql serve``'s and a program's own output. Spark's errors
  still reach the caller as exceptions (and dfsql's as DfsqlErrors).
* ``spark.driver.memory=4g`` — the driver is also the executor in local mode; 4 GB is
  ample for dfsql's workloads and modest on a 24 GB machine. Only takes effect when this
  call starts the JVM. ``DFSQL_SPARK_DRIVER_MEMORY`` overrides it.
* ``SPARK_LOCAL_IP`` (if unset), ``spark.driver.host`` / ``bindAddress=127.0.0.1`` (local
  masters only) — skips the host-name lookup (and its "resolves to a loopback address"
  warning) that stalls start-up on machines without DNS, and binds no public port.
* ``spark.sql.warehouse.dir`` = the ``warehouse`` argument, ``DFSQL_WAREHOUSE`` or
  ``./spark-warehouse`` — and the session's catalog kept there across runs and shared by
  every process on it (:mod:`dfsql.warehouse`): Spark's in-memory catalog alone
  forgets the tables whose files stay behind. Registering the tables found costs about
  0.13 s each (measured with 20 on this 2-core machine under load); none: nothing.
* ``spark.sql.ansi.enabled`` is deliberately left at Spark's default: dfsql promises plain
  SQL behaves exactly as ``spark.sql`` would.

Measured on the development machine (2 cores, Java 17): a cold ``session()`` takes about
4.2 s (plus about 1.8 s for the first query); a second call returns the active
session in under a millisecond.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dfsql.errors import ClusterUnreachableError
from dfsql.setting import setting_while as setting_while  # its callers' name for it

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"
#: ``dfsql serve``'s task threads on the default master (``--task-slots``): more than
#: the two cores. Spark never preempts a running task, and a FAIR pool only orders
#: tasks waiting for a slot, so on ``local[2]`` one client's
#: ``range(200000) CROSS JOIN range(200000)`` (two tasks of minutes) held both slots
#: and every other client's ``SELECT 1`` waited for one to end (56 s measured; over
#: 400 s on a loaded machine). With eight threads (the parallelism still two, so that
#: plain statements split as before) the other statements' tasks find a free slot,
#: and the cores are shared by the operating system instead of held by one query:
#: ``SELECT 1`` 0.4 s and a small table's count 1.7 s beside that join (measured on 2
#: loaded cores). A statement that asks for more partitions than there are slots can
#: still fill them all, each for as long as one of its tasks runs (the statement
#: timeout bounds that).
SERVE_TASK_SLOTS = 8
APP_NAME = "dfsql"
#: the examples shipped inside the package (the demo and --paper-tables run from a wheel)
EXAMPLES = Path(__file__).resolve().parent / "examples"

#: where the standard error of a JVM that dfsql starts goes (see the module doc)
SPARK_LOG = Path(tempfile.gettempdir()) / f"dfsql-spark-{os.getuid()}.log"


def spark_log() -> Path | None:
    """The file the JVM's standard error goes to: ``DFSQL_SPARK_LOG``, else
    :data:`SPARK_LOG`; None (the terminal) when that is ``-``."""
    named = os.environ.get("DFSQL_SPARK_LOG")
    if named == "-":
        return None
    return Path(named) if named else SPARK_LOG


@contextlib.contextmanager
def jvm_output_to(path: Path | None) -> Iterator[None]:
    """While Spark starts, this process's stderr (file descriptor 2) points at ``path``:
    the JVM it launches inherits that, so its output (and its Python workers') lands in
    the file for its whole life. Python's own ``sys.stderr`` is the same descriptor, so it
    is restored as soon as the session exists."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(log, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


#: SQL runtime settings: valid both for a local JVM and over Spark Connect.
SQL_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.sql.streaming.pollingDelay": "100ms",
}

#: Settings that only mean something when this process starts the driver JVM.
DRIVER_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    "spark.scheduler.mode": "FAIR",
    # Python workers over Unix sockets where the platform has them (see the module doc)
    **({"spark.python.unix.domain.socket.enabled": "true"} if hasattr(socket, "AF_UNIX")
       else {}),
}


def _python_for_workers() -> None:
    """Make Spark's Python workers the interpreter running dfsql."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _target(master: str | None) -> tuple[str, str]:
    """``("remote", url)`` or ``("master", url)`` by the precedence in the module doc."""
    if master:
        return ("remote", master) if master.startswith("sc://") else ("master", master)
    remote = os.environ.get("DFSQL_SPARK_REMOTE")
    if remote:
        return "remote", remote
    return "master", os.environ.get("DFSQL_SPARK_MASTER") or DEFAULT_MASTER


#: Seconds to wait for a cluster's or Connect server's port before giving up.
CONNECT_TIMEOUT_S = 5.0


def _check_reachable(kind: str, url: str) -> None:
    """Fail fast, and say why, when a ``spark://`` master or ``sc://`` server does not
    answer: otherwise Spark retries for a minute or more and ends in a stack trace."""
    import socket
    from urllib.parse import urlsplit

    if not url.startswith(("sc://", "spark://")):
        return
    default_port = 15002 if url.startswith("sc://") else 7077
    for one in url.split("://", 1)[1].split(";")[0].split("/")[0].split(","):
        parts = urlsplit(f"//{one}")
        host, port = parts.hostname or "localhost", parts.port or default_port
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                return  # one live master of a list is enough
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
    what = "Spark Connect server" if kind == "remote" else "Spark master"
    var = "DFSQL_SPARK_REMOTE" if kind == "remote" else "DFSQL_SPARK_MASTER"
    raise ClusterUnreachableError(
        f"the {what} at {url} does not answer ({reason})", None, None,
        f"start it, or fix the URL (argument or {var}); unset {var} to run on local Spark")


def session(master: str | None = None, warehouse: str | os.PathLike | None = None,
            *, task_slots: int = 0) -> SparkSession:
    """The active SparkSession, or a new one with dfsql's defaults (see module doc).

    ``task_slots``: on the default master (none given, by argument or variable), that
    many task threads instead of ``local[2]``'s two, the parallelism staying two
    (``dfsql serve --task-slots``: :data:`SERVE_TASK_SLOTS`'s doc says why).

    ``warehouse``: where a new local or cluster session keeps its tables and their
    definitions (``spark.sql.warehouse.dir``), kept across runs and shared by every
    process on the same warehouse (:mod:`dfsql.warehouse`); default
    ``DFSQL_WAREHOUSE``, else ``./spark-warehouse``."""
    from pyspark.sql import SparkSession

    active = active_session()
    if active is not None:
        return active  # never changed: not even its catalog
    _python_for_workers()
    kind, url = _target(master)
    _check_reachable(kind, url)
    slots = task_slots > 0 and url == DEFAULT_MASTER and master is None and not any(
        os.environ.get(v) for v in ("DFSQL_SPARK_MASTER", "DFSQL_SPARK_REMOTE"))
    if slots:
        url = f"local[{task_slots}]"
    builder = SparkSession.builder.appName(APP_NAME)
    if kind == "remote":
        # Over Spark Connect only SQL settings can be set; the server owns the rest.
        builder = builder.remote(url)
        for key, value in SQL_CONF.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    builder = builder.master(url)
    conf = {**SQL_CONF, **DRIVER_CONF}
    if slots:  # the partitions a plain range or parallelize gets stay local[2]'s
        conf["spark.default.parallelism"] = DEFAULT_MASTER[len("local["):-1]
    if url.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    # the catalog (and the scanner it reads statements with) loads with the first session:
    # importing dfsql, as Spark's Python workers do, loads no parser
    from dfsql.warehouse import attach, warehouse_dir

    where = warehouse_dir(warehouse)
    # not a default: the catalog attached below is kept in this directory
    builder = builder.config("spark.sql.warehouse.dir", str(where))
    with jvm_output_to(spark_log()):
        users = _users_settings(  # the master too: spark-submit prepares the JVM for it
            {"spark.master": url,
             "spark.driver.memory": os.environ.get("DFSQL_SPARK_DRIVER_MEMORY", "4g")})
        for key, value in conf.items():
            if key not in users:
                builder = builder.config(key, value)
        spark = builder.getOrCreate()
    _remove_accumulator_socket_at_exit(spark)
    attach(spark, where)
    return spark


def _remove_accumulator_socket_at_exit(spark: SparkSession) -> None:
    """With Python workers on Unix sockets, PySpark's accumulator server listens on a
    socket file in the temp directory, which it removes only when the context stops: a
    program that ends without stopping would leave one behind each run."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    path = getattr(server, "server_address", None)
    if isinstance(path, str):
        _remove_at_exit(path)


@functools.cache
def _remove_at_exit(path: str) -> None:
    """Once per path: a thread without an active session calls session() again."""
    atexit.register(_remove_quietly, path)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def active_session() -> SparkSession | None:
    """The session active in this thread, if there is one (none is started).

    Classic PySpark's ``SparkSession.getActiveSession()`` answers for the whole process:
    the session any thread last made a DataFrame from (``createDataFrame`` marks it), so
    in a process that serves, an endpoint connection's session. Spark keeps the active
    session per thread, in the JVM; this is the Python session of this thread's. (Spark
    Connect keeps it per thread in Python already.)"""
    from pyspark.sql import SparkSession

    marked = SparkSession.getActiveSession()
    if marked is None or not hasattr(marked, "_jsparkSession"):  # none, or Spark Connect
        return marked
    # the JVM's own answer for the thread this call runs on (py4j pins a JVM thread to
    # each Python thread); getActiveSession() above said it has one
    here = SparkSession._get_j_spark_session_class(marked._jvm).getActiveSession().get()
    for known in (marked, SparkSession._instantiatedSession):
        if known is not None and known._jsparkSession.equals(here):
            return known
    return SparkSession(marked.sparkContext, here)  # another wrapper of this thread's


def _users_settings(launch: dict[str, str]) -> frozenset[str]:
    """The settings the user's own Spark configuration gives — ``spark-defaults.conf``,
    ``--conf`` in ``PYSPARK_SUBMIT_ARGS``, or ``spark-submit``'s when a program runs under
    it — which win over dfsql's defaults. Asked of the JVM itself, whose ``SparkConf``
    holds them as spark-submit read them: the JVM is started here (if it is not running)
    with only the ``launch`` settings (the master and the driver's memory, which
    spark-submit acts on as it starts the JVM), and the defaults follow when the session
    is built on it. Reading those files and arguments again in Python would be a second,
    different reading of them."""
    from pyspark import SparkConf, SparkContext

    started_with = SparkConf(loadDefaults=False)
    for key, value in launch.items():
        started_with.set(key, value)
    SparkContext._ensure_initialized(conf=started_with)
    return frozenset(key for key, _ in SparkConf().getAll()) - launch.keys()


def spark_context(spark):
    """The session's SparkContext, or None on Spark Connect, which has none (and so no
    broadcast variables, accumulators or status tracker)."""
    from pyspark.errors import PySparkAttributeError

    try:
        return spark.sparkContext
    except PySparkAttributeError:  # Spark Connect: JVM_ATTRIBUTE_NOT_SUPPORTED
        return None


#: (kind, the JVM streams manager) of every stream listener added by listen_once
_LISTENING: set[tuple[str, int]] = set()
_LISTENING_LOCK = threading.Lock()


def listen_once(spark, kind: str, make: Callable[[], object]) -> bool:
    """Add the stream listener ``make()`` to ``spark``'s streams once per ``kind`` and JVM
    streams manager (several Python sessions may stand for one); whether one listens
    now. Spark Connect's streams get none (its listeners run on the server)."""
    sc = spark_context(spark)
    if sc is None:
        return False
    manager = spark._jsparkSession.streams()
    key = (kind, sc._jvm.System.identityHashCode(manager))
    with _LISTENING_LOCK:
        if key in _LISTENING:
            return True
        _LISTENING.add(key)
    spark.streams.addListener(make())
    return True


def cancel_group(spark, group: str) -> None:
    """Cancel the running Spark jobs of ``group`` (a job group, or a tag on Spark
    Connect) and, on classic Spark, the jobs it submits afterwards (Spark's
    ``cancelJobGroupAndFutureJobs``; each group here is one statement's, never reused).
    That does not catch the map stages adaptive execution submits as jobs of their own:
    :func:`cancel_until` keeps cancelling for a statement that runs on."""
    sc = spark_context(spark)
    if sc is not None:
        sc._jsc.sc().cancelJobGroupAndFutureJobs(group)
    else:
        spark.interruptTag(group)


def cancel_until(spark, group: str, finished, seconds: float = 600.0) -> None:
    """Cancel ``group`` now and every quarter second until ``finished`` (an Event) is set
    or ``seconds`` pass: one statement runs several jobs in turn (a replay's timeline,
    then its panes), and a cancel that stops only the running one lets the statement's
    thread start the next."""
    import time

    deadline = time.monotonic() + seconds
    cancel_group(spark, group)
    while not finished.wait(0.25) and time.monotonic() < deadline:
        cancel_group(spark, group)


def stop_session() -> None:
    """Stop the active session, if any, so the next :func:`session` starts afresh."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def register_paper_tables(spark: SparkSession) -> None:
    """Register the paper's running example as ``scores`` and ``paper_watermarks`` (the
    demo, ``--paper-tables`` of the shell, ``run`` and ``serve``)."""
    base = EXAMPLES / "paper"
    (spark.read.option("header", True)
     .schema("key STRING, value BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP")
     .csv(str(base / "events.csv")).createOrReplaceTempView("scores"))
    (spark.read.option("header", True)
     .schema("processing_time TIMESTAMP, watermark TIMESTAMP")
     .csv(str(base / "watermarks.csv")).createOrReplaceTempView("paper_watermarks"))
