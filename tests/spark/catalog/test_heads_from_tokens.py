"""What the Spark side reads of a statement's head or clause comes from the scanner's
tokens (issue #33, item 1): comments, quoted names, odd whitespace and a keyword inside
a string literal before the real one never fool it. No Spark session is needed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dfsql import warehouse as catalog
from dfsql.language.scan import scan_text, splice
from dfsql.language.statement import parse_statement
from dfsql.spark.catalog import writes
from dfsql.spark.explain import firings, watermark_trials
from dfsql.spark.stream import plan as streaming

WINDOWED = ("SELECT key, SUM(value) AS total FROM scores GROUP BY key "
            "WINDOW FIXED(2 MINUTES) ON event_time")


def _head(text: str):
    stmt = parse_statement(text)
    assert stmt.kind == "write", stmt.kind
    return stmt, writes._head(stmt)


@pytest.mark.parametrize("text,name,lazy,level", [
    ("CACHE TABLE c AS SELECT 1", "c", False, None),
    ("CACHE LAZY TABLE c_lazy OPTIONS ('storageLevel' 'DISK_ONLY') AS SELECT 1",
     "c_lazy", True, "DISK_ONLY"),
    ("/* CACHE TABLE decoy */ cache\n  lazy\tTABLE `my c` OPTIONS (\"x\" 'storageLevel', "
     "'STORAGELEVEL' = \"MEMORY_ONLY\") AS SELECT 'CACHE LAZY TABLE z' AS s",
     "`my c`", True, "MEMORY_ONLY"),
    ("-- storageLevel 'DISK_ONLY'\nCACHE TABLE c OPTIONS ('storageLevel' 'no level!') "
     f"AS {WINDOWED}", "c", False, None),
])
def test_a_cache_head(text, name, lazy, level):
    stmt, head = _head(text)
    assert head.cache and head.lazy is lazy and head.level == level and head.replace is None
    assert stmt.text[head.name[0]:head.name[1]] == name


@pytest.mark.parametrize("text,name,replace", [
    ("CREATE OR REPLACE TABLE t USING parquet AS SELECT 1", "t", "CREATE OR REPLACE"),
    ("replace  table\n db . `t x` AS SELECT 'CREATE OR REPLACE TABLE u'", "db . `t x`",
     "replace"),
    ("/* REPLACE TABLE decoy */ CREATE /* or */ OR\nREPLACE TABLE t AS " + WINDOWED, "t",
     "CREATE /* or */ OR\nREPLACE"),
    ("CREATE TABLE t COMMENT 'or replace' AS SELECT 1", "t", None),
    ("INSERT INTO t SELECT 'CACHE TABLE c' AS s", "", None),
])
def test_a_replace_head(text, name, replace):
    stmt, head = _head(text)
    assert not head.cache
    assert stmt.text[head.name[0]:head.name[1]] == name
    if replace is None:
        assert head.replace is None
    else:
        assert stmt.text[head.replace[0]:head.replace[1]].rstrip() == replace
        made = splice(stmt.text, [(*head.replace, "CREATE ")])
        assert len(made) == len(stmt.text)  # Spark's positions stay the user's
        assert [t.upper for t in scan_text(made).tokens[:2]] == ["CREATE", "TABLE"]


@pytest.mark.parametrize("text,ddl", [
    ("CREATE TABLE t (a INT)", True),
    ("  drop table t", True),
    ("-- a note\nALTER TABLE t ADD COLUMNS (b INT)", True),
    ("/* CREATE TABLE */ SELECT 1", False),
    ("SELECT 'DROP TABLE t'", False),
    ("INSERT INTO t VALUES (1)", False),
    ("", False),
    ("SELECT 'unterminated", False),
])
def test_ddl_is_the_first_word(text, ddl):
    assert catalog._is_ddl(text) is ddl
    if text and "unterminated" not in text:
        assert catalog._is_ddl(parse_statement(text)) is ddl


def test_a_definition_file_made_or_replace_and_if_not_exists():
    view = "CREATE VIEW `default`.`v` (\n  k)\nAS SELECT 'CREATE VIEW x' AS k"
    assert catalog._or_replace(view) == \
        "CREATE OR REPLACE VIEW `default`.`v` (\n  k)\nAS SELECT 'CREATE VIEW x' AS k"
    assert catalog._or_replace("/* x */ SELECT 1") == "/* x */ SELECT 1"
    table = ("CREATE TABLE spark_catalog.default.t (\n  a INT,\n  p STRING)\nUSING parquet\n"
             "COMMENT 'not PARTITIONED BY anything'")
    tokens = scan_text(table).tokens
    made = catalog._if_not_exists(table, tokens, "`default`.`t`")
    assert made.startswith("CREATE TABLE IF NOT EXISTS `default`.`t` (\n  a INT,")
    assert not catalog._partitioned(tokens)
    parted = table + "\nPARTITIONED BY (p)"
    assert catalog._partitioned(scan_text(parted).tokens)


def test_explain_firings_errors_point_at_firings():
    text = f"/* EXPLAIN FIRINGS */ EXPLAIN\n  FIRINGS {WINDOWED} WHERE key = 'EXPLAIN FIRINGS'"
    stmt = parse_statement(text)
    p = stmt.source.pos(firings.firings_offset(stmt))
    assert (p.line, p.column) == (2, 3)
    assert stmt.firings_where[1] == "key = 'EXPLAIN FIRINGS'"
    assert stmt.firings_predicate.sql("spark") == "key = 'EXPLAIN FIRINGS'"


@pytest.mark.parametrize("tail,at", [
    ("\nORDER BY total", (2, 1)),
    ("\nLIMIT 3", (2, 1)),
    (" /* ORDER BY key */\n  LIMIT 3", (2, 3)),
])
def test_a_streams_order_mistake_is_at_the_word_as_written(tail, at):
    text = ("SELECT key, SUM(value) AS total FROM scores WHERE key <> 'order by' "
            "AND `limit` > 0 GROUP BY key WINDOW FIXED(2 MINUTES) ON event_time" + tail)
    stmt = parse_statement(text)
    plan = SimpleNamespace(block=stmt.blocks[-1], stmt=stmt, src=stmt.source)
    p = streaming._first_word(plan, ("ORDER BY", "LIMIT", "DISTINCT", "OVER"))
    assert (p.line, p.column) == at


def test_a_windowed_inner_blocks_words_are_not_the_outer_blocks():
    inner = WINDOWED + " ORDER BY total LIMIT 2"
    text = (f"SELECT key, COUNT(*) AS n FROM ({inner}) GROUP BY key "
            "WINDOW FIXED(10 MINUTES) ON window_end")
    stmt = parse_statement(text)
    plan = SimpleNamespace(block=stmt.blocks[-1], stmt=stmt, src=stmt.source)
    assert streaming._first_word(plan, ("ORDER BY", "LIMIT")) is None
    plan = SimpleNamespace(block=stmt.blocks[0], stmt=stmt, src=stmt.source)
    assert streaming._first_word(plan, ("ORDER BY", "LIMIT")).offset == text.index("ORDER")


@pytest.mark.parametrize("clause,said", [
    ("WATERMARK FROM marks", "FROM marks"),
    ("WATERMARK   PERCENTILE\n 99 ", "PERCENTILE 99"),
    ("WATERMARK FROM `emit trigger`", "FROM `emit trigger`"),
    ("WATERMARK DELAY 30 SECONDS /* note */", "DELAY 30s"),  # a comment: the clause's str
])
def test_the_querys_own_watermark_as_written(clause, said):
    text = (f"SELECT key, SUM(value) AS total FROM scores GROUP BY key "
            f"WINDOW FIXED(2 MINUTES) ON event_time {clause} PROCESSING TIME arrival_time "
            "TRIGGER AT WATERMARK")
    stmt = parse_statement(text)
    block = stmt.blocks[-1]
    plan = SimpleNamespace(block=block, stmt=stmt, src=stmt.source, clauses=block.clauses,
                           registry={})
    assert watermark_trials._own_label(plan) == f"{said} (the query's)"
