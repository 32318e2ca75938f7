"""HiveServer2's HTTP transport (issue #25, part 3: clients as they are): beeline (Hive
JDBC, ``;transportMode=http;httpPath=cliservice``), PyHive (``scheme='http'``) and impyla
(``use_http_transport=True``) against ``Server(transport_mode="http")`` under
``--auth PLAIN`` — one server for the module, on the run's Spark application (a
``dfsql serve`` process would start a second one: 12 s), and one beeline run, whose
metadata commands also check the name patterns through Hive JDBC.

Expected panes are Figure 10's, summed by hand from the paper's events; expected names
are derived by hand from the patterns, as in tests/server/test_metadata_patterns.py.
"""

from __future__ import annotations

import base64
import http.client
import os
import re
import shutil
import socket
import subprocess

import pytest

from dfsql.server import Server
from dfsql.server.auth import hash_line
from tests.conftest import register_paper_tables
from tests.paper import FIGURES
from tests.server.clients import COLUMNS, _beeline, operation_rows

PASSWORD = "s3cret"


@pytest.fixture(scope="module")
def endpoint(spark, tmp_path_factory):
    """An HTTP endpoint, PLAIN against a password file with one user, ``ada``; a schema
    ``http_sales`` with one table, ``http_orders``, for the metadata patterns."""
    users = tmp_path_factory.mktemp("http") / "users"
    # few iterations: each refused login hashes again, and the hash is not what is tested
    users.write_text(hash_line("ada", PASSWORD, iterations=1000) + "\n")
    spark.sql("CREATE DATABASE IF NOT EXISTS http_sales")
    spark.sql("CREATE TABLE IF NOT EXISTS http_sales.http_orders (order_id BIGINT, "
              "amount DOUBLE) USING parquet")
    server = Server(spark, port=0, auth="PLAIN", password_file=str(users),
                    transport_mode="http", session_setup=register_paper_tables).start()
    try:
        yield server
    finally:
        server.stop()
        spark.sql("DROP DATABASE IF EXISTS http_sales CASCADE")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# --------------------------------------------------------------------------- beeline


FIG10 = FIGURES["fig10_fixed_batch"]
#: the paper's ten scores (examples/paper/events.csv) summed by hand per fixed 2-minute
#: window of event time, one ON_TIME pane each on a batch, as Figure 10 shows them
#: (window_start, window_end, total)
PANES_BY_TWO_MINUTES = [
    ("2015-09-01 12:00:00", "2015-09-01 12:02:00", 5 + 9),  # 12:00:30, 12:01:20
    ("2015-09-01 12:02:00", "2015-09-01 12:04:00", 7 + 8 + 3 + 4),  # 12:02:10 .. 12:03:40
    ("2015-09-01 12:04:00", "2015-09-01 12:06:00", 3),  # 12:04:00
    ("2015-09-01 12:06:00", "2015-09-01 12:08:00", 3 + 8 + 1),  # 12:06:30 .. 12:07:50
]

#: one beeline script, one JVM: each command's output follows its prompt
BEELINE_SCRIPT = [
    " ".join(FIG10["query"].split()) + ";",
    "!tables HTTP_ORD%",                   # 'HTTP.ORD*', any case: http_orders
    "!columns http_orders",                # table 'http.orders', columns '%'
    "!metadata getSchemas null http_sale_",  # 'http.sale.': http_sales, not default
]
#: beeline's prompt before each command's output ("0: jdbc:hive2://127.0.0.1:PORT/default> ")
PROMPT = re.compile(r"^\d+: jdbc:hive2://\S+> ", re.M)


def _outputs(stdout: str) -> list[list[str]]:
    """Each command's output lines (the text between one prompt and the next)."""
    return [[ln for ln in part.splitlines() if ln.strip()] for part in PROMPT.split(stdout)[1:]]


def _column(lines: list[str], name: str) -> list[str]:
    """One column of a csv2 listing (header first; metadata values hold no commas)."""
    at = lines[0].split(",").index(name)
    return [ln.split(",")[at] for ln in lines[1:]]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="beeline needs Java")
