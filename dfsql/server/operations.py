"""A client session's operations: one statement or metadata call each, its state, and
its result set streamed from Spark.

A statement runs through ``dfsql.api.plan`` (plain Spark SQL and dfsql's windowed queries
alike; its plan value gives the result and the warnings) under a Spark job group of its
own, so that CancelOperation can cancel its jobs. Results stream: a statement's rows come
from Spark one partition at a time as Arrow batches (:func:`arrow_batches`), and
FetchResults slices those into Thrift columns. A result larger than memory never sits
whole in the server. Operation status lives in plain attributes, so GetOperationStatus
(which JDBC clients call once per fetched row) takes no lock and starts no Spark work.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import nullcontext
from typing import TYPE_CHECKING

from dfsql.api import plan
from dfsql.continuous_actors import Actor, acting_as
from dfsql.errors import DfsqlError, DfsqlSyntaxError, NotSupportedError
from dfsql.language.continuous import ContinuousStatement, parse_any
from dfsql.language.scan import Scanned
from dfsql.language.statement import Statement
from dfsql.result_warnings import batch_notes, dropped_warnings
from dfsql.server import progress_update, rowsets, tallies
from dfsql.server.guard import refusal_of
from dfsql.server.limits import (
    MAX_PARTITION_MB,
    MAX_STREAMING_QUERIES_PER_USER,
    bounded_partitions,
    partition_refusal,
    user_pool,
)
from dfsql.server.owners import streaming_slot
from dfsql.server.settings import text_only
from dfsql.server.tcli import ttypes as tt
from dfsql.server.watchdog import SPARK_GONE, spark_gone
from dfsql.session import cancel_until
from dfsql.spark.errors import java_error
from dfsql.spark.progress import LogLines, Stage, listening

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from dfsql.server.judge import Judge
    from dfsql.spark.planned import Planned

#: the first protocol version whose row sets are column-based
COLUMNAR_FROM = tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6
S = tt.TOperationState


def stream_refused(stmt: Statement | ContinuousStatement) -> NotSupportedError:
    """What a client of the endpoint can do instead of reading a stream as a result set:
    a windowed query runs as a continuous query (CREATE STREAMING QUERY), whose live
    windows are a table; a plain query over a stream has no windows to keep (Python's
    ``dfsql.start`` and the shell's ``\\watch`` are not reachable from a client)."""
    if getattr(stmt, "windowed", False):
        hint = ("run it as a continuous query: CREATE STREAMING QUERY name AS <this "
                "query>; then SELECT * FROM global_temp.name reads its live windows")
    else:
        hint = ("window it and run it as a continuous query: CREATE STREAMING QUERY name "
                "AS SELECT ... GROUP BY ... WINDOW ...; then SELECT * FROM "
                "global_temp.name reads its live windows")
    return NotSupportedError("this statement reads a stream, which never ends: a result set "
                         "cannot hold it", 1, 1, hint)


def sqlstate_of(e: BaseException) -> str:
    """The SQLSTATE of a user mistake: 42601 for syntax, else the error class's own."""
    if isinstance(e, DfsqlSyntaxError):
        return "42601"
    return getattr(e, "sqlstate", None) or "HY000"


def _handle_id() -> tt.THandleIdentifier:
    return tt.THandleIdentifier(guid=uuid.uuid4().bytes, secret=uuid.uuid4().bytes)


class ServiceError(Exception):
    """A call the service refuses (unknown handle, a limit): an error status."""

    def __init__(self, message: str, sqlstate: str = "HY000") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


# --------------------------------------------------------------------------- results


def arrow_batches(df: DataFrame) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The rows of ``df`` as Arrow record batches, computed one partition at a time (the
    next one prefetched): neither the JVM nor Python holds the whole result. On Spark
    Connect (no JVM here) Spark streams Arrow batches to ``toLocalIterator`` itself."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema, timezone="UTC")
    jdf = getattr(df, "_jdf", None)
    if jdf is None:  # Spark Connect
        def rows() -> Iterator[pa.RecordBatch]:
            chunk: list = []
            for row in df.toLocalIterator():
                chunk.append(tuple(row))
                if len(chunk) == 10_000:
                    yield pa.RecordBatch.from_pylist(
                        [dict(zip(schema.names, r, strict=True)) for r in chunk], schema)
                    chunk = []
            if chunk:
                yield pa.RecordBatch.from_pylist(
                    [dict(zip(schema.names, r, strict=True)) for r in chunk], schema)
        return schema, rows()
    from pyspark.serializers import NoOpSerializer
    from pyspark.util import _local_iterator_from_socket

    sc = df.sparkSession.sparkContext
    sock = sc._jvm.PythonRDD.toLocalIteratorAndServe(jdf.toArrowBatchRdd(), True)
    frames = _local_iterator_from_socket(sock, NoOpSerializer())
    return schema, (pa.ipc.read_record_batch(pa.py_buffer(b), schema) for b in frames)


class Operation:
    """One statement or metadata call of a session, and its result set."""

    def __init__(self, session: Session, kind: int, statement: str = "",
                 scanned: Scanned | None = None) -> None:
        self.session = session
        self.kind = kind
        self.statement = statement
        #: the statement as the service scanned it for its limits (None: not yet)
        self.scanned = scanned
        self.handle = tt.TOperationHandle(operationId=_handle_id(), operationType=kind,
                                          hasResultSet=True)
        self.key = self.handle.operationId.guid
        self.group = f"dfsql-{uuid.UUID(bytes=self.key).hex}"
        self.state = S.INITIALIZED_STATE
        self.error: tuple[str, str] | None = None
        self.schema: StructType | None = None
        self._df: DataFrame | None = None
        self._static: pa.Table | None = None
        self._arrow_schema: pa.Schema | None = None
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._buf: pa.RecordBatch | None = None
        self._pos = 0
        self.offset = 0
        self.lock = threading.Lock()
        #: ((state, progress update asked), encoded reply)
        self._status_reply: tuple[tuple[int, bool], bytes] | None = None
        #: the statement's plan value (its result and windowed blocks), until its log is
        #: computed (the dropped-row warnings are read from it: :meth:`log`)
        self._result: Planned | None = None
        self._log: list[str] | None = None
        self._log_at = 0
        #: its progress while it runs (phase lines, its job group's stages), made when
        #: the client asks for the log; the lines given so far, kept for FETCH_FIRST
        self.progress = LogLines(session.spark, self.group)
        self._said: list[str] = []
        #: the client asks GetOperationStatus for progress updates (beeline draws them)
        self.wants_progress = False
        self._bar: list[Stage] = []  # the stages the last update showed
        self.started_ms = int(time.time() * 1000)
        self._log_lock = threading.Lock()
        self.done = threading.Event()  # set when it leaves the running states
        #: set when its thread has left run(): no more of its jobs can start after it
        self._ran = threading.Event()
        #: when a client last called about it (monotonic), for the idle sweep
        self.used = time.monotonic()
        #: when it times out (monotonic; None: never), and why (the timeout's source)
        self.deadline: float | None = None
        self.timeout_source = ""
        self.timed_out = False
        #: the most of one result partition the JVM may gather (``--max-partition-mb``)
        self.max_partition_mb: float = MAX_PARTITION_MB

    def touch(self) -> None:
        """A client called about it (and so about its session): not idle."""
        self.used = self.session.used = time.monotonic()

    # ---------------------------------------------------------------- running
    def run(self) -> None:
        """Execute the statement: plan it, start its result (the first partition's job
        runs here, so that an error shows at execution, as on Spark's server)."""
        if self.state == S.CANCELED_STATE or self.timed_out:
            self.done.set()
            self._ran.set()
            return
        self.state = S.RUNNING_STATE
        spark = self.session.spark
        try:
            sc = spark.sparkContext
            sc.setJobGroup(self.group, self.statement[:200], interruptOnCancel=True)
            # its user's FAIR pool (Spark's Thrift server gives each session one): a free
            # task slot goes to the user running the fewest tasks, not to the oldest
            # job, so one user's many-task statement does not hold every other's
            sc.setLocalProperty("spark.scheduler.pool", self.session.pool)
        except Exception:  # Spark Connect: no job groups; tags instead
            try:
                spark.addTag(self.group)
            except Exception:
                pass
        try:
            text_only(spark)  # again: a RESET before this statement turned it back on
            # read once: the judge and dfsql.api.plan take the value, not the text
            scanned, self.scanned = self.scanned, None  # its tokens not held past the parse
            stmt = parse_any(self.statement, scanned)
            with acting_as(Actor(self.session.user, self.session.admin)), \
                    self.session.judging(stmt), listening(self.progress.hear):
                if self.session.judge is not None:
                    self.session.judge.check_statement(spark, stmt)
                with streaming_slot(stmt, self.statement, self.session.user,
                                    self.session.max_streaming_queries):
                    planned = plan(stmt, spark)
                    df = planned.result
            if self._abandoned():  # while it was planned: start no job
                return
            if df.isStreaming:
                raise stream_refused(stmt)
            with self.lock:
                if self._abandoned():  # cancelled or closed meanwhile
                    return
                self.schema = df.schema
                self._result = planned
                self._df = bounded_partitions(rowsets.wire_frame(df), self.max_partition_mb)
                self._start()
            if self.state == S.RUNNING_STATE:
                self.state = S.FINISHED_STATE
        except BaseException as e:  # noqa: BLE001 (every failure becomes the op's error)
            if self.state == S.CANCELED_STATE or self.timed_out:
                return
            error = describe(e)
            self.error = (self.session.guarded and refusal_of(error[0])) or error
            self.state = S.ERROR_STATE
        finally:
            tallies.statement_ended(
                "cancelled" if self.timed_out or self._abandoned() else
                "error" if self.state == S.ERROR_STATE else "finished")
            self.done.set()
            self._ran.set()
            try:
                spark.sparkContext.setJobGroup(None, None)  # type: ignore[arg-type]
                spark.sparkContext.setLocalProperty("spark.scheduler.pool", None)
            except Exception:
                pass

    def _abandoned(self) -> bool:
        """Whether the client gave up on it (cancelled, closed) or it timed out."""
        return self.timed_out or self.state in (S.CANCELED_STATE, S.CLOSED_STATE)

    def set_static(self, schema: StructType, table: pa.Table) -> None:
        """A metadata call's result (already computed)."""
        self.schema = schema
        self._static = table
        self._start()
        self.state = S.FINISHED_STATE
        self.done.set()
        self._ran.set()

    def _start(self) -> None:
        if self._static is not None:
            self._arrow_schema = self._static.schema
            self._batches = iter(self._static.to_batches())
        else:
            assert self._df is not None
            self._arrow_schema, self._batches = arrow_batches(self._df)
        self._buf, self._pos, self.offset = None, 0, 0
        self._buf = next(self._batches, None)

    # ---------------------------------------------------------------- fetching
    def fetch(self, max_rows: int, first: bool) -> tuple[pa.Table, int]:
        """The next ``max_rows`` rows (from the first with ``first``), and the offset of
        the first of them."""
        import pyarrow as pa

        with self.lock:
            if self.state != S.FINISHED_STATE:
                raise ServiceError(f"the operation is not finished (state "
                                   f"{S._VALUES_TO_NAMES.get(self.state, self.state)})")
            if first:
                self._close_batches()
                self._start()
            parts: list[pa.RecordBatch] = []
            need = max(0, max_rows)
            while need and self._buf is not None:
                if self._pos >= self._buf.num_rows:
                    self._buf, self._pos = next(self._batches, None), 0  # type: ignore[arg-type]
                    continue
                take = min(need, self._buf.num_rows - self._pos)
                parts.append(self._buf.slice(self._pos, take))
                self._pos += take
                need -= take
            assert self._arrow_schema is not None
            table = pa.Table.from_batches(parts, self._arrow_schema)
            offset = self.offset
            self.offset += table.num_rows
            return table, offset

    def log(self, first: bool) -> list[str]:
        """The operation's log (FetchResults with fetchType 1, which beeline asks for each
        second while the statement runs and prints, and PyHive's ``fetch_logs`` reads):
        while it runs, its progress — dfsql's phase lines (a backfill, ALTER's
        restatement) and its Spark stages' tasks when they changed
        (:class:`dfsql.spark.progress.LogLines`, read only when asked); once it has
        finished, the warnings about rows it dropped
        (:func:`dfsql.result_warnings.dropped_warnings`;
        for a replay after its rows, so from the count its run made). Each line is
        returned once (FETCH_NEXT); ``first`` (FETCH_FIRST) starts again."""
        with self._log_lock:
            if self._log is None:
                # a client drawing the progress update (beeline) gets one stage line,
                # which lets it start drawing, then the stages only in the bar
                stage_lines = not (self.wants_progress and self.progress.gave_stages)
                self._said += self.progress.take(running=stage_lines and
                                                 not self.done.is_set())
                if self.state == S.FINISHED_STATE:
                    self._log = [*self._said, *self._notes()]
            lines_now = self._said if self._log is None else self._log
            if first:
                self._log_at = 0
            lines, self._log_at = lines_now[self._log_at:], len(lines_now)
            return lines

    def progress_update(self) -> tt.TProgressUpdateResp:
        """GetOperationStatus's progress update (:mod:`dfsql.server.progress_update`): a
        statement's stages while it runs, all done once it has finished; not available
        for a metadata call, a failed statement or one that ran no stage."""
        self.wants_progress = True
        if self.kind != tt.TOperationType.EXECUTE_STATEMENT or self.state not in (
                S.INITIALIZED_STATE, S.PENDING_STATE, S.RUNNING_STATE, S.FINISHED_STATE):
            return progress_update.NOT_AVAILABLE
        if not self.done.is_set():
            self._bar = self.progress.stages() or self._bar
            return progress_update.update(self._bar, self.started_ms, complete=False)
        if not self._bar:
            return progress_update.NOT_AVAILABLE
        return progress_update.update(self._bar, self.started_ms, complete=True)

    def _notes(self) -> list[str]:
        """The finished statement's warnings and notes, worked out once."""
        planned, self._result = self._result, None
        try:
            return [] if planned is None else [*dropped_warnings(planned),
                                               *batch_notes(planned)]
        except Exception as e:  # noqa: BLE001 (the rows stay valid without it)
            return [f"warning: dropped rows not counted: {describe(e)[0]}"]

    def cancel(self) -> None:
        if self.state in (S.FINISHED_STATE, S.ERROR_STATE, S.CLOSED_STATE):
            return
        self.state = S.CANCELED_STATE
        self.done.set()
        self._cancel_jobs()

    def time_out(self) -> None:
        """Its deadline passed while it ran: it ends in ERROR_STATE with HiveServer2's
        query-timeout SQLSTATE, and its Spark jobs are cancelled (the statement's thread
        then sees its job fail and leaves the error as it is)."""
        if self.done.is_set() or self.state not in (S.RUNNING_STATE, S.PENDING_STATE,
                                                    S.INITIALIZED_STATE):
            return
        self.timed_out = True
        self.error = (f"the statement ran past its {self.timeout_source} and was "
                      "cancelled", "HYT00")
        self.state = S.ERROR_STATE
        self.done.set()
        # its thread may plan for long past the deadline (no cancel reaches planning):
        # the jobs it starts then, a write's above all, are cancelled however late
        self._cancel_group(seconds=3600.0)

    def _cancel_jobs(self) -> None:
        # cancelled: whatever it runs, planning's jobs too (those before its result);
        # closed: only a result still being fetched
        if self.state == S.CANCELED_STATE or (self._df is not None and
                                              self._buf is not None):
            self._cancel_group()

    def _cancel_group(self, seconds: float = 60.0) -> None:
        """Its running jobs, and those its thread starts until it ends (a statement runs
        several in turn), for at most ``seconds``: :func:`dfsql.session.cancel_until`,
        beside."""
        def cancel() -> None:
            try:
                cancel_until(self.session.spark, self.group, self._ran, seconds=seconds)
            except Exception:  # noqa: BLE001 - a session already gone has nothing to cancel
                pass

        threading.Thread(target=cancel, daemon=True, name=f"cancel-{self.group}").start()

    def close(self) -> None:
        if self.state in (S.RUNNING_STATE, S.INITIALIZED_STATE, S.PENDING_STATE):
            self.state = S.CANCELED_STATE
        self._cancel_jobs()
        with self.lock:
            self._close_batches()
            self._result = None
            self.state = S.CLOSED_STATE
        self.done.set()

    def _close_batches(self) -> None:
        """Stop the partition iterator (its JVM server thread ends with it)."""
        batches, self._batches, self._buf = self._batches, None, None
        if batches is not None and hasattr(batches, "close"):
            try:
                batches.close()
            except Exception:
                pass


def describe(e: BaseException) -> tuple[str, str]:
    """(message, SQLSTATE) of a failed statement: dfsql's positioned text where it is a
    user mistake; Spark's own message otherwise (first line with its error class and
    SQLSTATE, no stack; for an error PySpark left in py4j's wrapping, the Java one's:
    :func:`dfsql.spark.errors.java_error`)."""
    if isinstance(e, DfsqlError):
        return str(e), sqlstate_of(e)
    refused = partition_refusal(str(e))
    if refused is not None:  # a partition over --max-partition-mb (its job's error)
        return refused
    if spark_gone(e):  # not py4j's "Error while sending or receiving"
        return SPARK_GONE
    if isinstance(e, ServiceError):
        return str(e), e.sqlstate
    java = java_error(e)  # py4j's "An error occurred while calling oN.sql": Spark's words
    if java is not None:
        return java
    state = "HY000"
    try:
        from pyspark.errors import PySparkException

        if isinstance(e, PySparkException):
            state = e.getSqlState() or state
    except Exception:
        pass
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__), state


