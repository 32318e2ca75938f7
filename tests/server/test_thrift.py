"""The HiveServer2 endpoint (issue #12) with real clients: PyHive's DB-API, SQLAlchemy's
``hive://`` dialect, and beeline (Hive JDBC 2.3, shipped with pyspark; one session for
the module) against ``dfsql serve`` started as a command.

Expected panes are the paper's (examples/paper/figures.json), not the server's output.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

import dfsql
from dfsql.server import Server
from tests.conftest import (
    paper_stream_dir,
    register_paper_tables,
    register_sample_tables,
    wait_until,
)
from tests.jvm_archive import driver_flags
from tests.paper import FIGURES
from tests.server.clients import COLUMNS, ROOT, _beeline, operation_rows

FIG14 = FIGURES["fig14_sessions_retracting"]


def _setup(spark) -> None:
    register_paper_tables(spark)
    register_sample_tables(spark)


@pytest.fixture(scope="module")
def endpoint(spark):
    """An endpoint on the test run's Spark application (SASL PLAIN, any password)."""
    server = Server(spark, port=0, auth="NONE", session_setup=_setup).start()
    yield server
    server.stop()


def _connect(server: Server, **kw):
    from pyhive import hive

    if server.auth == "NOSASL":
        kw.setdefault("auth", "NOSASL")
    else:
        kw.setdefault("auth", "CUSTOM" if "password" in kw else "NONE")
        kw.setdefault("username", "analyst")
    return hive.connect(host="127.0.0.1", port=server.port, **kw)


def _fig14_rows():
    ts = {"window_start", "window_end", "emit_time"}
    return [tuple(datetime.strptime(r[c], "%Y-%m-%d %H:%M:%S") if c in ts else r[c]
                  for c in COLUMNS) for r in FIG14["expected"]]


def test_pyhive_types_values_and_nulls(endpoint):
    conn = _connect(endpoint)
    cur = conn.cursor()
    cur.execute("SELECT emp_id, name, salary, hire_date, skills, attrs, address, manager_id, "
                "emp_id > 3 AS senior, CAST(emp_id AS DOUBLE) / 4 AS quarter, "
                "CAST(emp_id AS TINYINT) AS tiny, CAST(emp_id AS BIGINT) * 10000000000 AS big, "
                "CAST('ab' AS BINARY) AS bin, TIMESTAMP'2024-01-01 00:00:01.5' AS ts "
                "FROM employees WHERE emp_id IN (1, 6) ORDER BY emp_id")
    types = [d[1] for d in cur.description]
    assert [d[0] for d in cur.description][:3] == ["emp_id", "name", "salary"]
    assert types == ["INT_TYPE", "STRING_TYPE", "DECIMAL_TYPE", "DATE_TYPE", "ARRAY_TYPE",
                     "MAP_TYPE", "STRUCT_TYPE", "INT_TYPE", "BOOLEAN_TYPE", "DOUBLE_TYPE",
                     "TINYINT_TYPE", "BIGINT_TYPE", "BINARY_TYPE", "TIMESTAMP_TYPE"]
    rows = cur.fetchall()
    assert rows == [
        (1, "Alice", Decimal("120000.00"), "2015-03-01", '["scala","sql","python"]',
         '{"level":"senior","remote":"no"}', '{"city":"Berlin","zip":"10115"}', None, False,
         0.25, 1, 10000000000, b"ab", datetime(2024, 1, 1, 0, 0, 1, 500000)),
        (6, "Frank", Decimal("40000.00"), "2023-02-01", None, None,
         '{"city":"Paris","zip":"75001"}', 1, True, 1.5, 6, 60000000000, b"ab",
         datetime(2024, 1, 1, 0, 0, 1, 500000)),
    ]
    conn.close()
    assert date(2015, 3, 1).isoformat() == rows[0][3]


def test_pyhive_windowed_query_gives_the_papers_panes(endpoint):
    conn = _connect(endpoint)
    cur = conn.cursor()
    cur.execute(FIG14["query"])
    assert [d[0] for d in cur.description] == COLUMNS
    assert [d[1] for d in cur.description] == [
        "STRING_TYPE", "BIGINT_TYPE", "TIMESTAMP_TYPE", "TIMESTAMP_TYPE", "BIGINT_TYPE",
        "STRING_TYPE", "BOOLEAN_TYPE", "TIMESTAMP_TYPE", "BOOLEAN_TYPE"]
    assert cur.fetchall() == _fig14_rows()
    conn.close()


def test_explain_watermark_returns_one_row_per_watermark(endpoint):
    """The endpoint plans EXPLAIN WATERMARK as dfsql.sql does: Figure 14 under its own
    marks (the 9 late, tests/spark/explain/test_explain_watermark.py derives it) and PERFECT
    (nothing late), latencies in seconds as DOUBLE."""
    conn = _connect(endpoint)
    cur = conn.cursor()
    cur.execute("EXPLAIN WATERMARK " + FIG14["query"].rstrip().rstrip(";") + " TRY PERFECT")
    assert [d[:2] for d in cur.description][:3] == [
        ("watermark", "STRING_TYPE"), ("late_rows", "BIGINT_TYPE"),
        ("late_fraction", "DOUBLE_TYPE")]
    assert [(r[0], r[1], r[5], r[6]) for r in cur.fetchall()] == [
        ("FROM paper_watermarks (the query's)", 1, 7, 5), ("PERFECT", 0, 8, 6)]
    conn.close()


