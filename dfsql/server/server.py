"""The endpoint itself: :class:`Server` listens, admits connections (up to
``max_connections``, each logged in within ``login_timeout``), gives each its own thread
over the binary transport or the HTTP one, and stops when told to or when Spark dies
under it. What a connection may ask is the service's (:mod:`dfsql.server.service`); the
package's docstring (:mod:`dfsql.server`) tells the whole endpoint.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import dfsql
from dfsql.errors import DfsqlError
from dfsql.server.admission import LOGIN_TIMEOUT, MAX_CONNECTIONS_PER_USER, Admission
from dfsql.server.auth import PasswordFile
from dfsql.server.limits import (
    MAX_FETCH_ROWS,
    MAX_NESTING,
    MAX_PARTITION_MB,
    MAX_SESSIONS_PER_USER,
    MAX_STATEMENT_KB,
    MAX_STREAMING_QUERIES_PER_USER,
)
from dfsql.server.lobby import Lobby
from dfsql.server.logins import Backoff, Logins, host_of
from dfsql.server.streams import StreamView
from dfsql.server.watchdog import Watchdog
from dfsql.spark import progress_bar
from dfsql.spark.stream import progress_log

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dfsql.server.state import Restarted, StateDir

log = logging.getLogger("dfsql.server")

AUTH_MODES = ("NONE", "NOSASL", "PLAIN")
TRANSPORT_MODES = ("binary", "http")
#: the defaults of ``dfsql serve --max-message-mb / --max-connections /
#: --idle-connection-timeout``: far above what beeline, JDBC and PyHive send (a request
#: is a statement's text), an hour of silence
MAX_MESSAGE_MB, MAX_CONNECTIONS, IDLE_CONNECTION_TIMEOUT = 64, 100, 3600.0
#: seconds without a call after which a session (with nothing running) or an ended
#: operation is closed; HiveServer2 keeps them 7 and 5 days, long enough for a
#: forgotten client to pile up result sets and SparkSessions
IDLE_SESSION_TIMEOUT = 8 * 3600.0
IDLE_OPERATION_TIMEOUT = 3600.0


class Server:
    """A running endpoint: ``start()`` listens and returns; ``stop()`` ends it."""

    _sock: socket.socket | None
    _thread: threading.Thread | None

    def __init__(self, spark: SparkSession | None = None, host: str = "127.0.0.1",
                 port: int = 10000, auth: str = "NONE", password_file: str | None = None,
                 workers: int = 8, max_operations_per_session: int = 4,
                 session_setup=None, data_roots: list[str] | None = (),
                 on_spark_death: Callable[[str], None] | None = None,
                 allow_jvm_functions: bool = False, private_objects: bool = False,
                 statement_timeout: float = 0,
                 idle_session_timeout: float = IDLE_SESSION_TIMEOUT,
                 idle_operation_timeout: float = IDLE_OPERATION_TIMEOUT,
                 state_dir: str | None = None, streams: list[StreamView] = (),
                 max_message_mb: float = MAX_MESSAGE_MB, max_connections: int = MAX_CONNECTIONS,
                 idle_connection_timeout: float = IDLE_CONNECTION_TIMEOUT,
                 transport_mode: str = "binary", http_path: str = "cliservice",
                 admins: Sequence[str] = (), backoff: Backoff | None = None,
                 login_timeout: float = LOGIN_TIMEOUT,
                 max_connections_per_user: int = MAX_CONNECTIONS_PER_USER,
                 max_sessions_per_user: int = MAX_SESSIONS_PER_USER,
                 max_fetch_rows: int = MAX_FETCH_ROWS,
                 max_statement_kb: float = MAX_STATEMENT_KB, max_nesting: int = MAX_NESTING,
                 max_partition_mb: float = MAX_PARTITION_MB,
                 max_streaming_queries_per_user: int = MAX_STREAMING_QUERIES_PER_USER,
                 metrics_port: int | None = None, progress_batches: int | None = None) -> None:
        auth, transport_mode = _checked_options(
            auth, transport_mode, admins, max_message_mb, max_connections,
            idle_connection_timeout, login_timeout=login_timeout,
            max_connections_per_user=max_connections_per_user,
            max_sessions_per_user=max_sessions_per_user, max_fetch_rows=max_fetch_rows,
            max_statement_kb=max_statement_kb, max_nesting=max_nesting,
            max_partition_mb=max_partition_mb,
            max_streaming_queries_per_user=max_streaming_queries_per_user)
        # here, not at the top: ``dfsql passwd`` imports dfsql.server.auth (so the package's
        # __init__ and this file) and needs not the service's Thrift stack, numpy, scanner
        from dfsql.server import http_transport, service

        progress_bar.disable()  # the clients' statements are not this terminal's
        # checked before anything starts
        path = http_transport.http_path(http_path) if transport_mode == "http" else None
        #: the largest message, frame, string a client may announce (bytes)
        self.max_message = int(max_message_mb * 2**20)
        self.max_connections = max_connections
        #: seconds a connection may stay silent (None: forever)
        self.idle_timeout = idle_connection_timeout or None
        self._refused, self._refused_logged = 0, float("-inf")
        #: under PLAIN, the password file's check behind the failed logins' back-off
        #: (:mod:`dfsql.server.logins`); None under NONE and NOSASL
        self.logins = _plain_logins(password_file, backoff) if auth == "PLAIN" else None
        #: check(user, password, client address): whether to let them in (None: NOSASL)
        self.check: Callable[[str, str, str], bool] | None = (
            self.logins.check if self.logins is not None
            else _anyone if auth == "NONE" else None)
        if spark is None:
            spark = dfsql.session()
        self.spark = spark
        self.host, self.port, self.auth, self.transport_mode = host, port, auth, transport_mode
        self.service = service.Service(
            spark, workers, max_operations_per_session, session_setup,
            None if data_roots is None else list(data_roots), allow_jvm_functions,
            statement_timeout, idle_session_timeout, idle_operation_timeout, frozenset(admins),
            max_fetch_rows=max_fetch_rows, max_statement_kb=max_statement_kb,
            max_nesting=max_nesting, max_partition_mb=max_partition_mb,
            max_sessions_per_user=max_sessions_per_user, private_objects=private_objects,
            max_streaming_queries_per_user=max_streaming_queries_per_user)
        #: login deadlines, per-user connection counts, connections waiting for a slot
        self.admission = Admission(login_timeout, max_connections_per_user)
        self.lobby = Lobby(login_timeout or LOGIN_TIMEOUT, max_connections, self._refuse)
        #: what the HTTP transport's connections share (None over the binary transport)
        self.http = None if path is None else http_transport.Endpoint(
            self.service, auth, self.check, path, self.max_message)
        #: where the continuous queries are kept across restarts (``--state-dir``)
        self.state = None if state_dir is None else _state_dir(state_dir, streams)
        #: what became of each kept query when the server started
        self.restarted: list[Restarted] = []
        self._sock, self._thread = None, None
        self._connections: set[socket.socket] = set()
        self._stopping, self._slots = threading.Event(), threading.Lock()
        #: why the server stopped by itself (Spark died under it), else None
        self.failure: str | None = None
        self._watched(spark, on_spark_death, metrics_port, progress_batches)

    def _watched(self, spark: SparkSession, on_spark_death: Callable[[str], None] | None,
                 metrics_port: int | None, progress_batches: int | None) -> None:
        """What watches the server: the watchdog on Spark, ``/metrics`` on the endpoint's
        host (docs/guides/watching.md#metrics: its port, and its server once started),
        and the batches each continuous query's progress log keeps."""
        #: called with the reason, from the watchdog's thread, once the server has
        #: stopped accepting (``dfsql serve`` logs it and exits non-zero)
        self.on_spark_death = on_spark_death
        self.watchdog = Watchdog.of(spark, self._spark_died)
        self.metrics_port = metrics_port
        self.metrics = None
        if progress_batches is not None:
            progress_log.keep(progress_batches)

    def start(self) -> Server:
        self.service.judge.prepare(self.spark)  # compiled once, before any client
        if self.state is not None:  # before listening: a client sees them running
            self.service.judge.owners.registry.keep_in(self.state.root)  # and the owners
            self.restarted = self.state.open(self.spark, self.service.session_setup,
                                             self.service.judge)
        if self.metrics_port is not None:
            self.metrics = self.service.serve_metrics(self.host, self.metrics_port)
        sock = socket.create_server((self.host, self.port), reuse_port=False, backlog=128)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="dfsql-accept", daemon=True)
        self._thread.start()
        self.admission.start()
        self.lobby.start()
        self.watchdog.start()
        return self

    def _spark_died(self, reason: str) -> None:
        """Spark is gone: refuse new connections at once (a client sees ``connection
        refused``, not a session that fails), say why, end the connections; then
        ``serve_forever`` returns. PySpark cannot start a second SparkContext in this
        process, so restarting is left to whoever runs the server (see
        :mod:`dfsql.server.watchdog`)."""
        self.failure = reason
        self._close_listener()
        if self.on_spark_death is not None:
            self.on_spark_death(reason)
        else:
            log.error("%s; the endpoint stops", reason)
        self._answer_in_flight()
        self._stopping.set()  # serve_forever wakes up and stops
        self._drop_connections()  # also when nobody runs serve_forever

    def _answer_in_flight(self, within: float = 10.0, grace: float = 1.5) -> None:
        """Before the connections drop: the statements running when Spark died end (their
        error says Spark is gone), and their clients get a moment to read that answer, or
        one more status poll's worth, rather than a connection dropped under them."""
        deadline = time.monotonic() + within
        while self.service.figures()[1] and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(grace)

    def serve_forever(self) -> None:
        if self._sock is None:
            self.start()
        try:
            while not self._stopping.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def request_stop(self) -> None:
        """Ask ``serve_forever`` to stop the server and return (a signal handler's call:
        it only sets an event)."""
        self._stopping.set()

    def stop(self) -> None:
        self._stopping.set()
        self.watchdog.stop()
        self.admission.stop()
        self._close_listener()
        self.lobby.stop()
        self._drop_connections()
        self.service.shutdown()  # and the continuous queries its clients started
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        if self.state is not None:  # kept for the next start on the state directory
            self.state.close()

    def _drop_connections(self) -> None:
        """End every client connection (each one's thread then closes its sessions)."""
        for conn in list(self._connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _close_listener(self) -> None:
        """Stop listening now: on Linux a close alone leaves the socket listening while
        the accepting thread sits in accept(); shutdown wakes it and ends the listening."""
        sock = self._sock
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            sock.close()
        except OSError:
            pass

    def connections(self) -> int:
        return len(self._connections)

    # ---------------------------------------------------------------- connections
    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, peer = self._sock.accept()
            except OSError:
                return
            with self._slots:
                # every slot taken, or others already waiting: it waits behind them
                if len(self._connections) < self.max_connections and not len(self.lobby):
                    try:
                        self._open(conn, peer)
                    except OSError:  # reset before it was served
                        self._connections.discard(conn)
                        conn.close()
                    continue
                waits = self.lobby.wait(conn, peer)
            if not waits:
                self._refuse(conn, peer)

    def _open(self, conn: socket.socket, peer) -> None:
        """Serve ``conn`` on a thread of its own: its login deadline starts now."""
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # every read and write of the connection's thread waits at most this long
        conn.settimeout(self.idle_timeout)
        self._connections.add(conn)
        self.admission.arrived(conn, _peer(peer))
        threading.Thread(target=self._serve, args=(conn, _peer(peer)), name="dfsql-conn",
                         daemon=True).start()

    def _admit(self) -> None:
        """A slot freed: let in the connections waiting longest."""
        with self._slots:
            while len(self._connections) < self.max_connections and \
                    not self._stopping.is_set():
                waiting = self.lobby.next()
                if waiting is None:
                    return
                try:
                    self._open(*waiting)
                except OSError:  # it went away while it waited
                    self._connections.discard(waiting[0])
                    waiting[0].close()

    def _refuse(self, conn: socket.socket, peer) -> None:
        """Over ``max_connections`` with the lobby full, or waited there too long: closed,
        the ones open go on. One log line per 10 s at most, with the count, so that a
        flood does not flood the log too."""
        try:
            conn.close()
        except OSError:
            pass
        self._refused += 1
        now = time.monotonic()
        if now - self._refused_logged >= 10:
            log.warning("refused the connection from %s: %d open, the limit "
                        "(--max-connections); %d refused since the last such line",
                        _peer(peer), self.max_connections, self._refused)
            self._refused, self._refused_logged = 0, now

    def url(self) -> str:
        """The JDBC URL beeline connects with."""
        url = f"jdbc:hive2://{self.host}:{self.port}/default"
        if self.http is not None:
            return url + f";transportMode=http;httpPath={self.http.path[1:]}"
        return url + (";auth=noSasl" if self.auth == "NOSASL" else "")

    def _serve(self, conn: socket.socket, peer: str = "?") -> None:
        counted: list[str] = []  # the user the connection counts for, once logged in

        def logged_in(user: str) -> str | None:
            why = self.admission.logged_in(conn, user)
            if why is None and user:
                counted.append(user)
            return why

        try:
            if self.http is not None:
                self.http.serve(conn, peer, logged_in)
            else:
                self._serve_binary(conn, peer, logged_in)
        except Exception as e:  # noqa: BLE001 (one bad connection must not stop the server)
            self._ended(peer, e)
        finally:
            try:
                self.service.connection_closed()
            finally:
                self.admission.left(conn, counted[0] if counted else None)
                with self._slots:
                    self._connections.discard(conn)
                try:
                    conn.close()
                except OSError:
                    pass
                self._admit()

    def _serve_binary(self, conn: socket.socket, peer: str,
                      logged_in: Callable[[str], str | None]) -> None:
        from thrift.transport import TSocket

        # loaded with the service already (see __init__); kept out of this file's top for
        # the same reason
        from dfsql.server import sasl, transport
        from dfsql.server.tcli import MalformedRequest, Processor, Protocol

        raw = TSocket.TSocket()
        raw.setHandle(conn)
        try:
            user = ""
            if self.auth != "NOSASL":
                assert self.check is not None
                check = self.check
                user = sasl.negotiate(raw, lambda u, p: check(u, p, host_of(peer)),
                                      logged_in)
            # a buffer under everything: the status short path reads the socket itself
            # and hands back what is not its own (Processor.serve_status)
            inner = transport.Buffered(raw, self.max_message)
            trans = inner if self.auth == "NOSASL" else transport.Framed(inner, self.max_message)
            proto = Protocol(trans, self.max_message)
            processor = Processor(self.service, conn, inner, trans, self.max_message)
            self.service.connection_opened(user)
            if self.auth == "NOSASL":  # no handshake: logged in with its first call
                processor.process(proto, proto)
                logged_in("")
            while not self._stopping.is_set():
                if not processor.serve_status():
                    processor.process(proto, proto)
        except sasl.AuthenticationError as e:
            log.info("refused the connection from %s: %s", peer, e)
        except MalformedRequest as e:
            log.info("closed the connection from %s: a malformed request (%s)", peer, e)

    def _ended(self, peer: str, e: Exception) -> None:
        """Say why a connection ended, in one line: debug when the client hung up, info
        when the server ended it (silent too long, over a limit); a traceback only for a
        fault of the server's own."""
        from thrift.transport.TTransport import TTransportException as TTE

        inner = getattr(e, "inner", None)
        if isinstance(e, TimeoutError) or (isinstance(e, TTE) and e.type == TTE.TIMED_OUT):
            log.info("closed the connection from %s: silent for %g s "
                     "(--idle-connection-timeout)", peer, self.idle_timeout)
        elif isinstance(e, (OSError, EOFError)) or isinstance(inner, OSError) or (
                isinstance(e, TTE) and e.type in (TTE.END_OF_FILE, TTE.NOT_OPEN)):
            log.debug("the client at %s went away", peer)
        elif isinstance(e, TTE):
            log.info("closed the connection from %s: %s", peer, e)
        else:
            log.exception("the connection from %s failed", peer)


def _checked_options(auth: str, transport_mode: str, admins: Sequence[str],
                     max_message_mb: float, max_connections: int, idle: float,
                     **counts: float) -> tuple[str, str]:
    """``--auth`` and ``--transport-mode`` in their canonical case, once every option is
    checked (before anything starts), or a clear error for the first one wrong."""
    auth, transport_mode = auth.upper(), transport_mode.lower()
    if auth not in AUTH_MODES:
        raise DfsqlError(f"unknown --auth {auth!r}", hint="one of " + ", ".join(AUTH_MODES))
    if transport_mode not in TRANSPORT_MODES:
        raise DfsqlError(f"unknown --transport-mode {transport_mode!r}",
                         hint="one of " + ", ".join(TRANSPORT_MODES))
    _check_limits(max_message_mb, max_connections, idle)
    if admins and auth != "PLAIN":  # under NONE anyone may name themself an admin
        raise DfsqlError("--admin needs --auth PLAIN",
                         hint="an admin must prove who they are: a password file")
    _check_counts(**counts)
    return auth, transport_mode


def _state_dir(path: str, streams: Sequence[StreamView]) -> StateDir:
    """``--state-dir``: where the continuous queries are kept across restarts."""
    from dfsql.server.state import StateDir  # with the service's stack (Server.__init__)

    return StateDir(path, streams)


def _plain_logins(password_file: str | None, backoff: Backoff | None) -> Logins:
    """``--auth PLAIN``'s logins: the password file's users, failures backing off."""
    if not password_file:
        raise DfsqlError("--auth PLAIN needs --password-file",
                         hint="create one with: dfsql passwd FILE USER")
    return Logins(PasswordFile(password_file).check, backoff)


def _anyone(user: str, password: str, address: str) -> bool:
    """``--auth NONE``: any user and password (Hive's default)."""
    return True


def _peer(address) -> str:
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)


