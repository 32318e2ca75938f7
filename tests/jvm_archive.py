"""A class-data-sharing archive of Spark's classes for the test run's JVMs.

A test run starts dozens of driver JVMs (its own session on each worker, and the shells,
servers, CLI runs and restarts the tests start), and on this 2-core machine each one
spent about 7 s in ``getOrCreate`` and 3 s more in its first query, most of it loading
and verifying the same ten thousand classes. Java's dynamic CDS archive
(``-XX:ArchiveClassesAtExit``) keeps those classes parsed and verified in one file that
every later JVM maps (``-XX:SharedArchiveFile``): measured here, ``getOrCreate`` 7.0 →
3.7 s and a first ``SELECT 1`` 3.3 → 1.0 s.

The archive is made once, beside the first run (about a minute of one core), by a JVM
that runs a small dfsql workload (a plain query, a replay, a stream on the RocksDB state
store, a table write), and kept under ``.pytest_cache``, keyed by the Java and PySpark
it was made with. A JVM that starts before it is there, or cannot use it (another
classpath, another JDK), starts as before, silently (``-Xlog:cds=off``): the archive only
ever saves time. ``tests/shell/test_terminal.py`` alone: 137 s without, 89 s with.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: JVM flags of every test JVM (see tests/conftest.py for why)
BASE_FLAGS = "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _key() -> str:
    """What the archive depends on: the JDK and the Spark it was made from."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    text = "\n".join([java, pyspark.__version__, str(Path(pyspark.__file__).parent),
                      BASE_FLAGS])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def archive_path() -> Path:
    return ROOT / ".pytest_cache" / "dfsql-jvm" / f"spark-{_key()}.jsa"


def driver_flags(make: bool) -> str:
    """The driver JVM options for this run: the base flags and the archive, which a JVM
    maps if it is there when it starts (``make``: the run's first process starts making
    it, beside the run, when it is missing)."""
    try:
        path = archive_path()
    except OSError:
        return BASE_FLAGS  # no java on PATH here: pyspark will say so
    if make and not path.exists():
        _start_making(path)
    return f"{BASE_FLAGS} -XX:SharedArchiveFile={path} {_QUIET}"


def _start_making(path: Path) -> None:
    """Make the archive in a process of its own, not waited for: the run goes on, and
    the JVMs that start once it is there (most of them) map it. One maker at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_suffix(".making")
    try:
        if time.time() - lock.stat().st_mtime < 900:
            return  # another run is making it
        lock.unlink()
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--make", str(path)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


def _make(path: Path) -> None:
    """Run the workload in a JVM that writes its classes to ``path`` as it exits."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS":
           f"--driver-java-options '{BASE_FLAGS} -XX:ArchiveClassesAtExit={tmp} "
           f"{_QUIET}' pyspark-shell"}
    try:
        with tempfile.TemporaryDirectory(prefix="dfsql-jvm-archive-") as work:
            env["DFSQL_WAREHOUSE"] = str(Path(work) / "warehouse")
            run = subprocess.run([sys.executable, str(Path(__file__).resolve()), work],
                                 env=env, cwd=work, timeout=900, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, check=True)
        # the JVM writes the archive as it exits, after the Python that started it
        jvm = Path(f"/proc/{run.stdout.split()[-1]}")
        deadline = time.monotonic() + 300
        while jvm.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if tmp.exists() and not jvm.exists():
            os.replace(tmp, path)  # whole or not at all
    finally:
        tmp.unlink(missing_ok=True)
        path.with_suffix(".making").unlink(missing_ok=True)


def _workload(work: Path) -> None:
    """What most tests' JVMs do: plain SQL, a replayed window (Python workers, Arrow), a
    native window, a stream on RocksDB with dfsql's bucket processor, a table written."""
    import dfsql
    from dfsql.session import register_paper_tables, session, stop_session

    spark = session("local[2]")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    register_paper_tables(spark)
    spark.sql("SELECT key, SUM(value) AS s FROM scores GROUP BY key ORDER BY key").collect()
    for query in (
            "SELECT key, SUM(value) AS total FROM scores GROUP BY key "
            "WINDOW FIXED(2 MINUTES) ON event_time",
            "SELECT key, SUM(value) AS total FROM scores GROUP BY key "
            "WINDOW SESSIONS(GAP 1 MINUTE) ON event_time PROCESSING TIME arrival_time "
            "TRIGGER EVERY 1 MINUTE EMIT ACCUMULATING AND RETRACTING"):
        dfsql.sql(query, spark).collect()
    src = work / "scores"
    spark.table("scores").repartition(2).write.parquet(str(src))
    (spark.readStream.schema(spark.read.parquet(str(src)).schema)
     .option("maxFilesPerTrigger", 1).parquet(str(src)).createOrReplaceTempView("live"))
    stream = dfsql.start(
        "SELECT key, SUM(value) AS total FROM live GROUP BY key WINDOW SESSIONS(GAP 1 MINUTE) "
        "ON event_time PROCESSING TIME arrival_time TRIGGER EVERY 1 MINUTE "
        "EMIT ACCUMULATING AND RETRACTING", sink="memory", name="archived",
        checkpoint=str(work / "ck"), trigger={"availableNow": True}, spark=spark)
    stream.awaitTermination()
    dfsql.sql("CREATE TABLE archived_table AS SELECT * FROM archived", spark)
    spark.table("archived_table").collect()
    print(spark.sparkContext._jvm.ProcessHandle.current().pid(), flush=True)
    stop_session()


if __name__ == "__main__":
    if sys.argv[1] == "--make":
        _make(Path(sys.argv[2]))
    else:
        _workload(Path(sys.argv[1]))
