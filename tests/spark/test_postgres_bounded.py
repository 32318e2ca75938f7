"""Bounded reads and writes of PostgreSQL tables named ``NAME.schema.table``
(docs/guides/databases.md#bounded-reads-and-writes), against a real server.

Expected rows are the paper's (examples/paper/figures.json): a CREATE TABLE … AS of a
figure's query holds the figure's changelog, retractions included, as a Spark table
would; read back with SELECT it is the figure's rows again."""

from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pytest

import dfsql
from dfsql.connections import CONNECTIONS
from dfsql.errors import DfsqlError
from tests.paper import FIGURES, PAPER
from tests.postgres import running

COLUMNS = ["key", "total", "window_start", "window_end", "pane_index", "pane_timing",
           "is_last", "emit_time", "is_retraction"]
FIG14 = FIGURES["fig14_sessions_retracting"]
UTC = timezone.utc
#: the PostgreSQL types of Figure 14's columns (docs/guides/databases.md's mapping)
FIG14_TYPES = [("key", "text"), ("total", "bigint"),
               ("window_start", "timestamp with time zone"),
               ("window_end", "timestamp with time zone"), ("pane_index", "bigint"),
               ("pane_timing", "text"), ("is_last", "boolean"),
               ("emit_time", "timestamp with time zone"), ("is_retraction", "boolean")]


def _ts(v, tz=None):
    return None if v is None else datetime.strptime(v, "%Y-%m-%d %H:%M:%S").replace(tzinfo=tz)


def _rows(fig: dict, tz=None) -> list[tuple]:
    """The figure's rows, sorted (a table's rows come in no order)."""
    return sorted((tuple(_ts(r[c], tz) if c in ("window_start", "window_end", "emit_time")
                         else r[c] for c in COLUMNS) for r in fig["expected"]), key=repr)


@pytest.fixture(scope="module")
def pg():
    with running() as server:
        dfsql.connection("bounded_db", server.url())
        yield server
        CONNECTIONS.remove("bounded_db")


def _table(pg, name: str) -> tuple[list[tuple], list[tuple]]:
    """The table's columns (name, type) and its rows, as PostgreSQL has them."""
    with pg.connect() as c:
        cols = c.execute("SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM "
                         "pg_attribute a WHERE a.attrelid = %s::regclass AND a.attnum > 0 "
                         "ORDER BY a.attnum", (name,)).fetchall()
        rows = c.execute(f"SELECT * FROM {name}").fetchall()
    return [tuple(r) for r in cols], sorted((tuple(r) for r in rows), key=repr)


def _drop(pg, *names: str) -> None:
    with pg.connect() as c:
        for name in names:
            c.execute(f"DROP TABLE IF EXISTS {name}")


def test_create_table_as_a_figure_then_select_it_back(spark, paper_tables, pg):
    _drop(pg, "public.fig14")
    dfsql.sql(f"CREATE TABLE bounded_db.public.fig14 AS {FIG14['query']}", spark).collect()
    cols, rows = _table(pg, "public.fig14")
    assert cols == FIG14_TYPES
    assert rows == _rows(FIG14, UTC)  # the changelog, its retractions included
    assert sum(r[-1] for r in rows) == sum(r["is_retraction"] for r in FIG14["expected"]) > 0
    with pg.connect() as c:  # a changelog repeats its windows: no primary key
        assert c.execute("SELECT count(*) FROM pg_index WHERE indrelid = "
                         "'public.fig14'::regclass").fetchone() == (0,)
    back = dfsql.sql("SELECT * FROM bounded_db.public.fig14", spark)
    assert back.columns == COLUMNS
    assert sorted((tuple(r) for r in back.collect()), key=repr) == _rows(FIG14)
    # the rows' generated view went once the statement was planned
    assert not [r for r in spark.sql("SHOW VIEWS").collect()
                if r.viewName.startswith("__dfsql_database")]


