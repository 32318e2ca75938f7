"""The HiveServer2 service: client sessions, operations and the TCLIService calls.

One Spark application serves every client; each client session gets its own
``SparkSession`` (``newSession()``: temp views and SQL settings isolated, one
SparkContext shared), as Spark's own Thrift server does. A statement runs through
``dfsql.sql`` (plain Spark SQL and dfsql's windowed queries alike), synchronously or on a
pool (``runAsync``), under a Spark job group of its own so that CancelOperation can
cancel its jobs.

Results stream: a statement's rows come from Spark one partition at a time as Arrow
batches (:func:`arrow_batches`), and FetchResults slices those into Thrift columns. A
result larger than memory never sits whole in the server. Operation status lives in
plain attributes, so GetOperationStatus (which JDBC clients call once per fetched row)
takes no lock and starts no Spark work.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError, DfsqlSyntaxError
from dfsql.server import rowsets
from dfsql.server.tcli import TCLIService, encode
from dfsql.server.tcli import ttypes as tt

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger("dfsql.server")

#: the newest protocol this server speaks (Spark 4.3's own server: V10)
SERVER_PROTOCOL = tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10
COLUMNAR_FROM = tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6
OK = tt.TStatus(statusCode=tt.TStatusCode.SUCCESS_STATUS)
S = tt.TOperationState
#: how long GetOperationStatus waits for a running operation to end (HiveServer2's
#: hive.server2.long.polling.timeout is 5 s)
LONG_POLL = 5.0


def _error_status(message: str, sqlstate: str = "HY000", code: int = 0) -> tt.TStatus:
    return tt.TStatus(statusCode=tt.TStatusCode.ERROR_STATUS, errorMessage=message,
                      sqlState=sqlstate, errorCode=code)


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

    def __init__(self, session: Session, kind: int, statement: str = "") -> None:
        self.session = session
        self.kind = kind
        self.statement = statement
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
        self._status_reply: tuple[int, bytes] | None = None  # (state, encoded reply)
        self.done = threading.Event()  # set when it leaves the running states

    # ---------------------------------------------------------------- running
    def run(self) -> None:
        """Execute the statement: plan it, start its result (the first partition's job
        runs here, so that an error shows at execution, as on Spark's server)."""
        if self.state == S.CANCELED_STATE:
            self.done.set()
            return
        self.state = S.RUNNING_STATE
        spark = self.session.spark
        try:
            sc = spark.sparkContext
            sc.setJobGroup(self.group, self.statement[:200], interruptOnCancel=True)
        except Exception:  # Spark Connect: no job groups; tags instead
            try:
                spark.addTag(self.group)
            except Exception:
                pass
        try:
            import dfsql

            df = dfsql.sql(self.statement, spark)
            if df.isStreaming:
                raise ServiceError(
                    "this statement is a continuous query over a stream: a result set "
                    "cannot hold it (start it with dfsql.start)", "0A000")
            with self.lock:
                self.schema = df.schema
                self._df = rowsets.wire_frame(df)
                self._start()
            if self.state == S.RUNNING_STATE:
                self.state = S.FINISHED_STATE
        except BaseException as e:  # noqa: BLE001 (every failure becomes the op's error)
            if self.state == S.CANCELED_STATE:
                return
            self.error = _describe(e)
            self.state = S.ERROR_STATE
        finally:
            self.done.set()
            try:
                spark.sparkContext.setJobGroup(None, None)  # type: ignore[arg-type]
            except Exception:
                pass

    def set_static(self, schema: StructType, table: pa.Table) -> None:
        """A metadata call's result (already computed)."""
        self.schema = schema
        self._static = table
        self._start()
        self.state = S.FINISHED_STATE
        self.done.set()

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

    def cancel(self) -> None:
        if self.state in (S.FINISHED_STATE, S.ERROR_STATE, S.CLOSED_STATE):
            return
        self.state = S.CANCELED_STATE
        self.done.set()
        self._cancel_jobs()

    def _cancel_jobs(self) -> None:
        if self._df is None or (self.state != S.CANCELED_STATE and self._buf is None):
            return  # nothing of it runs on Spark (any more)
        spark = self.session.spark
        try:
            spark.sparkContext.cancelJobGroup(self.group)
        except Exception:
            try:
                spark.interruptTag(self.group)
            except Exception:
                pass

    def close(self) -> None:
        if self.state in (S.RUNNING_STATE, S.INITIALIZED_STATE, S.PENDING_STATE):
            self.state = S.CANCELED_STATE
        self._cancel_jobs()
        with self.lock:
            self._close_batches()
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


def _describe(e: BaseException) -> tuple[str, str]:
    """(message, SQLSTATE) of a failed statement: dfsql's positioned text where it is a
    user mistake; Spark's own message (first line, no stack) otherwise."""
    if isinstance(e, DfsqlError):
        return str(e), sqlstate_of(e)
    if isinstance(e, ServiceError):
        return str(e), e.sqlstate
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

    def __init__(self, spark: SparkSession, protocol: int, user: str) -> None:
        self.spark = spark
        self.protocol = protocol
        self.user = user
        self.handle = tt.TSessionHandle(sessionId=_handle_id())
        self.key = self.handle.sessionId.guid
        self.operations: dict[bytes, Operation] = {}

    @property
    def columnar(self) -> bool:
        return self.protocol >= COLUMNAR_FROM

    def running(self) -> int:
        return sum(op.state in (S.RUNNING_STATE, S.PENDING_STATE, S.INITIALIZED_STATE)
                   for op in self.operations.values())


def _metadata_call(function: str, response: type, *fields: str):
    """A metadata call (GetTables, ...): ``dfsql.server.metadata.<function>`` with the
    request's ``fields``, as an operation holding its result."""

    def call(self: Service, req):
        from dfsql.server import metadata

        status, handle = self._metadata(req, getattr(metadata, function),
                                        *(getattr(req, f) for f in fields))
        return response(status=status, operationHandle=handle)

    return call


def _unsupported(response: type):
    """A delegation-token call: not supported (an error status, as Spark's server)."""

    def call(self: Service, req):
        return response(status=_error_status("delegation tokens are not supported", "0A000"))

    return call


class Service:
    """The TCLIService handler (the generated Processor calls these by name)."""

    def __init__(self, spark: SparkSession, workers: int = 8,
                 max_operations_per_session: int = 4, session_setup=None,
                 data_roots: list[str] | None = None) -> None:
        self.spark = spark
        #: where statements may read and write files (None: anywhere)
        self.data_roots = data_roots
        self.session_setup = session_setup  # run on every new client session's SparkSession
        self.sessions: dict[bytes, Session] = {}
        self.operations: dict[bytes, Operation] = {}  # every session's, for fast look-ups
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dfsql-op")
        self.max_operations = max_operations_per_session
        self.lock = threading.Lock()
        self.local = threading.local()  # the calling connection's sessions and user

    # ---------------------------------------------------------------- connections
    def connection_opened(self, user: str) -> None:
        self.local.sessions = set()
        self.local.user = user

    def connection_closed(self) -> None:
        """A client went away: its sessions close (operations cancelled, jobs too)."""
        for key in list(getattr(self.local, "sessions", ())):
            self._close_session(key)

    def shutdown(self) -> None:
        for key in list(self.sessions):
            self._close_session(key)
        self.pool.shutdown(wait=False, cancel_futures=True)

    # ---------------------------------------------------------------- helpers
    def _session(self, handle) -> Session:
        s = self.sessions.get(handle.sessionId.guid) if handle and handle.sessionId else None
        if s is None:
            raise ServiceError("invalid session handle (closed, or from another server)")
        return s

    def _operation(self, handle) -> Operation:
        key = handle.operationId.guid if handle and handle.operationId else None
        op = self.operations.get(key)  # type: ignore[arg-type]
        if op is not None:
            return op
        raise ServiceError("invalid operation handle (closed, or from another server)")

    def _close_session(self, key: bytes) -> None:
        with self.lock:
            s = self.sessions.pop(key, None)
        if s is None:
            return
        for op in list(s.operations.values()):
            op.close()
            self.operations.pop(op.key, None)
        s.operations.clear()
        sessions = getattr(self.local, "sessions", None)
        if sessions is not None:
            sessions.discard(key)

    def _new_operation(self, session: Session, kind: int, statement: str = "") -> Operation:
        if session.running() >= self.max_operations:
            raise ServiceError(f"this session already runs {self.max_operations} operations "
                               "(the per-session limit): wait for one to finish, or close it",
                               "54000")
        op = Operation(session, kind, statement)
        session.operations[op.key] = op
        self.operations[op.key] = op
        return op

    def _forget(self, op: Operation) -> None:
        op.session.operations.pop(op.key, None)
        self.operations.pop(op.key, None)

    # ---------------------------------------------------------------- sessions
    def OpenSession(self, req):  # noqa: N802 (Thrift's names)
        protocol = min(req.client_protocol, SERVER_PROTOCOL)
        user = getattr(self.local, "user", None) or req.username or "anonymous"
        try:
            spark = self.spark.newSession()
            if self.session_setup is not None:
                self.session_setup(spark)
            for k, v in (req.configuration or {}).items():
                if k == "use:database" and v and v != "default":
                    spark.catalog.setCurrentDatabase(v)
                elif k.startswith("set:hiveconf:spark.") or k.startswith("set:hiveconf:dfsql."):
                    spark.conf.set(k[len("set:hiveconf:"):], v)
        except Exception as e:  # noqa: BLE001
            message, state = _describe(e)
            return tt.TOpenSessionResp(status=_error_status(message, state),
                                       serverProtocolVersion=protocol)
        s = Session(spark, protocol, user)
        with self.lock:
            self.sessions[s.key] = s
        if hasattr(self.local, "sessions"):
            self.local.sessions.add(s.key)
        return tt.TOpenSessionResp(status=OK, serverProtocolVersion=protocol,
                                   sessionHandle=s.handle, configuration={})

    def CloseSession(self, req):  # noqa: N802
        self._close_session(req.sessionHandle.sessionId.guid)
        return tt.TCloseSessionResp(status=OK)

    def GetInfo(self, req):  # noqa: N802
        from pyspark import __version__

        names = {tt.TGetInfoType.CLI_SERVER_NAME: "dfsql",
                 tt.TGetInfoType.CLI_DBMS_NAME: "Spark SQL",
                 tt.TGetInfoType.CLI_DBMS_VER: __version__}
        if req.infoType not in names:
            return tt.TGetInfoResp(status=_error_status(
                f"Unrecognized GetInfoType value: {req.infoType}"),
                infoValue=tt.TGetInfoValue(stringValue=""))
        return tt.TGetInfoResp(status=OK, infoValue=tt.TGetInfoValue(
            stringValue=names[req.infoType]))

    # ---------------------------------------------------------------- statements
    def ExecuteStatement(self, req):  # noqa: N802
        try:
            s = self._session(req.sessionHandle)
            if self.data_roots is not None:
                from dfsql.server.paths import check_paths

                check_paths(req.statement, self.data_roots)
            op = self._new_operation(s, tt.TOperationType.EXECUTE_STATEMENT, req.statement)
        except ServiceError as e:
            return tt.TExecuteStatementResp(status=_error_status(str(e), e.sqlstate))
        except DfsqlError as e:
            return tt.TExecuteStatementResp(status=_error_status(*_describe(e)))
        if req.runAsync:
            op.state = S.PENDING_STATE
            self.pool.submit(op.run)
            return tt.TExecuteStatementResp(status=OK, operationHandle=op.handle)
        op.run()
        if op.state == S.ERROR_STATE:
            assert op.error is not None
            self._forget(op)
            return tt.TExecuteStatementResp(status=_error_status(*op.error))
        return tt.TExecuteStatementResp(status=OK, operationHandle=op.handle)

    def GetOperationStatus(self, req):  # noqa: N802
        try:
            op = self._operation(req.operationHandle)
        except ServiceError as e:
            return tt.TGetOperationStatusResp(status=_error_status(str(e)))
        return _status_of(op, _long_poll(op))

    def status_reply(self, req) -> bytes:
        """GetOperationStatus's reply body, encoded: kept on the operation per state (an
        operation's answer changes only with its state)."""
        handle = req.operationHandle
        op = self.operations.get(handle.operationId.guid if handle else None)  # type: ignore[arg-type]
        if op is None:  # the invalid-handle error
            return encode(TCLIService.GetOperationStatus_result(
                success=self.GetOperationStatus(req)))
        cached = op._status_reply
        if cached is not None and op.done.is_set() and cached[0] == op.state:
            return cached[1]  # an ended operation asked again (JDBC: once per row)
        state = _long_poll(op)
        body = encode(TCLIService.GetOperationStatus_result(success=_status_of(op, state)))
        op._status_reply = (state, body)
        return body

    def CancelOperation(self, req):  # noqa: N802
        try:
            self._operation(req.operationHandle).cancel()
        except ServiceError as e:
            return tt.TCancelOperationResp(status=_error_status(str(e)))
        return tt.TCancelOperationResp(status=OK)

    def CloseOperation(self, req):  # noqa: N802
        try:
            op = self._operation(req.operationHandle)
        except ServiceError as e:
            return tt.TCloseOperationResp(status=_error_status(str(e)))
        op.close()
        self._forget(op)
        return tt.TCloseOperationResp(status=OK)

    def GetResultSetMetadata(self, req):  # noqa: N802
        try:
            op = self._operation(req.operationHandle)
            if op.schema is None:
                raise ServiceError("the operation has no result set yet")
        except ServiceError as e:
            return tt.TGetResultSetMetadataResp(status=_error_status(str(e)))
        return tt.TGetResultSetMetadataResp(status=OK, schema=rowsets.table_schema(op.schema))

    def FetchResults(self, req):  # noqa: N802
        got = self._fetch(req)
        return got if isinstance(got, tt.TFetchResultsResp) else self._response(*got)

    def fetch_reply(self, req) -> bytes:
        """FetchResults's reply body, encoded; a column-based row set straight from Arrow
        (:func:`rowsets.encoded_row_set`), the rest through Thrift's codec."""
        got = self._fetch(req)
        if isinstance(got, tt.TFetchResultsResp):
            resp = got
        elif got[2]:
            return rowsets.encoded_fetch_result(got[0], got[1])
        else:
            resp = self._response(*got)
        return encode(TCLIService.FetchResults_result(success=resp))

    def _response(self, table, offset: int, columnar: bool) -> tt.TFetchResultsResp:
        return tt.TFetchResultsResp(status=OK, hasMoreRows=table.num_rows > 0,
                                    results=rowsets.row_set(table, offset, columnar))

    def _fetch(self, req) -> tt.TFetchResultsResp | tuple[pa.Table, int, bool]:
        """The rows a FetchResults asks for (table, offset, column-based?), or the whole
        answer where there are none to encode (an error, the empty log)."""
        try:
            op = self._operation(req.operationHandle)
            if req.fetchType == 1:  # the operation's log: none kept
                return tt.TFetchResultsResp(status=OK, hasMoreRows=False, results=tt.TRowSet(
                    startRowOffset=0, rows=[], columns=[tt.TColumn(
                        stringVal=tt.TStringColumn(values=[], nulls=b""))]))
            first = req.orientation == tt.TFetchOrientation.FETCH_FIRST
            table, offset = op.fetch(req.maxRows, first)
        except ServiceError as e:
            return tt.TFetchResultsResp(status=_error_status(str(e), e.sqlstate))
        except Exception as e:  # noqa: BLE001 (a job failing mid-result)
            return tt.TFetchResultsResp(status=_error_status(*_describe(e)))
        return table, offset, op.session.columnar

    # ---------------------------------------------------------------- metadata
    def _metadata(self, req, fn, *args) -> tuple[tt.TStatus, tt.TOperationHandle | None]:
        try:
            s = self._session(req.sessionHandle)
            op = self._new_operation(s, tt.TOperationType.GET_TABLES)
            try:
                schema, table = fn(s.spark, *args)
            except BaseException:
                self._forget(op)
                raise
            op.set_static(schema, table)
            return OK, op.handle
        except ServiceError as e:
            return _error_status(str(e), e.sqlstate), None
        except Exception as e:  # noqa: BLE001
            return _error_status(*_describe(e)), None

    # one metadata call each: the function of dfsql.server.metadata that answers it, the
    # response type, and the request's fields passed on
    GetTypeInfo = _metadata_call("type_info", tt.TGetTypeInfoResp)
    GetCatalogs = _metadata_call("catalogs", tt.TGetCatalogsResp)
    GetSchemas = _metadata_call("schemas", tt.TGetSchemasResp, "schemaName")
    GetTables = _metadata_call("tables", tt.TGetTablesResp, "schemaName", "tableName",
                               "tableTypes")
    GetTableTypes = _metadata_call("table_types", tt.TGetTableTypesResp)
    GetColumns = _metadata_call("columns", tt.TGetColumnsResp, "schemaName", "tableName",
                                "columnName")
    GetFunctions = _metadata_call("functions", tt.TGetFunctionsResp, "schemaName",
                                  "functionName")
    GetPrimaryKeys = _metadata_call("primary_keys", tt.TGetPrimaryKeysResp)
    GetCrossReference = _metadata_call("cross_reference", tt.TGetCrossReferenceResp)
    GetDelegationToken = _unsupported(tt.TGetDelegationTokenResp)
    CancelDelegationToken = _unsupported(tt.TCancelDelegationTokenResp)
    RenewDelegationToken = _unsupported(tt.TRenewDelegationTokenResp)


def _long_poll(op: Operation) -> int:
    """The operation's state once it has ended, or after LONG_POLL seconds: HiveServer2's
    long polling, so clients that poll without sleeping (Hive JDBC) do not spin against
    the statement they wait for."""
    if not op.done.is_set():
        op.done.wait(LONG_POLL)
    return op.state


def _status_of(op: Operation, state: int) -> tt.TGetOperationStatusResp:
    resp = tt.TGetOperationStatusResp(status=OK, operationState=state, hasResultSet=True)
    if state == S.ERROR_STATE and op.error:
        resp.errorMessage, resp.sqlState = op.error
        resp.errorCode = 0
    return resp


def like_pattern(pattern: str | None) -> re.Pattern[str]:
    """A JDBC search pattern (``%`` any run, ``_`` one character; NULL or ``*`` all) as
    a case-insensitive regular expression."""
    if pattern is None or pattern in ("", "*", "%"):
        return re.compile(".*", re.S)
    out = []
    for ch in pattern:
        out.append(".*" if ch in "%*" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(out), re.I | re.S)