def _check_limits(max_message_mb: float, max_connections: int, idle: float) -> None:
    """The limits, or a clear error for a value that would disable the server."""
    # a frame's length is a signed 32-bit number, and thrift caps its frames at 1 GiB
    if not 0 < max_message_mb <= 1023:
        raise DfsqlError(f"--max-message-mb {max_message_mb:g}: out of range",
                         hint="more than 0, at most 1023 (MiB; the default is 64)")
    if max_connections < 1:
        raise DfsqlError(f"--max-connections {max_connections}: at least one",
                         hint=f"the default is {MAX_CONNECTIONS}")
    if idle < 0:
        raise DfsqlError(f"--idle-connection-timeout {idle:g}: negative",
                         hint="seconds, 0 for none (the default is 3600)")


def _check_counts(**limits: float) -> None:
    """The per-client limits (keyword: the flag's name), or a clear error for a negative
    one (0 turns each off)."""
    for name, value in limits.items():
        if not value >= 0:
            raise DfsqlError(f"--{name.replace('_', '-')} {value:g}: negative",
                             hint="0 turns the limit off")


def serve(host: str = "127.0.0.1", port: int = 10000, auth: str = "NONE",
          password_file: str | None = None, spark: SparkSession | None = None,
          transport_mode: str = "binary") -> Server:
    """Start an endpoint in the background and return it (``.port``, ``.stop()``)."""
    return Server(spark, host, port, auth, password_file,
                  transport_mode=transport_mode).start()
