"""Live streams (issue #11): a windowed query over a streaming source gives, row for row
and in order, what the bounded replay of the same rows gives (docs/reference.md#processing-time: with
``PROCESSING TIME <col>`` the clock is the column, so where Spark cuts the stream into
micro-batches does not matter).

A stream has no end: rows at its latest arrival wait for the next batch (more of that
instant may come), and the bounded replay's final +inf watermark never comes. Every
stream here therefore ends with a sentinel row (NULL event time: it belongs to no window
and moves no watermark) at a later arrival, and is compared with the replay of the same
rows up to that instant.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dfsql
from dfsql.errors import DfsqlError
from tests.spark.feeds import STREAM_QUERY as QUERY
from tests.spark.feeds import in_arrival_order as _in_arrival_order
from tests.spark.feeds import paper_events as _paper_events
from tests.spark.feeds import stream_and_replay as _stream_and_replay
from tests.spark.feeds import with_sentinel as _with_sentinel
from tests.spark.feeds import workload as _workload
from tests.spark.feeds import write_parts as _write_parts

PAPER = Path(__file__).resolve().parents[3] / "examples" / "paper"
FIGURES = json.loads((PAPER / "figures.json").read_text())["figures"]
#: the replayed figures streamed here, their marks (if any) a bounded table; Figures 12-14
#: stream their marks too in tests/spark/stream/test_stream_inputs.py, so of those only Figure 13
#: (early, on-time and late panes) is here
STREAMED = [f for f in FIGURES if "PROCESSING TIME" in f["query"]
            and ("WATERMARK FROM" not in f["query"] or f["name"].startswith("fig13"))]
















@pytest.mark.shuffle_partitions(2)  # random keys spread over two buckets and tasks
@pytest.mark.parametrize("seed,window,trigger,emit", [
    (1, "SESSIONS(GAP 30 SECONDS)", "EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
     "ACCUMULATING AND RETRACTING"),
    (2, "SESSIONS(GAP 45 SECONDS)", "AT WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROW",
     "ACCUMULATING AND RETRACTING"),
    (3, "FIXED(1 MINUTE)", "EVERY 15 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
     "ACCUMULATING AND RETRACTING"),
    (4, "SLIDING(1 MINUTE, EVERY 20 SECONDS)", "REPEAT WATERMARK", "DISCARDING"),
])
def test_stream_cut_at_random_points_equals_the_replay(spark, tmp_path, seed, window,
                                                       trigger, emit):
    frame = _workload(seed)
    rng = np.random.default_rng(100 + seed)
    cuts = sorted(rng.choice(np.arange(1, len(frame)), 7, replace=False).tolist())
    q = QUERY.format(window=window, trigger=trigger, emit=emit)
    stream, replay, n_batches = _stream_and_replay(spark, frame, q, cuts, tmp_path)
    assert n_batches >= 8
    assert len(replay) > 50
    assert any(r.is_retraction for r in replay) == ("RETRACTING" in emit)
    assert stream == replay


@pytest.mark.parametrize("fig", STREAMED, ids=[f["name"] for f in STREAMED])
def test_paper_figures_streamed(spark, paper_tables, tmp_path, fig):
    """Each replayed figure of the paper, its rows streamed two to a file (a micro-batch
    costs about a second here; tests/spark/stream/test_stream_inputs.py streams them a file per
    row beside a stream of marks)."""
    frame = _paper_events()
    query = fig["query"].replace("FROM scores", "FROM {t}")
    stream, replay, _ = _stream_and_replay(spark, frame, query, list(range(2, len(frame), 2)),
                                           tmp_path)
    assert stream == replay
    # and the replay is the figure (the expected rows hand-derived from the paper)
    want = [r for r in fig["expected"] if r["emit_time"] is not None]
    assert len(stream) == len(want)
    assert [r.total for r in stream] == [r["total"] for r in want]


def _start_error(spark, text: str) -> DfsqlError:
    with pytest.raises(DfsqlError) as info:
        dfsql.start(text, sink="memory", name="never", spark=spark)
    return info.value


@pytest.fixture
def live_scores(spark, tmp_path):
    frame = _paper_events()
    _write_parts(frame, [3], tmp_path / "scores")
    (spark.readStream.schema(spark.read.parquet(str(tmp_path / "scores")).schema)
     .parquet(str(tmp_path / "scores")).createOrReplaceTempView("live_scores"))
    return "live_scores"


def test_percentile_watermark_on_a_stream_equals_the_replay(spark, tmp_path):
    """WATERMARK PERCENTILE over a stream cut at random points: every bucket keeps the
    histogram of all delays (rounded to three significant digits, docs/reference.md#watermark's
    documented error bound) and the same rising watermark as the bounded replay, which
    moves between arrivals (sessions close with no row arriving)."""
    rng = np.random.default_rng(7)
    n = 400
    et = np.sort(rng.integers(0, 600_000, n))  # milliseconds: delays with many digits
    at = et + rng.integers(0, 30_000, n) + np.where(rng.random(n) < 0.1, 90_000, 0)
    frame = _in_arrival_order(rng, et, at, ["a", "b", "c", "d"], timedelta(milliseconds=1))
    q = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} GROUP BY key "
         "WINDOW SESSIONS(GAP 20 SECONDS) ON event_time "
         "WATERMARK PERCENTILE 80 DELAY 2 SECONDS PROCESSING TIME arrival_time "
         "ALLOWED LATENESS 2 MINUTES "
         "TRIGGER AT WATERMARK EARLY EVERY 10 SECONDS LATE EVERY 1 ROW "
         "EMIT ACCUMULATING AND RETRACTING")
    cuts = sorted(rng.choice(np.arange(1, n), 9, replace=False).tolist())
    stream, replay, n_batches = _stream_and_replay(spark, frame, q, cuts, tmp_path)
    assert n_batches >= 10
    timings = {r.pane_timing for r in replay}
    assert {"EARLY", "ON_TIME", "LATE"} <= timings, timings
    assert any(r.is_retraction for r in replay)
    # windows close between arrivals: an ON_TIME pane emitted when no row arrived
    arrivals = set(frame["arrival_time"].dt.tz_localize(None))
    assert any(r.pane_timing == "ON_TIME" and pd.Timestamp(r.emit_time) not in arrivals
               for r in replay)
    assert stream == replay


BASE = ("SELECT key, SUM(value) AS total FROM live_scores GROUP BY key\n"
        "WINDOW FIXED(2 MINUTES) ON event_time {wm}PROCESSING TIME arrival_time{tail}")


@pytest.mark.parametrize("wm,tail,line,col,word", [
    ("WATERMARK PERFECT ", "", 2, 39, "WATERMARK"),
    ("", "\nORDER BY total", 3, 1, "ORDER BY"),
    ("", "\nLIMIT 3", 3, 1, "LIMIT"),
])
def test_what_a_stream_cannot_do_is_a_positioned_error(spark, live_scores, wm, tail, line,
                                                       col, word):
    err = _start_error(spark, BASE.format(wm=wm, tail=tail))
    assert (err.line, err.column) == (line, col), err
    assert err.hint
    assert not spark.streams.active  # nothing started, nothing written


def test_a_stream_aggregate_it_cannot_compute_is_a_positioned_error(spark, live_scores):
    err = _start_error(spark, "SELECT key, collect_set(value) AS s FROM live_scores GROUP BY key "
                              "WINDOW FIXED(2 MINUTES) ON event_time PROCESSING TIME "
                              "arrival_time")
    assert "SUM, COUNT, MIN, MAX and AVG" in str(err)


def test_start_needs_a_stream(spark, paper_tables):
    with pytest.raises(DfsqlError, match="streaming source"):
        dfsql.start("SELECT key, SUM(value) AS total FROM scores GROUP BY key "
                    "WINDOW FIXED(2 MINUTES) ON event_time", spark=spark)


def test_table_sink_holds_the_current_row_of_every_live_window(spark, paper_tables,
                                                                tmp_path):
    """Figure 14's retracting sessions streamed into a TableSink: the table ends as the
    figure's changelog applied row by row (hand-derived rows: a retraction removes its
    window's row, a pane replaces it)."""
    fig = next(f for f in FIGURES if f["name"] == "fig14_sessions_retracting")
    frame = _paper_events()
    frame = _with_sentinel(frame)
    # a file per arrival minute (12:04 … 12:08, the sentinel): the 9 that merges the
    # first two sessions and the 8 that joins them arrive in batches after theirs
    _write_parts(frame, [2, 5, 6, 8, 10], tmp_path / "in")
    (spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema)
     .option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
     .createOrReplaceTempView("fig14_live"))
    sink = dfsql.TableSink("fig14_current", path=str(tmp_path / "table"))
    q = dfsql.start(fig["query"].replace("FROM scores", "FROM fig14_live"), sink=sink,
                    checkpoint=str(tmp_path / "ck"), trigger={"availableNow": True},
                    spark=spark)
    q.awaitTermination()
    current: dict = {}
    for r in fig["expected"]:
        window = (r["key"], r["window_start"], r["window_end"])
        if r["is_retraction"]:
            current.pop(window, None)
        else:
            current[window] = r["total"]
    want = {(k, datetime.strptime(s, "%Y-%m-%d %H:%M:%S"),
             datetime.strptime(e, "%Y-%m-%d %H:%M:%S"), t) for (k, s, e), t in current.items()}
    got = {(r.key, r.window_start, r.window_end, r.total)
           for r in spark.table("fig14_current").collect()}
    assert got == want
    assert len(want) == 2  # the sessions 39 [12:00:30, 12:05) and 12 [12:06:30, 12:08:50)
    # a restart from the same table and checkpoint applies nothing twice
    again = dfsql.TableSink("fig14_current", path=str(tmp_path / "table"))
    q = dfsql.start(fig["query"].replace("FROM scores", "FROM fig14_live"), sink=again,
                    checkpoint=str(tmp_path / "ck"), trigger={"availableNow": True},
                    spark=spark)
    q.awaitTermination()
    again._load()
    assert {(r.key, r.window_start.to_pydatetime(), r.window_end.to_pydatetime(), r.total)
            for r in again.current.itertuples()} == want