#: Figure 12 without its ALLOWED LATENESS: the 9 (event 12:01:20, window [12:00, 12:02))
#: arrives at 12:07:20, when the marks' watermark is 12:05:10: dropped, the only one
FIG12_NO_LATENESS = " ".join(FIGURES["fig12_fixed_streaming"]["query"].replace(
    "ALLOWED LATENESS 10 MINUTES", "").split())
FIG12_WARNING = (
    "warning: 1 row dropped as late: they arrived (PROCESSING TIME arrival_time) after the "
    "watermark (WATERMARK FROM paper_watermarks) had passed their window's end + ALLOWED "
    "LATENESS 0s. ALLOWED LATENESS <duration> keeps them (LATE panes); LATE ROWS INTO "
    "<view> lists them")


def test_pyhive_gets_the_dropped_rows_as_the_operation_log(endpoint):
    """docs/reference.md#allowed-lateness: the endpoint returns the dropped-rows line with the result, as the
    operation's log (PyHive's fetch_logs, beeline prints it): each line once."""
    conn = _connect(endpoint)
    cur = conn.cursor()
    assert "ALLOWED LATENESS" not in FIG12_NO_LATENESS
    cur.execute(FIG12_NO_LATENESS)
    rows = cur.fetchall()
    assert sum(r[1] for r in rows if r[6]) == 51 - 9  # the last panes lack the 9
    assert cur.fetch_logs() == [FIG12_WARNING]
    assert cur.fetch_logs() == []  # FETCH_NEXT: said once
    cur.execute(FIGURES["fig12_fixed_streaming"]["query"])  # with its lateness: no drop
    cur.fetchall()
    assert cur.fetch_logs() == []
    cur.execute("SELECT COUNT(*) FROM scores")
    assert cur.fetchall() == [(10,)] and cur.fetch_logs() == []
    conn.close()


#: a Spark job's progress line in the operation log (dfsql.spark.progress.stage_line)
STAGE_LINE = re.compile(r"job \d+ stage \d+: (\d+)/(\d+) tasks(; job \d+ stage \d+: "
                        r"\d+/\d+ tasks)*")


def _status_with_progress(conn, cur):
    """GetOperationStatus with ``getProgressUpdate``, as Hive JDBC asks for beeline
    (it waits up to 5 s for a running statement to end: long polling)."""
    from TCLIService.ttypes import TGetOperationStatusReq

    return conn.client.GetOperationStatus(TGetOperationStatusReq(
        operationHandle=cur._operationHandle, getProgressUpdate=True))


def test_pyhive_reads_the_progress_while_a_windowed_statement_runs(endpoint, spark,
                                                                    tmp_path):
    """Issue #51: while a statement runs, its operation log (PyHive's fetch_logs, beeline
    asks each second) holds its Spark stages' progress, each change once, and
    GetOperationStatus's progress update (beeline's bar) a row per stage; once it has
    finished, the log says nothing more and the update shows every stage done. Eight
    rows taking two seconds each (a Python UDF, in a global view; over 8 s on two cores)
    summed by FIXED(2 MINUTES): 1+2, 3+4, 5+6, 7+8. The rows wait for a file the test
    writes once it has asked for an update while the statement ran (a loaded machine's
    status store may report the first stage late: a fixed duration could end first)."""
    from pyspark.sql import functions as F
    from TCLIService.ttypes import TJobExecutionStatus as Job
    from TCLIService.ttypes import TOperationState as St

    gate = str(tmp_path / "go")  # the rows wait for it: the statement runs until then

    @F.udf("long")
    def slow(v):
        import os
        import time
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        return v

    spark.range(8, numPartitions=4).select(
        F.lit("k").alias("key"), slow(F.col("id") + 1).alias("value"),
        F.timestamp_seconds(F.lit(1704110400) + F.col("id") * 60).alias("event_time"),
    ).createOrReplaceGlobalTempView("slow_scores")
    conn = _connect(endpoint)
    cur = conn.cursor()
    cur.execute("SELECT key, SUM(value) AS total FROM global_temp.slow_scores GROUP BY key "
                "WINDOW FIXED(2 MINUTES) ON event_time", async_=True)
    logs: list[str] = []
    # the log (no waiting) until it shows a stage: the statement still runs then
    assert wait_until(lambda: logs.extend(cur.fetch_logs()) or logs, 60), "no progress"
    for line in logs:
        m = STAGE_LINE.fullmatch(line)
        assert m and int(m[1]) <= int(m[2]), line
    assert all(a != b for a, b in zip(logs, logs[1:], strict=False))  # changes only
    updates = []
    while (got := _status_with_progress(conn, cur)).operationState in (
            St.INITIALIZED_STATE, St.PENDING_STATE, St.RUNNING_STATE):
        updates.append(got.progressUpdateResponse)
        Path(gate).touch()  # one update asked while it ran: now it may finish
    finished = got.progressUpdateResponse
    assert got.operationState == St.FINISHED_STATE
    assert [r[1] for r in cur.fetchall()] == [3, 7, 11, 15]
    # asked while it ran (over 5 s after its first stage): nine cells per stage's row
    assert updates and {u.status for u in updates} == {Job.IN_PROGRESS}
    assert all(len(u.headerNames) == 9 for u in updates)
    rows = [row for u in updates for row in u.rows]
    assert rows and all(len(row) == 9 and int(row[4]) <= int(row[3]) for row in rows)
    assert finished.status == Job.COMPLETE and finished.progressedPercentage == 1.0
    assert finished.rows and {row[2] for row in finished.rows} == {"SUCCEEDED"}
    n = len(finished.rows)
    assert finished.footerSummary == f"STAGES: {n:02d}/{n:02d}"
    assert cur.fetch_logs() == []  # nothing more: no notes, and the stages left to the bar
    conn.close()
    spark.catalog.dropGlobalTempView("slow_scores")


