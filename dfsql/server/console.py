"""``dfsql serve --ui-port P``: a read-only web console of the running continuous queries
(issue #56; docs/guides/watching.md#the-console).

It listens where the endpoint does (``--host``, 127.0.0.1 by default) and lets in the
endpoint's users with their passwords (HTTP Basic auth, checked by the endpoint's own
check: under ``--auth PLAIN`` the password file behind the failed logins' back-off,
:mod:`dfsql.server.logins`, so a failed login here counts where the endpoint counts
them). Each user sees their own queries; an ``--admin`` sees all
(:class:`~dfsql.server.console_data.Viewer`). It changes nothing: GET only.

* ``/``: the running queries, with small charts over their latest batches;
* ``/query/NAME``: one query: its figures, its inputs and which one holds the frontier,
  the watermark and frontier over time, its pane timeline; a pane's link opens
  ``/query/NAME/window?…``, that window's EXPLAIN FIRINGS FOR STREAMING QUERY rows;
* ``/api/…``: the same parts as JSON of HTML fragments, which the page's script polls
  every second (and redraws only when a batch has committed);
* ``/static/…``: the page's script and style, shipped in the wheel (no network).

Why the stdlib's ThreadingHTTPServer: a few pages for a few operators, nothing a web
framework would add is needed, and a password check (PBKDF2, a tenth of a second) is
done once per user and password: a good one is remembered for REMEMBER seconds (its
digest, not the password), so a page polling every second does not hash every second.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import threading
import time
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from dfsql.errors import DfsqlError
from dfsql.server import console_pages as pages
from dfsql.server.console_data import Logs, Viewer, find, firings, visible, watched, windows
from dfsql.server.logins import LoginRefused

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dfsql.server.server import Server

log = logging.getLogger("dfsql.server.console")

#: seconds a checked user and password is let in again without a new check
REMEMBER = 300.0
STATIC = {"console.js": "text/javascript", "console.css": "text/css"}
#: what the page may load: its own script, style and pictures, nothing from elsewhere
POLICY = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"


class Gate:
    """Who a request comes from, by its ``Authorization: Basic`` header."""

    def __init__(self, server: Server) -> None:
        if server.auth == "NOSASL":
            raise DfsqlError("--ui-port needs users: --auth NOSASL has none",
                             hint="use --auth PLAIN (or NONE) with the console")
        self.check = server.check
        self.admins = frozenset(server.service.admins)
        self._good: dict[bytes, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def viewer(self, header: str | None, address: str) -> Viewer | str:
        """The viewer, or why not (no header, a malformed one, a wrong password, a
        locked user or address)."""
        if not header or not header.startswith("Basic "):
            return "sign in with your dfsql user and password"
        digest = hashlib.sha256(header.encode()).digest()
        now = time.monotonic()
        with self._lock:
            known = self._good.get(digest)
        if known is not None and known[1] > now:
            return Viewer(known[0], known[0] in self.admins)
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode() \
                .partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return "a malformed Authorization header"
        if not user:
            return "sign in with your dfsql user and password"
        assert self.check is not None
        try:
            ok = self.check(user, password, address)
        except LoginRefused as e:
            return str(e)
        if not ok:
            return "wrong user or password"
        with self._lock:
            if len(self._good) > 10_000:
                self._good.clear()
            self._good[digest] = (user, now + REMEMBER)
        return Viewer(user, user in self.admins)


class Console:
    """The console's HTTP server: ``start()`` listens on a thread of its own."""

    def __init__(self, server: Server, port: int, host: str | None = None) -> None:
        self.server = server
        self.gate = Gate(server)
        self.host, self.port = host or server.host, port
        self.logs = Logs(server.spark)
        self._httpd: ThreadingHTTPServer | None = None
        self._session: SparkSession | None = None
        self._explaining = threading.Lock()  # one EXPLAIN at a time: each runs Spark jobs
        #: each query's timeline and windows as last drawn, and of which batch
        self._drawings: dict[str, tuple[tuple, dict[str, str]]] = {}
        self._lock = threading.Lock()

    def start(self) -> Console:
        handler = type("Handler", (_Handler,), {"console": self})
        self._httpd = ThreadingHTTPServer((self.host, self.port), handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, name="dfsql-console",
                         daemon=True).start()
        threading.Thread(target=self._stop_with_server, name="dfsql-console-stop",
                         daemon=True).start()
        return self

    def _stop_with_server(self) -> None:
        """The console lives as long as its server: it stops once the server stops."""
        self.server._stopping.wait()
        self.stop()

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def session(self) -> SparkSession:
        """The session EXPLAIN runs in: the server's own views (``--paper-tables``,
        ``--stream``), as a kept query's restart has them (the query is planned again)."""
        if self._session is None:
            s = self.server.spark.newSession()
            if self.server.service.session_setup is not None:
                self.server.service.session_setup(s)
            self._session = s
        return self._session

    # ---------------------------------------------------------------- what it answers
    def answer(self, viewer: Viewer, path: str, query: dict[str, str]) -> tuple[int, str, str]:
        """(status, content type, body) for a GET of ``path``."""
        parts = [unquote(p) for p in path.strip("/").split("/")] if path != "/" else []
        api = bool(parts) and parts[0] == "api"
        if api:
            parts = parts[1:]
        if not parts or parts == ["queries"]:
            running, failed = visible(viewer)
            rows = [watched(r, self.logs) for r in running] + \
                [pages.failed_row(f) for f in failed]
            if api:
                return _json({"parts": {"queries": pages.queries_fragment(rows)}})
            return 200, "text/html", pages.list_page(viewer.user, rows)
        if parts[0] != "query" or len(parts) not in (2, 3):
            return self._missing(viewer, api, "no such page")
        r = find(viewer, parts[1])
        if r is None:
            return self._missing(viewer, api, f"no running query {parts[1]} that you may "
                                 "watch")
        if len(parts) == 3:
            if parts[2] != "window":
                return self._missing(viewer, api, "no such page")
            return self._window(viewer, r, query, api)
        w = watched(r, self.logs)
        if not api:
            return 200, "text/html", pages.query_page(viewer.user, w, self._drawn(r, w))
        parts = pages.now_parts(w)
        if query.get("since") != str(w.last_batch):  # a batch committed since: redrawn
            parts.update(self._drawn(r, w))
        return _json({"batch": w.last_batch, "parts": parts})

    def _drawn(self, r: Any, w: Any) -> dict[str, str]:
        """The timeline and the windows' list of ``r``, drawn once per batch (and table:
        a table sink replaces its frames whole with each batch) for every viewer."""
        sink = r.sink_object
        key = (w.last_batch, id(getattr(sink, "current", None)),
               id(getattr(sink, "recent", None)))
        with self._lock:
            kept = self._drawings.get(r.name)
        if kept is not None and kept[0] == key:
            return kept[1]
        drawn = pages.drawn_parts(w, windows(r))
        with self._lock:
            self._drawings[r.name] = (key, drawn)
        return drawn

    def _window(self, viewer: Viewer, r: Any, query: dict[str, str],
                api: bool) -> tuple[int, str, str]:
        start, end = query.get("start", ""), query.get("end", "")
        key = {k[4:]: v for k, v in query.items() if k.startswith("key.")}
        try:
            with self._explaining:
                cols, rows = firings(self.session(), viewer, r, start, end, key)
            html = pages.firings_fragment(r.name, start, end, key, cols, rows)
        except DfsqlError as e:
            html = f'<p class="error">{escape(str(e))}</p>'
            rows = []
        if api:
            return _json({"html": html, "rows": len(rows)})
        body = (f"<h1>Query <a href='/query/{quote(r.name)}'>{escape(r.name)}"
                f"</a>: one window</h1>{html}")
        return 200, "text/html", pages.page(r.name, viewer.user, body)

    def _missing(self, viewer: Viewer, api: bool, why: str) -> tuple[int, str, str]:
        if api:
            return 404, "application/json", json.dumps({"error": why})
        return 404, "text/html", pages.message_page(viewer.user, "Not found", why)