def test_progress_events_carry_panes_late_rows_state_and_watermark(spark, tmp_path):
    """dfsql's figures are in each micro-batch's progress (``observedMetrics["dfsql"]``):
    they add up to the rows the sink got, the elements read, the replay's late drops,
    and the last watermark is the largest event time less the delay."""
    frame = _workload(5)
    _write_parts(_with_sentinel(frame), [40, 90, 150, 220, 300], tmp_path / "in")
    spark.read.parquet(str(tmp_path / "in")).where("event_time IS NOT NULL") \
        .createOrReplaceTempView("metrics_bounded")
    (spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema)
     .option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
     .createOrReplaceTempView("metrics_live"))
    q = QUERY.format(window="SESSIONS(GAP 30 SECONDS)",
                     trigger="EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
                     emit="ACCUMULATING AND RETRACTING")
    rows: list = []
    query = dfsql.start(q.format(t="metrics_live"), sink=lambda b, i: rows.extend(b.collect()),
                        checkpoint=str(tmp_path / "ck"), trigger={"availableNow": True},
                        spark=spark)
    query.awaitTermination()
    metrics = [p.observedMetrics["dfsql"] for p in query.recentProgress
               if "dfsql" in p.observedMetrics]
    assert len(metrics) == 6
    assert sum(m["panes"] for m in metrics) == sum(not r.is_retraction for r in rows) > 20
    assert sum(m["retractions"] for m in metrics) == sum(r.is_retraction for r in rows) > 0
    assert sum(m["elements_in"] for m in metrics) == len(frame) + 1
    dropped = dfsql.dropped_late(dfsql.sql(q.format(t="metrics_bounded"), spark))
    assert sum(m["late_dropped"] for m in metrics) == dropped > 0
    last_wm = frame["event_time"].max() - pd.Timedelta(seconds=20)
    assert str(metrics[-1]["watermark"]) == last_wm.strftime("%Y-%m-%d %H:%M:%S")
    # retained at the end: the elements of windows still live, not the whole input
    assert 0 < metrics[-1]["state_elements"] < len(frame) // 3