def test_a_trigger_on_a_bounded_table_is_said_to_have_no_effect(endpoint):
    """Issue #23: a TRIGGER on a bounded table without PROCESSING TIME changes nothing (one
    ON_TIME pane per window, docs/reference.md#trigger); the endpoint says so in the operation log,
    and EXPLAIN beside the trigger. The paper's ten scores in the global window: one
    ON_TIME pane of their sum, 51, whatever the trigger."""
    conn = _connect(endpoint)
    cur = conn.cursor()
    q = ("SELECT key, SUM(value) AS total FROM scores GROUP BY key "
         "WINDOW GLOBAL TRIGGER EVERY 1 MINUTE")
    cur.execute(q)
    rows = cur.fetchall()
    assert [(r[0], r[1], r[5]) for r in rows] == [("k", 51, "ON_TIME")]
    logs = cur.fetch_logs()
    assert len(logs) == 1 and logs[0].startswith("note: the TRIGGER has no effect on a batch")
    cur.execute("SELECT key, SUM(value) AS total FROM scores GROUP BY key WINDOW GLOBAL")
    cur.fetchall()
    assert cur.fetch_logs() == []  # the default trigger: nothing to say
    conn.close()
    text = dfsql.explain(q)
    assert "TRIGGER Repeat(AtPeriod(1m))  -- over a bounded table no effect without " \
           "PROCESSING TIME: one ON_TIME pane per window" in text.splitlines()
    assert "no effect" not in dfsql.explain(q.replace(" TRIGGER EVERY 1 MINUTE", ""))


def test_a_large_result_streams_in_fetches(endpoint):
    """More rows than one fetch and than one Arrow batch: every row once, in order."""
    conn = _connect(endpoint)
    cur = conn.cursor()
    cur.arraysize = 7_000
    cur.execute("SELECT id, CAST(id AS STRING) AS s FROM range(0, 25000, 1, 3)")
    got = []
    while batch := cur.fetchmany(7_000):
        got.extend(batch)
    assert len(got) == 25_000
    assert got[0] == (0, "0") and got[-1] == (24_999, "24999")
    assert [r[0] for r in got] == list(range(25_000))
    conn.close()


def test_a_mistake_is_a_positioned_error_and_the_session_goes_on(endpoint):
    from pyhive.exc import OperationalError

    conn = _connect(endpoint)
    cur = conn.cursor()
    with pytest.raises(OperationalError) as info:
        cur.execute("SELECT key, SUM(value) AS total FROM scores GROUP BY key\n"
                    "WINDOW SESSIONS(GAP 1 MINUTE) ON event_time\nTRIGGER EVRY 1 MINUTE")
    status = info.value.args[0].status
    assert status.sqlState == "42601"
    assert status.errorMessage.startswith("line 3, col 9:"), status.errorMessage
    assert "EVERY" in status.errorMessage  # the did-you-mean hint
    with pytest.raises(OperationalError) as info:
        cur.execute("SELECT nope FROM scores")
    assert info.value.args[0].status.errorMessage.startswith("line 1, col 8:")
    cur.execute("SELECT COUNT(*) FROM scores")  # the same session still works
    assert cur.fetchall() == [(10,)]  # the paper's ten scores
    conn.close()


