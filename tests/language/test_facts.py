"""The tables a statement reads, answered once (docs/reference.md#sources):
:mod:`dfsql.language.facts` (a query's tree) and
:mod:`dfsql.language.statement_facts` (a statement, its clauses included, recorded on the
statement as ``facts``). Each expected tuple is derived by hand from the statement:
the names after FROM and JOIN (subqueries and CTE bodies included), a CTE's own name
not one where it is in scope, ``WATERMARK FROM`` and ``BACKFILL FROM`` read, ``LATE ROWS
INTO`` written. A second text-level walk of table names in ``dfsql/`` fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot

from dfsql.language import facts
from dfsql.language.continuous import parse_any
from dfsql.language.statement import parse_statement

PACKAGE = Path(__file__).resolve().parents[2] / "dfsql"

W = " GROUP BY k WINDOW FIXED(1 MINUTE) ON ts"

TREES = {
    "plain": ("SELECT k, v FROM events", ("events",)),
    "qualified": ("SELECT * FROM db.events AS e", ("db.events",)),
    "join": ("SELECT * FROM a JOIN b ON a.k = b.k LEFT JOIN c USING (k)", ("a", "b", "c")),
    "comma join, each once": ("SELECT * FROM a, b, a AS again", ("a", "b")),
    "subquery": ("SELECT * FROM (SELECT k FROM inner_t) AS s WHERE k IN "
                 "(SELECT k FROM keys_t)", ("inner_t", "keys_t")),
    # the CTE named like a table shadows it in the main query; its body reads the table
    "cte shadowing": ("WITH events AS (SELECT * FROM events WHERE v > 0) "
                      "SELECT * FROM events", ("events",)),
    "cte not a table": ("WITH x AS (SELECT * FROM raw) SELECT * FROM x JOIN dims d "
                        "ON x.k = d.k", ("raw", "dims")),
    # a later CTE sees an earlier one; the earlier one does not see the later
    "ctes in order": ("WITH a AS (SELECT * FROM b), b AS (SELECT * FROM a) "
                      "SELECT * FROM b", ("b",)),
    "parquet path": ("SELECT * FROM parquet.`/data/events`", ("parquet.`/data/events`",)),
}


@pytest.mark.parametrize("name", list(TREES))
def test_tables_read_of_a_query(name: str) -> None:
    sql, expected = TREES[name]
    assert facts.tables_read(sqlglot.parse_one(sql, read="spark")) == expected


STATEMENTS = {
    "windowed": ("SELECT k, COUNT(*) AS n FROM events" + W, ("events",)),
    "windowed over a join": ("SELECT e.k AS k, COUNT(*) AS n FROM events e JOIN dims d "
                             "ON e.k = d.k GROUP BY e.k WINDOW FIXED(1 MINUTE) ON ts",
                             ("events", "dims")),
    "watermark from marks": ("SELECT k, COUNT(*) AS n FROM events" + W +
                             " WATERMARK FROM marks", ("events", "marks")),
    # LATE ROWS INTO names a view the query writes: not read
    "late rows into": ("SELECT k, COUNT(*) AS n FROM events" + W +
                       " ALLOWED LATENESS 1 MINUTE LATE ROWS INTO v", ("events",)),
    # a persistent windowed view's body reading another view: the other view is read
    "view reading a view": ("CREATE VIEW outer_v AS SELECT k, COUNT(*) AS n FROM inner_v" + W,
                            ("inner_v",)),
    "cte over a windowed block": ("WITH w AS (SELECT k, COUNT(*) AS n FROM events" + W +
                                  ") SELECT * FROM w", ("events",)),
}


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_tables_read_of_a_statement(name: str) -> None:
    sql, expected = STATEMENTS[name]
    assert parse_statement(sql).facts.reads == expected


def test_backfill_from_history_is_read() -> None:
    stmt = parse_any("CREATE STREAMING QUERY q INTO DIRECTORY '/tmp/out' "
                     "BACKFILL FROM history AS SELECT k, COUNT(*) AS n FROM live" + W +
                     " WATERMARK FROM marks")
    assert stmt.facts.reads == ("live", "marks", "history")
    assert stmt.facts.history == ("history",)


def test_the_clauses_tables_are_named_where_written() -> None:
    # what the judge checks by name: each WATERMARK FROM and TRY … FROM table, at the
    # offset of its name in the text as written (after the FROM that follows the clause)
    sql = ("EXPLAIN WATERMARK SELECT k, COUNT(*) AS n FROM events" + W +
           " WATERMARK FROM marks TRY DELAY 1 MINUTE, FROM other_marks")
    stmt = parse_statement(sql)
    assert stmt.facts.named == (("marks", sql.index("marks")),
                                ("other_marks", sql.index("other_marks")))
    assert stmt.facts.reads == ("events", "marks", "other_marks")


def test_the_facts_are_found_once() -> None:
    stmt = parse_statement("SELECT k, COUNT(*) AS n FROM events" + W)
    assert stmt.facts is stmt.facts


def test_direct_relations_are_the_from_and_joins_only() -> None:
    tree = sqlglot.parse_one("WITH c AS (SELECT * FROM x) SELECT * FROM a AS p JOIN c "
                             "JOIN b ON true WHERE k IN (SELECT k FROM s)", read="spark")
    assert facts.direct_relations(tree) == [("a", "p"), ("b", "b")]


#: the homes of a walk over a tree's table nodes: the facts, and the rewrite that
#: substitutes views for tables (it reads no names of its own: it asks the facts)
WALKS = re.compile(r"find_all\(\s*exp\.Table\b|isinstance\([^)]*exp\.Table\b")
HOMES = {"language/facts.py"}


def test_no_second_walk_of_table_names() -> None:
    found = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if WALKS.search(p.read_text()))
    assert set(found) <= HOMES, found


def test_the_former_readers_ask_the_facts() -> None:
    readers = ["language/registered.py", "language/rewrite.py", "language/stages.py",
               "spark/stream/backfill.py"]
    for r in readers:
        assert "from dfsql.language.facts import" in (PACKAGE / r).read_text(), r
    # a statement's tables, read from its facts: the server's stream record (once a scan
    # of the query's word tokens) and the judge's clause tables (once a FROM search)
    for r, asked in (("server/state.py", "stmt.facts.reads"),
                     ("server/judge.py", "stmt.facts.named")):
        assert asked in (PACKAGE / r).read_text(), r
    assert "scan_text" not in (PACKAGE / "server/state.py").read_text()


#: a search of a statement's tokens for the name after FROM: the parser's (language/)
#: and the persistent views' expansion, which runs before the parse (its docstring says
#: why it cannot read the facts); anywhere else it is a second answer
FROM_SEARCH = re.compile(r"""is_word\(\s*["']FROM["']""")
FROM_HOMES = ("language/", "spark/catalog/views.py")


def _from_searches(root: Path) -> list[str]:
    return sorted(rel for p in root.rglob("*.py")
                  if not (rel := p.relative_to(root).as_posix()).startswith(FROM_HOMES)
                  and FROM_SEARCH.search(p.read_text()))


def test_no_token_search_for_tables_outside_the_parser() -> None:
    assert _from_searches(PACKAGE) == []


def test_the_token_search_guard_sees_a_planted_one(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "door.py").write_text("ok = t.is_word('FROM')\n")
    (tmp_path / "language").mkdir()
    (tmp_path / "language" / "parse.py").write_text("ok = t.is_word('FROM')\n")
    assert _from_searches(tmp_path) == ["server/door.py"]
