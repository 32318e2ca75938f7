"""Dropped rows counted as rows (issue #51): a SLIDING window puts a row in several
windows, and the row may be dropped from more than one of them; ``dfsql.dropped_late``
and the warning count the row once (the (row, window) pairs only where asked, and named
so), on the replay and on a stream alike. LATE ROWS INTO lists one row per window a row
was dropped from, with that window, the GROUP BY keys under the query's own names and the
columns the query reads (docs/reference.md "ALLOWED LATENESS"). A watermark a mis-dated
row pushed ahead of processing time is named in the warning.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pytest

import dfsql
from tests.spark import feeds

T0 = datetime(2024, 1, 1)


def _t(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


#: (k, v, event time, arrival), seconds after T0. SLIDING(10 s, EVERY 5 s): every row is
#: in two windows. DELAY 0: the 31 moves the watermark to 31, where it stays.
ROWS = [
    ("a", 1, 12, 12),   # [5, 15), [10, 20)
    ("a", 2, 31, 31),   # [25, 35), [30, 40)
    ("a", 4, 3, 40),    # [-5, 5), [0, 10): both ended before 31: dropped twice
    ("a", 8, 22, 41),   # [15, 25), [20, 30): both ended: dropped twice
    ("a", 16, 27, 42),  # [20, 30) ended: dropped; [25, 35) still open: on time
]
#: by hand: the rows 4, 8 and 16 are dropped (3 rows), from 5 windows
LATE = [  # (k, v, window_start, window_end, event_time, arrival_time, reason, watermark)
    ("a", 4, _t(-5), _t(5), _t(3), _t(40), "expired", _t(31)),
    ("a", 4, _t(0), _t(10), _t(3), _t(40), "expired", _t(31)),
    ("a", 8, _t(15), _t(25), _t(22), _t(41), "expired", _t(31)),
    ("a", 8, _t(20), _t(30), _t(22), _t(41), "expired", _t(31)),
    ("a", 16, _t(20), _t(30), _t(27), _t(42), "expired", _t(31)),
]
LATE_COLUMNS = ["k", "v", "window_start", "window_end", "event_time", "arrival_time",
                "reason", "watermark_at_arrival"]
Q = ("SELECT k, {agg} AS total FROM {t} GROUP BY k "
     "WINDOW SLIDING(10 SECONDS, EVERY 5 SECONDS) ON et PROCESSING TIME at "
     "ALLOWED LATENESS 0 SECONDS LATE ROWS INTO {v}")


def _frame(rows) -> pd.DataFrame:
    return pd.DataFrame({"k": [r[0] for r in rows], "v": [r[1] for r in rows],
                         "et": pd.to_datetime([_t(r[2]) for r in rows]).tz_localize("UTC"),
                         "at": pd.to_datetime([_t(r[3]) for r in rows]).tz_localize("UTC")})


@pytest.fixture(scope="module")
def drops(spark):
    spark.createDataFrame(_frame(ROWS)).createOrReplaceTempView("drops")
    return "drops"


def _late(spark, view: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(view).collect())


# SUM: the model's kernels aggregate; COUNT(DISTINCT): Spark, per element
@pytest.mark.parametrize("agg", ["SUM(v)", "COUNT(DISTINCT v)"])
def test_a_sliding_replay_counts_each_dropped_row_once(spark, drops, agg):
    df = dfsql.sql(Q.format(agg=agg, t="drops", v="drops_late"), spark)
    assert dfsql.dropped_late(df) == 3
    assert dfsql.dropped_late(df, windows=True) == 5
    [line] = dfsql.api.dropped_warnings(df)
    assert line.startswith("warning: 3 rows dropped as late (from 5 (row, window) pairs): "
                           "they arrived (PROCESSING TIME at)"), line
    late = spark.table("drops_late")
    assert late.columns == LATE_COLUMNS
    assert _late(spark, "drops_late") == LATE
    spark.catalog.dropTempView("drops_late")
    if agg == "SUM(v)":  # EXPLAIN WATERMARK counts rows too: the same 3
        explained = dfsql.sql(f"EXPLAIN WATERMARK {Q.format(agg=agg, t='drops', v='x')} "
                              "TRY DELAY 1 MINUTE", spark).collect()
        assert [r.dropped_rows for r in explained] == [3, 0]


def test_late_rows_into_names_keys_as_the_query_does(spark, drops):
    """A key the SELECT renames is under that name; one it does not select, under its
    column's; an expression it does not select, key_<i>. Every column the aggregates read
    is there once, under its own name."""
    df = dfsql.sql("SELECT k AS user_id, MAX(v) AS top, MIN(v + 1) AS low FROM drops "
                   "GROUP BY k, v % 2, v "
                   "WINDOW SLIDING(10 SECONDS, EVERY 5 SECONDS) ON et PROCESSING TIME at "
                   "ALLOWED LATENESS 0 SECONDS LATE ROWS INTO drops_named", spark)
    df.collect()
    late = spark.table("drops_named")
    assert late.columns[:4] == ["user_id", "key_1", "v", "window_start"]
    assert sorted((r.user_id, r.key_1, r.v) for r in late.collect()) == [
        ("a", 0, 4), ("a", 0, 4), ("a", 0, 8), ("a", 0, 8), ("a", 0, 16)]
    spark.catalog.dropTempView("drops_named")


# COUNT(et): the column read is a TIMESTAMP (NULL in the processor's pane rows)
@pytest.mark.parametrize("agg", ["SUM(v)", "COUNT(et)"])
def test_a_sliding_stream_counts_each_dropped_row_once(spark, tmp_path, agg):
    """The stream's metric ``late_dropped`` and its LATE ROWS INTO rows equal the replay's
    (the stream's last rows wait for a later arrival: a sentinel row, NULL event time)."""
    frame = feeds.with_sentinel(_frame(ROWS).rename(
        columns={"et": "event_time", "at": "arrival_time"}))
    frame = frame.rename(columns={"event_time": "et", "arrival_time": "at"})
    feeds.write_parts(frame, [2, 4], tmp_path / "in")
    schema = spark.read.parquet(str(tmp_path / "in")).schema
    (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
     .parquet(str(tmp_path / "in")).createOrReplaceTempView("drops_live"))
    query = dfsql.start(Q.format(agg=agg, t="drops_live", v="drops_live_late"),
                        sink="memory", name="drops_panes", checkpoint=str(tmp_path / "ck"),
                        trigger={"availableNow": True}, spark=spark)
    query.awaitTermination()
    metrics = [p.observedMetrics["dfsql"] for p in query.recentProgress
               if "dfsql" in p.observedMetrics]
    assert sum(m["late_dropped"] for m in metrics) == 3
    late = spark.table("drops_live_late")
    if agg == "SUM(v)":
        assert late.columns == LATE_COLUMNS
        assert _late(spark, "drops_live_late") == LATE
    else:  # the read column is et: the event time, under its own name
        assert late.columns == ["k", "et", *LATE_COLUMNS[2:]]
        assert _late(spark, "drops_live_late") == sorted((r[0], r[4], *r[2:]) for r in LATE)
    for view in ("drops_panes", "drops_live_late"):
        spark.catalog.dropTempView(view)


def test_the_warning_says_when_the_watermark_ran_ahead_of_processing_time(spark):
    """One row dated years ahead (2030) moves a DELAY watermark past every later row's
    window: the warning says when the watermark passed processing time and which row
    moved it there."""
    rows = [("a", 1, 5, 5), ("a", 2, 12, 12), ("b", 4, 14, 20), ("a", 8, 21, 25),
            ("a", 16, 26, 30)]
    frame = _frame(rows)
    frame.loc[2, "et"] = pd.Timestamp("2030-01-01 00:00:00", tz="UTC")
    spark.createDataFrame(frame).createOrReplaceTempView("misdated")
    df = dfsql.sql("SELECT k, SUM(v) AS total FROM misdated GROUP BY k "
                   "WINDOW FIXED(10 SECONDS) ON et WATERMARK DELAY 1 MINUTE "
                   "PROCESSING TIME at", spark)
    assert dfsql.dropped_late(df) == 2  # the 8 and the 16
    [line] = dfsql.api.dropped_warnings(df)
    assert line.endswith(
        ". The watermark ran ahead of processing time: at 2024-01-01 00:00:20 it became "
        "2029-12-31 23:59:00, moved there by the row arriving then with event time "
        "2030-01-01 00:00:00 (k = 'b')"), line
    # a watermark that stays behind processing time adds nothing
    on_time = dfsql.sql("SELECT k, SUM(v) AS total FROM drops GROUP BY k "
                        "WINDOW FIXED(10 SECONDS) ON et PROCESSING TIME at", spark)
    [plain] = dfsql.api.dropped_warnings(on_time)
    assert "ahead of processing time" not in plain