def test_insert_into_appends_a_second_figure(spark, paper_tables, pg):
    _drop(pg, "public.fig14_both")
    discarding = FIGURES["fig14_sessions_discarding"]
    dfsql.sql(f"CREATE TABLE bounded_db.public.fig14_both AS {FIG14['query']}", spark)
    dfsql.sql(f"INSERT INTO bounded_db.public.fig14_both {discarding['query']}", spark)
    _, rows = _table(pg, "public.fig14_both")
    assert rows == sorted(_rows(FIG14, UTC) + _rows(discarding, UTC), key=repr)


def test_a_windowed_query_reads_a_database_table(spark, paper_tables, pg):
    """The paper's events copied into PostgreSQL by a plain CREATE TABLE … AS, then
    Figure 14's query over that table (aliased, qualified columns): the figure's rows."""
    _drop(pg, "public.events")
    dfsql.sql("CREATE TABLE bounded_db.public.events AS SELECT * FROM scores", spark)
    with pg.connect() as c:
        assert c.execute("SELECT count(*) FROM public.events").fetchone() == (
            len(pd.read_csv(PAPER / "events.csv")),)
    query = FIG14["query"].replace("FROM scores", "FROM bounded_db.public.events AS e")
    got = dfsql.sql(query.replace("SUM(value)", "SUM(e.value)"), spark).collect()
    assert sorted((tuple(r) for r in got), key=repr) == _rows(FIG14)
    joined = dfsql.sql("SELECT count(*) AS n FROM bounded_db.public.events JOIN scores "
                       "USING (key, value, event_time, arrival_time)", spark).collect()
    assert joined[0].n == len(pd.read_csv(PAPER / "events.csv"))


def test_a_spark_catalog_name_stays_sparks(spark, pg):
    dfsql.sql("CREATE TABLE spark_catalog.default.bounded_spark USING parquet AS "
              "SELECT 1 AS a", spark)
    try:
        got = dfsql.sql("SELECT a FROM spark_catalog.default.bounded_spark", spark).collect()
        assert [r.a for r in got] == [1]
    finally:
        spark.sql("DROP TABLE IF EXISTS spark_catalog.default.bounded_spark")


@pytest.mark.parametrize("sql,at,says", [
    # a connection not named: at the name, the known ones in the hint
    ("SELECT *\nFROM nowhere.public.fig14", (2, 6), "nowhere is not a connection"),
    ("SELECT * FROM bounded_db.public.no_such", (1, 15),
     "bounded_db.public.no_such is not a table"),
    ("CREATE TABLE nowhere.public.t AS SELECT 1 AS a", (1, 14), "nowhere is not a connection"),
    ("CREATE OR REPLACE TABLE bounded_db.public.t AS SELECT 1 AS a", (1, 1),
     "written only by CREATE TABLE"),
])
def test_a_bad_name_is_a_positioned_error(spark, paper_tables, pg, sql, at, says):
    with pytest.raises(DfsqlError) as info:
        dfsql.sql(sql, spark)
    assert (info.value.line, info.value.column) == at
    assert says in info.value.message


def test_create_refuses_an_existing_table_and_writes_nothing(spark, paper_tables, pg):
    _drop(pg, "public.taken")
    with pg.connect() as c:
        c.execute("CREATE TABLE public.taken (key text)")
        c.execute("INSERT INTO public.taken VALUES ('kept')")
    with pytest.raises(DfsqlError) as info:
        dfsql.sql(f"CREATE TABLE bounded_db.public.taken AS\n{FIG14['query']}", spark)
    assert (info.value.line, info.value.column) == (1, 14)
    assert "already exists" in info.value.message
    assert _table(pg, "public.taken") == ([("key", "text")], [("kept",)])