LATE_QUERY = ("SELECT key, SUM(value) AS total FROM {t} GROUP BY key HAVING SUM(value) > 5 "
              "WINDOW FIXED(1 MINUTE) ON event_time WATERMARK DELAY 20 SECONDS "
              "PROCESSING TIME arrival_time ALLOWED LATENESS 30 SECONDS LATE ROWS INTO {v} "
              "TRIGGER EVERY 15 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
              "EMIT ACCUMULATING AND RETRACTING")


@pytest.fixture(scope="module")
def late_rows_replay(spark, tmp_path_factory):
    """The input of the LATE ROWS INTO tests (written once, only read) and its bounded
    replay up to the stream's frontier (the sentinel's arrival): its panes, its dropped
    rows and their reasons. Each sink's test compares its stream with the same replay,
    so it is computed once for the module."""
    frame = _with_sentinel(_workload(3))
    src = tmp_path_factory.mktemp("late_rows") / "in"
    # three files of rows and the sentinel's (four micro-batches, the state carried over
    # three cuts): the panes, late rows and reasons compared are the replay's, whatever
    # the cuts (the random cuts above vary those)
    _write_parts(frame, [100, 200, 300], src)
    spark.read.parquet(str(src)).createOrReplaceTempView("late_bounded")
    frontier = frame["arrival_time"].max().to_pydatetime().replace(tzinfo=None)
    replay = dfsql.sql(LATE_QUERY.format(t="late_bounded", v="late_replay"), spark)
    # the replay up to the stream's frontier (the sentinel's arrival)
    panes = sorted((tuple(r) for r in replay.collect() if r.emit_time < frontier), key=repr)
    dropped = spark.table("late_replay").collect()
    late = sorted((tuple(r) for r in dropped if r.arrival_time < frontier), key=repr)
    reasons = {r.reason for r in dropped}
    for view in ("late_bounded", "late_replay"):  # the session is shared
        spark.catalog.dropTempView(view)
    return src, panes, late, reasons