def test_beeline_over_http_windowed_query_metadata_patterns_and_a_wrong_password(
        endpoint, tmp_path):
    """Figure 10's panes through Hive JDBC over HTTP (with ``-n ada -p``): the sums by
    hand above, each window's one ON_TIME pane, its last, no emit time on a batch; its metadata
    calls with JDBC patterns (getTables, getColumns, getSchemas: beeline's ``!tables``,
    ``!columns``, ``!metadata``) name what the patterns match, derived by hand from
    Hive's conversion (``%`` -> ``*``, ``_`` -> ``.``) and Spark's case-insensitive
    match; then a wrong password is refused with HTTP 401, in Hive JDBC's words."""
    script = tmp_path / "http.sql"
    wrong = f"!connect {endpoint.url()} ada wrong"
    script.write_text("\n".join([*BEELINE_SCRIPT, wrong]) + "\n")
    env = dict(os.environ)
    env.pop("SPARK_HOME", None)
    # C1 only and the serial collector, as tests/conftest.py gives pyspark's JVMs: beeline's
    # two short JVMs (the launcher's and its own) start in 2 s instead of 4-6 on 2 cores
    env["JAVA_TOOL_OPTIONS"] = "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC"
    done = subprocess.run([_beeline(), "-u", endpoint.url(), "-n", "ada", "-p", PASSWORD,
                           "--outputformat=csv2", "-f", str(script)],
                          capture_output=True, text=True, env=env, timeout=600)
    out = _outputs(done.stdout)
    assert len(out) >= len(BEELINE_SCRIPT), done.stdout[-3000:] + done.stderr[-3000:]
    fig10, tables, columns, schemas = out[:len(BEELINE_SCRIPT)]
    assert fig10[0] == ",".join(COLUMNS)
    # a batch's panes all have no emit time: in no set order; by window here
    assert sorted(fig10[1:], key=lambda ln: ln.split(",")[2]) == [
        f"k,{total},{start}.0,{end}.0,0,ON_TIME,true,NULL,false"  # JDBC's timestamp text
        for start, end, total in PANES_BY_TWO_MINUTES], fig10
    assert list(zip(_column(tables, "TABLE_SCHEM"), _column(tables, "TABLE_NAME"),
                    _column(tables, "TABLE_TYPE"), strict=True)) == [
        ("http_sales", "http_orders", "TABLE")], tables
    assert list(zip(_column(columns, "COLUMN_NAME"), _column(columns, "TYPE_NAME"),
                    _column(columns, "ORDINAL_POSITION"), strict=True)) == [
        ("order_id", "BIGINT", "1"), ("amount", "DOUBLE", "2")], columns
    assert _column(schemas, "TABLE_SCHEM") == ["http_sales"], schemas
    # the wrong password, last: refused, the client says 401; beeline then has no connection
    assert "HTTP Response code: 401" in done.stderr, done.stderr[-3000:]
    assert done.returncode != 0


# --------------------------------------------------------------------------- PyHive, impyla


def test_pyhive_over_http_keeps_the_session_across_requests(endpoint):
    """PyHive's ``scheme='http'`` opens a TCP connection per call (Thrift's THttpClient),
    so the session is found by its handle on every request: a temp view made by one
    statement is read by the next, and a metadata call (GetColumns of the paper's
    ``scores``: its four columns, in order) answers in the same session. The session's
    user is the one of the Basic header, which the password checked, not OpenSession's
    ``username``; a wrong password gets a Thrift exception saying why (PyHive reads the
    body whatever the HTTP status)."""
    from pyhive import hive
    from thrift.transport.THttpClient import THttpClient

    from dfsql.server.tcli import ttypes as tt

    conn = hive.connect(host="127.0.0.1", port=endpoint.port, scheme="http", auth="BASIC",
                        username="ada", password=PASSWORD)
    cur = conn.cursor()
    cur.execute("CREATE TEMP VIEW answer AS SELECT 42 AS n")
    cur.execute("SELECT n FROM answer")
    assert cur.fetchall() == [(42,)]
    cols = operation_rows(conn, conn.client.GetColumns(tt.TGetColumnsReq(
        sessionHandle=conn.sessionHandle, tableName="scores")))
    assert [(r[3], r[5], r[16]) for r in cols] == [
        ("key", "STRING", 1), ("value", "BIGINT", 2), ("event_time", "TIMESTAMP", 3),
        ("arrival_time", "TIMESTAMP", 4)]
    conn.close()

    transport = THttpClient(f"http://127.0.0.1:{endpoint.port}/cliservice")
    transport.setCustomHeaders({"Authorization": _basic("ada", PASSWORD)})
    other = hive.connect(thrift_transport=transport, username="mallory")
    key = other.sessionHandle.sessionId.guid
    assert endpoint.service.sessions[key].user == "ada"
    other.close()
    assert key not in endpoint.service.sessions  # CloseSession ends it

    from thrift.Thrift import TApplicationException

    with pytest.raises(TApplicationException) as refused:
        hive.connect(host="127.0.0.1", port=endpoint.port, scheme="http", auth="BASIC",
                     username="ada", password="wrong")
    assert str(refused.value) == ("Authentication Error: Error validating the login of "
                                  "user 'ada'")


