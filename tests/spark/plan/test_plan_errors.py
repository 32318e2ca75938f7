"""Planning errors: an unknown column next to a pane column is reported where it was
written, and a streaming source is rejected at plan time (never planned as a batch)."""

from __future__ import annotations

import pytest

import dfsql
from dfsql.errors import AnalysisError, NotSupportedError


@pytest.fixture(scope="module")
def plan_events(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW plan_events AS SELECT * FROM VALUES
                 ('a', 1, TIMESTAMP'2024-01-01 12:00:00') AS t(k, v, et)""")


def test_unknown_column_next_to_a_pane_column_is_positioned(spark, plan_events):
    """The SELECT names window_start (a column that exists only after windowing) and the
    WHERE an unknown column ``n``: the error points at that ``n`` (line 3, col 7), not at
    the first ``n`` of the text (inside window_start)."""
    q = ("SELECT k, window_start, COUNT(*) AS cnt\n"
         "FROM plan_events\n"
         "WHERE n > 0\n"
         "GROUP BY k WINDOW FIXED(1 MINUTE) ON et")
    with pytest.raises(AnalysisError) as info:
        dfsql.sql(q, spark)
    err = info.value
    assert "`n`" in err.message and (err.line, err.column) == (3, 7)
    assert "__k0" not in str(err) and "__event_time" not in str(err)


def test_pane_columns_alone_still_plan(spark, plan_events):
    rows = dfsql.sql("SELECT k, window_start, window_end, COUNT(*) AS cnt FROM plan_events "
                     "GROUP BY k WINDOW FIXED(1 MINUTE) ON et", spark).collect()
    assert [(r.k, r.cnt) for r in rows] == [("a", 1)]


@pytest.fixture(scope="module")
def rate_stream(spark):
    spark.readStream.format("rate").option("rowsPerSecond", 1).load() \
        .createOrReplaceTempView("rate_stream")


@pytest.mark.parametrize("window", ["FIXED(1 MINUTE) ON timestamp",
                                    "SESSIONS(GAP 10 SECONDS) ON timestamp"])
def test_a_stream_on_the_engine_clock_plans_and_percentile_is_refused(spark, rate_stream,
                                                                     window):
    """Without PROCESSING TIME a stream runs on the engine's clock: the default trigger
    (Spark's own operator) and early firings (dfsql's executor) both plan, nothing
    starts; WATERMARK PERCENTILE on a stream is refused at WATERMARK."""
    q = f"SELECT value % 2 AS parity, COUNT(*) AS n FROM rate_stream GROUP BY 1\nWINDOW {window}"
    for tail in ("", " TRIGGER EVERY 1 MINUTE UNTIL WATERMARK",
                 " PROCESSING TIME timestamp TRIGGER EVERY 1 MINUTE UNTIL WATERMARK"):
        df = dfsql.sql(q + tail, spark)
        assert df.isStreaming and df.columns[:2] == ["parity", "n"]
    with pytest.raises(NotSupportedError) as info:
        dfsql.sql(q + " WATERMARK PERCENTILE 90", spark)
    err = info.value
    assert "stream" in err.message and err.hint
    assert (err.line, err.column) == (2, len(f"WINDOW {window} ") + 1)
    assert not spark.streams.active


def test_a_global_window_on_the_engine_clock_is_refused_at_plan_time(spark, rate_stream):
    q = "SELECT value % 2 AS parity, COUNT(*) AS n FROM rate_stream GROUP BY 1\nWINDOW GLOBAL"
    with pytest.raises(NotSupportedError) as info:
        dfsql.sql(q, spark)
    assert (info.value.line, info.value.column) == (2, 8)
    assert not spark.streams.active


@pytest.mark.parametrize("text, hint", [
    ("SELCT 1", "did you mean SELECT?"),
    ("CRATE TABLE t (a INT)", "did you mean CREATE?"),
    ("EXPLIAN SELECT 1", "did you mean EXPLAIN?"),
    ("BANANA 1", None),  # nothing close: Spark's message alone
])
def test_a_misspelt_first_keyword_gets_a_hint(spark, text, hint):
    from dfsql.errors import DfsqlSyntaxError

    with pytest.raises(DfsqlSyntaxError) as info:
        dfsql.sql(text, spark)
    assert (info.value.line, info.value.column) == (1, 1)
    assert "PARSE_SYNTAX_ERROR" in info.value.message
    assert info.value.hint == hint
