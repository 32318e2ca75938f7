"""Issue #10, items 8 and 11 through ``dfsql.sql`` on the real Spark session: zero
durations behave as the defaults they equal, the longest duration runs, and CREATE …
VIEW does what was asked.

Expected rows are derived by hand from docs/reference.md (window, processing-time, trigger) in each test's docstring.
"""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import SparkSession

import dfsql
from dfsql.errors import AnalysisError, DfsqlError

T0 = dt.datetime(2024, 1, 1)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def events(spark: SparkSession) -> str:
    """Four rows; the last (a, 4) has event time 0:30 but arrives at 1:30, after b's 1:20
    has moved a zero-delay watermark past the end of [0:00, 1:00)."""
    spark.sql("""CREATE OR REPLACE TEMP VIEW mistakes_events AS SELECT * FROM VALUES
        ('a', 1, TIMESTAMP'2024-01-01 00:00:10', TIMESTAMP'2024-01-01 00:00:11'),
        ('a', 2, TIMESTAMP'2024-01-01 00:00:50', TIMESTAMP'2024-01-01 00:00:52'),
        ('b', 5, TIMESTAMP'2024-01-01 00:01:20', TIMESTAMP'2024-01-01 00:01:21'),
        ('a', 4, TIMESTAMP'2024-01-01 00:00:30', TIMESTAMP'2024-01-01 00:01:30')
        AS t(k, v, ts, arr)""")
    return "mistakes_events"


def rows(df, *cols: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in df.collect())


# --------------------------------------------------------------------------- item 8


ZERO_REPLAY = ("SELECT k, SUM(v) AS s FROM mistakes_events GROUP BY k\n"
               "WINDOW FIXED(1 MINUTE, OFFSET 0 SECONDS) ON ts\n"
               "WATERMARK DELAY 0 SECONDS\nPROCESSING TIME arr\n"
               "ALLOWED LATENESS 0 MINUTES LATE ROWS INTO mistakes_late0")


def test_zero_delay_lateness_and_offset_replay(spark: SparkSession, events: str) -> None:
    """Watermark = max event time so far (delay 0). At 1:21 it reaches 1:20, past the end
    of a's [0:00, 1:00): one ON_TIME pane, sum 1+2 = 3, and the last one, since lateness 0
    expires the window at once (§5). (a, 4) arriving at 1:30 is late for an expired window:
    dropped and kept in the LATE ROWS view (§4). b's [1:00, 2:00) fires at the end of the
    input (+inf watermark): sum 5. The same query without the zero clauses (their
    defaults) gives the same rows."""
    got = rows(dfsql.sql(ZERO_REPLAY, spark), "k", "s", "window_start", "pane_timing",
               "is_last", "is_retraction")
    assert got == [("a", 3, at(0), "ON_TIME", True, False),
                   ("b", 5, at(60), "ON_TIME", True, False)]
    late = spark.table("mistakes_late0").collect()
    assert [(r[0], r["event_time"], r["arrival_time"], r["watermark_at_arrival"])
            for r in late] == [("a", at(30), at(90), at(80))]
    default = ("SELECT k, SUM(v) AS s FROM mistakes_events GROUP BY k\n"
               "WINDOW FIXED(1 MINUTE) ON ts PROCESSING TIME arr")
    cols = ("k", "s", "window_start", "window_end", "pane_index", "pane_timing", "is_last",
            "emit_time", "is_retraction")
    assert rows(dfsql.sql(ZERO_REPLAY, spark), *cols) == rows(dfsql.sql(default, spark), *cols)


def test_zero_clauses_batch(spark: SparkSession, events: str) -> None:
    """Batch (no PROCESSING TIME): one pane per key and window; a's [0:00, 1:00) has
    1+2+4 = 7, b's [1:00, 2:00) has 5."""
    q = ("SELECT k, SUM(v) AS s FROM mistakes_events GROUP BY k\n"
         "WINDOW SLIDING(1 MINUTE, EVERY 1 MINUTE, OFFSET INTERVAL '0' SECOND) ON ts\n"
         "WATERMARK DELAY INTERVAL '0' MINUTE ALLOWED LATENESS 0 MS")
    assert rows(dfsql.sql(q, spark), "k", "s", "window_start") == [("a", 7, at(0)),
                                                                   ("b", 5, at(60))]


# --------------------------------------------------------------------------- item 11: durations


@pytest.mark.parametrize("tail", ["", " PROCESSING TIME arr"])
def test_longest_duration_runs(spark: SparkSession, events: str, tail: str) -> None:
    """FIXED(3652059 DAYS), the bound: windows start at multiples of the size from the
    epoch, so every 2024 row is in the window starting 1970-01-01; its end lies beyond
    9999 (Spark holds it; Python's datetime cannot, so it is read as a string). Batch and
    replay alike: a = 1+2+4 = 7, b = 5 (in the replay nothing is late: the only window's
    end is far ahead of every watermark)."""
    q = ("SELECT k, SUM(v) AS s FROM mistakes_events GROUP BY k\n"
         "WINDOW FIXED(3652059 DAYS) ON ts" + tail)
    df = dfsql.sql(q, spark).selectExpr("k", "s", "CAST(window_start AS STRING) AS ws",
                                        "is_last")
    assert rows(df, "k", "s", "ws", "is_last") == [("a", 7, "1970-01-01 00:00:00", True),
                                                   ("b", 5, "1970-01-01 00:00:00", True)]


