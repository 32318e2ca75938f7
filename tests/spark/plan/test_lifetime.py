"""What a query leaves behind: no ``__dfsql_*`` temp views once it is planned, no
persisted DataFrame once its result is gone, and ``dropped_late`` reads the count the
query's own run made instead of running the query again."""

from __future__ import annotations

import gc

import pytest

import dfsql

LATE = ("SELECT k, SUM(v) AS total FROM life_events GROUP BY k "
        "WINDOW FIXED(1 MINUTE) ON et WATERMARK DELAY 1 SECOND PROCESSING TIME at "
        "ALLOWED LATENESS 1 SECOND LATE ROWS INTO life_late")


@pytest.fixture(scope="module")
def life_events(spark):
    # b's 12:00:05 arrives at 12:05, after the watermark passed 12:01 + 1 s: dropped
    spark.sql("""CREATE OR REPLACE TEMP VIEW life_events AS
                 SELECT k, CAST(v AS BIGINT) AS v, CAST(et AS TIMESTAMP) AS et,
                        CAST(at AS TIMESTAMP) AS at FROM VALUES
                 ('a', 1, '2024-01-01 12:00:10', '2024-01-01 12:00:20'),
                 ('b', 2, '2024-01-01 12:03:00', '2024-01-01 12:03:05'),
                 ('b', 4, '2024-01-01 12:00:05', '2024-01-01 12:05:00') AS t(k, v, et, at)""")


def _ours(spark) -> list[str]:
    return [r.tableName for r in spark.sql("SHOW TABLES").collect()
            if r.tableName.startswith("__dfsql")]


def _cached(spark) -> bool:
    return not spark._jsparkSession.sharedState().cacheManager().isEmpty()


def test_no_temp_views_are_left(spark, life_events):
    inner = "SELECT k, SUM(v) AS total FROM life_events GROUP BY k " \
            "WINDOW FIXED(1 MINUTE) ON et PROCESSING TIME at EMIT ACCUMULATING AND RETRACTING"
    queries = [
        LATE,
        f"WITH s AS ({inner}) SELECT COUNT(*) AS n FROM s WINDOW GLOBAL",
        f"SELECT * FROM ({inner}) AS x WHERE total > 0",
        "SELECT k, COUNT(*) AS n FROM life_events GROUP BY k WINDOW FIXED(1 MINUTE) ON et",
    ]
    for q in queries:
        df = dfsql.sql(q, spark)
        assert _ours(spark) == [], q
        assert df.collect(), q  # the plan does not need the views any more
    # the user's LATE ROWS INTO view stays
    assert [r.k for r in spark.table("life_late").collect()] == ["b"]


def test_persisted_driver_output_is_released_with_the_result(spark, life_events):
    assert not _cached(spark)
    df = dfsql.sql(LATE, spark)
    df.collect()
    late = spark.table("life_late")
    del df
    gc.collect()
    assert not _cached(spark)
    # the late rows' view still reads (it runs the driver again when needed)
    assert [(r.k, r.event_time.minute) for r in late.collect()] == [("b", 0)]


def test_dropped_late_does_not_run_the_query_again(spark, life_events):
    df = dfsql.sql(LATE.replace(" LATE ROWS INTO life_late", ""), spark)
    rows = df.collect()
    assert sorted((r.k, r.total) for r in rows if not r.is_retraction) == [("a", 1), ("b", 2)]
    sc = spark.sparkContext
    sc.setJobGroup("dfsql_dropped_late", "dropped_late")
    try:
        assert dfsql.dropped_late(df) == 1
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert sc.statusTracker().getJobIdsForGroup("dfsql_dropped_late") == []


def test_dropped_late_before_the_query_ran_counts_once(spark, life_events):
    df = dfsql.sql(LATE.replace(" LATE ROWS INTO life_late", ""), spark)
    assert dfsql.dropped_late(df) == 1
    assert dfsql.dropped_late(df) == 1