class Session:
    """A client session: its SparkSession and operations."""

    def __init__(self, spark: SparkSession, protocol: int, user: str,
                 guarded: bool = False, admin: bool = False,
                 judge: Judge | None = None) -> None:
        self.spark = spark
        #: judges what its statements hand to Spark (None: nothing is judged)
        self.judge = judge
        self.protocol = protocol
        #: who opened it: its continuous queries are this user's (dfsql.continuous_actors.Actor)
        self.user = user
        #: the user is one of ``dfsql serve --admin``'s (may stop anyone's queries)
        self.admin = admin
        #: its SparkSession lacks the JVM functions (:mod:`dfsql.server.guard`)
        self.guarded = guarded
        self.used = time.monotonic()  # the last call about it or its operations
        self.handle = tt.TSessionHandle(sessionId=_handle_id())
        self.key = self.handle.sessionId.guid
        self.operations: dict[bytes, Operation] = {}
        #: the continuous queries its user may hold (``--max-streaming-queries-per-user``)
        self.max_streaming_queries = MAX_STREAMING_QUERIES_PER_USER
        #: its FAIR scheduler pool (spark.scheduler.pool): its user's, shared by the
        #: user's sessions, so that more sessions are not a larger share of the slots
        self.pool = user_pool(user)

    def judging(self, statement: Statement | ContinuousStatement):
        """While ``statement`` runs: refusals are placed in its text."""
        return self.judge.statement(statement) if self.judge is not None else nullcontext()

    @property
    def columnar(self) -> bool:
        return self.protocol >= COLUMNAR_FROM

    def running(self) -> int:
        return sum(op.state in (S.RUNNING_STATE, S.PENDING_STATE, S.INITIALIZED_STATE)
                   for op in self.operations.values())

