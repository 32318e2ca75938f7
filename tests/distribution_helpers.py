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
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jvm_archive import driver_flags  # tests/ is this module's folder (pytest, the client)

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


#: How every JVM the distribution tests start runs (see daemon_env): the run's flags and
#: its archive of Spark's classes (tests/jvm_archive.py)
JVM_OPTIONS = driver_flags(make=False)


# --------------------------------------------------------------------------- server side
def spark_home() -> Path:
    """The ``pyspark`` package directory: it ships ``bin/spark-class``, ``sbin`` and jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def daemon_env(tmp: Path) -> dict[str, str]:
    """Environment for Spark daemons and clients: loopback only, logs and pids in ``tmp``.

    Inherited ``SPARK_*`` / ``DFSQL_SPARK_*`` / ``PYSPARK_*`` settings are dropped so that
    a developer's shell cannot point the test at another Spark.
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPARK_", "DFSQL_SPARK_", "PYSPARK_"))}
    env.update({
        "SPARK_HOME": str(spark_home()),
        # A folder that is not there: no spark-defaults.conf from anywhere (no Spark
        # setting at all: where the client runs is still only DFSQL_SPARK_MASTER /
        # DFSQL_SPARK_REMOTE), and no folder first on every JVM's class path. A folder
        # that is there (one holding a spark-defaults.conf) makes the class path differ
        # from the archive's, and every JVM here started without it (measured: master,
        # workers, executors, drivers and the Connect server loaded no archived class).
        "SPARK_CONF_DIR": str(tmp / "no-conf"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_PID_DIR": str(tmp / "pids"),
        "SPARK_IDENT_STRING": f"dfsql-test-{os.getpid()}",
        # The master's REST submission server listens on the fixed port 6066 by default.
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        # Only how the JVMs run, as tests/conftest.py has the run's other JVMs run (C1
        # only, one compiler thread, the serial collector: short-lived JVMs on 2 shared
        # cores; the archive of Spark's classes): read by every JVM started here — the
        # master, the workers, the executors (which inherit their worker's environment),
        # the cluster's client and the Connect server.
        "JAVA_TOOL_OPTIONS": JVM_OPTIONS,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })
    return env


def _wait_for(what: str, found: Callable[[], str | None], dead: Callable[[], str | None],
              logs: list[Path], timeout: float) -> str:
    """Poll ``found`` until it returns a value; fail early if ``dead`` names a dead process."""
    deadline = time.monotonic() + timeout
    while True:
        value = found()
        if value is not None:
            return value
        gone = dead()
        if gone or time.monotonic() > deadline:
            tails = "\n".join(f"--- {log}\n{_tail(log)}" for log in logs)
            why = f"exited: {gone}" if gone else f"not within {timeout:.0f} s"
            raise RuntimeError(f"{what}: {why}\n{tails}")
        time.sleep(0.2)


def _tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _grep(path: Path, pattern: str) -> str | None:
    try:
        m = re.search(pattern, path.read_text(errors="replace"))
    except OSError:
        return None
    return m.group(1) if m else None


def _kill_group(pgid: int, leader: subprocess.Popen | None = None, grace: float = 10.0) -> None:
    """SIGTERM a process group, then SIGKILL whatever is left after ``grace`` seconds.

    ``leader`` is the group's first process if it is our child: it must be reaped, or its
    zombie keeps the group "alive" for ``killpg(pgid, 0)``.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if leader is not None:
                leader.poll()
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@dataclass
class Started:
    """What was started: the URL clients use, their environment, the logs, start-up time."""

    url: str
    env: dict[str, str]
    logs: list[Path]
    start_seconds: float


@contextmanager
def standalone_cluster(tmp: Path, workers: int = 2, cores: int = 1,
                       memory: str = "1g", timeout: float = 300) -> Iterator[Started]:
    """A standalone master and ``workers`` workers on 127.0.0.1; yields ``spark://…``.

    Every port is 0 (the JVM picks a free one; the master's is read from its log), so
    parallel runs cannot collide. Each daemon is its own process group, killed on exit.
    """
    env = daemon_env(tmp)
    spark_class = str(spark_home() / "bin" / "spark-class")
    t0 = time.monotonic()
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []
    started = Started("", env, logs, 0.0)

    def dead() -> str | None:
        gone = [" ".join(map(str, p.args[1:2])) for p in procs if p.poll() is not None]
        return ", ".join(gone) or None

    def launch(name: str, args: list[str]) -> None:
        log = tmp / f"{name}.log"
        logs.append(log)
        with log.open("wb") as out:
            proc = subprocess.Popen([spark_class, *args], env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        procs.append(proc)

    try:
        launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", "0", "--webui-port", "0"])
        port = _wait_for("standalone master", lambda: _grep(
            logs[0], r"Starting Spark master at spark://127\.0\.0\.1:(\d+)"),
            dead, logs, timeout)
        started.url = f"spark://127.0.0.1:{port}"
        for i in range(workers):
            work = tmp / f"work{i}"
            work.mkdir(exist_ok=True)
            launch(f"worker{i}", ["org.apache.spark.deploy.worker.Worker",
                                  "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                                  "--cores", str(cores), "--memory", memory,
                                  "--work-dir", str(work), started.url])
        for log in logs[1:]:
            _wait_for(f"worker ({log.name})", lambda log=log: _grep(
                log, r"(Successfully registered with master)"), dead, logs, timeout)
        started.start_seconds = time.monotonic() - t0
        yield started
    finally:
        for proc in reversed(procs):
            _kill_group(proc.pid, proc)


@contextmanager
def connect_server(tmp: Path, master: str = "local[2]",
                   timeout: float = 300) -> Iterator[Started]:
    """A Spark Connect server (``sbin/start-connect-server.sh``) on 127.0.0.1; yields
    ``sc://127.0.0.1:PORT``. The gRPC port is 0 (read back from the server's log).

    The script daemonizes the server under ``nohup``; it is run in a new session, so the
    server stays in that process group and teardown can kill the group even if
    ``stop-connect-server.sh`` fails.
    """
    env = daemon_env(tmp)
    sbin = spark_home() / "sbin"
    t0 = time.monotonic()
    out_log = tmp / "start-connect-server.log"
    started = Started("", env, [out_log], 0.0)
    starter: subprocess.Popen | None = None
    try:
        with out_log.open("wb") as out:
            starter = subprocess.Popen(
                [str(sbin / "start-connect-server.sh"), "--master", master,
                 "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                 "--conf", "spark.connect.grpc.binding.port=0",
                 "--conf", "spark.ui.enabled=false",
                 "--conf", "spark.driver.host=127.0.0.1",
                 "--conf", "spark.driver.bindAddress=127.0.0.1",
                 "--conf", "spark.ui.showConsoleProgress=false"],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        starter.wait(timeout)
        logs_dir = Path(env["SPARK_LOG_DIR"])

        def port() -> str | None:
            for log in sorted(logs_dir.glob("*SparkConnectServer*.out")):
                if log not in started.logs:
                    started.logs.append(log)
                found = _grep(log, r"Spark Connect server started at: 127\.0\.0\.1:(\d+)")
                if found:
                    return found
            return None

        def dead() -> str | None:
            pid = _server_pid(env)
            if pid is None:
                return "start-connect-server.sh wrote no pid file"
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return f"Spark Connect server (pid {pid})"
            return None

        found = _wait_for("Spark Connect server", port, dead, started.logs, timeout)
        started.url = f"sc://127.0.0.1:{found}"
        started.start_seconds = time.monotonic() - t0
        yield started
    finally:
        subprocess.run([str(sbin / "stop-connect-server.sh")], env=env, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if starter is not None:
            _kill_group(starter.pid, starter)


def _server_pid(env: dict[str, str]) -> int | None:
    for pid_file in Path(env["SPARK_PID_DIR"]).glob("*SparkConnectServer*.pid"):
        try:
            return int(pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
    return None


@dataclass
class ClientRun:
    """One run of the client script: its JSON report, wall time and stderr."""

    report: dict[str, Any]
    seconds: float
    stderr: str


def run_client(env: dict[str, str], extra: dict[str, str], timeout: float = 900) -> ClientRun:
    """Run this file as a script in a fresh interpreter with ``env`` + ``extra``.

    The client is its own process group (with the driver JVM it may start), killed as a
    whole if it overruns ``timeout``: a bound on a hang, not a check of speed (the cluster
    client takes 95 s on a quiet 2-core machine, and more than 120 s beside the suite's
    other worker's streams).
    """
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve())],
                            env={**env, **extra}, cwd=str(REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid, proc)
        stdout, stderr = proc.communicate()
        raise RuntimeError(f"client did not finish within {timeout:.0f} s\nstdout:\n"
                           f"{stdout[-3000:]}\nstderr:\n{stderr[-6000:]}") from None
    finally:
        _kill_group(proc.pid, proc)  # anything the client left in its group
    seconds = time.monotonic() - t0
    lines = [ln for ln in stdout.splitlines() if ln.startswith(MARKER)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"client exited {proc.returncode}\nstdout:\n{stdout[-3000:]}"
                           f"\nstderr:\n{stderr[-6000:]}")
    return ClientRun(json.loads(lines[-1][len(MARKER):]), seconds, stderr)


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


def queries() -> dict[str, str]:
    """The statements every mode runs, by name."""
    return {
        "plain": PLAIN_SQL,
        "fig06": _statement(PAPER / "fig06_batch_global.sql"),
        "fig10": _statement(PAPER / "fig10_fixed_batch.sql"),
        "sessions": SESSIONS_SQL,
        # Replayed by the Dataflow model's driver in mapInArrow: Python on the executors.
        "fig14_discarding": _statement(PAPER / "fig14_sessions_discarding.sql"),
        "bad_windowed": BAD_WINDOWED_SQL,
        "bad_plain": BAD_PLAIN_SQL,
    }


def run_all(spark: Any) -> dict[str, dict[str, Any]]:
    """Register the paper's tables in ``spark`` and run :func:`queries` through dfsql."""
    from dfsql.cli import register_paper_tables

    register_paper_tables(spark)
    return {name: _run_query(spark, text) for name, text in queries().items()}


#: The streamed figure: dfsql.start plans it once, on classic Spark and on Spark Connect.
STREAM_FIGURE = "fig14_sessions_retracting"


def run_stream(spark: Any, tmp: Path) -> dict[str, Any]:
    """``STREAM_FIGURE`` over the paper's scores as parquet files (one per arrival minute,
    and a sentinel an hour later that moves the frontier past the paper's last instant),
    two files a micro-batch (three micro-batches: the windows' state crosses them; each
    costs a second or more on a cluster of two one-core workers), started with
    ``dfsql.start`` into a memory sink until the files are consumed."""
    from conftest import paper_stream_dir  # tests/ is this script's own folder

    import dfsql

    t0 = time.monotonic()
    try:
        src = paper_stream_dir(tmp / "scores_stream")
        schema = spark.read.parquet(str(src)).schema
        (spark.readStream.schema(schema).option("maxFilesPerTrigger", 2).parquet(str(src))
         .createOrReplaceTempView("live_scores"))
        text = _statement(PAPER / f"{STREAM_FIGURE}.sql").replace("FROM scores",
                                                                   "FROM live_scores")
        query = dfsql.start(text, sink="memory", name="dist_stream",
                            checkpoint=str(tmp / "ck"), trigger={"availableNow": True},
                            spark=spark)
        query.awaitTermination()
        rows = [_jsonable(r.asDict(recursive=True))
                for r in spark.sql("SELECT * FROM dist_stream").collect()]
        return {"ok": True, "rows": rows, "seconds": round(time.monotonic() - t0, 3)}
    except Exception as exc:  # noqa: BLE001 - the test reports the exact failure
        return {"ok": False, "type": type(exc).__name__, "message": str(exc)[:2000],
                "traceback": traceback.format_exc()[-6000:]}


def run_alter(spark: Any, tmp: Path) -> dict[str, Any]:
    """``STREAM_FIGURE`` as a continuous query over ``run_stream``'s files, then changed
    (its gap widened to 5 minutes): on classic Spark the change takes effect; over Spark
    Connect, whose server holds the stream's plan and checkpoint, it is refused (the
    query goes into a directory there: a table's sink is a Python callable, which Spark
    Connect does not take from a dfsql client yet)."""
    import dfsql
    from dfsql.continuous_queries import QUERIES
    from dfsql.session import spark_context

    head = "" if spark_context(spark) is not None else f" INTO DIRECTORY '{tmp / 'panes'}'"

    text = _statement(PAPER / f"{STREAM_FIGURE}.sql").replace("FROM scores",
                                                               "FROM live_scores")
    out: dict[str, Any] = {}
    if head:  # Spark Connect: INTO TABLE is refused, a DfsqlError
        try:
            dfsql.sql(f"CREATE STREAMING QUERY dist_table AS {text}", spark)
            out["table"] = "started"
        except dfsql.DfsqlError as exc:
            out["table"] = f"{exc.line}:{exc.column} {exc.message}"
    try:
        dfsql.sql(f"CREATE STREAMING QUERY dist_alter{head} AS {text}", spark)
        QUERIES.running["dist_alter"].query.processAllAvailable()
        changed = dfsql.sql("ALTER STREAMING QUERY dist_alter AS "
                            + text.replace("GAP 1 MINUTE", "GAP 5 MINUTES"), spark).collect()
        out.update(ok=True, version=changed[0]["version"])
    except dfsql.DfsqlError as exc:
        out.update(ok=False, dfsql_error=True, type=type(exc).__name__,
                   message=exc.message, line=exc.line, column=exc.column)
    except Exception as exc:  # noqa: BLE001 - the test reports the exact failure
        out.update(ok=False, dfsql_error=False, type=type(exc).__name__,
                   message=str(exc)[:2000], traceback=traceback.format_exc()[-6000:])
    finally:
        if "dist_alter" in QUERIES.running:
            dfsql.sql("STOP STREAMING QUERY dist_alter", spark)
    return out


def client_main() -> int:
    """Run every query in the session ``dfsql.session()`` makes; print the JSON report."""
    import dfsql

    t0 = time.monotonic()
    out: dict[str, Any] = {}
    try:
        spark = dfsql.session()
        out["session_seconds"] = round(time.monotonic() - t0, 3)
        out["session"] = _session_info(spark)
        out["queries"] = run_all(spark)
        with tempfile.TemporaryDirectory(prefix="dfsql-dist-stream-") as tmp:
            out["stream"] = run_stream(spark, Path(tmp))
            out["alter"] = run_alter(spark, Path(tmp))
        spark.stop()
    except Exception:  # noqa: BLE001 - set-up failure: report it as data
        out["fatal"] = traceback.format_exc()[-6000:]
    out["total_seconds"] = round(time.monotonic() - t0, 3)
    print(MARKER + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(client_main())
