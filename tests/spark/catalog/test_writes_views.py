"""Windowed results written and named (docs/reference.md#writing-results): CTAS in every form, INSERT,
CACHE TABLE, and persistent views kept in Spark's catalog.

A write stores exactly the rows the query returns alone: a replayed result its whole
changelog, retractions included. Figure 14's changelog (examples/paper/figures.json,
checked against the paper) is the reference: its twelve rows, ``-7 -10 +25`` among
them, and its signed totals summing to 51, the sum of the paper's ten values.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

import dfsql
from dfsql.errors import AnalysisError, DfsqlError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "paper"
FIG14 = "\n".join(
    line for line in (EXAMPLES / "fig14_sessions_retracting.sql").read_text().splitlines()
    if not line.startswith("--")).strip().rstrip(";")
FIG14_ROWS = next(f for f in json.loads((EXAMPLES / "figures.json").read_text())["figures"]
                  if f["name"] == "fig14_sessions_retracting")["expected"]
#: the paper's batch example, FIXED two-minute windows: 14, 22, 3 and 12 (Figure 6's input)
BATCH = "SELECT key, SUM(value) AS total FROM scores GROUP BY key WINDOW FIXED(2 MINUTES) ON event_time"
COMPOSED = f"""WITH s AS ({FIG14})
SELECT COUNT(*) AS sessions, SUM(total) AS grand FROM s WINDOW FIXED(10 MINUTES) ON window_end"""


def _fig14_changelog() -> list[tuple]:
    ts = ("window_start", "window_end", "emit_time")
    return sorted(tuple(datetime.strptime(r[c], "%Y-%m-%d %H:%M:%S") if c in ts else r[c]
                        for c in r) for r in FIG14_ROWS)


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def _over(table: str) -> str:
    """BATCH over a catalog table (a persistent view may not read the temp ``scores``)."""
    return BATCH.replace("FROM scores", f"FROM {table}")


@pytest.fixture()
def tables(spark, paper_tables):
    made: list[str] = []
    yield made
    for name in made:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.catalog.dropTempView(name)


def test_ctas_in_every_form_stores_the_whole_changelog(spark, tables):
    """CREATE TABLE … AS, … USING parquet AS, and CREATE OR REPLACE TABLE (which Spark's
    session catalog cannot do for a file table: dfsql drops and creates) each hold
    Figure 14's twelve rows, retractions included."""
    tables += ["w_plain", "w_parquet"]
    dfsql.sql(f"CREATE TABLE w_plain AS {FIG14}", spark)
    assert _rows(spark.table("w_plain")) == _fig14_changelog()
    dfsql.sql(f"CREATE TABLE w_parquet USING parquet AS {BATCH}", spark)
    assert sorted(r.total for r in spark.table("w_parquet").collect()) == [3, 12, 14, 22]
    dfsql.sql(f"CREATE OR REPLACE TABLE w_parquet USING parquet AS {FIG14}", spark)
    rows = _rows(spark.table("w_parquet"))
    assert rows == _fig14_changelog()
    retracted = [r[1] for r in rows if r[-1]]
    assert sorted(retracted) == [3, 5, 7, 10, 25]
    assert sum(-r[1] if r[-1] else r[1] for r in rows) == 51


def test_insert_into_and_overwrite(spark, tables):
    tables.append("w_ins")
    spark.sql("CREATE TABLE w_ins (key STRING, total BIGINT, window_start TIMESTAMP, "
              "window_end TIMESTAMP, pane_index BIGINT, pane_timing STRING, is_last BOOLEAN, "
              "emit_time TIMESTAMP, is_retraction BOOLEAN) USING parquet")
    dfsql.sql(f"INSERT INTO w_ins {FIG14}", spark)
    dfsql.sql(f"INSERT INTO TABLE w_ins ({FIG14})", spark)
    assert _rows(spark.table("w_ins")) == sorted(_fig14_changelog() * 2)
    dfsql.sql(f"INSERT OVERWRITE TABLE w_ins {FIG14}", spark)
    assert _rows(spark.table("w_ins")) == _fig14_changelog()


def test_cache_table_keeps_the_result_cached(spark, tables):
    tables += ["c_fig14", "c_lazy"]
    dfsql.sql(f"CACHE TABLE c_fig14 AS {FIG14}", spark)
    assert spark.catalog.isCached("c_fig14")
    assert _rows(spark.table("c_fig14")) == _fig14_changelog()
    dfsql.sql(f"CACHE LAZY TABLE c_lazy OPTIONS ('storageLevel' 'DISK_ONLY') AS {BATCH}", spark)
    assert spark.catalog.isCached("c_lazy")
    assert sorted(r.total for r in spark.table("c_lazy").collect()) == [3, 12, 14, 22]