def test_a_stream_read_as_a_result_set_points_to_create_streaming_query(spark, tmp_path):
    """Issue #23: over the endpoint a query over a stream said "start it with dfsql.start",
    which a client cannot do. It names CREATE STREAMING QUERY, and that statement (as
    the hint writes it) runs; a bounded query in the same session still reads."""
    from pyhive.exc import OperationalError

    stream = paper_stream_dir(tmp_path / "live")

    def setup(s) -> None:
        _setup(s)
        schema = s.read.parquet(str(stream)).schema
        s.readStream.schema(schema).parquet(str(stream)).createOrReplaceTempView("live")

    server = Server(spark, port=0, auth="NONE", session_setup=setup).start()
    conn = _connect(server)
    cur = conn.cursor()
    windowed = FIG14["query"].replace("FROM scores", "FROM live")
    try:
        for text, says in [("SELECT * FROM live", "CREATE STREAMING QUERY name AS SELECT"),
                           (windowed, "CREATE STREAMING QUERY name AS <this query>")]:
            with pytest.raises(OperationalError) as info:
                cur.execute(text)
            status = info.value.args[0].status
            assert status.sqlState == "0A000"
            assert status.errorMessage.startswith("line 1, col 1: this statement reads a "
                                                  "stream"), status.errorMessage
            assert says in status.errorMessage and "global_temp.name" in status.errorMessage
            assert "dfsql.start" not in status.errorMessage
        cur.execute(f"CREATE STREAMING QUERY live_panes AS {windowed}")
        assert cur.fetchall()[0][0] == "live_panes"
        cur.execute("STOP STREAMING QUERY live_panes")
        assert cur.fetchall() == [("live_panes", "STOPPED")]
        cur.execute("SELECT COUNT(*) FROM scores")
        assert cur.fetchall() == [(10,)]
    finally:
        conn.close()
        server.stop()
        for q in spark.streams.active:
            q.stop()


def test_sessions_are_isolated(endpoint):
    a, b = _connect(endpoint), _connect(endpoint)
    ca, cb = a.cursor(), b.cursor()
    ca.execute("CREATE TEMP VIEW mine AS SELECT 42 AS answer")
    ca.execute("SELECT answer FROM mine")
    assert ca.fetchall() == [(42,)]
    from pyhive.exc import OperationalError

    with pytest.raises(OperationalError):
        cb.execute("SELECT answer FROM mine")
    a.close()
    b.close()


def test_sqlalchemy_hive_dialect(endpoint):
    import sqlalchemy as sa

    engine = sa.create_engine(f"hive://analyst@127.0.0.1:{endpoint.port}/default")
    with engine.connect() as conn:
        rows = conn.execute(sa.text(FIG14["query"])).fetchall()
        assert [tuple(r) for r in rows] == _fig14_rows()
        n = conn.execute(sa.text("SELECT COUNT(*) AS n FROM employees")).scalar()
        assert n == 7
    # the endpoint guide's pandas example: read_sql_query (read_sql would take the
    # query for a table's name: Spark's DESCRIBE accepts a query)
    import pandas as pd

    frame = pd.read_sql_query("SELECT COUNT(*) AS n FROM employees", engine)
    assert frame["n"].tolist() == [7]
    engine.dispose()


def test_unknown_method_leaves_the_connection_open(endpoint):
    """GetLog is not in HiveServer2's service: Thrift's unknown-method error, and the
    connection serves the next call (how PyHive and impyla probe it)."""
    from thrift.Thrift import TApplicationException

    from dfsql.server.tcli import ttypes as tt

    conn = _connect(endpoint)
    cur = conn.cursor()
    cur.execute("SELECT 1")
    with pytest.raises(TApplicationException) as info:
        conn.client.GetLog(tt.TGetLogReq(operationHandle=cur._operationHandle))
    assert info.value.type == TApplicationException.UNKNOWN_METHOD
    cur.execute("SELECT 2")
    assert cur.fetchall() == [(2,)]
    conn.close()




def test_metadata_calls(endpoint):
    from dfsql.server.tcli import ttypes as tt

    conn = _connect(endpoint)
    client, session = conn.client, conn.sessionHandle

    def rows_of(resp):
        return operation_rows(conn, resp)

    tables = rows_of(client.GetTables(tt.TGetTablesReq(sessionHandle=session,
                                                       tableName="%")))
    assert {"scores", "employees", "paper_watermarks"} <= {r[2] for r in tables}
    cols = rows_of(client.GetColumns(tt.TGetColumnsReq(sessionHandle=session,
                                                       tableName="scores")))
    assert [(r[3], r[5], r[16]) for r in cols] == [
        ("key", "STRING", 1), ("value", "BIGINT", 2), ("event_time", "TIMESTAMP", 3),
        ("arrival_time", "TIMESTAMP", 4)]
    assert ("default", "") in rows_of(client.GetSchemas(tt.TGetSchemasReq(sessionHandle=session)))
    assert ("VIEW",) in rows_of(client.GetTableTypes(tt.TGetTableTypesReq(sessionHandle=session)))
    assert "BIGINT" in {r[0] for r in rows_of(client.GetTypeInfo(
        tt.TGetTypeInfoReq(sessionHandle=session)))}
    funcs = rows_of(client.GetFunctions(tt.TGetFunctionsReq(sessionHandle=session,
                                                            functionName="session_win*")))
    assert [r[2] for r in funcs] == ["session_window"]
    assert rows_of(client.GetPrimaryKeys(tt.TGetPrimaryKeysReq(sessionHandle=session))) == []
    conn.close()


