"""The --stream views a kept continuous query's record names: those the query reads
(docs/guides/streams.md#continuous-queries-as-statements: a restart registers them
again), read from the statement's facts. Each expected list is derived by hand from the
statement: the server's streams (in the order given) that the query names after FROM or
JOIN, or in WATERMARK FROM; a name only inside a string literal, a comment or a CTE's own
name in its scope is not a stream read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dfsql.language.continuous import parse_any, parse_continuous
from dfsql.server.state import StateDir
from dfsql.server.streams import StreamView

HEAD = "CREATE STREAMING QUERY q AS "
W = " GROUP BY k WINDOW FIXED(1 MINUTE) ON ts"
STREAMS = ("live", "other", "marks")

CASES = {
    "one stream": ("SELECT k, COUNT(*) AS n FROM live" + W, ["live"]),
    "a string literal names another": ("SELECT k, COUNT(*) AS n FROM live WHERE k <> "
                                       "'other'" + W, ["live"]),
    "a comment names another": ("SELECT k, COUNT(*) AS n -- from other\nFROM live" + W,
                                ["live"]),
    "quoted name": ("SELECT k, COUNT(*) AS n FROM `live`" + W, ["live"]),
    "a join of two, in the server's order": ("SELECT o.k AS k, COUNT(*) AS n FROM other o "
                                             "JOIN live l ON o.k = l.k GROUP BY o.k "
                                             "WINDOW FIXED(1 MINUTE) ON ts",
                                             ["live", "other"]),
    "watermark from a stream": ("SELECT k, COUNT(*) AS n FROM live" + W +
                                " WATERMARK FROM marks", ["live", "marks"]),
    "a cte named like a stream": ("WITH other AS (SELECT * FROM live) "
                                  "SELECT k, COUNT(*) AS n FROM other" + W, ["live"]),
    "no stream": ("SELECT k, COUNT(*) AS n FROM dims" + W, []),
}


class _Table:
    schema = type("Schema", (), {"json": lambda self: "{}"})()


class _Spark:
    """What keep asks of Spark: a stream view's schema (its text is not under test)."""

    def table(self, name: str) -> _Table:
        assert name in STREAMS, name
        return _Table()


def _kept(tmp_path: Path, stmt: object) -> list[str]:
    state = StateDir(tmp_path, [StreamView(s, f"/data/{s}", "json") for s in STREAMS])
    try:
        state.keep(stmt, "text", _Spark(), None)  # type: ignore[arg-type]
    finally:
        state.close()
    record = json.loads((tmp_path / "queries" / "q.json").read_text())
    return [s["name"] for s in record["streams"]]


@pytest.mark.parametrize("name", list(CASES))
def test_the_record_names_the_streams_the_query_reads(tmp_path: Path, name: str) -> None:
    query, expected = CASES[name]
    assert _kept(tmp_path, parse_any(HEAD + query)) == expected


def test_a_query_not_parsed_with_the_statement_is_read_too(tmp_path: Path) -> None:
    # ALTER keeps the statement as parse_continuous reads it: its query not yet parsed
    stmt = parse_continuous("ALTER STREAMING QUERY q AS SELECT k, COUNT(*) AS n FROM "
                            "other" + W)
    assert stmt is not None and stmt.statement is None
    assert _kept(tmp_path, stmt) == ["other"]
