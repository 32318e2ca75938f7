"""ALTER STREAMING QUERY of a query into a PostgreSQL table or changelog
(docs/guides/databases.md): the table restated in one transaction at the frontier — the
old query's current rows of the windows it still holds retracted, the new query's
current rows written — then the new query's panes, its progress ids going on from the
old one's.

Expected rows are the paper's by hand, as tests/spark/stream/test_alter.py derives them
for a directory: Figure 14's query (sessions, GAP 1 MINUTE) has read the rows that arrived
up to 12:06:20, its table [12:00:30,12:01:30) 5, [12:02:10,12:03:10) 7 and
[12:03:20,12:05:00) 10; the gap widened to 5 minutes, the 5, 7, 3, 4 and 3 are one
session [12:00:30,12:09:00) of 22 (RESTATED at 12:06:20); with every row, one session
[12:00:30,12:12:50) of 51; changed back to GAP 1 MINUTE over every row, the paper's LATE
39 [12:00:30,12:05:00) and 12 [12:06:30,12:08:50)."""

from __future__ import annotations

import shutil

import pytest

import dfsql
from dfsql.connections import CONNECTIONS
from dfsql.errors import DfsqlError
from dfsql.spark.postgres_tables import read_table
from tests.postgres import running
from tests.spark.feeds import FIG14, GAP5
from tests.spark.feeds import t as _t


@pytest.fixture(scope="module")
def pg():
    with running() as server:
        yield server


@pytest.fixture
def named(pg):
    dfsql.connection("alter_db", pg.url())
    yield "alter_db"
    CONNECTIONS.remove("alter_db")


def _catch_up(name: str) -> None:
    from dfsql.continuous_queries import QUERIES

    QUERIES.running[name].query.processAllAvailable()


def _more_files(paper_live) -> None:
    for f in sorted((paper_live.parent / "all").glob("*.parquet"))[3:]:
        shutil.copy2(f, paper_live / f.name)


def _table(pg, table: str) -> list[tuple]:
    with pg.connect() as c:
        return [tuple(r) for r in c.execute(
            "SELECT key, total, window_start AT TIME ZONE 'UTC', window_end AT TIME ZONE "
            f"'UTC', pane_index, pane_timing FROM public.{table} ORDER BY window_start")]


def _progress(pg, table: str) -> int:
    with pg.connect() as c:
        return c.execute("SELECT batch_id FROM public.dfsql_progress WHERE target = %s",
                         (table,)).fetchone()[0]


def _live(query: str) -> str:
    return query.replace("FROM scores", "FROM scores_live")


def test_a_database_table_is_restated_in_one_transaction_and_goes_on(spark, paper_live, pg,
                                                                      named):
    dfsql.sql(f"CREATE STREAMING QUERY gap_pg INTO TABLE alter_db.public.gap AS "
              f"{_live(FIG14)}", spark)
    try:
        _catch_up("gap_pg")
        assert [r[1] for r in _table(pg, "gap")] == [5, 7, 10]
        before = _progress(pg, "gap")
        dfsql.sql(f"ALTER STREAMING QUERY gap_pg AS {_live(GAP5)}", spark)
        _catch_up("gap_pg")
        assert _table(pg, "gap") == [("k", 22, _t("12:00:30"), _t("12:09:00"), 0, "RESTATED")]
        # the new version's first batch went on from the old one's last id
        assert _progress(pg, "gap") == before + 1
        _more_files(paper_live)
        _catch_up("gap_pg")
        assert _table(pg, "gap") == [("k", 51, _t("12:00:30"), _t("12:12:50"), 0, "EARLY")]
        dfsql.sql(f"ALTER STREAMING QUERY gap_pg AS {_live(FIG14)}", spark)
        _catch_up("gap_pg")
        assert [r[:4] for r in _table(pg, "gap")] == [
            ("k", 39, _t("12:00:30"), _t("12:05:00")), ("k", 12, _t("12:06:30"),
                                                        _t("12:08:50"))]
        shown = dfsql.sql("SHOW STREAMING QUERIES", spark).collect()[0]
        assert shown.sink == "table alter_db.public.gap"
        assert shown.versions.startswith("v1 from the start; v2 from 2015-09-01 12:06:20")
    finally:
        dfsql.sql("STOP STREAMING QUERY gap_pg", spark)