def test_a_persistent_windowed_view_is_shared_by_every_session(endpoint):
    """One client makes the view, another (its own session, temp views of its own) reads
    Figure 14's changelog from it; GetTables lists it as a VIEW and GetColumns shows
    dfsql's columns (docs/reference.md#writing-results)."""
    from dfsql.server.tcli import ttypes as tt

    maker, reader = _connect(endpoint), _connect(endpoint)
    try:
        cur = maker.cursor()  # a persistent view reads tables, not the temp views
        cur.execute("CREATE TABLE IF NOT EXISTS fig14_scores AS SELECT * FROM scores")
        cur.execute("CREATE TABLE IF NOT EXISTS fig14_marks AS SELECT * FROM "
                    "paper_watermarks")
        query = FIG14["query"].replace("FROM scores", "FROM fig14_scores").replace(
            "FROM paper_watermarks", "FROM fig14_marks")
        cur.execute(f"CREATE OR REPLACE VIEW fig14_view AS {query}")
        cur = reader.cursor()
        cur.execute("SELECT * FROM fig14_view ORDER BY emit_time, is_retraction DESC, total")
        got = cur.fetchall()
        expected = sorted(_fig14_rows(), key=lambda r: (r[7], not r[8], r[1]))
        assert [tuple(r) for r in got] == expected
        client, session = reader.client, reader.sessionHandle
        tables = operation_rows(reader, client.GetTables(tt.TGetTablesReq(
            sessionHandle=session, tableName="fig14_v%")))
        assert [(r[2], r[3]) for r in tables] == [("fig14_view", "VIEW")]
        cols = operation_rows(reader, client.GetColumns(tt.TGetColumnsReq(
            sessionHandle=session, tableName="fig14_view")))
        assert [(r[3], r[5]) for r in cols] == list(zip(COLUMNS, [
            "STRING", "BIGINT", "TIMESTAMP", "TIMESTAMP", "BIGINT", "STRING", "BOOLEAN",
            "TIMESTAMP", "BOOLEAN"], strict=True))
    finally:
        for kind, name in (("VIEW", "fig14_view"), ("TABLE", "fig14_scores"),
                           ("TABLE", "fig14_marks")):
            maker.cursor().execute(f"DROP {kind} IF EXISTS {name}")
        maker.close()
        reader.close()


# --------------------------------------------------------------------------- auth


def test_plain_auth_accepts_the_password_and_refuses_others(spark, tmp_path):
    from dfsql.cli import main

    pw = tmp_path / "users"
    stdin = sys.stdin
    try:
        import io

        sys.stdin = io.StringIO("s3cret\n")
        assert main(["passwd", str(pw), "ada"]) == 0
    finally:
        sys.stdin = stdin
    assert "s3cret" not in pw.read_text()
    server = Server(spark, port=0, auth="PLAIN", password_file=str(pw)).start()
    try:
        conn = _connect(server, username="ada", password="s3cret")
        cur = conn.cursor()
        cur.execute("SELECT 'in' AS x")
        assert cur.fetchall() == [("in",)]
        conn.close()
        for user, password in [("ada", "wrong"), ("bob", "s3cret")]:
            with pytest.raises(Exception) as info:
                _connect(server, username=user, password=password)
            assert "validating the login" in str(info.value) or "TTransport" in repr(info.value)
        # the server is still up
        conn = _connect(server, username="ada", password="s3cret")
        conn.cursor().execute("SELECT 1")
        conn.close()
    finally:
        server.stop()


def test_nosasl(spark):
    server = Server(spark, port=0, auth="NOSASL", session_setup=_setup).start()
    try:
        conn = _connect(server)
        cur = conn.cursor()
        cur.execute(FIG14["query"])
        assert cur.fetchall() == _fig14_rows()
        conn.close()
    finally:
        server.stop()


# --------------------------------------------------------------------------- beeline


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]