def test_insert_refuses_other_columns_and_writes_nothing(spark, paper_tables, pg):
    _drop(pg, "public.other")
    with pg.connect() as c:
        c.execute("CREATE TABLE public.other (key text, total integer)")
    with pytest.raises(DfsqlError) as info:
        dfsql.sql("INSERT INTO bounded_db.public.other SELECT key, SUM(value) AS total "
                  "FROM scores GROUP BY key", spark)
    assert (info.value.line, info.value.column) == (1, 13)
    assert "other columns" in info.value.message
    assert "total bigint" in info.value.hint
    assert _table(pg, "public.other")[1] == []


def test_no_password_in_an_error(spark, pg):
    secret = "pw-not-to-be-shown"
    with pg.connect() as c:
        c.execute("DO $$ BEGIN CREATE ROLE reader LOGIN PASSWORD 'right-one'; "
                  "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    dfsql.connection("bounded_bad", pg.url(user="reader"), password=secret)
    try:
        with pytest.raises(DfsqlError) as info:
            dfsql.sql("SELECT * FROM bounded_bad.public.fig14", spark)
    finally:
        CONNECTIONS.remove("bounded_bad")
    assert "bounded_bad" in str(info.value)
    assert secret not in str(info.value) and secret not in str(info.value.hint)
    assert (info.value.line, info.value.column) == (1, 15)


def test_backfill_from_a_database_table(spark, paper_tables, pg, tmp_path):
    """The paper's rows that arrived before 12:05 as a PostgreSQL table, the rest as a
    stream: the query backfilled from the table emits Figure 14's rows (as
    tests/spark/stream/test_backfill.py's directory of the same cut does)."""
    from dfsql.continuous_queries import QUERIES
    from tests.spark.feeds import split_history as _split

    frame = pd.read_csv(PAPER / "events.csv", parse_dates=["event_time", "arrival_time"])
    for col in ("event_time", "arrival_time"):
        frame[col] = frame[col].dt.tz_localize("UTC")
    cut = int((frame["arrival_time"] < pd.Timestamp("2015-09-01 12:05:00", tz="UTC")).sum())
    _split(spark, frame, cut, tmp_path / "live", "bounded_live", "bounded_history")
    _drop(pg, "public.history")
    dfsql.sql("CREATE TABLE bounded_db.public.history AS SELECT * FROM bounded_history", spark)
    spark.catalog.dropTempView("bounded_history")  # the database's rows, nothing else
    out = tmp_path / "panes"
    query = FIG14["query"].replace("FROM scores", "FROM bounded_live")
    try:
        dfsql.sql(f"CREATE STREAMING QUERY bounded_backfilled INTO DIRECTORY '{out}' "
                  f"BACKFILL FROM bounded_db.public.history AS {query}", spark)
        QUERIES.running["bounded_backfilled"].query.processAllAvailable()
    finally:
        dfsql.sql("STOP STREAMING QUERY bounded_backfilled", spark)
        spark.catalog.dropTempView("bounded_live")
        spark.catalog.dropTempView("bounded_live_all")
    got = spark.read.parquet(str(out)).select(*COLUMNS).collect()
    assert sorted((tuple(r) for r in got), key=repr) == _rows(FIG14)


def test_backfill_from_a_missing_database_table_is_positioned(spark, paper_tables, pg):
    spark.readStream.schema(spark.table("scores").schema).parquet(
        str(PAPER)).createOrReplaceTempView("bounded_stream")
    query = FIG14["query"].replace("FROM scores", "FROM bounded_stream")
    try:
        with pytest.raises(DfsqlError) as info:
            dfsql.sql("CREATE STREAMING QUERY bounded_nothing\nBACKFILL FROM "
                      f"bounded_db.public.no_history AS {query}", spark)
    finally:
        spark.catalog.dropTempView("bounded_stream")
    assert (info.value.line, info.value.column) == (2, 15)
    assert "bounded_db.public.no_history is not a table" in info.value.message
    assert [r.name for r in dfsql.sql("SHOW STREAMING QUERIES", spark).collect()] == []
