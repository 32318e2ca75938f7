"""The HiveServer2 service: the TCLIService calls, over a registry of client sessions
and their operations.

One Spark application serves every client; each client session gets its own
``SparkSession`` (``newSession()``: temp views and SQL settings isolated, one
SparkContext shared), as Spark's own Thrift server does. A statement runs synchronously
or on threads shared fairly per user (``runAsync``: :mod:`dfsql.server.fair`) as an
:class:`~dfsql.server.operations.Operation`; metadata calls are answered by
:mod:`dfsql.server.metadata`; statement deadlines and idle sessions and operations are
:mod:`dfsql.server.timeouts`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from dfsql.continuous import stop_all
from dfsql.errors import DfsqlError
from dfsql.language.scan import Scanned
from dfsql.metrics import MetricsServer, serve_metrics
from dfsql.server import metadata, rowsets, tallies
from dfsql.server.fair import WORKERS, FairPool
from dfsql.server.guard import JvmNotAllowedError, drop_jvm_functions
from dfsql.server.judge import Judge, Policy
from dfsql.server.limits import (
    LIMIT_STATE,
    MAX_FETCH_ROWS,
    MAX_NESTING,
    MAX_PARTITION_MB,
    MAX_SESSIONS_PER_USER,
    MAX_STATEMENT_KB,
    MAX_STREAMING_QUERIES_PER_USER,
    check_statement,
    drop_pool,
    fair_scheduling,
)
from dfsql.server.operations import Operation, S, ServiceError, Session, describe
from dfsql.server.owners import caller_owns, same_handle
from dfsql.server.settings import setting_allowed, setting_refusal, text_only
from dfsql.server.tcli import TCLIService, encode
from dfsql.server.tcli import ttypes as tt
from dfsql.server.timeouts import Timeouts, run_until_deadline
from dfsql.spark import door

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

log = logging.getLogger("dfsql.server")

#: the newest protocol this server speaks (Spark 4.3's own server: V10)
SERVER_PROTOCOL = tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10
OK = tt.TStatus(statusCode=tt.TStatusCode.SUCCESS_STATUS)
#: how long GetOperationStatus waits for a running operation to end (HiveServer2's
#: hive.server2.long.polling.timeout is 5 s)
LONG_POLL = 5.0


def _error_status(message: str, sqlstate: str = "HY000", code: int = 0) -> tt.TStatus:
    return tt.TStatus(statusCode=tt.TStatusCode.ERROR_STATUS, errorMessage=message,
                      sqlState=sqlstate, errorCode=code)



def _metadata_call(function: str, response: type, *fields: str):
    """A metadata call (GetTables, ...): ``dfsql.server.metadata.<function>`` with the
    request's ``fields``, as an operation holding its result."""

    def call(self: Service, req):
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

    def __init__(self, spark: SparkSession, workers: int = WORKERS,
                 max_operations_per_session: int = 4, session_setup=None,
                 data_roots: list[str] | None = None, allow_jvm_functions: bool = False,
                 statement_timeout: float = 0,
                 idle_session_timeout: float = 0, idle_operation_timeout: float = 0,
                 admins: frozenset[str] = frozenset(), *,
                 max_fetch_rows: int = MAX_FETCH_ROWS,
                 max_statement_kb: float = MAX_STATEMENT_KB, max_nesting: int = MAX_NESTING,
                 max_partition_mb: float = MAX_PARTITION_MB,
                 max_sessions_per_user: int = MAX_SESSIONS_PER_USER,
                 max_streaming_queries_per_user: int = MAX_STREAMING_QUERIES_PER_USER,
                 private_objects: bool = False) -> None:
        self.spark = spark
        #: the users who may stop any user's continuous queries (``--admin``)
        self.admins = frozenset(admins)
        #: what one client may cost (:mod:`dfsql.server.limits`; 0: no limit): rows per
        #: fetch, a statement's size and nesting, a result partition held at once,
        #: sessions open at once per user, continuous queries per user (admins too)
        self.max_fetch_rows = max_fetch_rows
        self.max_streaming_queries_per_user = max_streaming_queries_per_user
        self.max_statement_kb, self.max_nesting = max_statement_kb, max_nesting
        self.max_partition_mb = max_partition_mb
        self.max_sessions_per_user = max_sessions_per_user
        if not fair_scheduling(spark):
            log.warning("Spark schedules FIFO (spark.scheduler.mode, set when its context "
                        "started): one client's long statement holds the others' until it "
                        "ends; dfsql.session() starts Spark with FAIR")
        #: whether statements may run code on the server (:mod:`dfsql.server.judge`)
        self.allow_jvm_functions = allow_jvm_functions
        #: what judges each statement on its plan before Spark runs it
        self.judge = Judge(Policy(None if data_roots is None else tuple(data_roots),
                                  allow_jvm_functions, private_objects))
        if private_objects and not self.judge.policy.judges:
            raise DfsqlError("--private-objects needs statements judged: not with both "
                             "--allow-any-path and --allow-jvm-functions")
        self.session_setup = session_setup  # run on every new client session's SparkSession
        self.sessions: dict[bytes, Session] = {}
        self.operations: dict[bytes, Operation] = {}  # every session's, for fast look-ups
        #: the async statements' threads, shared per user fairly (:mod:`dfsql.server.fair`)
        self.pool = FairPool(workers)
        self.max_operations = max_operations_per_session
        self.lock = threading.Lock()
        self.local = threading.local()  # the calling connection's sessions and user
        #: statement deadlines and the idle sweeps (:mod:`dfsql.server.timeouts`)
        self.timeouts = Timeouts(statement_timeout, idle_session_timeout,
                                 idle_operation_timeout, self.sessions, self.operations,
                                 self._close_session, self._forget)
        self.timeouts.start()

    # ---------------------------------------------------------------- connections
    def connection_opened(self, user: str) -> None:
        self.local.sessions = set()
        self.local.user = user

    def request_opened(self, user: str) -> None:
        """An HTTP request's user ("": OpenSession's username). The sessions it opens
        belong to no connection: an HTTP client may send each call on a new one, so they
        end with CloseSession or the idle-session timeout, as in HiveServer2's HTTP mode."""
        self.local.user = user

    def connection_closed(self) -> None:
        """A client went away: its sessions close (operations cancelled, jobs too)."""
        for key in list(getattr(self.local, "sessions", ())):
            self._close_session(key)

    def figures(self) -> tuple[int, int, dict[str, int], int]:
        """The endpoint's metrics now (:mod:`dfsql.metrics`): sessions open, operations
        running, statements by outcome, failed logins (:mod:`dfsql.server.tallies`)."""
        ops = list(self.operations.values())
        return (len(self.sessions), sum(o.state == S.RUNNING_STATE for o in ops),
                *tallies.counts())

    def serve_metrics(self, host: str, port: int) -> MetricsServer:
        """``/metrics`` of this endpoint and the process' continuous queries."""
        return serve_metrics(port, host, self.spark, self.figures)

    def shutdown(self) -> None:
        """Every session closes, and the continuous queries clients started stop."""
        self.timeouts.stop()
        for key in list(self.sessions):
            self._close_session(key)
        self.pool.shutdown()
        stop_all()

    # ---------------------------------------------------------------- helpers
    def _session(self, handle) -> Session:
        """The caller's session of ``handle``: its GUID and secret both match, and it is
        the caller's (:meth:`_owns`). Another's, or a wrong secret, gets the error an
        unknown handle gets: the answer must not tell that the session exists."""
        hid = handle.sessionId if handle else None
        s = self.sessions.get(hid.guid if hid else None)  # type: ignore[arg-type]
        if s is None or not same_handle(hid, s.handle.sessionId) or not self._owns(s):
            raise ServiceError("invalid session handle: " + self.timeouts.why_gone(hid))
        s.used = time.monotonic()
        return s

    def _operation(self, handle) -> Operation:
        """The caller's operation of ``handle`` (GUID and secret, in a session of the
        caller's), else the invalid-handle error, as :meth:`_session`."""
        op = self._find_operation(handle)
        if op is None:
            raise ServiceError("invalid operation handle: " + self.timeouts.why_gone(
                handle.operationId if handle else None))
        op.touch()
        return op

    def _find_operation(self, handle) -> Operation | None:
        hid = handle.operationId if handle else None
        op = self.operations.get(hid.guid if hid else None)  # type: ignore[arg-type]
        if op is None or not same_handle(hid, op.handle.operationId) or not self._owns(op.session):
            return None
        return op

    def _owns(self, s: Session) -> bool:
        return caller_owns(self.local, s.user, s.key)

    def _close_session(self, key: bytes) -> None:
        with self.lock:
            s = self.sessions.pop(key, None)
        if s is None:
            return
        for op in list(s.operations.values()):
            op.close()
            self.operations.pop(op.key, None)
        s.operations.clear()
        # the user's pool, once none of their sessions is left (locked: a session
        # the user opens meanwhile runs its jobs in the pool made again after)
        with self.lock:
            if not any(o.pool == s.pool for o in self.sessions.values()):
                drop_pool(self.spark, s.pool)
        door.release(s.spark)  # its continuous queries' plans were judged when made
        sessions = getattr(self.local, "sessions", None)
        if sessions is not None:
            sessions.discard(key)

    def _new_operation(self, session: Session, kind: int, statement: str = "",
                       scanned: Scanned | None = None) -> Operation:
        if session.running() >= self.max_operations:
            raise ServiceError(f"this session already runs {self.max_operations} operations "
                               "(the per-session limit): wait for one to finish, or close it",
                               "54000")
        op = Operation(session, kind, statement, scanned)
        op.max_partition_mb = self.max_partition_mb
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
        cap = self.max_sessions_per_user
        if cap > 0 and sum(s.user == user for s in list(self.sessions.values())) >= cap:
            return tt.TOpenSessionResp(status=_error_status(
                f"user {user[:64]!r} already has {cap} sessions open, the limit (dfsql serve "
                "--max-sessions-per-user): close one (or let it idle out) first",
                LIMIT_STATE), serverProtocolVersion=protocol)
        try:
            spark = self.spark.newSession()
            if not self.allow_jvm_functions:
                drop_jvm_functions(spark)
            if self.session_setup is not None:
                self.session_setup(spark)  # the operator's code: before the judge
            text_only(spark)  # ${…} is text (after the setup, which runs as the operator)
            for k, v in (req.configuration or {}).items():
                if k == "use:database" and v and v != "default":
                    spark.catalog.setCurrentDatabase(v)
                elif k.startswith("set:hiveconf:spark.") or k.startswith("set:hiveconf:dfsql."):
                    key = k[len("set:hiveconf:"):]
                    if not (self.allow_jvm_functions or setting_allowed(key, v)):
                        raise JvmNotAllowedError(setting_refusal(key))
                    # the client's own session, made above: kept, never restored
                    spark.conf.set(key, v)
            self.judge.guard(spark)
        except Exception as e:  # noqa: BLE001
            message, state = describe(e)
            return tt.TOpenSessionResp(status=_error_status(message, state),
                                       serverProtocolVersion=protocol)
        s = Session(spark, protocol, user, guarded=not self.allow_jvm_functions,
                    admin=user in self.admins, judge=self.judge)
        s.max_streaming_queries = self.max_streaming_queries_per_user
        with self.lock:
            self.sessions[s.key] = s
        if hasattr(self.local, "sessions"):
            self.local.sessions.add(s.key)
        return tt.TOpenSessionResp(status=OK, serverProtocolVersion=protocol,
                                   sessionHandle=s.handle, configuration={})

    def CloseSession(self, req):  # noqa: N802
        try:
            s = self._session(req.sessionHandle)
        except ServiceError as e:
            return tt.TCloseSessionResp(status=_error_status(str(e)))
        self._close_session(s.key)
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
            # before anything parses it (Spark's parser above all); scanned once, here
            scanned = check_statement(req.statement, self.max_statement_kb, self.max_nesting)
            op = self._new_operation(s, tt.TOperationType.EXECUTE_STATEMENT, req.statement,
                                     scanned)
            self.timeouts.set_deadline(op, req.queryTimeout or 0)
        except ServiceError as e:
            return tt.TExecuteStatementResp(status=_error_status(str(e), e.sqlstate))
        except DfsqlError as e:
            return tt.TExecuteStatementResp(status=_error_status(*describe(e)))
        if req.runAsync:
            op.state = S.PENDING_STATE
            self.pool.submit(s.user, op.run)
            return tt.TExecuteStatementResp(status=OK, operationHandle=op.handle)
        run_until_deadline(op)  # the deadline answers it even while it is planned
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
        return _status_of(op, _long_poll(op), req.getProgressUpdate)

    def status_reply(self, req) -> bytes:
        """GetOperationStatus's reply body, encoded: kept on the operation per state (an
        operation's answer changes only with its state)."""
        op = self._find_operation(req.operationHandle)
        if op is None:  # the invalid-handle error
            return encode(TCLIService.GetOperationStatus_result(
                success=self.GetOperationStatus(req)))
        op.touch()
        cached, wanted = op._status_reply, bool(req.getProgressUpdate)
        if cached is not None and op.done.is_set() and cached[0] == (op.state, wanted):
            return cached[1]  # an ended operation asked again (JDBC: once per row)
        state = _long_poll(op)
        body = encode(TCLIService.GetOperationStatus_result(
            success=_status_of(op, state, wanted)))
        op._status_reply = ((state, wanted), body)
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
            first = req.orientation == tt.TFetchOrientation.FETCH_FIRST
            if req.fetchType == 1:  # the operation's log: its dropped-row warnings
                import pyarrow as pa

                log = pa.table({"log": pa.array(op.log(first), pa.string())})
                return log, 0, op.session.columnar
            # HiveServer2 caps a fetch too (hive.server2.thrift.resultset.max.fetch.size):
            # a client asking for 2^31 rows gets the cap, and asks again
            cap = self.max_fetch_rows
            table, offset = op.fetch(min(req.maxRows, cap) if cap > 0 else req.maxRows, first)
        except ServiceError as e:
            return tt.TFetchResultsResp(status=_error_status(str(e), e.sqlstate))
        except Exception as e:  # noqa: BLE001 (a job failing mid-result)
            return tt.TFetchResultsResp(status=_error_status(*describe(e)))
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
            return _error_status(*describe(e)), None

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


def _status_of(op: Operation, state: int,
               progress: bool = False) -> tt.TGetOperationStatusResp:
    """The status of ``op`` in ``state``; ``progress``: with its progress update (which
    beeline asks for and draws in place)."""
    resp = tt.TGetOperationStatusResp(status=OK, operationState=state, hasResultSet=True)
    if progress:
        resp.progressUpdateResponse = op.progress_update()
    if state == S.ERROR_STATE and op.error:
        resp.errorMessage, resp.sqlState = op.error
        resp.errorCode = 0
    return resp