@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``dfsql serve`` as a command (its own Spark application), NOSASL."""
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    stream = paper_stream_dir(tmp_path_factory.mktemp("scores_live"))
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dfsql.cli", "serve", "--port", str(port),
                                 "--auth", "NOSASL", "--paper-tables",
                                 "--stream", f"scores_live={stream}"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    deadline = time.time() + 300  # a JVM on a loaded machine: minutes, not seconds
    while "dfsql serving" not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.time() < deadline, log.read_text()
        time.sleep(0.5)
    yield port, proc
    proc.terminate()
    proc.wait(30)


#: beeline's prompt, before each command it reads (``0: jdbc:hive2://127.0.0.1:PORT/default> ``)
PROMPT = "0: jdbc:hive2://"


@dataclass
class Ran:
    """What one script gave in a beeline session: its standard output and error, and the
    exit code ``beeline -f`` would have given for it (1 if a statement failed)."""

    stdout: str
    stderr: str
    returncode: int


class Beeline:
    """One beeline (its JVM starts once per module, not once per script), reading commands
    from a pipe. :meth:`run` writes a script to a file and has beeline ``!run`` it, which
    executes it as ``beeline -f`` does (stops at the first failing statement and says
    ``Aborting command set ... command failed``, where ``-f`` exits non-zero); a marker
    query after it ends the script's output on stdout, a failing one on stderr."""

    def __init__(self, port: int, tmp: Path) -> None:
        env = dict(os.environ)
        env.pop("SPARK_HOME", None)
        # beeline's JVM runs as the run's others do (tests/conftest.py: C1 only, the serial
        # collector, the archive of Spark's classes): spark-class gives it only
        # SPARK_BEELINE_OPTS, not the drivers' options (its start alone: 3.0 → 1.2 CPU-s)
        env["SPARK_BEELINE_OPTS"] = driver_flags(make=False)
        self.tmp, self.n = tmp, 0
        self.proc = subprocess.Popen(
            [_beeline(), "-u", f"jdbc:hive2://127.0.0.1:{port}/default;auth=noSasl",
             "--outputformat=csv2"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env)
        self.lines = {"out": queue.Queue(), "err": queue.Queue()}
        for name, pipe in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._pump, args=(pipe, self.lines[name]),
                             daemon=True).start()

    @staticmethod
    def _pump(pipe, lines: queue.Queue) -> None:
        for line in pipe:
            lines.put(line)
        lines.put(None)

    def _until(self, name: str, last, deadline: float) -> list[str]:
        got: list[str] = []
        while True:
            try:
                line = self.lines[name].get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("beeline gave no answer in time; so far:\n"
                                     + "".join(got)[-3000:]) from None
            if line is None:
                raise AssertionError("beeline ended:\n" + "".join(got)[-3000:])
            got.append(line)
            if last(line):
                return got

    def run(self, script: str, timeout: float = 600) -> Ran:
        self.n += 1
        path, mark = self.tmp / f"{self.n}.sql", f"bd{self.n}"
        path.write_text(script + "\n")
        commands = [f"!run {path}", f"SELECT '{mark}' AS m;", f"SELECT {mark}_err;"]
        # beeline echoes each command after its prompt (41 characters), cut at 80 columns
        assert max(map(len, commands)) < 38, commands
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(c + "\n" for c in commands))
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        out = self._until("out", lambda ln: ln.strip() == mark, deadline)
        err = self._until("err", lambda ln: f"{mark}_err" in ln, deadline)
        # stdout: the script's output, up to the marker query's echo, without the echoes
        # of the commands above (one line each, starting with the prompt)
        end = next(i for i, ln in enumerate(out) if f"'{mark}'" in ln)
        stdout = [ln for ln in out[:end] if not ln.startswith(PROMPT)]
        # stderr: all before the marker query's "1 row selected" and the failing marker
        err = err[:-2]
        failed = any(ln.startswith("Aborting command set because") for ln in err)
        return Ran("".join(stdout), "".join(err), 1 if failed else 0)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture(scope="module")
def beeline(served) -> Iterator[Beeline]:
    """One beeline session against the served endpoint for the module's tests."""
    port, _ = served
    # a short folder: the scripts' paths are echoed on beeline's 80 columns
    with tempfile.TemporaryDirectory(prefix="bl") as tmp:
        session = Beeline(port, Path(tmp))
        yield session
        session.close()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="beeline needs Java")
def test_beeline_queries_tables_columns_and_errors(served, beeline):
    _, proc = served
    done = beeline.run("SELECT key, value FROM scores ORDER BY arrival_time LIMIT 3;\n"
                       + " ".join(FIG14["query"].split()) + ";\n!tables\n!columns scores")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = _lines(done.stdout)
    assert lines[:4] == ["key,value", "k,5", "k,7", "k,3"], done.stdout
    header = lines.index(",".join(COLUMNS))
    want = [",".join(_csv(v) for v in r) for r in _fig14_rows()]
    assert lines[header + 1: header + 1 + len(want)] == want
    tail = "\n".join(lines[header + 1 + len(want):])
    assert "scores" in tail and "paper_watermarks" in tail  # !tables
    assert "arrival_time" in tail and "TIMESTAMP" in tail  # !columns scores

    bad = beeline.run("SELECT key FROM scores\nWINDOW SESSIONS(GAP 1 MINUT) ON event_time;")
    assert bad.returncode != 0
    assert "line 2, col" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
    assert proc.poll() is None  # the server is still up
    again = beeline.run("SELECT COUNT(*) AS n FROM scores;")
    assert again.returncode == 0 and again.stdout.split()[-2:] == ["n", "10"], again.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="beeline needs Java")
def test_beeline_prints_the_dropped_rows_warning(served, beeline):
    """beeline fetches the operation log and prints it after the rows (on stderr, with
    its other notes): the dropped-rows line; none for a query that drops nothing."""
    done = beeline.run(FIG12_NO_LATENESS + ";")
    assert done.returncode == 0, done.stderr[-3000:]
    assert FIG12_WARNING in done.stderr.splitlines(), done.stderr[-3000:]
    kept = beeline.run(" ".join(FIGURES["fig12_fixed_streaming"]["query"].split()) + ";")
    assert kept.returncode == 0 and "dropped" not in kept.stderr, kept.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="beeline needs Java")