def _signed(rows) -> dict:
    sums: dict = {}
    for r in rows:
        k = (r.key, r.window_start, r.window_end)
        sums[k] = sums.get(k, 0) + (-r.total if r.is_retraction else r.total)
    return {k: v for k, v in sums.items() if v}


def test_a_changelog_gets_the_retractions_and_the_restated_rows(spark, paper_live, pg,
                                                                 named):
    """The old query's three live sessions retracted at 12:06:20 as the changelog holds
    them (Figure 14's rows: 5 ON_TIME, 7 and 10 EARLY), the new one's session of 22 RESTATED, in the new version's first batch; every
    row appended, so the signed sum per window is the new query's."""
    dfsql.sql(f"CREATE STREAMING QUERY gap_log INTO CHANGELOG alter_db.public.gap_log AS "
              f"{_live(FIG14)}", spark)
    try:
        _catch_up("gap_log")
        before = read_table(spark, CONNECTIONS.named("alter_db"), "public",
                            "gap_log").collect()
        assert sorted(_signed(before).values()) == [5, 7, 10]
        dfsql.sql(f"ALTER STREAMING QUERY gap_log AS {_live(GAP5)}", spark)
        _catch_up("gap_log")
        now = read_table(spark, CONNECTIONS.named("alter_db"), "public",
                         "gap_log").collect()
        first = max(r.batch_id for r in before) + 1
        restated = sorted(((r.total, r.window_start, r.pane_timing, r.emit_time,
                            r.is_retraction) for r in now if r.batch_id == first),
                          key=repr)
        assert restated == sorted([
            (5, _t("12:00:30"), "ON_TIME", _t("12:06:20"), True),
            (7, _t("12:02:10"), "EARLY", _t("12:06:20"), True),
            (10, _t("12:03:20"), "EARLY", _t("12:06:20"), True),
            (22, _t("12:00:30"), "RESTATED", _t("12:06:20"), False)], key=repr)
        # in the batch, the retractions come before the row that restates them
        order = [r.is_retraction for r in sorted(now, key=lambda r: r.batch_row)
                 if r.batch_id == first]
        assert order == [True, True, True, False]
        assert _signed(now) == {("k", _t("12:00:30"), _t("12:09:00")): 22}
        _more_files(paper_live)
        _catch_up("gap_log")
        assert _signed(read_table(spark, CONNECTIONS.named("alter_db"), "public",
                                  "gap_log").collect()) == {
            ("k", _t("12:00:30"), _t("12:12:50")): 51}
    finally:
        dfsql.sql("STOP STREAMING QUERY gap_log", spark)


def test_a_query_that_does_not_retract_is_refused_and_runs_on(spark, paper_live, pg, named):
    from dfsql.continuous_queries import QUERIES

    dfsql.sql(f"CREATE STREAMING QUERY gap_kept INTO TABLE alter_db.public.kept AS "
              f"{_live(FIG14)}", spark)
    try:
        _catch_up("gap_kept")
        with pytest.raises(DfsqlError) as info:
            dfsql.sql("ALTER STREAMING QUERY gap_kept AS " + _live(GAP5).replace(
                "ACCUMULATING AND RETRACTING", "ACCUMULATING"), spark)
        assert "table alter_db.public.kept is restated by retracting" in info.value.message
        assert (info.value.line, info.value.column) == (1, 35)
        assert QUERIES.running["gap_kept"].query.isActive
        assert [r[1] for r in _table(pg, "kept")] == [5, 7, 10]
    finally:
        dfsql.sql("STOP STREAMING QUERY gap_kept", spark)
