"""How often the endpoint reads one statement (issue #33, item 1): a client's statement is
scanned once and parsed once, the judge, ``dfsql.sql`` and (for CREATE STREAMING QUERY)
``dfsql.start`` and the keeper taking the value read, not the text.

Run in-process through the endpoint's :class:`~dfsql.server.service.Service` (what the
Thrift server calls: ExecuteStatement's limits, then the operation of a judged and
guarded client session), counted as
``tests/language/test_statement_counts.py`` counts ``dfsql.sql``: scans, Lark parses,
sqlglot parses, and the Spark parses the judge asks for (``parse_plan``: a statement is
judged on the plan Spark parses from it).

Before (60e0bb7): the windowed statement 2 scans, 2 Lark parses, 6 sqlglot parses,
15 renders (the judge parsed the text, then ``dfsql.sql`` parsed the text again);
CREATE STREAMING QUERY 4 scans, 2 Lark parses, 6 sqlglot parses, 16 renders (the judge
scanned the statement and parsed its query again, ``dfsql.sql`` scanned the statement,
and ``dfsql.start`` scanned and parsed its query once more). After: 1 scan, 1 Lark
parse, 3 sqlglot parses each, 8 and 9 renders. The judge's Spark parses are the same
before and after: one of the client's statement (its windowed block's Spark SQL) and
one of each text ``spark.sql`` runs for it (4 here), the guard's.
"""

from __future__ import annotations

from collections import Counter

import pytest

from dfsql.server.service import Service
from dfsql.server.tcli import ttypes as tt
from tests.conftest import paper_stream_dir, register_paper_tables
from tests.language.counts import _count, _counted

WINDOWED = ("SELECT key, SUM(value) AS total FROM scores GROUP BY key\n"
            "WINDOW FIXED(2 MINUTES) ON event_time\n"
            "PROCESSING TIME arrival_time\n"
            "TRIGGER EVERY 1 MINUTE")
CREATE = ("CREATE STREAMING QUERY counted_live AS\n"
          "SELECT key, SUM(value) AS total FROM scores_counted GROUP BY key\n"
          "WINDOW FIXED(2 MINUTES) ON event_time\n"
          "PROCESSING TIME arrival_time\n"
          "TRIGGER EVERY 1 MINUTE")


@pytest.fixture(scope="module")
def service(spark, tmp_path_factory):
    """The endpoint's service in-process (what the Thrift server calls): judged (data
    roots, no code on the server), each client session with the paper's tables and a
    stream over its scores."""
    base = tmp_path_factory.mktemp("counts")
    src = paper_stream_dir(base / "scores")
    schema = spark.read.parquet(str(src)).schema

    def setup(session) -> None:
        register_paper_tables(session)
        session.readStream.schema(schema).parquet(str(src)).createOrReplaceTempView(
            "scores_counted")

    svc = Service(spark, session_setup=setup, data_roots=[str(base)])
    svc.judge.prepare(spark)
    yield svc
    svc.shutdown()


@pytest.fixture(scope="module")
def handle(service):
    opened = service.OpenSession(tt.TOpenSessionReq(
        client_protocol=tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10, username="carol"))
    assert opened.status.statusCode == tt.TStatusCode.SUCCESS_STATUS, opened.status
    return opened.sessionHandle


def _judged(monkeypatch, counts: Counter) -> None:
    """Count the judge's Spark parses, and what they were of: the client's statement
    (``check`` with ``exact``) or a text ``spark.sql`` runs (the guard)."""
    from dfsql.server import judge as judge_module

    _counted(monkeypatch, counts, "spark parses", judge_module, "parse_plan")
    real = judge_module.Judge.check

    def check(self, spark, text: str, exact: bool = False) -> None:
        counts["of the statement" if exact else "of a text spark.sql runs"] += 1
        return real(self, spark, text, exact)

    monkeypatch.setattr(judge_module.Judge, "check", check)


def _run(service: Service, handle, statement: str) -> None:
    """ExecuteStatement, as a client's synchronous call makes it."""
    done = service.ExecuteStatement(tt.TExecuteStatementReq(
        sessionHandle=handle, statement=statement, runAsync=False))
    assert done.status.statusCode == tt.TStatusCode.SUCCESS_STATUS, done.status


def _assert_judged_once(judged: Counter) -> None:
    """The client's statement judged once, on one Spark parse; every other Spark parse
    the judge asks for is of a text dfsql built and ``spark.sql`` runs."""
    assert judged["of the statement"] == 1
    assert judged["spark parses"] == 1 + judged["of a text spark.sql runs"]


def test_a_windowed_statement_is_read_once(service, handle, monkeypatch) -> None:
    _run(service, handle, WINDOWED)  # loads every module the statement needs

    spark_parses: Counter = Counter()

    def run() -> None:
        _judged(monkeypatch, spark_parses)
        _run(service, handle, WINDOWED)

    counts = _count(monkeypatch, run)
    print("endpoint", dict(counts), dict(spark_parses))
    assert (counts["scan"], counts["lark"], counts["sqlglot"]) == (1, 1, 3)
    assert counts["render"] <= 8
    _assert_judged_once(spark_parses)


def test_create_streaming_query_is_read_once(service, handle, monkeypatch) -> None:
    from dfsql.continuous_queries import QUERIES

    spark_parses: Counter = Counter()

    def run() -> None:
        _judged(monkeypatch, spark_parses)
        _run(service, handle, CREATE)

    try:
        counts = _count(monkeypatch, run)
        assert "counted_live" in QUERIES.running
    finally:
        _run(service, handle, "STOP STREAMING QUERY counted_live")
    print("endpoint CREATE STREAMING QUERY", dict(counts), dict(spark_parses))
    assert (counts["scan"], counts["lark"], counts["sqlglot"]) == (1, 1, 3)
    assert counts["render"] <= 9
    _assert_judged_once(spark_parses)