def test_impyla_over_http_and_wrong_passwords(endpoint):
    """impyla over HTTP with PLAIN: Figure 10's windowed query (the paper's scores summed
    per fixed 2-minute window, one ON_TIME pane each on a batch) and get_tables of
    ``http_sales``. A wrong password is HTTP 401, with the reason."""
    from impala.dbapi import connect
    from impala.error import HttpError

    conn = connect(host="127.0.0.1", port=endpoint.port, use_http_transport=True,
                   http_path="cliservice", auth_mechanism="PLAIN", user="ada",
                   password=PASSWORD)
    cur = conn.cursor()
    cur.execute(FIG10["query"])
    names = [d[0] for d in cur.description]
    got = sorted(tuple(str(r[names.index(c)]) for c in ("window_start", "window_end",
                                                         "total", "pane_timing"))
                 for r in cur.fetchall())
    cur.get_tables(database_name="http_sales")
    tables = [(r[1], r[2]) for r in cur.fetchall()]
    cur.close()
    conn.close()
    assert got == [(start, end, str(total), "ON_TIME")
                   for start, end, total in PANES_BY_TWO_MINUTES]
    # the schema's one table, and (as from Spark's server) the session's temp views,
    # which no schema pattern filters
    assert [t for t in tables if t[0]] == [("http_sales", "http_orders")]
    assert ("", "scores") in tables

    with pytest.raises(HttpError) as info:
        connect(host="127.0.0.1", port=endpoint.port, use_http_transport=True,
                http_path="cliservice", auth_mechanism="PLAIN", user="ada",
                password="wrong").cursor()
    assert info.value.code == 401
    assert str(info.value) == "HTTP code 401: Error validating the login"


# --------------------------------------------------------------------------- not a call


