"""``dfsql serve``: a HiveServer2-compatible Thrift endpoint (TCLIService, binary
transport), so beeline, JDBC tools, PyHive and SQLAlchemy's ``hive://`` query dfsql
unchanged.

Authentication (``--auth``): ``NOSASL`` (raw Thrift, beeline's ``;auth=noSasl``),
``NONE`` (SASL PLAIN, any user and password: Hive's default) and ``PLAIN`` (SASL PLAIN
checked against a password file of salted hashes, :mod:`dfsql.server.auth`). One thread
per connection; when a client goes away its sessions close, their operations are
cancelled and their Spark jobs with them. Loopback only unless told otherwise; files
only under the data roots (:mod:`dfsql.server.paths`; none unless configured); nothing
that reaches into the JVM or loads code (:mod:`dfsql.server.guard`) unless allowed;
statements time out and idle sessions and operations close when told to. If Spark
dies under it, it stops accepting and stops (:mod:`dfsql.server.watchdog`): never an
endpoint that accepts connections and fails every session. With a state directory its
continuous queries outlive it and start again with it (:mod:`dfsql.server.state`).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import dfsql
from dfsql.errors import DfsqlError
from dfsql.server.auth import PasswordFile
from dfsql.server.streams import StreamView, parse_streams
from dfsql.server.watchdog import EXIT_SPARK_DIED, Watchdog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dfsql.server.state import Restarted

log = logging.getLogger("dfsql.server")

AUTH_MODES = ("NONE", "NOSASL", "PLAIN")
#: seconds without a call after which a session (with nothing running) or an ended
#: operation is closed; HiveServer2 keeps them 7 and 5 days, long enough for a
#: forgotten client to pile up result sets and SparkSessions
IDLE_SESSION_TIMEOUT = 8 * 3600.0
IDLE_OPERATION_TIMEOUT = 3600.0
__all__ = ["EXIT_SPARK_DIED", "Server", "StreamView", "parse_streams", "serve"]


class Server:
    """A running endpoint: ``start()`` listens and returns; ``stop()`` ends it."""

    def __init__(self, spark: SparkSession | None = None, host: str = "127.0.0.1",
                 port: int = 10000, auth: str = "NONE", password_file: str | None = None,
                 workers: int = 8, max_operations_per_session: int = 4,
                 session_setup=None, data_roots: list[str] | None = (),
                 on_spark_death: Callable[[str], None] | None = None,
                 allow_jvm_functions: bool = False, jar_roots: list[str] | None = None,
                 statement_timeout: float = 0,
                 idle_session_timeout: float = IDLE_SESSION_TIMEOUT,
                 idle_operation_timeout: float = IDLE_OPERATION_TIMEOUT,
                 state_dir: str | None = None, streams: list[StreamView] = ()) -> None:
        auth = auth.upper()
        if auth not in AUTH_MODES:
            raise DfsqlError(f"unknown --auth {auth!r}", hint="one of " + ", ".join(AUTH_MODES))
        self.check = None
        if auth == "PLAIN":
            if not password_file:
                raise DfsqlError("--auth PLAIN needs --password-file",
                                 hint="create one with: dfsql passwd FILE USER")
            self.check = PasswordFile(password_file).check
        elif auth == "NONE":
            self.check = lambda user, password: True
        if spark is None:
            spark = dfsql.session()
        # here, not at the top: ``dfsql passwd`` imports dfsql.server.auth, which runs this
        # file, and need not load the Thrift stack, numpy and the scanner the service needs
        from dfsql.server.service import Service

        self.spark = spark
        self.host, self.port, self.auth = host, port, auth
        self.service = Service(
            spark, workers, max_operations_per_session, session_setup,
            None if data_roots is None else list(data_roots), allow_jvm_functions,
            None if jar_roots is None else list(jar_roots), statement_timeout,
            idle_session_timeout, idle_operation_timeout)
        #: where the continuous queries are kept across restarts (``--state-dir``)
        self.state = None
        if state_dir is not None:
            from dfsql.server.state import StateDir  # with the service's stack, see above

            self.state = StateDir(state_dir, streams)
        #: what became of each kept query when the server started
        self.restarted: list[Restarted] = []
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        #: why the server stopped by itself (Spark died under it), else None
        self.failure: str | None = None
        #: called with the reason, from the watchdog's thread, once the server has stopped
        #: accepting (``dfsql serve`` logs it and exits non-zero)
        self.on_spark_death = on_spark_death
        self.watchdog = Watchdog.of(spark, self._spark_died)

    def start(self) -> Server:
        if self.state is not None:  # before listening: a client sees them running
            self.restarted = self.state.open(self.spark, self.service.session_setup,
                                             self.service.data_roots)
        sock = socket.create_server((self.host, self.port), reuse_port=False, backlog=128)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="dfsql-accept", daemon=True)
        self._thread.start()
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
        self._stopping.set()  # serve_forever wakes up and stops
        self._drop_connections()  # also when nobody runs serve_forever

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

    def stop(self) -> None:
        self._stopping.set()
        self.watchdog.stop()
        self._close_listener()
        self._drop_connections()
        self.service.shutdown()  # and the continuous queries its clients started
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
                conn, _ = self._sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="dfsql-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        from thrift.transport import TSocket, TTransport

        # loaded with the service already (see __init__); kept out of this file's top for
        # the same reason
        from dfsql.server import sasl
        from dfsql.server.tcli import Processor, Protocol

        raw = TSocket.TSocket()
        raw.setHandle(conn)
        trans = None
        try:
            user = ""
            if self.auth != "NOSASL":
                assert self.check is not None
                user = sasl.negotiate(raw, self.check)
            # a buffer under everything: the status short path reads the socket itself
            # and hands back what is not its own (Processor.serve_status)
            inner = TTransport.TBufferedTransport(raw)
            trans = inner if self.auth == "NOSASL" else sasl.framed(inner)
            proto = Protocol(trans)
            processor = Processor(self.service, conn, inner, trans)
            self.service.connection_opened(user)
            while not self._stopping.is_set():
                if not processor.serve_status():
                    processor.process(proto, proto)
        except TTransport.TTransportException:
            pass  # the client went away
        except sasl.AuthenticationError as e:
            log.info("refused a connection: %s", e)
        except Exception:  # noqa: BLE001 (one bad connection must not stop the server)
            log.exception("connection failed")
        finally:
            try:
                self.service.connection_closed()
            finally:
                self._connections.discard(conn)
                try:
                    conn.close()
                except OSError:
                    pass


def serve(host: str = "127.0.0.1", port: int = 10000, auth: str = "NONE",
          password_file: str | None = None, spark: SparkSession | None = None) -> Server:
    """Start an endpoint in the background and return it (``.port``, ``.stop()``)."""
    return Server(spark, host, port, auth, password_file).start()