def test_composition_cte_and_subquery_are_written_as_their_rows(spark, tables):
    """A windowed query over the retracting sessions sees the final two sessions (12 and
    39, docs/reference.md#emit): COUNT 2, SUM 51 — written as a CTE and as a subquery."""
    tables += ["w_comp", "w_sub"]
    dfsql.sql(f"CREATE TABLE w_comp AS {COMPOSED}", spark)
    assert [(r.sessions, r.grand) for r in spark.table("w_comp").collect()] == [(2, 51)]
    dfsql.sql(f"CREATE TABLE w_sub AS SELECT key, total FROM ({FIG14}) WHERE NOT is_retraction",
              spark)
    assert sorted(r.total for r in spark.table("w_sub").collect()) == [3, 5, 7, 10, 12, 25, 39]


def test_a_mistake_in_a_write_is_positioned_and_writes_nothing(spark, tables):
    tables.append("w_bad")
    bad = BATCH.replace("SUM(value)", "SUM(valu)")
    with pytest.raises(DfsqlError) as e:
        dfsql.sql(f"CREATE TABLE w_bad AS\n{bad}", spark)
    assert (e.value.line, e.value.column) == (2, 17) and "valu" in e.value.message
    assert not spark.catalog.tableExists("w_bad")


def test_a_mistake_around_a_windowed_subquery_is_where_the_user_wrote_it(spark, tables):
    """The statement around windowed blocks reaches Spark with each block replaced by its
    view, offsets kept: a mistake after the block, or in a CACHE TABLE's query, is at
    the user's line and column (``nope``: line 2, column 7 and column 8)."""
    tables.append("c_bad")
    with pytest.raises(DfsqlError) as e:
        dfsql.sql(f"SELECT * FROM ({BATCH}) t\nWHERE nope > 1", spark)
    assert (e.value.line, e.value.column) == (2, 7) and "nope" in e.value.message
    with pytest.raises(DfsqlError) as e:
        dfsql.sql(f"/* CACHE LAZY TABLE x */ CACHE TABLE c_bad AS\nSELECT nope FROM ({BATCH}) t",
                  spark)
    assert (e.value.line, e.value.column) == (2, 8) and "nope" in e.value.message
    assert not spark.catalog.tableExists("c_bad")


# --------------------------------------------------------------------------- persistent views


def test_a_persistent_view_is_the_windowed_query_replanned_on_each_read(spark, tables):
    """Over a catalog table: a row added after the view was made is in the next read
    (a second session of the same application reads the same view)."""
    tables += ["scores_tbl", "marks_tbl", "v_sessions", "v_totals"]
    spark.sql("CREATE TABLE scores_tbl USING parquet AS SELECT * FROM scores")
    spark.sql("CREATE TABLE marks_tbl USING parquet AS SELECT * FROM paper_watermarks")
    query = FIG14.replace("FROM scores", "FROM scores_tbl").replace(
        "FROM paper_watermarks", "FROM marks_tbl")
    dfsql.sql(f"CREATE VIEW v_sessions AS {query}", spark)
    assert _rows(dfsql.sql("SELECT * FROM v_sessions", spark)) == _fig14_changelog()
    other = spark.newSession()  # none of this session's temp views
    assert _rows(dfsql.sql("SELECT * FROM default.v_sessions", other)) == _fig14_changelog()
    # a view over the view; DESCRIBE shows dfsql's columns, SHOW CREATE TABLE its clauses
    dfsql.sql("CREATE VIEW v_totals AS SELECT SUM(CASE WHEN is_retraction THEN -total "
              "ELSE total END) AS net FROM v_sessions", spark)
    assert dfsql.sql("SELECT net FROM v_totals", spark).collect()[0].net == 51
    spark.sql("INSERT INTO scores_tbl SELECT 'k', 100, event_time, arrival_time FROM scores "
              "WHERE value = 9")
    assert dfsql.sql("SELECT net FROM v_totals", spark).collect()[0].net == 151
    described = [(r.col_name, r.data_type) for r in spark.sql("DESCRIBE v_sessions").collect()]
    assert described[:3] == [("key", "string"), ("total", "bigint"),
                             ("window_start", "timestamp")]
    assert ("is_retraction", "boolean") in described
    shown = dfsql.sql("SHOW CREATE TABLE v_sessions", spark).collect()[0][0]
    assert "WINDOW SESSIONS(GAP 1 MINUTE)" in shown and shown.startswith("CREATE VIEW")
    # the head read from tokens: a comment, odd whitespace, a quoted qualified name
    shown = dfsql.sql("-- SHOW CREATE TABLE v_totals\nshow  create\tTABLE default.`v_sessions`"
                      " ;", spark).collect()[0][0]
    assert shown.startswith("CREATE VIEW default.`v_sessions` AS\n")
    assert "WINDOW SESSIONS(GAP 1 MINUTE)" in shown
    assert {"v_sessions", "v_totals"} <= {r.tableName for r in
                                          spark.sql("SHOW TABLES").collect()}


