"""``dfsql serve``: a HiveServer2-compatible Thrift endpoint (TCLIService, over the binary
transport or, ``--transport-mode http``, over HTTP: :mod:`dfsql.server.http_transport`),
so beeline, JDBC tools, PyHive, impyla and SQLAlchemy's ``hive://`` query dfsql unchanged.

Authentication (``--auth``): ``NOSASL`` (raw Thrift, beeline's ``;auth=noSasl``),
``NONE`` (SASL PLAIN, any user and password: Hive's default) and ``PLAIN`` (SASL PLAIN
checked against a password file of salted hashes, :mod:`dfsql.server.auth`); over HTTP
the same modes read HTTP Basic credentials instead of SASL's; failed PLAIN logins back
off per user and per client address (:mod:`dfsql.server.logins`), and a session, its
operations and a continuous query are their user's (:mod:`dfsql.server.owners`). One
thread per connection; when a binary client goes away its sessions close, their
operations are cancelled and their Spark jobs with them. Loopback only unless told
otherwise; files only under the data roots (:mod:`dfsql.server.paths`; none unless
configured); nothing that runs code on the server (:mod:`dfsql.server.judge`, on
Spark's plan) unless allowed; statements time out and idle sessions and operations
close when told to. If Spark dies under it, it stops accepting and stops
(:mod:`dfsql.server.watchdog`): never an endpoint that accepts connections and fails
every session. With a state directory its continuous queries outlive it and start
again with it (:mod:`dfsql.server.state`).

Bounded against what a client sends: no SASL frame, Thrift string or method name over
``max_message_mb`` is read (the announcement ends the connection before anything is
set aside: :mod:`dfsql.server.transport`), at most ``max_connections`` connections at
once (more wait for a slot in arrival order, up to the login timeout:
:mod:`dfsql.server.lobby`), a connection not logged in within
``login_timeout`` seconds is closed, as is one of a user already holding
``max_connections_per_user`` (:mod:`dfsql.server.admission`), and a connection silent
for ``idle_connection_timeout`` seconds is closed (a socket timeout, so a reply the
client does not take for that long as well). Bytes that do not decode end their
connection with one log line; other connections never notice. What one statement may
cost — its size and nesting, rows per fetch, a result partition held at once, sessions
per user — is :mod:`dfsql.server.limits`'s.
"""

from __future__ import annotations

# the endpoint's class and its defaults live in dfsql.server.server; here they stay
# importable as ``from dfsql.server import Server`` (cli.py, the tests, the docs)
from dfsql.server.server import (
    AUTH_MODES,
    IDLE_CONNECTION_TIMEOUT,
    IDLE_OPERATION_TIMEOUT,
    IDLE_SESSION_TIMEOUT,
    MAX_CONNECTIONS,
    MAX_MESSAGE_MB,
    TRANSPORT_MODES,
    Server,
    serve,
)
from dfsql.server.shutdown import end_spark, stop_on_sigterm
from dfsql.server.streams import StreamView, parse_streams
from dfsql.server.watchdog import EXIT_SPARK_DIED

__all__ = ["AUTH_MODES", "EXIT_SPARK_DIED", "IDLE_CONNECTION_TIMEOUT", "IDLE_OPERATION_TIMEOUT",
           "IDLE_SESSION_TIMEOUT", "MAX_CONNECTIONS", "MAX_MESSAGE_MB", "Server", "StreamView",
           "TRANSPORT_MODES", "end_spark", "parse_streams", "serve", "stop_on_sigterm"]
