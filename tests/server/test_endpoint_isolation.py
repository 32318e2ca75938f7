"""Users are isolated (issue #31, item 4): what an authenticated user (bob) could do to
another (alice) — fetch, close, cancel and poll her operations and sessions by their
GUID, stop her continuous queries, drop their views — is refused; failed logins back off
per user and per address without slowing other users; SASL's authorization id cannot
name another user; HTTP is parsed strictly; and Spark's own error text reaches clients.

One binary PLAIN server for the module (alice, bob, root the admin) and one HTTP
server; the tests that need other settings (back-offs, a state directory) start their
own. All on
the run's Spark application, through PyHive and raw sockets to 127.0.0.1.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import struct
import threading
import time
import uuid
from pathlib import Path

import pytest
from pyhive import hive
from pyhive.exc import OperationalError

from dfsql.server import Server
from dfsql.server.auth import hash_line
from dfsql.server.logins import Backoff
from dfsql.server.streams import StreamView
from dfsql.server.tcli import ttypes as tt
from tests.conftest import paper_stream_dir, register_paper_tables
from tests.server.users import (
    LIVE_QUERY,
    PASSWORDS,
    _connect,
    _refusal,
    _run,
    _setup,
    _users,
)

INVALID_OP = "invalid operation handle: closed, or from another server"
INVALID_SESSION = "invalid session handle: closed, or from another server"
#: the back-off test's lock: carol's fourth try within 3 s is refused
LOCK = 3.0




@pytest.fixture(scope="module")
def stream(tmp_path_factory) -> StreamView:
    return StreamView("scores_live", str(paper_stream_dir(tmp_path_factory.mktemp("live"))),
                      "parquet")




@pytest.fixture(scope="module")
def server(spark, tmp_path_factory, stream):
    setup = _setup(stream)
    users = _users(tmp_path_factory.mktemp("iso") / "users")
    s = Server(spark, port=0, auth="PLAIN", password_file=users, admins=["root"],
               data_roots=None, session_setup=setup).start()
    yield s
    s.stop()




def _forged(handle: tt.TOperationHandle, secret: bytes | None = None) -> tt.TOperationHandle:
    """``handle`` with another secret (None: the same one), as a new object."""
    hid = handle.operationId
    return tt.TOperationHandle(
        operationId=tt.THandleIdentifier(guid=hid.guid, secret=secret or hid.secret),
        operationType=handle.operationType, hasResultSet=True)


def _operation_calls(client, handle) -> dict[str, tuple[int, str]]:
    """(status code, error message) of every call on an operation handle."""
    calls = {
        "status": client.GetOperationStatus(tt.TGetOperationStatusReq(operationHandle=handle)),
        "metadata": client.GetResultSetMetadata(
            tt.TGetResultSetMetadataReq(operationHandle=handle)),
        "fetch": client.FetchResults(tt.TFetchResultsReq(
            operationHandle=handle, orientation=tt.TFetchOrientation.FETCH_FIRST,
            maxRows=10)),
        "cancel": client.CancelOperation(tt.TCancelOperationReq(operationHandle=handle)),
        "close": client.CloseOperation(tt.TCloseOperationReq(operationHandle=handle)),
    }
    return {k: (r.status.statusCode, r.status.errorMessage) for k, r in calls.items()}


REFUSED_OP = {k: (tt.TStatusCode.ERROR_STATUS, INVALID_OP)
              for k in ("status", "metadata", "fetch", "cancel", "close")}


def test_another_users_operation_is_an_invalid_handle(server):
    """Bob, holding alice's operation handle (its GUID with a wrong secret, or the whole
    handle), gets from every operation call the very answer an unknown handle gets, on
    the status and fetch fast paths too; alice with a wrong secret as well. Her rows are
    untouched: she then fetches all three."""
    alice, bob = _connect(server, "alice"), _connect(server, "bob")
    cur = alice.cursor()
    cur.execute("SELECT id FROM range(3)")
    handle = cur._operationHandle
    unknown = tt.TOperationHandle(operationId=tt.THandleIdentifier(
        guid=uuid.uuid4().bytes, secret=uuid.uuid4().bytes),
        operationType=handle.operationType, hasResultSet=True)
    assert _operation_calls(bob.client, unknown) == REFUSED_OP
    assert _operation_calls(bob.client, _forged(handle, b"\0" * 16)) == REFUSED_OP
    assert _operation_calls(bob.client, _forged(handle)) == REFUSED_OP  # GUID and secret
    assert _operation_calls(alice.client, _forged(handle, b"\0" * 16)) == REFUSED_OP
    assert cur.fetchall() == [(0,), (1,), (2,)]
    alice.close()
    bob.close()


def test_another_users_session_is_an_invalid_handle(server):
    """Bob with alice's session handle (whole, or with a wrong secret) can neither run a
    statement in it (plant a temp view), nor list its tables, nor close it: each is the
    unknown-handle error; her session goes on, without his view."""
    alice, bob = _connect(server, "alice"), _connect(server, "bob")
    theirs = alice.sessionHandle
    wrong = tt.TSessionHandle(sessionId=tt.THandleIdentifier(
        guid=theirs.sessionId.guid, secret=b"\0" * 16))
    for handle in (theirs, wrong):
        planted = bob.client.ExecuteStatement(tt.TExecuteStatementReq(
            sessionHandle=handle, statement="CREATE TEMP VIEW planted AS SELECT 1 AS x"))
        tables = bob.client.GetTables(tt.TGetTablesReq(sessionHandle=handle))
        closed = bob.client.CloseSession(tt.TCloseSessionReq(sessionHandle=handle))
        assert [(r.status.statusCode, r.status.errorMessage)
                for r in (planted, tables, closed)] == [
            (tt.TStatusCode.ERROR_STATUS, INVALID_SESSION)] * 3
    cur = alice.cursor()
    cur.execute("SHOW VIEWS LIKE 'planted'")
    assert cur.fetchall() == []
    cur.execute("SELECT 7 AS n")
    assert cur.fetchall() == [(7,)]
    alice.close()
    bob.close()


def test_without_sasl_a_session_is_its_connections(spark):
    """NOSASL names no user (OpenSession's username is a claim): a session is usable only
    on the connection that opened it; another connection, even under the same name and
    with the whole handle, gets the unknown-handle error."""
    server = Server(spark, port=0, auth="NOSASL").start()
    try:
        first = hive.connect("127.0.0.1", server.port, username="alice", auth="NOSASL")
        second = hive.connect("127.0.0.1", server.port, username="alice", auth="NOSASL")
        taken = second.client.ExecuteStatement(tt.TExecuteStatementReq(
            sessionHandle=first.sessionHandle, statement="SELECT 1"))
        assert taken.status.errorMessage == INVALID_SESSION
        assert _run(first, "SELECT 2 AS n") == [(2,)]
        first.close()
        second.close()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def http_server(spark, tmp_path_factory):
    users = _users(tmp_path_factory.mktemp("iso-http") / "users")
    s = Server(spark, port=0, auth="PLAIN", password_file=users,
               transport_mode="http").start()
    yield s
    s.stop()


def test_over_http_the_user_comes_from_each_request(http_server):
    """Over HTTP a session belongs to no connection: each request's Basic credentials
    name the caller. Bob's requests with alice's session or operation handle get the
    unknown-handle errors; alice's go on."""
    def connect(user: str) -> hive.Connection:
        return hive.connect(host="127.0.0.1", port=http_server.port, scheme="http",
                            auth="BASIC", username=user, password=PASSWORDS[user])

    alice, bob = connect("alice"), connect("bob")
    cur = alice.cursor()
    cur.execute("SELECT id FROM range(2)")
    assert _operation_calls(bob.client, _forged(cur._operationHandle)) == REFUSED_OP
    planted = bob.client.ExecuteStatement(tt.TExecuteStatementReq(
        sessionHandle=alice.sessionHandle, statement="SELECT 1"))
    assert planted.status.errorMessage == INVALID_SESSION
    assert cur.fetchall() == [(0,), (1,)]
    alice.close()
    bob.close()


# --------------------------------------------------------------------------- continuous






def test_a_continuous_query_is_its_creators(server):
    """Alice's continuous query: bob may read its view and see it listed with its owner,
    but not STOP it, nor drop or replace its view (also through EXECUTE IMMEDIATE): each
    42501 naming the owner; root, an --admin, may stop it."""
    alice, bob, root = (_connect(server, u) for u in ("alice", "bob", "root"))
    created = _run(alice, f"CREATE STREAMING QUERY alice_live AS {LIVE_QUERY}")
    assert created[0][0] == "alice_live"
    shown = {r[0]: r[-1] for r in _run(bob, "SHOW STREAMING QUERIES")}
    assert shown == {"alice_live": "alice"}
    assert _run(bob, "SELECT COUNT(*) >= 0 FROM global_temp.alice_live") == [(True,)]
    owned = ("the continuous query alice_live belongs to user 'alice': {} is theirs or an "
             "admin's (dfsql serve --admin)")
    state, message = _refusal(bob, "STOP STREAMING QUERY alice_live")
    assert (state, message.splitlines()[0]) == (
        "42501", "line 1, col 22: " + owned.format("STOP"))
    view = owned.format("its view global_temp.alice_live")
    for statement, column in (("DROP VIEW global_temp.alice_live", 23),
                              ("DROP VIEW IF EXISTS `global_temp`.alice_live", 35),
                              ("CREATE OR REPLACE GLOBAL TEMP VIEW alice_live AS SELECT 1",
                               36),
                              ("EXECUTE IMMEDIATE 'DROP VIEW global_temp.alice_live'", 42)):
        state, message = _refusal(bob, statement)
        assert (state, message.splitlines()[0]) == ("42501", f"line 1, col {column}: {view}")
    assert [r[0] for r in _run(alice, "SHOW STREAMING QUERIES")] == ["alice_live"]
    assert _run(root, "STOP STREAMING QUERY alice_live") == [("alice_live", "STOPPED")]
    assert _run(alice, "SHOW STREAMING QUERIES") == []
    for c in (alice, bob, root):
        c.close()


def test_why_a_query_has_not_fired_is_its_owners_to_ask(server):
    """EXPLAIN FIRINGS FOR STREAMING QUERY over the endpoint: alice reads her query's
    live windows (Figure 14's stream read whole: its two windows' last panes, the 39
    and the 12, neither waiting); bob's is refused with 42501 naming the owner, as is
    a WHERE that calls Java, placed at the call. ALTER is hers alone too."""
    from tests.conftest import wait_until

    alice, bob = (_connect(server, u) for u in ("alice", "bob"))
    _run(alice, f"CREATE STREAMING QUERY alice_why AS {LIVE_QUERY}")
    asked = "EXPLAIN FIRINGS FOR STREAMING QUERY alice_why"
    rows: list = []

    def told() -> bool:
        try:
            rows[:] = _run(alice, asked)
        except OperationalError as e:  # before its first micro-batch
            assert "has not completed a micro-batch" in e.args[0].status.errorMessage
            return False
        return len(rows) == 2

    assert wait_until(told, 120)
    assert [(r[4], r[6], r[7], r[8].split("; emits ")[-1]) for r in rows] == [
        ("FIRE", 0, "LATE", "total=39"), ("FIRE", 0, "ON_TIME", "total=12")]
    state, message = _refusal(bob, asked)
    assert (state, message.splitlines()[0]) == (
        "42501", "line 1, col 37: the continuous query alice_why belongs to user 'alice': "
                 "EXPLAIN is theirs or an admin's (dfsql serve --admin)")
    state, message = _refusal(alice, asked + " WHERE reflect('java.lang.System', 'exit', 3) "
                                             "IS NULL")
    assert state == "42501" and message.startswith("line 1, col 53:"), message
    # changing it is hers too
    wider = LIVE_QUERY.replace("GAP 1 MINUTE", "GAP 5 MINUTES")
    state, message = _refusal(bob, f"ALTER STREAMING QUERY alice_why AS {wider}")
    assert (state, message.splitlines()[0]) == (
        "42501", "line 1, col 23: the continuous query alice_why belongs to user 'alice': "
                 "ALTER is theirs or an admin's (dfsql serve --admin)")
    assert [r[2] for r in _run(alice, f"ALTER STREAMING QUERY alice_why AS {wider}")] == [2]
    assert [r[-1] for r in _run(bob, "SHOW STREAMING QUERIES")] == ["alice"]
    _run(alice, "STOP STREAMING QUERY alice_why")
    for c in (alice, bob):
        c.close()


def test_ownership_survives_a_restart_on_the_state_directory(spark, tmp_path, stream):
    """A query kept in --state-dir is its creator's after the server starts again on the
    directory: bob's STOP refused, alice's stops it (and removes it from the directory)."""
    users = _users(tmp_path / "users")
    state = tmp_path / "state"

    def start() -> Server:
        return Server(spark, port=0, auth="PLAIN", password_file=users, data_roots=None,
                      state_dir=str(state), streams=[stream],
                      session_setup=_setup(stream)).start()

    first = start()
    try:
        alice = _connect(first, "alice")
        _run(alice, f"CREATE STREAMING QUERY kept_live AS {LIVE_QUERY}")
        alice.close()
    finally:
        first.stop()
    assert json.loads((state / "queries" / "kept_live.json").read_text())["owner"] == "alice"
    second = start()
    try:
        assert [(r.name, r.ok) for r in second.restarted] == [("kept_live", True)]
        alice, bob = _connect(second, "alice"), _connect(second, "bob")
        assert _refusal(bob, "STOP STREAMING QUERY kept_live")[0] == "42501"
        assert _run(alice, "STOP STREAMING QUERY kept_live")[0][:2] == ("kept_live", "STOPPED")
        assert not (state / "queries" / "kept_live.json").exists()
        alice.close()
        bob.close()
    finally:
        second.stop()


def test_a_failed_kept_query_is_its_owners_to_start(spark, tmp_path, stream):
    """A kept query that failed to start again (its stream's directory moved away while
    the server was down) is its creator's to START once the cause is fixed: bob's START
    is refused with 42501 naming the owner, at the name; alice's starts it, in the same
    server (Figure 14's stream read whole: its two windows' last panes, 39 and 12)."""
    from tests.conftest import wait_until

    users = _users(tmp_path / "users")
    state, mine = tmp_path / "state", StreamView(
        "start_live", str(paper_stream_dir(tmp_path / "live")), "parquet")

    def start(*views: StreamView) -> Server:
        def setup(session) -> None:
            register_paper_tables(session)
            for v in views:
                v.register(session)

        return Server(spark, port=0, auth="PLAIN", password_file=users, data_roots=None,
                      state_dir=str(state), streams=list(views), session_setup=setup).start()

    first = start(stream, mine)
    try:
        alice = _connect(first, "alice")
        _run(alice, "CREATE STREAMING QUERY alice_start AS "
             + LIVE_QUERY.replace("scores_live", "start_live"))
        alice.close()
    finally:
        first.stop()
    Path(mine.path).rename(tmp_path / "away")
    second = start(stream)
    try:
        assert [(r.name, r.ok) for r in second.restarted] == [("alice_start", False)]
        alice, bob = _connect(second, "alice"), _connect(second, "bob")
        Path(tmp_path / "away").rename(mine.path)
        state_, message = _refusal(bob, "START STREAMING QUERY alice_start")
        assert (state_, message.splitlines()[0]) == (
            "42501", "line 1, col 23: the continuous query alice_start belongs to user "
                     "'alice': START is theirs or an admin's (dfsql serve --admin)")
        assert [r[2] for r in _run(alice, "START STREAMING QUERY alice_start")] == ["RUNNING"]

        def table() -> list[tuple]:
            return _run(alice, "SELECT total, pane_timing FROM global_temp.alice_start "
                               "ORDER BY total")

        assert wait_until(lambda: table() == [(12, "ON_TIME"), (39, "LATE")], 120), table()
        assert [r[-1] for r in _run(bob, "SHOW STREAMING QUERIES")] == ["alice"]
        _run(alice, "STOP STREAMING QUERY alice_start")
        alice.close()
        bob.close()
    finally:
        second.stop()


def test_admin_needs_plain(spark):
    """--admin under NONE would let anyone name themself the admin: refused at start."""
    from dfsql.errors import DfsqlError

    with pytest.raises(DfsqlError) as info:
        Server(spark, port=0, auth="NONE", admins=["root"])
    assert info.value.message == "--admin needs --auth PLAIN"


# --------------------------------------------------------------------------- logins


def sasl_login(port: int, user: str, password: str, authzid: str = "") -> tuple[int, bytes]:
    """A SASL PLAIN handshake on a raw socket: the server's (status, message); 5 is
    COMPLETE, 3 BAD."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"\x01" + struct.pack(">I", 5) + b"PLAIN")
        body = f"{authzid}\0{user}\0{password}".encode()
        s.sendall(b"\x02" + struct.pack(">I", len(body)) + body)
        head = b""
        while len(head) < 5:
            chunk = s.recv(5 - len(head))
            if not chunk:
                return -1, b""
            head += chunk
        size = struct.unpack(">I", head[1:])[0]
        payload = b""
        while len(payload) < size:
            payload += s.recv(size - len(payload))
        return head[0], payload


def test_failed_logins_back_off_per_user_not_for_others(spark, tmp_path):
    """Three wrong passwords for carol, then her right one is refused at once for the
    lock's 3 s, while bob logs in; after the lock she logs in. Then eight threads hammer
    carol's name: only the three attempts before the lock are hashed (the password file's
    real 200 000 rounds: unchecked, such a flood took bob's login from 0.1 s to 3.4 s),
    and bob's logins, once those three are done, stay fast."""
    users = tmp_path / "users"
    users.write_text(hash_line("bob", PASSWORDS["bob"]) + "\n"
                     + hash_line("carol", PASSWORDS["carol"]) + "\n")
    server = Server(spark, port=0, auth="PLAIN", password_file=str(users),
                    backoff=Backoff(user_free=3, address_free=1000, base=LOCK,
                                    cap=LOCK)).start()
    port = server.port
    try:
        assert [sasl_login(port, "carol", "wrong") for _ in range(3)] == [
            (3, b"Error validating the login")] * 3
        began = time.monotonic()
        status, message = sasl_login(port, "carol", PASSWORDS["carol"])
        assert status == 3 and message.startswith(
            b"too many failed logins for user 'carol': try again in ")
        # refused at once, not delayed by the lock (LOCK s); half of it leaves a loaded
        # machine room
        assert time.monotonic() - began < LOCK / 2
        assert sasl_login(port, "bob", PASSWORDS["bob"]) == (5, b"")
        time.sleep(LOCK)
        assert sasl_login(port, "carol", PASSWORDS["carol"]) == (5, b"")

        answers: list[bytes] = []
        stop = threading.Event()

        def hammer() -> None:
            while not stop.is_set():
                answers.append(sasl_login(port, "carol", "wrong")[1])

        threads = [threading.Thread(target=hammer) for _ in range(8)]
        began = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(0.5)  # the three hashed attempts, then the lock
        took = []
        while time.monotonic() - began < 1.7:
            at = time.monotonic()
            assert sasl_login(port, "bob", PASSWORDS["bob"]) == (5, b"")
            took.append(time.monotonic() - at)
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join()
        hammered = time.monotonic() - began
    finally:
        server.stop()
    checked = answers.count(b"Error validating the login")
    # one lock window covers the flood (a slow machine's longer flood: one more)
    assert checked == 3 if hammered < LOCK else checked <= 4, (checked, hammered)
    assert len(answers) > 20 and all(a.startswith(b"too many failed logins") or
                                     a == b"Error validating the login" for a in answers)
    # fast: unchecked, the flood took bob's login to 3.4 s; 2 s leaves a loaded machine room
    assert len(took) >= 3 and max(took) < 2.0, took


def test_failed_logins_back_off_per_address(spark, tmp_path):
    """Four failures from one address (each a different user name) lock the address:
    bob's right password from it is refused for the lock's 1 s, then let in."""
    server = Server(spark, port=0, auth="PLAIN", password_file=_users(tmp_path / "users"),
                    backoff=Backoff(user_free=100, address_free=4, base=1.0, cap=1.0)).start()
    try:
        for user in ("u1", "u2", "u3", "u4"):
            assert sasl_login(server.port, user, "x") == (3, b"Error validating the login")
        status, message = sasl_login(server.port, "bob", PASSWORDS["bob"])
        assert status == 3 and message.startswith(
            b"too many failed logins for address 127.0.0.1: try again in ")
        time.sleep(1.0)
        assert sasl_login(server.port, "bob", PASSWORDS["bob"]) == (5, b"")
    finally:
        server.stop()


def test_sasl_authzid_must_be_the_user(server):
    """PLAIN's authorization id: empty or the user's own name is fine; another user's is
    refused (bob cannot ask to act as alice), and does not count as a failed login."""
    assert sasl_login(server.port, "bob", PASSWORDS["bob"], authzid="") == (5, b"")
    assert sasl_login(server.port, "bob", PASSWORDS["bob"], authzid="bob") == (5, b"")
    assert sasl_login(server.port, "bob", PASSWORDS["bob"], authzid="alice") == (
        3, b"Authorization id differs from the user: impersonation is not supported")
    assert sasl_login(server.port, "bob", "wrong", authzid="alice")[0] == 3


# --------------------------------------------------------------------------- HTTP


def _http(port: int, head: str, body: bytes = b"") -> bytes:
    """The status line the HTTP server answers a raw request with."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head.encode() + b"\r\n" + body)
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    return got.split(b"\r\n", 1)[0]


def test_http_is_parsed_strictly(http_server):
    """Content-Length of anything but ASCII digits, two Authorization or Content-Length
    headers, dot segments in the path: 400; another path (a sub-path, a query): 404; the
    path itself, with or without a trailing slash, reaches the login check (401 here)."""
    port = http_server.port
    auth = "Authorization: Basic " + base64.b64encode(b"alice:alice-pw").decode()

    def post(path: str, *headers: str, length: str = "4") -> bytes:
        lines = [f"POST {path} HTTP/1.1", "Host: x", f"Content-Length: {length}", *headers]
        return _http(port, "\r\n".join(lines) + "\r\n", b"abcd")

    bad, missing = b"HTTP/1.1 400 Bad Request", b"HTTP/1.1 404 Not Found"
    assert post("/cliservice", auth, length="4_0") == bad
    assert post("/cliservice", auth, length="+4") == bad
    assert post("/cliservice", auth, length="0x4") == bad
    assert post("/cliservice", auth, auth) == bad
    assert post("/cliservice", auth, "Content-Length: 4") == bad
    assert post("/cliservice/../cliservice", auth) == bad
    assert post("/x/../cliservice", auth) == bad
    assert post("/cliservice/%2E%2e/cliservice", auth) == bad
    assert post("/cliservice/./", auth) == bad
    assert post("/cliservice/sub", auth) == missing
    assert post("/cliservice?x=1", auth) == missing
    unauthorized = b"HTTP/1.1 401 Error validating the login"
    assert post("/cliservice") == unauthorized
    assert post("/cliservice/") == unauthorized
    # a body too short for a Thrift message: 400, not a connection dropped unanswered
    assert post("/cliservice", auth) == bad


def test_over_http_failed_logins_back_off_too(http_server):
    """The HTTP transport's Basic credentials go through the same back-off (the
    server's defaults: the third failure locks the user for 1 s): carol's right password
    after three wrong ones is 401 saying so."""
    import http.client

    def post(password: str) -> tuple[int, str]:
        web = http.client.HTTPConnection("127.0.0.1", http_server.port, timeout=10)
        creds = base64.b64encode(f"carol:{password}".encode()).decode()
        web.request("POST", "/cliservice", b"x", {"Authorization": f"Basic {creds}"})
        r = web.getresponse()
        got = r.status, r.read().decode()
        web.close()
        return got

    assert [post("wrong") for _ in range(3)] == [
        (401, "Authentication Error: Error validating the login of user 'carol'\n")] * 3
    status, text = post(PASSWORDS["carol"])
    assert status == 401 and text.startswith(
        "Authentication Error: too many failed logins for user 'carol': try again in ")


# --------------------------------------------------------------------------- errors


def test_spark_errors_reach_the_client_in_sparks_words(server, tmp_path):
    """An unknown column: Spark's error class and its SQLSTATE 42703; a job failing on a
    corrupt file (a SparkException PySpark leaves in py4j's wrapper): Spark's
    FAILED_READ_FILE and KD001, not "An error occurred while calling o73.getResult", and
    no Java stack."""
    alice = _connect(server, "alice")
    state, message = _refusal(alice, "SELECT no_such_col FROM range(1)")
    assert state == "42703"
    assert message.startswith("line 1, col 8: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, "
                              "variable, or function parameter with name `no_such_col` "
                              "cannot be resolved.")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "x.parquet").write_bytes(b"PAR1 not a parquet file PAR1")
    _run(alice, f"CREATE TABLE iso_corrupt (a INT) USING parquet LOCATION '{corrupt}'")
    try:
        state, message = _refusal(alice, "SELECT * FROM iso_corrupt")
    finally:
        _run(alice, "DROP TABLE iso_corrupt")
        alice.close()
    assert state == "KD001"
    assert message.startswith("[FAILED_READ_FILE.NO_HINT] Encountered error while reading "
                              f"file file://{corrupt}/x.parquet"), message
    assert "An error occurred while calling" not in message and "\tat " not in message
    assert "\n" not in message


def test_continuous_queries_per_user_are_capped(spark, tmp_path, stream):
    """--max-streaming-queries-per-user 2: alice's third CREATE is refused with 54000 at
    its name (however it is written), naming the flag and STOP; bob, another user,
    still creates his; a STOP frees a slot. An admin is capped as everyone is."""
    users = _users(tmp_path / "users")
    server = Server(spark, port=0, auth="PLAIN", password_file=users, data_roots=None,
                    admins=["root"], session_setup=_setup(stream),
                    max_streaming_queries_per_user=2).start()
    alice, bob, root = (_connect(server, u) for u in ("alice", "bob", "root"))
    try:
        for name in ("cap_a1", "cap_a2"):
            assert _run(alice, f"CREATE STREAMING QUERY {name} AS {LIVE_QUERY}")[0][0] == name
        for statement, column in (
                (f"CREATE STREAMING QUERY cap_a3 AS {LIVE_QUERY}", 24),
                (f"create streaming query `cap_a3` as {LIVE_QUERY}", 24),
                (f"/* two */ CREATE\n STREAMING QUERY cap_a3 AS {LIVE_QUERY}", 0)):
            state, message = _refusal(alice, statement)
            first = message.splitlines()[0]
            assert state == "54000", message
            where = "line 2, col 18" if column == 0 else f"line 1, col {column}"
            assert first.startswith(f"{where}: user 'alice' already runs 2 continuous "
                                    "queries"), first
            assert "--max-streaming-queries-per-user" in message
            assert "STOP STREAMING QUERY" in message
        assert sorted(r[0] for r in _run(alice, "SHOW STREAMING QUERIES")) == [
            "cap_a1", "cap_a2"]
        assert _run(bob, f"CREATE STREAMING QUERY cap_b1 AS {LIVE_QUERY}")[0][0] == "cap_b1"
        assert _run(alice, "STOP STREAMING QUERY cap_a1") == [("cap_a1", "STOPPED")]
        assert _run(alice, f"CREATE STREAMING QUERY cap_a3 AS {LIVE_QUERY}")[0][0] == "cap_a3"
        for name in ("cap_a2", "cap_a3"):
            _run(alice, f"STOP STREAMING QUERY {name}")
        _run(bob, "STOP STREAMING QUERY cap_b1")
        for name in ("cap_r1", "cap_r2"):
            _run(root, f"CREATE STREAMING QUERY {name} AS {LIVE_QUERY}")
        assert _refusal(root, f"CREATE STREAMING QUERY cap_r3 AS {LIVE_QUERY}")[0] == "54000"
        assert _run(bob, "SELECT 1 AS one") == [(1,)]
    finally:
        for name in ("cap_a1", "cap_a2", "cap_a3", "cap_b1", "cap_r1", "cap_r2", "cap_r3"):
            with contextlib.suppress(OperationalError):
                _run(root, f"STOP STREAMING QUERY {name}")
        for c in (alice, bob, root):
            c.close()
        server.stop()
