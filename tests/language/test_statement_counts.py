"""How often one windowed statement is scanned, parsed and rendered (issue #33, item 1).

A statement is read once: scanned once by :func:`dfsql.language.scan.scan`, each
extension region parsed once by the Lark grammar, each SELECT and each clause
expression parsed once by sqlglot; the shell hands the statement it parsed to
``dfsql.sql`` instead of the text. Counted with wrappers around the real functions:

* scans: :func:`dfsql.language.scan.scan` (``scan_text`` calls it), wherever bound;
* Lark parses: ``lark.Lark.parse``;
* sqlglot parses: ``sqlglot.parser.Parser.parse`` (``sqlglot.parse``, ``parse_one`` and
  ``maybe_parse`` of a string all end there);
* renders: ``sqlglot.exp.Expression.sql``.

Planning only (``dfsql.sql`` returns a lazy DataFrame); the shell also collects the rows
(and runs the replay, whose Spark work is in other processes).

Before (2a63c71), ``STATEMENT``: dfsql.sql 3 scans (the statement, then its ON and its
PROCESSING TIME expression again), 1 Lark parse, 3 sqlglot parses, 8 renders; the shell
7 scans, 2 Lark parses, 6 sqlglot parses, 15 renders (it parsed the text, then handed
the text to dfsql.sql). ``REGISTERED`` through dfsql.sql: 1 scan, 1 Lark parse, 5 sqlglot
parses (the planner's rewrite missed the parse-time one: ON and PROCESSING TIME parsed
again), 17 renders.
After: dfsql.sql and the shell alike 1 scan, 1 Lark parse, 3 sqlglot parses (the SELECT,
ON and PROCESSING TIME, each once), 8 renders: the shell hands dfsql.sql the statement
it parsed, the ON / PROCESSING TIME expressions are read from the statement's tokens,
and the planner takes the stages the parser made (and kept in the block) instead of
rewriting. ``REGISTERED``: 1 scan, 1 Lark parse, 3 sqlglot parses (the SELECT, and the
registration's two expressions, parsed once per registration and qualified as trees),
17 renders (the planner's rewrite with the defaults, from trees).
"""

from __future__ import annotations

import pytest
from in_process import shell_on

from tests.language.counts import _count

STATEMENT = ("SELECT key, SUM(value) AS total FROM count_scores GROUP BY key\n"
             "WINDOW FIXED(2 MINUTES) ON event_time\n"
             "PROCESSING TIME proc_time\n"
             "TRIGGER EVERY 1 MINUTE")
#: the same over a source registered with ON and PROCESSING TIME (its defaults fill them in)
REGISTERED = ("SELECT key, SUM(value) AS total FROM count_registered GROUP BY key\n"
              "WINDOW FIXED(2 MINUTES)\n"
              "TRIGGER EVERY 1 MINUTE")


@pytest.fixture(scope="module")
def count_scores(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW count_scores AS
        SELECT key, CAST(value AS BIGINT) AS value, CAST(event_time AS TIMESTAMP) AS event_time,
               CAST(proc_time AS TIMESTAMP) AS proc_time
        FROM VALUES ('a', 5, '2024-01-01 12:00:30', '2024-01-01 12:01:00'),
                    ('a', 7, '2024-01-01 12:01:10', '2024-01-01 12:02:30'),
                    ('b', 3, '2024-01-01 12:02:40', '2024-01-01 12:03:00')
        AS t(key, value, event_time, proc_time)""")
    import dfsql

    dfsql.register("count_registered", spark.table("count_scores"), event_time="event_time",
                   processing_time="proc_time")
    yield "count_scores"
    spark.catalog.dropTempView("count_scores")
    spark.catalog.dropTempView("count_registered")






def test_dfsql_sql_reads_the_statement_once(spark, count_scores, monkeypatch) -> None:
    import dfsql

    dfsql.sql(STATEMENT, spark)  # loads every module the statement needs
    counts = _count(monkeypatch, lambda: dfsql.sql(STATEMENT, spark))
    print("dfsql.sql", dict(counts))
    assert (counts["scan"], counts["lark"], counts["sqlglot"]) == (1, 1, 3)
    assert counts["render"] <= 8
    registered = _count(monkeypatch, lambda: dfsql.sql(REGISTERED, spark))
    print("dfsql.sql registered", dict(registered))
    assert (registered["scan"], registered["lark"], registered["sqlglot"]) == (1, 1, 3)
    assert registered["render"] <= 17
    again = _count(monkeypatch, lambda: dfsql.sql(REGISTERED, spark))
    assert again["sqlglot"] == 1  # the registration's expressions are parsed already


def test_the_shell_reads_the_statement_once(spark, count_scores, monkeypatch, capsys) -> None:
    shell = shell_on(spark)
    shell.statement(STATEMENT)
    capsys.readouterr()
    counts = _count(monkeypatch, lambda: shell.statement(STATEMENT))
    out = capsys.readouterr().out
    print("shell", dict(counts))
    assert "total" in out and "window_start" in out  # it ran, and printed its panes
    assert (counts["scan"], counts["lark"], counts["sqlglot"]) == (1, 1, 3)
    assert counts["render"] <= 8