def test_too_long_fails_before_spark(spark: SparkSession, events: str) -> None:
    with pytest.raises(DfsqlError) as info:
        dfsql.sql("SELECT k, COUNT(*) FROM mistakes_events GROUP BY k\n"
                  "WINDOW FIXED(999999999999 DAYS) ON ts", spark)
    assert (info.value.line, info.value.column) == (2, 14)
    assert "3652059 DAYS" in info.value.hint


# --------------------------------------------------------------------------- item 11: CREATE VIEW

VIEW_BODY = ("SELECT k, SUM(v) AS s FROM mistakes_events GROUP BY k "
             "WINDOW FIXED(1 MINUTE) ON ts")


def view_sums(spark: SparkSession, name: str) -> list[tuple]:
    return sorted((r[0], r[1]) for r in spark.sql(f"SELECT k, s FROM {name}").collect())


def test_create_temp_view_if_not_exists_keeps_the_existing_view(spark: SparkSession,
                                                                events: str) -> None:
    """IF NOT EXISTS: an existing view is not replaced; a missing one is created."""
    spark.sql("CREATE OR REPLACE TEMP VIEW mistakes_v1 AS SELECT 'old' AS k, 0 AS s")
    dfsql.sql(f"CREATE TEMP VIEW IF NOT EXISTS mistakes_v1 AS {VIEW_BODY}", spark)
    assert view_sums(spark, "mistakes_v1") == [("old", 0)]
    spark.catalog.dropTempView("mistakes_v2")
    dfsql.sql(f"CREATE TEMP VIEW IF NOT EXISTS mistakes_v2 AS {VIEW_BODY}", spark)
    assert view_sums(spark, "mistakes_v2") == [("a", 7), ("b", 5)]


def test_create_temp_view_over_an_existing_one_is_spark_s_error(spark: SparkSession,
                                                                events: str) -> None:
    """Without OR REPLACE, Spark refuses to replace a temp view; so does dfsql, at the name."""
    spark.sql("CREATE OR REPLACE TEMP VIEW mistakes_v3 AS SELECT 'old' AS k, 0 AS s")
    with pytest.raises(AnalysisError) as info:
        dfsql.sql(f"CREATE TEMP VIEW\n  mistakes_v3 AS {VIEW_BODY}", spark)
    assert (info.value.line, info.value.column) == (2, 3)
    assert "already exists" in info.value.message
    assert "CREATE OR REPLACE TEMP VIEW mistakes_v3" in info.value.hint
    assert view_sums(spark, "mistakes_v3") == [("old", 0)]
    dfsql.sql(f"CREATE OR REPLACE TEMP VIEW mistakes_v3 AS {VIEW_BODY}", spark)
    assert view_sums(spark, "mistakes_v3") == [("a", 7), ("b", 5)]


def test_create_global_temp_view(spark: SparkSession, events: str) -> None:
    spark.catalog.dropGlobalTempView("mistakes_g")
    dfsql.sql(f"CREATE GLOBAL TEMP VIEW mistakes_g AS {VIEW_BODY}", spark)
    assert view_sums(spark, "global_temp.mistakes_g") == [("a", 7), ("b", 5)]
    assert not spark.catalog.tableExists("mistakes_g")


def test_create_temp_view_over_an_inner_windowed_query(spark: SparkSession,
                                                       events: str) -> None:
    """The windowed query is a subquery of the view's body: Spark creates the view over
    dfsql's result (was: an AssertionError in the planner)."""
    dfsql.sql("CREATE OR REPLACE TEMP VIEW mistakes_v5 AS SELECT k, s * 10 AS s FROM "
              f"({VIEW_BODY}) AS w", spark)
    assert view_sums(spark, "mistakes_v5") == [("a", 70), ("b", 50)]


@pytest.mark.parametrize("text,cls", [
    (f"CREATE VIEW mistakes_db.mistakes_v4 AS {VIEW_BODY}", AnalysisError),  # no such database
    (f"CREATE TEMP VIEW mistakes_db.mistakes_v4 AS {VIEW_BODY}", AnalysisError),
])
def test_create_view_refused_creates_nothing(spark: SparkSession, events: str, text: str,
                                            cls: type) -> None:
    """Once CREATE VIEW db.v made a temp view named db; now nothing is created (a persistent
    view in a database that does not exist is Spark's error)."""
    with pytest.raises(cls):
        dfsql.sql(text, spark)
    assert not spark.catalog.tableExists("mistakes_db")
    assert not spark.catalog.tableExists("mistakes_v4")
