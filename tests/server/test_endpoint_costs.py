"""Costs bounded by the clauses' values over the endpoint (issue #52): the issue's
``WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND)`` over one row, and its disguises, sent
by a PLAIN user over PyHive, are refused with SQLSTATE 54000 where the period is written,
in well under a second and before any Spark work; another user's ``SELECT 1`` is still
answered, and a legitimate sliding window still runs with its rows. (The bound itself,
and dfsql.sql: tests/language/test_costs.py.)"""

from __future__ import annotations

import time

import pytest

from dfsql.server import Server
from dfsql.server.auth import hash_line

PASSWORD = "s3cret"
ONE_ROW = "FROM VALUES (TIMESTAMP '2026-01-01 00:00:00', 1) AS t(ts, v)"
ABSURD = f"SELECT SUM(v) AS s {ONE_ROW} WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) ON ts"
#: the issue's query as an attacker would write it: case, INTERVAL, decimals, comments,
#: a CTE, a subquery, a view body, EXPLAIN (EXECUTE IMMEDIATE: in the test)
DISGUISED = [
    ABSURD,
    ABSURD.lower(),
    f"SELECT SUM(v) AS s {ONE_ROW}\nWINDOW SLIDING(INTERVAL '1' HOUR, "
    "EVERY INTERVAL '1' MILLISECOND) ON ts",
    f"SELECT SUM(v) AS s {ONE_ROW} WINDOW /* every */ SLIDING(1 HOUR,\n"
    "  EVERY 0.001 SECONDS) ON ts",
    f"WITH c AS (SELECT SUM(v) AS s {ONE_ROW} WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) "
    "ON ts) SELECT * FROM c",
    f"SELECT * FROM (SELECT SUM(v) AS s {ONE_ROW} "
    "WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) ON ts) AS q",
    f"CREATE OR REPLACE TEMP VIEW absurd_v AS SELECT SUM(v) AS s {ONE_ROW} "
    "WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND) ON ts",
    f"EXPLAIN {ABSURD}",
]


@pytest.fixture(scope="module")
def server(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("costs") / "users"
    path.write_text("".join(hash_line(u, PASSWORD, iterations=1000) + "\n"
                            for u in ("ada", "bob")))
    s = Server(spark, port=0, auth="PLAIN", password_file=str(path)).start()
    yield s
    s.stop()


def _connect(server: Server, user: str):
    from pyhive import hive

    return hive.connect(host="127.0.0.1", port=server.port, auth="CUSTOM", username=user,
                        password=PASSWORD)


def _where(statement: str) -> str:
    """"line L, col C" of the period: the word after the last EVERY."""
    at = statement.lower().rindex("every") + len("every ")
    return f"line {statement.count(chr(10), 0, at) + 1}, col {at - statement.rfind(chr(10), 0, at)}"


def test_the_issues_query_and_its_disguises_are_refused_fast_with_54000(server):
    from pyhive.exc import OperationalError

    ada = _connect(server, "ada")
    try:
        cur = ada.cursor()
        for statement in DISGUISED:
            t0 = time.perf_counter()
            with pytest.raises(OperationalError) as info:
                cur.execute(statement)
            assert time.perf_counter() - t0 < 1.0, statement
            status = info.value.args[0].status
            assert status.sqlState == "54000", (statement, status.errorMessage)
            assert status.errorMessage.startswith(
                _where(statement) + ": SLIDING puts each row in 3,600,000 windows"), \
                status.errorMessage
            assert "--max-windows-per-row" in status.errorMessage
        # EXECUTE IMMEDIATE hands its string to Spark's parser, which has no WINDOW
        # clause: a syntax error, never planned
        t0 = time.perf_counter()
        with pytest.raises(OperationalError) as info:
            cur.execute("EXECUTE IMMEDIATE '" + ABSURD.replace("'", "''") + "'")
        assert time.perf_counter() - t0 < 2.0
        assert info.value.args[0].status.sqlState == "42601"
        assert "Syntax error at or near 'WINDOW'" in info.value.args[0].status.errorMessage
        cur.execute("SHOW VIEWS LIKE 'absurd_v'")
        assert cur.fetchall() == []  # nothing written
    finally:
        ada.close()
    bob = _connect(server, "bob")
    try:
        cur = bob.cursor()
        cur.execute("SELECT 1 AS one")
        assert cur.fetchall() == [(1,)]
    finally:
        bob.close()


def test_a_legitimate_sliding_window_still_runs(server):
    ada = _connect(server, "ada")
    try:
        cur = ada.cursor()
        cur.execute(f"SELECT SUM(v) AS s {ONE_ROW} WINDOW SLIDING(10 SECONDS, "
                    "EVERY 2 SECONDS) ON ts")
        rows = sorted((r[0], str(r[1])) for r in cur.fetchall())
        assert rows == [(1, "2025-12-31 23:59:52"), (1, "2025-12-31 23:59:54"),
                        (1, "2025-12-31 23:59:56"), (1, "2025-12-31 23:59:58"),
                        (1, "2026-01-01 00:00:00")]
    finally:
        ada.close()


def test_serve_names_the_flag_and_its_default(capsys):
    from dfsql.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--max-windows-per-row N" in text and "(default 1000; 0: no limit)" in text
    assert "--max-trigger-nodes N" in text
    with pytest.raises(SystemExit):
        main(["serve", "--max-windows-per-row", "-1"])
    assert "a bound is 0 (none) or more" in capsys.readouterr().err


def test_a_trigger_tree_over_the_bound_is_refused_with_54000(server):
    from pyhive.exc import OperationalError

    counts = ", ".join(f"after {i + 1} rows" for i in range(1000))
    ada = _connect(server, "ada")
    try:
        cur = ada.cursor()
        for statement in (
                f"select sum(v) as s {ONE_ROW} window fixed(1 minute) on ts "
                f"trigger repeat any({counts})",
                f"WITH c AS (SELECT SUM(v) AS s {ONE_ROW} WINDOW FIXED(1 MINUTE) ON ts "
                f"TRIGGER REPEAT ANY({counts})) SELECT * FROM c"):
            t0 = time.perf_counter()
            with pytest.raises(OperationalError) as info:
                cur.execute(statement)
            assert time.perf_counter() - t0 < 1.0
            status = info.value.args[0].status
            column = statement.lower().index("trigger") + 1
            assert status.sqlState == "54000", status.errorMessage
            assert status.errorMessage.startswith(
                f"line 1, col {column}: the trigger has 1,002 nodes; the bound is 1,000 "
                "(dfsql serve --max-trigger-nodes)"), status.errorMessage
        cur.execute("SELECT 1 AS one")
        assert cur.fetchall() == [(1,)]
    finally:
        ada.close()