def test_beeline_prints_the_progress_while_a_statement_runs(served, beeline):
    """Issue #51: beeline asks for the operation log each second while a statement runs
    and prints it on stderr (the first stage line), then draws GetOperationStatus's
    progress update in place, as HiveServer2's Tez bar: a row per stage, its tasks, the
    stages done. A join of 20,000 by 20,000 rows that takes seconds: for each a, the b
    with (7a + b) % 1000 = 0 are 12 of the 12,000. beeline asks for the status every 5 s
    (long polling) and draws only after a log line: a statement of a few seconds may end
    before its bar is drawn, so the bar is checked when drawn (the PyHive test above reads
    the update itself)."""
    done = beeline.run("SELECT COUNT(*) AS n FROM range(0, 12000, 1, 4) a JOIN "
                       "range(0, 12000, 1, 4) b ON (a.id * 7 + b.id) % 1000 = 0;")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "144000" in done.stdout.split()
    plain = re.sub(r"\x1b\[[0-9;?]*[ -/]*[@-~]", "", done.stderr)
    progress = [ln.strip() for ln in plain.splitlines() if STAGE_LINE.fullmatch(ln.strip())]
    assert progress, done.stderr[-3000:]
    if "STAGES " not in plain:
        return
    # the bar: beeline's header, a row per stage (nine columns), the footer at 100%
    assert re.search(r"STAGES +JOB +STATUS +TOTAL +COMPLETED +RUNNING +PENDING +FAILED "
                     r"+KILLED", plain), plain[-3000:]
    rows = re.findall(r"Stage-\d+ +\d+ +(SUCCEEDED|RUNNING|PENDING) +(\d+) +(\d+) ", plain)
    assert rows and all(int(c) <= int(t) for _, t, c in rows)
    assert re.search(r"STAGES: (\d\d)/\1 +\[=+>>\] +100%", plain), plain[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="beeline needs Java")
def test_beeline_starts_reads_and_stops_a_streaming_query(served, beeline):
    """CREATE STREAMING QUERY over beeline; its live windows read back while it runs
    (Figure 14's two windows left after its last pane, from the paper); SHOW; STOP."""
    _, proc = served
    query = " ".join(FIG14["query"].replace("FROM scores", "FROM scores_live").split())
    created = beeline.run(f"CREATE STREAMING QUERY fig14_live AS {query};")
    assert created.returncode == 0, created.stdout + created.stderr[-2000:]
    assert "fig14_live," in created.stdout
    want = ["key,total,window_start,pane_timing",
            "k,39,2015-09-01 12:00:30.0,LATE", "k,12,2015-09-01 12:06:30.0,ON_TIME"]
    got: list[str] = []
    deadline = time.monotonic() + 300  # the stream's micro-batches, on a loaded machine
    while got != want and time.monotonic() < deadline:
        read = beeline.run("SELECT key, total, window_start, pane_timing FROM "
                           "global_temp.fig14_live ORDER BY window_start;")
        assert read.returncode == 0, read.stderr[-2000:]
        got = _lines(read.stdout)
        if got != want:
            time.sleep(1)
    assert got == want
    shown = beeline.run("SHOW STREAMING QUERIES;")
    assert any(ln.startswith("fig14_live,") and ",RUNNING," in ln
               for ln in _lines(shown.stdout)), shown.stdout
    stopped = beeline.run("STOP STREAMING QUERY fig14_live;")
    assert stopped.returncode == 0 and "fig14_live,STOPPED" in stopped.stdout, stopped.stdout
    after = beeline.run("SHOW STREAMING QUERIES;")
    assert "fig14_live" not in after.stdout
    assert proc.poll() is None


def _lines(stdout: str) -> list[str]:
    """beeline's output lines without its prompts ("0: jdbc:hive2://...> ", ". . .> ")."""
    lines = (re.sub(r"^(\d+: jdbc:\S+> |(\. )+\.?> ?)+", "", x) for x in stdout.splitlines())
    return [ln for ln in lines if ln.strip()]


def _csv(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, datetime):  # JDBC's java.sql.Timestamp text
        return v.strftime("%Y-%m-%d %H:%M:%S") + ".0"
    return str(v)


# --------------------------------------------------------------------------- load, cancel


def _active_jobs(spark, group: str) -> list[int]:
    tracker = spark.sparkContext.statusTracker()
    return [j for j in tracker.getJobIdsForGroup(group)
            if (info := tracker.getJobInfo(j)) is not None and info.status == "RUNNING"]


def _wait(predicate, seconds: float = 30.0) -> bool:
    return wait_until(predicate, seconds)