def _json(value: dict) -> tuple[int, str, str]:
    return 200, "application/json", json.dumps(value, default=str)


class _Handler(BaseHTTPRequestHandler):
    console: Console
    server_version = "dfsql-console"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        if url.path.startswith("/static/"):
            self._static(url.path[len("/static/"):])
            return
        viewer = self.console.gate.viewer(self.headers.get("Authorization"),
                                          self.client_address[0])
        if isinstance(viewer, str):
            self._send(401, "text/plain", f"401: {viewer}\n",
                       {"WWW-Authenticate": 'Basic realm="dfsql", charset="UTF-8"'})
            return
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            status, kind, body = self.console.answer(viewer, url.path, query)
        except Exception:  # noqa: BLE001 (one failed page must not stop the console)
            log.exception("the console failed to answer %s", url.path)
            status, kind, body = 500, "text/plain", "500: the console failed (see the log)\n"
        self._send(status, kind, body)

    def _static(self, name: str) -> None:
        if name not in STATIC:
            self._send(404, "text/plain", "404\n")
            return
        text = resources.files("dfsql.server").joinpath("console_static", name).read_text()
        self._send(200, STATIC[name], text, {"Cache-Control": "max-age=300"})

    def _send(self, status: int, kind: str, body: str,
              headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        if kind != "text/css" and kind != "text/javascript":
            self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        try:
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the browser went away: its loss
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("console %s: " + format, self.client_address[0], *args)


def start_console(server: Server, port: int | None) -> Console | None:
    """``dfsql serve --ui-port P``: the console started beside ``server`` (None: no
    port given), its address printed for the operator."""
    if port is None:
        return None
    console = Console(server, port).start()
    print(f"dfsql console on {console.url} (the endpoint's users and passwords)",
          flush=True)
    return console