def test_plain_spark_reading_a_windowed_view_gets_an_error_naming_dfsql(spark, tables):
    from pyspark.errors import PySparkException

    tables += ["scores_v1", "v_plain"]
    spark.sql("CREATE TABLE scores_v1 USING parquet AS SELECT * FROM scores")
    dfsql.sql(f"CREATE OR REPLACE VIEW v_plain AS {_over('scores_v1')}", spark)
    with pytest.raises(PySparkException) as e:
        spark.table("v_plain").collect()
    assert "v_plain is a dfsql view" in str(e.value) and "read it through dfsql" in str(e.value)
    with pytest.raises(PySparkException):
        spark.sql("SELECT COUNT(*) FROM v_plain").collect()


def test_a_view_that_would_read_itself_and_a_mistake_in_a_view_are_positioned(spark, tables):
    tables += ["scores_v2", "v_a", "v_b"]
    spark.sql("CREATE TABLE scores_v2 USING parquet AS SELECT * FROM scores")
    dfsql.sql(f"CREATE VIEW v_a AS {_over('scores_v2')}", spark)
    dfsql.sql("CREATE VIEW v_b AS SELECT * FROM v_a", spark)
    with pytest.raises(AnalysisError) as e:
        dfsql.sql("CREATE OR REPLACE VIEW v_a AS SELECT * FROM v_b", spark)
    assert "would read itself" in e.value.message and (e.value.line, e.value.column) == (1, 24)
    with pytest.raises(DfsqlError) as e3:  # a mistake in a view's windowed body
        dfsql.sql("CREATE VIEW v_bad AS\n" + _over("scores_v2").replace("SUM(value)",
                                                                        "SUM(valu)"), spark)
    assert (e3.value.line, e3.value.column) == (2, 17) and "valu" in e3.value.message
    assert not spark.catalog.tableExists("v_bad")
    with pytest.raises(DfsqlError) as e2:
        dfsql.sql("SELECT 1 AS one,\n  nope FROM v_a", spark)
    assert (e2.value.line, e2.value.column) == (2, 3)
    assert dfsql.sql("SELECT COUNT(*) AS n FROM v_a x WHERE x.total > 10",
                     spark).collect()[0].n == 3  # 14, 22 and 12


def test_a_persistent_view_may_not_read_a_temporary_one(spark, tables):
    """A persistent windowed view outlives the session, so reading a temp view (a
    registered source, the paper's ``scores``) or a WATERMARK FROM temp view is refused
    when it is created, at the temp view's name, as Spark refuses for its own views; a
    TEMP view over them is fine, and a CTE named like a temp view is not one."""
    query = ("SELECT key, SUM(value) AS total FROM {src} GROUP BY key "
             "WINDOW FIXED(2 MINUTES) ON event_time")
    with pytest.raises(AnalysisError) as e:
        dfsql.sql("CREATE VIEW v_over_temp AS\n" + query.format(src="scores"), spark)
    assert (e.value.line, e.value.column) == (2, 38)  # "scores" after FROM
    assert "would read scores, a temporary view" in e.value.message
    assert "TEMP VIEW" in e.value.hint
    tables += ["scores_v3", "v_temp_over_temp"]
    spark.sql("CREATE TABLE scores_v3 USING parquet AS SELECT * FROM scores")
    marks = ("SELECT key, SUM(value) AS total FROM scores_v3 GROUP BY key "
             "WINDOW FIXED(2 MINUTES) ON event_time WATERMARK FROM paper_watermarks "
             "PROCESSING TIME arrival_time")
    with pytest.raises(AnalysisError) as e:
        dfsql.sql("CREATE VIEW v_over_temp AS " + marks, spark)
    assert "would read paper_watermarks, a temporary view" in e.value.message
    assert spark.catalog.tableExists("v_over_temp") is False
    dfsql.sql("CREATE TEMP VIEW v_temp_over_temp AS " + query.format(src="scores"), spark)
    cte = ("WITH scores AS (SELECT * FROM scores_v3) " + query).format(src="scores")
    tables.append("v_cte")
    dfsql.sql("CREATE VIEW v_cte AS " + cte, spark)
    assert spark.catalog.tableExists("v_cte")


def test_a_view_whose_query_is_a_continuous_statement_is_refused(spark, tables):
    """A persistent view holds a query; a continuous-query statement as its body (here
    CREATE STREAMING QUERY around a windowed subquery) would start a stream as a side
    effect of CREATE VIEW: refused at the body's first word (column 24, after
    ``CREATE VIEW v_query AS ``), and neither the view nor a query is made."""
    tables += ["scores_v4", "v_query"]
    spark.sql("CREATE TABLE scores_v4 USING parquet AS SELECT * FROM scores")
    body = f"CREATE STREAMING QUERY q_in_view AS SELECT * FROM ({_over('scores_v4')})"
    with pytest.raises(AnalysisError) as e:
        dfsql.sql("CREATE VIEW v_query AS " + body, spark)
    assert (e.value.line, e.value.column) == (1, 24)
    assert e.value.message == "a view's query cannot be a continuous-query statement"
    assert not spark.catalog.tableExists("v_query")
    assert "q_in_view" not in [r.name for r in dfsql.sql("SHOW STREAMING QUERIES",
                                                         spark).collect()]
