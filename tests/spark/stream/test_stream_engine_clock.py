"""Streams on the engine's clock (issue #11, docs/reference.md#processing-time: without PROCESSING TIME,
processing time is the engine's): every micro-batch is an instant, its rows arrive then,
and the watermark at batch N is the maximum event time of the batches before N minus the
delay (Spark's own rule; a batch's maximum moves it at the next batch, run without data
if none comes). With the default trigger and no allowed lateness that is exactly Spark's
streaming aggregation, which dfsql compiles to.

The expected rows are the bounded replay of the same rows with that clock written out:
``PROCESSING TIME`` = the batch's instant and ``WATERMARK FROM`` a table holding Spark's
watermark per batch. The stream's batch ids stand for its instants.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

import dfsql
from dfsql.errors import DfsqlError
from tests.spark.engine_clock import (
    QUERY,
    _batches,
    _run,
    engine_clock_equals_replay,
)
from tests.spark.feeds import write_parts as _write_parts


@pytest.mark.parametrize("seed,window,delay", [
    (1, "SESSIONS(GAP 30 SECONDS)", 10),
    (2, "SESSIONS(GAP 45 SECONDS)", 0),
    (3, "FIXED(1 MINUTE)", 20),
    (4, "SLIDING(1 MINUTE, EVERY 20 SECONDS)", 5),
])
def test_engine_clock_stream_equals_the_replay_on_sparks_watermark(spark, tmp_path, seed,
                                                                    window, delay):
    engine_clock_equals_replay(spark, tmp_path, seed, window, delay)




def test_engine_clock_emit_time_is_the_batch_timestamp(spark, tmp_path):
    """A pane's emit_time is the timestamp of the micro-batch that fired it: after the
    query started, before it ended, and the same for every pane of one batch."""
    batches = _batches(9, 60, 3)
    before = datetime.now()
    rows, _, _ = _run(spark, tmp_path, "live_ec2", batches,
                      QUERY.format(src="{src}", window="FIXED(1 MINUTE)", tail=""))
    got = [(r[0], r[10]) for r in rows]  # (batch, emit_time)
    after = datetime.now()
    assert got
    per_batch = {}
    for i, t in got:
        per_batch.setdefault(i, set()).add(t)
        assert before - timedelta(seconds=1) <= t <= after
    assert all(len(ts) == 1 for ts in per_batch.values())
    times = [next(iter(per_batch[i])) for i in sorted(per_batch)]
    assert times == sorted(times) and len(set(times)) == len(times)


@pytest.mark.parametrize("tail,at", [
    ("WATERMARK FROM marks_ec3", "WATERMARK"),
])
def test_engine_clock_watermark_from_is_a_positioned_error(spark, tmp_path, tail, at):
    spark.createDataFrame([(datetime(2030, 1, 1), datetime(2024, 1, 1))],
                          "processing_time TIMESTAMP, watermark TIMESTAMP") \
        .createOrReplaceTempView("marks_ec3")
    batches = _batches(5, 20, 1)
    _write_parts(batches[0], [], tmp_path / "in")
    schema = spark.read.parquet(str(tmp_path / "in")).schema
    (spark.readStream.schema(schema).parquet(str(tmp_path / "in"))
     .createOrReplaceTempView("live_ec3"))
    text = QUERY.format(src="live_ec3", window="FIXED(1 MINUTE)", tail=tail)
    with pytest.raises(DfsqlError) as err:
        dfsql.sql(text, spark)
    assert err.value.line == 1
    assert err.value.column == text.index(at) + 1, str(err.value)
    assert "PROCESSING TIME" in err.value.hint
    assert not spark.streams.active


def test_engine_clock_global_window_is_a_positioned_error(spark, tmp_path):
    _write_parts(_batches(6, 10, 1)[0], [], tmp_path / "in")
    schema = spark.read.parquet(str(tmp_path / "in")).schema
    spark.readStream.schema(schema).parquet(str(tmp_path / "in")) \
        .createOrReplaceTempView("live_ec4")
    text = "SELECT key, COUNT(*) AS n FROM live_ec4 GROUP BY key WINDOW GLOBAL"
    with pytest.raises(DfsqlError) as err:
        dfsql.sql(text, spark)
    assert err.value.column == text.index("GLOBAL") + 1
    assert "never" in str(err.value)




@pytest.mark.parametrize("seed,window", [(11, "SESSIONS(GAP 30 SECONDS)"),
                                         (12, "SLIDING(1 MINUTE, EVERY 20 SECONDS)")])
def test_engine_clock_dfsql_executor_equals_sparks_operator(spark, tmp_path, seed, window):
    """The default trigger on the engine's clock two ways: Spark's own operator and
    dfsql's executor (``dfsql.stream.native`` = false) fire the same panes in the same
    micro-batches."""
    batches = _batches(seed, 240, 5)
    q = QUERY.format(src="{src}", window=window, tail="WATERMARK DELAY 10 SECONDS")
    native, _, _ = _run(spark, tmp_path, f"ec_native_{seed}", batches, q)
    spark.conf.set("dfsql.stream.native", "false")
    try:
        ours, _, _ = _run(spark, tmp_path, f"ec_ours_{seed}", batches, q)
    finally:
        spark.conf.unset("dfsql.stream.native")
    # (batch, key, total, n, hi, window_start, window_end, pane_index, pane_timing,
    # is_last, emit_time, is_retraction): emit times differ between two runs
    drop_emit = [(*r[:10], r[11]) for r in native], [(*r[:10], r[11]) for r in ours]
    assert len(native) > 10
    assert drop_emit[1] == drop_emit[0]


def test_engine_clock_early_late_retracting_equals_the_replay_on_the_batch_timestamps(
        spark, tmp_path):
    """Early, late and retracting panes on the engine's clock: the bounded replay with
    each row arriving at its micro-batch's timestamp (from the offset log) and Spark's
    watermark per batch (the largest event time of the batches before, less the delay)
    gives the same rows, emit times included, up to the last batch."""
    batches = _batches(13, 200, 6)
    q = QUERY.format(src="{src}", window="SESSIONS(GAP 30 SECONDS)",
                     tail="WATERMARK DELAY 10 SECONDS ALLOWED LATENESS 1 MINUTE "
                          "TRIGGER EVERY 1 SECOND UNTIL WATERMARK THEN REPEAT WATERMARK "
                          "EMIT ACCUMULATING AND RETRACTING")
    got, stamps, _ = _run(spark, tmp_path, "ec_early", batches, q)
    ts = [datetime(1970, 1, 1) + timedelta(milliseconds=stamps[n]) for n in sorted(stamps)]
    assert len(ts) >= len(batches)
    frame = pd.concat(batches, ignore_index=True)
    frame["arrival_time"] = np.concatenate(
        [[ts[i]] * len(b) for i, b in enumerate(batches)]).astype("datetime64[us]")
    spark.createDataFrame(frame).createOrReplaceTempView("ec_early_bounded")
    seen = pd.Series([b["event_time"].max() for b in batches]
                     + [pd.NaT] * (len(ts) - len(batches))).ffill().cummax()
    marks = [(ts[n], (seen[n - 1] - timedelta(seconds=10)).to_pydatetime()
              .replace(tzinfo=None)) for n in range(1, len(ts))]
    marks.append((ts[-1] + timedelta(hours=1), marks[-1][1]))
    spark.createDataFrame(marks, "processing_time TIMESTAMP, watermark TIMESTAMP") \
        .createOrReplaceTempView("ec_early_marks")
    replay = dfsql.sql(q.format(src="ec_early_bounded").replace(
        "WATERMARK DELAY 10 SECONDS",
        "WATERMARK FROM ec_early_marks PROCESSING TIME arrival_time"), spark).collect()
    want = [tuple(r) for r in replay if r.emit_time <= ts[-1]]
    assert len(want) > 20
    assert {r[7] for r in want} >= {"EARLY", "ON_TIME"} and any(r[-1] for r in want)
    assert [r[1:] for r in got] == want


def test_sparks_own_watermark_clause_on_a_stream(spark, tmp_path):
    """``FROM t WATERMARK ts DELAY OF INTERVAL …`` (Spark's relation clause) on a stream
    names the event time and sets the delay: the same panes as ON ts WATERMARK DELAY."""
    batches = _batches(14, 160, 5)
    ours = ("SELECT key, SUM(value) AS total, COUNT(*) AS n, MAX(value) AS hi FROM {src} "
            "GROUP BY key WINDOW SESSIONS(GAP 30 SECONDS) ON event_time "
            "WATERMARK DELAY 10 SECONDS")
    sparks = ("SELECT key, SUM(value) AS total, COUNT(*) AS n, MAX(value) AS hi "
              "FROM {src} WATERMARK event_time DELAY OF INTERVAL 10 SECONDS "
              "GROUP BY key WINDOW SESSIONS(GAP 30 SECONDS)")
    a, _, _ = _run(spark, tmp_path, "ec_clause_a", batches, ours)
    b, _, _ = _run(spark, tmp_path, "ec_clause_b", batches, sparks)
    assert len(a) > 5
    assert [(*r[:10], r[11]) for r in b] == [(*r[:10], r[11]) for r in a]
