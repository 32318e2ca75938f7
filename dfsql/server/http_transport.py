"""HiveServer2's HTTP transport (``dfsql serve --transport-mode http``): each TCLIService
call is one Thrift binary message POSTed to ``/cliservice`` (``--http-path``), its reply
the response body, as Hive's and Spark's servers do with
``hive.server2.transport.mode=http`` (beeline's ``;transportMode=http;httpPath=cliservice``,
PyHive's ``scheme='http'``, impyla's ``use_http_transport=True``).

There is no SASL: credentials come in every request's ``Authorization: Basic`` header.
Under ``--auth PLAIN`` they are checked against the password file, and a request without
them, or with wrong ones, gets 401 with ``WWW-Authenticate`` (its body, for a Thrift
client, a Thrift exception saying why: PyHive reads the body whatever the status, and
would otherwise take the text for a message of 1.1 GB); under ``NONE`` and
``NOSASL`` anyone is let in, the header (when sent) naming the user. A successful check
is remembered for a while (keyed by an HMAC of the header under a secret of this
process): a password's hash takes a tenth of a second, and Hive JDBC sends a request per
fetched row, where HiveServer2 sets a signed cookie instead.

A session is not tied to a connection: HTTP clients may open a connection per call
(Thrift's Python ``THttpClient`` does), so sessions are found by their handle, as over
the binary transport, and end with CloseSession or ``--idle-session-timeout``.

Connections come from the endpoint's own accept loop (:class:`dfsql.server.Server`), so
``--max-connections`` and ``--idle-connection-timeout`` hold as for binary clients (an
idle keep-alive connection is closed); ``--max-message-mb`` bounds a request's body,
announced by ``Content-Length`` (411 without one, 413 over it), and the body is read a
chunk at a time, so that memory follows what was sent. A body that is not a Thrift call
gets 400; the connection and the server go on.

Parsed strictly, so that what a proxy in front reads is what the endpoint reads: a
``Content-Length`` of anything but ASCII digits (Python's ``int`` takes ``10_9``,
`` +10`` and Unicode digits), two ``Content-Length`` or ``Authorization`` headers, or
a path with ``.`` or ``..`` segments get 400; a path other than ``--http-path``
(with or without a trailing ``/``, no query) gets 404. Failed logins back off as over
SASL (:mod:`dfsql.server.logins`): a locked user or address gets 401 at once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import re
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport.TTransport import TMemoryBuffer, TTransportException

from dfsql.errors import DfsqlError
from dfsql.server.logins import LoginRefused, host_of
from dfsql.server.tcli import MalformedRequest, Processor, Protocol
from dfsql.server.transport import CHUNK, gather

if TYPE_CHECKING:
    import socket

    from dfsql.server.service import Service

log = logging.getLogger("dfsql.server")

#: Hive's default ``hive.server2.thrift.http.path``
HTTP_PATH = "cliservice"
#: how long a checked Authorization header is trusted without checking it again (s)
AUTH_REMEMBERED = 3600.0
#: the most checked headers remembered at once (beyond: forgotten, checked again)
AUTH_KEPT = 1024
_PATH = re.compile(r"[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*")
_DIGITS = re.compile(r"[0-9]+")
#: the headers a request may carry once only (two could be read differently by a proxy)
SINGLE = ("Content-Length", "Authorization")
REALM = 'Basic realm="dfsql", charset="UTF-8"'


def http_path(text: str) -> str:
    """``--http-path`` as the path the endpoint serves (``cliservice`` -> ``/cliservice``),
    or a clear error."""
    inner = text.strip().strip("/")
    if not _PATH.fullmatch(inner) or _dot_segments(inner):
        raise DfsqlError(f"--http-path {text!r}: not a URL path",
                         hint="letters, digits, '.', '_', '~', '-' and '/' between them; "
                              f"the default is {HTTP_PATH} (beeline's httpPath)")
    return "/" + inner


def _dot_segments(path: str) -> bool:
    """Whether a path has a ``.`` or ``..`` segment, also percent-encoded."""
    return any(seg.lower().replace("%2e", ".") in (".", "..")
               for seg in path.replace("%2f", "/").replace("%2F", "/").split("/"))


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header, else None (no header,
    another scheme, or not base64 of ``user:password``)."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = text.partition(":")
    return (user, password) if colon and user else None


def thrift_error(call: bytes, message: str) -> bytes | None:
    """A Thrift exception replying to ``call`` (its method name and sequence id), saying
    ``message``; None when ``call`` does not start as a strict binary message."""
    if len(call) < 8:
        return None
    version, size = struct.unpack("!iI", call[:8])
    if version & TBinaryProtocol.VERSION_MASK != TBinaryProtocol.VERSION_1 or \
            size > 64 or len(call) < 12 + size:
        return None
    name = call[8:8 + size].decode("utf-8", "replace")
    seqid = struct.unpack("!i", call[8 + size:12 + size])[0]
    out = TMemoryBuffer()
    proto = TBinaryProtocol(out)
    proto.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
    TApplicationException(TApplicationException.UNKNOWN, message).write(proto)
    proto.writeMessageEnd()
    return out.getvalue()


@dataclass
class Endpoint:
    """What every HTTP connection of one server shares: the service, the auth mode and
    its check, the path, the body limit, and the remembered successful checks."""

    service: Service
    auth: str
    #: check(user, password, client address) (:class:`dfsql.server.logins.Logins`)
    check: Callable[[str, str, str], bool] | None
    path: str
    max_message: int
    _secret: bytes = field(default_factory=lambda: os.urandom(32))
    _checked: dict[bytes, tuple[str, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self, conn: socket.socket, peer: str,
              logged_in: Callable[[str], str | None] | None = None) -> None:
        """Serve one connection's requests (keep-alive) until it closes. ``logged_in``
        is told the user of its first accepted request (the login timeout ends; a
        reason returned refuses the request and closes the connection: a per-user
        limit)."""
        _Handler(conn, peer, self, logged_in)

    def on_path(self, target: str) -> bool:
        """Whether a request target is the endpoint's: exactly ``/cliservice``, or with a
        trailing ``/`` (PyHive's), nothing else (no sub-path, no query)."""
        return target in (self.path, self.path + "/")

    def user(self, header: str | None, address: str = "?") -> tuple[str | None, str]:
        """(the request's user, or None when refused; why, when refused). Under NONE and
        NOSASL the user is the header's, or "" (OpenSession's username then)."""
        creds = basic_credentials(header)
        if self.auth != "PLAIN":
            return (creds[0] if creds else ""), ""
        if creds is None:
            return None, ("the request has no Basic credentials (an Authorization header "
                          "with user and password: beeline -n USER -p PASSWORD)")
        assert header is not None and self.check is not None
        key = hmac.new(self._secret, header.encode(), hashlib.sha256).digest()
        now = time.monotonic()
        with self._lock:
            known = self._checked.get(key)
        if known is not None and known[1] > now:
            return known[0], ""
        try:
            ok = self.check(*creds, address)
        except LoginRefused as e:
            return None, str(e)
        if not ok:
            return None, f"Error validating the login of user {creds[0][:64]!r}"
        with self._lock:
            if len(self._checked) >= AUTH_KEPT:
                self._checked.clear()
            self._checked[key] = (creds[0], now + AUTH_REMEMBERED)
        return creds[0], ""


class _Handler(BaseHTTPRequestHandler):
    """One connection: each POST to the path is one Thrift call through TCLIService's
    processor (:class:`dfsql.server.tcli.Processor`), every other request a plain-text
    error."""

    protocol_version = "HTTP/1.1"  # keep-alive, as Hive JDBC's connection pool expects
    error_content_type = "text/plain; charset=utf-8"
    error_message_format = "%(code)d %(message)s: %(explain)s\n"

    def __init__(self, conn, peer: str, endpoint: Endpoint,
                 logged_in: Callable[[str], str | None] | None = None) -> None:
        self.endpoint = endpoint
        self.logged_in = logged_in  # None once told (or never to be told)
        self.processor = Processor(endpoint.service, max_message=endpoint.max_message)
        super().__init__(conn, peer, None)  # type: ignore[arg-type]  (no socketserver)

    # ---------------------------------------------------------------- requests
    def do_POST(self) -> None:  # noqa: N802 (http.server's names)
        ep = self.endpoint
        twice = [h for h in SINGLE if len(self.headers.get_all(h) or ()) > 1]
        if twice:  # the body's end is not known either: the connection closes
            self.close_connection = True
            self._text(400, f"the request has more than one {twice[0]} header")
            return
        if _dot_segments(self.path.split("?", 1)[0]):
            self._discard_body()
            self._text(400, "a path with '.' or '..' segments")
            return
        if not ep.on_path(self.path):
            self._discard_body()
            self._text(404, f"HiveServer2 is served at {ep.path} (--http-path), not here")
            return
        size = self._body_size()
        if size is None:
            return
        body = self._read(size)
        if body is None:
            return
        user, why = ep.user(self.headers.get("Authorization"), host_of(self.client_address))
        if user is None:
            log.info("refused a request from %s: %s", self.client_address, why)
            challenge = {"WWW-Authenticate": REALM}
            refusal = None
            if self.headers.get("Content-Type", "").startswith("application/x-thrift"):
                refusal = thrift_error(body, f"Authentication Error: {why}")
            if refusal is None:
                self._text(401, f"Authentication Error: {why}", challenge,
                           reason="Error validating the login")
            else:
                self._send(401, refusal, "application/x-thrift", challenge,
                           reason="Error validating the login")
            return
        if self.logged_in is not None:
            why, self.logged_in = self.logged_in(user), None
            if why:
                log.info("refused a request from %s: %s", self.client_address, why)
                self.close_connection = True
                self._text(429, why, reason="Too many connections")
                return
        reply = self._call(body, user)
        if reply is not None:
            self._send(200, reply, "application/x-thrift")

    def do_GET(self) -> None:  # noqa: N802
        """A browser's or a probe's look: what this is, as 405 (no body to discard)."""
        self._text(405, f"HiveServer2's HTTP transport takes Thrift calls as POST to "
                        f"{self.endpoint.path}", {"Allow": "POST"})

    def _call(self, body: bytes, user: str) -> bytes | None:
        """The Thrift reply to one call; None when the body is no call (400 sent)."""
        out = TMemoryBuffer()
        self.endpoint.service.request_opened(user)
        try:
            self.processor.process(Protocol(TMemoryBuffer(body), self.endpoint.max_message),
                                   Protocol(out, self.endpoint.max_message))
        except (MalformedRequest, TTransportException, EOFError) as e:  # EOF: a short body
            log.info("refused a request from %s: not a Thrift call (%s)",
                     self.client_address, e)
            self._text(400, f"the body is not a TCLIService call in Thrift's binary "
                            f"protocol: {e}")
            return None
        return out.getvalue()

    # ---------------------------------------------------------------- the body
    def _body_size(self) -> int | None:
        """The announced body size, within the limit; None when refused (and the
        connection closes: what follows on it cannot be told from the body)."""
        length = self.headers.get("Content-Length")
        limit = self.endpoint.max_message
        if length is None or "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            self._text(411, "a Thrift call needs a Content-Length")
            return None
        # ASCII digits only: int() also takes "10_9", " +10" and other scripts' digits
        size = int(length) if _DIGITS.fullmatch(length) else -1
        if not 0 <= size <= limit:
            self.close_connection = True
            self._text(413 if size > limit else 400,
                       f"a body of {length} bytes announced; the limit is {limit} "
                       "(--max-message-mb)")
            return None
        return size

    def _read(self, size: int) -> bytes | None:
        """``size`` bytes of body, a chunk at a time (an announcement costs nothing
        before its bytes arrive); None when the client went away first."""
        try:
            return gather(lambda n: self.rfile.read1(min(n, CHUNK)), b"", size)
        except TTransportException:
            self.close_connection = True
            return None

    def _discard_body(self) -> None:
        """Read a refused request's body (within the limit), so that the reply reaches the
        client and the connection stays usable; without one it closes."""
        length = self.headers.get("Content-Length", "0")
        if _DIGITS.fullmatch(length) and int(length) <= self.endpoint.max_message:
            self._read(int(length))
        else:
            self.close_connection = True

    # ---------------------------------------------------------------- replies
    def _text(self, code: int, text: str, headers: dict[str, str] | None = None,
              reason: str | None = None) -> None:
        self._send(code, (text + "\n").encode(), "text/plain; charset=utf-8", headers, reason)

    def _send(self, code: int, body: bytes, kind: str, headers: dict[str, str] | None = None,
              reason: str | None = None) -> None:
        self.send_response(code, reason)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def version_string(self) -> str:
        return "dfsql"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        """Each request at debug level (http.server writes every one to stderr)."""
        log.debug("%s: " + format, self.client_address, *args)

    def log_error(self, format: str, *args) -> None:  # noqa: A002
        log.info("HTTP from %s: " + format, self.client_address, *args)