@pytest.mark.parametrize("sink", ["dir", "memory"])
def test_late_rows_into_a_side_view_and_the_panes_into_the_sink(spark, tmp_path,
                                                               late_rows_replay, sink):
    """LATE ROWS INTO on a stream: the dropped rows (reason, watermark at arrival) go to
    the view, the panes to the sink, in one query; both equal the bounded replay's."""
    src, want_panes, want_late, reasons = late_rows_replay
    (spark.readStream.schema(spark.read.parquet(str(src)).schema)
     .option("maxFilesPerTrigger", 1).parquet(str(src))
     .createOrReplaceTempView("late_live"))
    out = str(tmp_path / "out") if sink == "dir" else "memory"
    query = dfsql.start(LATE_QUERY.format(t="late_live", v="late_stream"), sink=out,
                        name="late_panes", checkpoint=str(tmp_path / "ck"),
                        trigger={"availableNow": True}, spark=spark)
    query.awaitTermination()
    got = spark.read.parquet(out) if sink == "dir" else spark.table("late_panes")
    assert sorted((tuple(r) for r in got.collect()), key=repr) == want_panes
    assert len(want_panes) > 20
    got_late = sorted((tuple(r) for r in spark.table("late_stream").collect()), key=repr)
    assert got_late == want_late
    assert len(want_late) >= 5
    assert reasons >= {"expired"}
    for view in ("late_panes", "late_stream", "late_live"):  # the session is shared
        spark.catalog.dropTempView(view)


def test_planning_reads_the_aggregates_typed_not_the_stage_sql(spark, live_scores,
                                                                 paper_tables, monkeypatch):
    """A stream's planner and the replay's kernels read the block's aggregates as typed
    values (issue #22, item 2): sqlglot never parses a stage's aggregate SQL (over the
    input stage's ``__c<j>`` columns) again."""
    import sqlglot

    parsed: list[str] = []
    real = sqlglot.parse_one

    def recording(sql, *args, **kwargs):
        parsed.append(sql)
        return real(sql, *args, **kwargs)

    monkeypatch.setattr(sqlglot, "parse_one", recording)
    q = dfsql.start("SELECT key, SUM(value) AS total, COUNT(*) AS n, MAX(value) AS top "
                    "FROM live_scores GROUP BY key WINDOW FIXED(2 MINUTES) ON event_time "
                    "PROCESSING TIME arrival_time TRIGGER EVERY 1 MINUTE "
                    "EMIT ACCUMULATING AND RETRACTING", sink="memory", name="typed_aggs",
                    spark=spark)
    q.stop()
    rows = dfsql.sql("SELECT key, SUM(value) AS total, MIN(value) AS low FROM scores "
                     "GROUP BY key WINDOW FIXED(2 MINUTES) ON event_time "
                     "PROCESSING TIME arrival_time TRIGGER EVERY 1 MINUTE",
                     spark=spark).collect()
    assert rows
    assert parsed  # the user's SELECTs are parsed (once): the recording works
    assert not [s for s in parsed if "__c" in s], parsed
