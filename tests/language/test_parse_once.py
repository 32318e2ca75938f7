"""A statement is scanned once and its SELECTs parsed once (issue #22, item 2)."""

from __future__ import annotations

import pytest
import sqlglot

from dfsql.errors import DfsqlError
from dfsql.language import parse_any, parse_statement
from dfsql.language import scan as scan_module
from dfsql.language import statement as statement_module
from dfsql.language.continuous import ContinuousStatement, parse_continuous, string_literal
from dfsql.language.rewrite import rewrite

WINDOWED = ("SELECT k, COUNT(*) AS n FROM (SELECT k, SUM(v) AS v FROM t GROUP BY k "
            "WINDOW FIXED(1 MINUTE) ON ts) GROUP BY k WINDOW GLOBAL")
TEXTS = [
    "SHOW STREAMING QUERIES",
    "STOP STREAMING QUERY q",
    "START STREAMING QUERY q",
    "CREATE STREAMING QUERY q AS " + WINDOWED,
    "SELECT 1",
    WINDOWED,
    "EXPLAIN " + WINDOWED,
    "SHOW STREAMING x",
    "SELECT (1",
    "SELECT k FROM t WINDOW FIXED(1 MINUTE) ON ts",
]


def _either(text: str):
    continuous = parse_continuous(text)
    return continuous if continuous is not None else parse_statement(text)


@pytest.mark.parametrize("text", TEXTS)
def test_parse_any_is_continuous_else_statement(text: str) -> None:
    def outcome(parse):
        try:
            return parse(text)
        except DfsqlError as e:
            return type(e), str(e)

    assert outcome(parse_any) == outcome(_either)


def test_parse_any_scans_once(monkeypatch) -> None:
    calls = []
    real = scan_module.scan

    def counting(src):
        calls.append(src.text)
        return real(src)

    monkeypatch.setattr(scan_module, "scan", counting)
    got = parse_any("CREATE STREAMING QUERY q AS " + WINDOWED)
    assert isinstance(got, ContinuousStatement) and len(calls) == 1
    calls.clear()
    stmt = parse_any(WINDOWED)
    assert len(calls) == 1 and len(stmt.blocks) == 2


def test_each_select_is_parsed_once(monkeypatch) -> None:
    """The planner's variants of a block's rewrite start from the SELECT parsed with the
    statement: sqlglot parses each block's text once."""
    parsed = []
    real = sqlglot.parse_one

    def counting(sql, *args, **kwargs):
        parsed.append(sql)
        return real(sql, *args, **kwargs)

    monkeypatch.setattr(sqlglot, "parse_one", counting)
    stmt = statement_module.parse_statement(WINDOWED)
    for b in stmt.blocks:
        rewrite(b, stmt.source, changelog=True)
        rewrite(b, stmt.source, late_rows=True)
    blocks = [b.sql for b in stmt.blocks]
    assert [s for s in parsed if s in blocks] == blocks


@pytest.mark.parametrize("path", ["/data/panes", "/tmp/it's", "C:\\panes\\q1"])
def test_a_path_written_back_reads_as_itself(path: str) -> None:
    """ALTER writes the changed query's CREATE statement with the query's directory and
    checkpoint as literals; the parser reads each back as the same path."""
    stmt = parse_continuous(f"CREATE STREAMING QUERY q CHECKPOINT {string_literal(path)} "
                            f"INTO DIRECTORY {string_literal(path)} AS SELECT 1")
    assert stmt is not None and (stmt.path, stmt.checkpoint) == (path, path)