def _raw(port: int, data: bytes) -> bytes:
    """What the server answers ``data`` on a new connection, until it closes or 2 s."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(data)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except (TimeoutError, ConnectionResetError):  # refused: closed with bytes unread
            pass
    return got


def test_requests_that_are_no_call_get_clean_http_errors(endpoint):
    """A GET, a garbage body, another path, no credentials, no Content-Length, a body
    over the limit, and a line that is not HTTP: each a plain HTTP error with a
    sentence, no traceback; the server goes on serving."""
    auth = _basic("ada", PASSWORD)
    web = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
    web.request("GET", "/cliservice")
    r = web.getresponse()
    assert (r.status, r.getheader("Allow"), r.read().decode()) == (
        405, "POST", "HiveServer2's HTTP transport takes Thrift calls as POST to "
                     "/cliservice\n")
    web.request("POST", "/cliservice", b"\x80\x01\x00\x01garbage!", {"Authorization": auth})
    r = web.getresponse()
    assert r.status == 400
    assert r.read().decode().startswith("the body is not a TCLIService call")
    web.request("POST", "/elsewhere", b"x", {"Authorization": auth})
    r = web.getresponse()
    assert (r.status, r.read()) == (
        404, b"HiveServer2 is served at /cliservice (--http-path), not here\n")
    web.request("POST", "/cliservice", b"x")  # PLAIN: no credentials
    r = web.getresponse()
    assert (r.status, r.getheader("WWW-Authenticate")) == (
        401, 'Basic realm="dfsql", charset="UTF-8"')
    assert r.read().decode().startswith("Authentication Error: the request has no Basic")
    web.close()

    head = b"POST /cliservice HTTP/1.1\r\nHost: x\r\n"
    assert _raw(endpoint.port, head + b"\r\n").startswith(b"HTTP/1.1 411 ")
    huge = _raw(endpoint.port, head + b"Content-Length: 1099511627776\r\n\r\nabc")
    assert huge.startswith(b"HTTP/1.1 413 "), huge
    assert huge.endswith(b"the limit is 67108864 (--max-message-mb)\n")
    # not HTTP/1.x: http.server answers as HTTP/0.9 did, the body alone
    assert _raw(endpoint.port, b"SELECT 1\r\n\r\n").startswith(b"400 Bad HTTP/0.9 request")

    from pyhive import hive

    conn = hive.connect(host="127.0.0.1", port=endpoint.port, scheme="http", auth="BASIC",
                        username="ada", password=PASSWORD)
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM scores")
    assert cur.fetchall() == [(10,)]  # the paper's ten scores
    conn.close()


def test_serve_checks_the_http_options(spark, capsys):
    """``dfsql serve``'s HTTP options reach the server and are checked before it starts
    (on the run's Spark, which ``dfsql serve`` takes as the active session): a path that
    is not a URL path, and --http-path without the HTTP transport."""
    from dfsql.cli import main

    assert main(["serve", "--port", "0", "--transport-mode", "http", "--http-path",
                 "cli service"]) == 1
    assert "error: --http-path 'cli service': not a URL path" in capsys.readouterr().err
    assert main(["serve", "--port", "0", "--http-path", "cliservice"]) == 1
    err = capsys.readouterr().err
    assert "--http-path is the path of the HTTP transport" in err
    assert "hint: add --transport-mode http" in err


def test_the_connection_limits_hold_over_http(spark):
    """--max-connections and --idle-connection-timeout count HTTP connections as they
    count binary ones (the same accept loop): with one allowed, a second waits,
    unanswered, while the first is open (issue #52, item 11: not closed on arrival);
    the first, silent for 1 s, is closed, and the second is answered."""
    server = Server(spark, port=0, auth="NONE", transport_mode="http", max_connections=1,
                    idle_connection_timeout=1).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as first, \
                socket.create_connection(("127.0.0.1", server.port), timeout=10) as second:
            first.sendall(b"GET /cliservice HTTP/1.1\r\nHost: x\r\n\r\n")
            assert first.recv(12) == b"HTTP/1.1 405"  # served, kept alive
            second.sendall(b"GET /cliservice HTTP/1.1\r\nHost: x\r\n"
                           b"Connection: close\r\n\r\n")
            second.settimeout(0.5)
            with pytest.raises(TimeoutError):
                second.recv(12)  # over the limit: waiting
            while first.recv(65536):  # the rest of the reply, then the server's close
                pass
            second.settimeout(10)
            assert second.recv(12) == b"HTTP/1.1 405"  # let in once the first went
    finally:
        server.stop()


def test_none_lets_anyone_in_the_header_naming_the_user(spark):
    """Under NONE any credentials pass and the header names the session's user; without
    a header, OpenSession's username does (what HiveServer2's NOSASL HTTP mode does)."""
    from pyhive import hive
    from thrift.transport.THttpClient import THttpClient

    server = Server(spark, port=0, auth="NONE", transport_mode="http").start()
    try:
        conn = hive.connect(host="127.0.0.1", port=server.port, scheme="http",
                            username="someone", password="anything", auth="BASIC")
        cur = conn.cursor()
        cur.execute("SELECT 1 AS one")
        assert cur.fetchall() == [(1,)]
        assert [s.user for s in server.service.sessions.values()] == ["someone"]
        conn.close()
        bare = hive.connect(thrift_transport=THttpClient(
            f"http://127.0.0.1:{server.port}/cliservice"), username="mallory")
        assert [s.user for s in server.service.sessions.values()] == ["mallory"]
        bare.close()
    finally:
        server.stop()