def test_cancel_stops_the_spark_job(spark, endpoint):
    from dfsql.server.tcli import ttypes as tt

    conn = _connect(endpoint)
    cur = conn.cursor()
    cur.execute("SELECT MAX(id) FROM range(0, 10000000000000, 1, 2)", async_=True)  # hours
    op = endpoint.service.operations[cur._operationHandle.operationId.guid]
    assert _wait(lambda: _active_jobs(spark, op.group)), "the job never started"
    cur.cancel()
    assert cur.poll().operationState == tt.TOperationState.CANCELED_STATE
    assert _wait(lambda: not _active_jobs(spark, op.group), 60), "the job still runs"
    cur.execute("SELECT 1")  # the session goes on
    assert cur.fetchall() == [(1,)]
    conn.close()


CLIENT = """
import sys
from pyhive import hive
conn = hive.connect(host="127.0.0.1", port=int(sys.argv[1]), auth="NONE", username="gone")
cur = conn.cursor()
cur.execute("SELECT id FROM range(0, 50000000, 1, 8)")
cur.fetchmany(1000)
print("fetching", flush=True)
sys.stdin.read()
"""


def test_a_client_killed_mid_fetch_leaves_nothing_behind(spark, endpoint):
    import threading

    before_threads = {t.ident for t in threading.enumerate()}
    before_sessions = len(endpoint.service.sessions)
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, str(endpoint.port)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "fetching"
        assert len(endpoint.service.sessions) == before_sessions + 1
        groups = [op.group for op in endpoint.service.operations.values()]
        assert groups
    finally:
        proc.kill()
        proc.wait(30)
    assert _wait(lambda: len(endpoint.service.sessions) == before_sessions), "session left"
    assert _wait(lambda: not [op for op in list(endpoint.service.operations.values())
                              if op.group in groups]), "operation left"
    assert _wait(lambda: not any(_active_jobs(spark, g) for g in groups), 60), "job left"
    # the client's threads (its connection's, a cancel's) end; the operations' pool keeps
    # the worker it may have grown by (dfsql-op_N, reused by the next statement)
    assert _wait(lambda: not [t for t in threading.enumerate() if t.ident not in before_threads
                              and not t.name.startswith("dfsql-op")]), "thread left"
    assert _wait(lambda: endpoint.connections() == 0), "connection left"


def test_sixteen_clients_at_once(endpoint):
    """16 clients x 10 mixed plain and windowed queries at once: every answer right."""
    from concurrent.futures import ThreadPoolExecutor

    fig14 = _fig14_rows()

    def client(i: int) -> int:
        conn = _connect(endpoint)
        cur = conn.cursor()
        done = 0
        for j in range(10):
            if j % 5 == i % 5:
                cur.execute(FIG14["query"])
                assert cur.fetchall() == fig14
            elif j % 2:
                cur.execute(f"SELECT COUNT(*) + {i} AS n FROM employees WHERE dept_id = 10")
                assert cur.fetchall() == [(3 + i,)]
            else:
                cur.execute(f"SELECT {j} AS j, 'client {i}' AS who")
                assert cur.fetchall() == [(j, f"client {i}")]
            done += 1
        conn.close()
        return done

    with ThreadPoolExecutor(16) as pool:
        assert sum(pool.map(client, range(16))) == 16 * 10
    assert _wait(lambda: endpoint.connections() == 0)
    assert not endpoint.service.sessions


# --------------------------------------------------------------------------- file roots


def test_statements_touch_files_only_under_the_data_roots(spark, tmp_path):
    from pyhive.exc import OperationalError

    inside = tmp_path / "data"
    spark.range(3).write.parquet(str(inside / "three"))
    outside = tmp_path / "elsewhere"
    spark.range(5).write.parquet(str(outside))
    link = inside / "sneaky"
    link.symlink_to(outside)
    server = Server(spark, port=0, auth="NONE", data_roots=[str(inside)]).start()
    try:
        conn = _connect(server)
        cur = conn.cursor()
        cur.execute(f"SELECT COUNT(*) FROM parquet.`{inside / 'three'}`")
        assert cur.fetchall() == [(3,)]
        for bad, col in [(f"SELECT COUNT(*) FROM parquet.`{outside}`", 30),
                         (f"SELECT COUNT(*) FROM parquet.`{link}`", 30),  # a link out
                         (f"SELECT COUNT(*) FROM parquet.`{inside}/../elsewhere`", 30),
                         ("SELECT * FROM json.`s3a://bucket/x`", 20),
                         (f"CREATE TABLE t USING parquet LOCATION '{outside}'", 39),
                         (f"LOAD DATA LOCAL INPATH '{outside}/x' INTO TABLE t", 24)]:
            with pytest.raises(OperationalError) as info:
                cur.execute(bad)
            status = info.value.args[0].status
            assert status.sqlState == "42501", bad
            assert status.errorMessage.startswith(f"line 1, col {col}:"), status.errorMessage
        cur.execute("SELECT 'parquet.`/etc`' AS not_a_path")  # a string is no path
        assert cur.fetchall() == [("parquet.`/etc`",)]
        conn.close()
    finally:
        server.stop()
