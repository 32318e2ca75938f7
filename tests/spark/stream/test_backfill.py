"""A continuous query started over its history (issue #34, item 1; docs/guides/streams.md#continuous-queries-as-statements):
``CREATE STREAMING QUERY … BACKFILL FROM <history> AS …`` and ``dfsql.start(…,
backfill=…)``. The history holds what arrived before the stream's first row; its sink
then receives exactly the rows a bounded replay of history ∪ stream gives before the
stream's frontier.

Expected rows come from the paper (``examples/paper/figures.json``: the history is the
paper's rows that arrived before a cut, the stream the rest) and, over random workloads
cut at random points, from the bounded replay of all the rows (an independent path: the
replay's driver, not the bucket processor)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dfsql
from dfsql.errors import DfsqlError
from dfsql.spark.progress import listening
from tests.spark.feeds import FIG14_TABLE, FIGURES, PAPER
from tests.spark.feeds import STREAM_QUERY as QUERY
from tests.spark.feeds import split_history as _split
from tests.spark.feeds import workload as _workload

COLUMNS = ["key", "total", "window_start", "window_end", "pane_index", "pane_timing", "is_last",
           "emit_time", "is_retraction"]


def _ts(v):
    return None if v is None else datetime.strptime(v, "%Y-%m-%d %H:%M:%S")


def _paper_rows(fig: dict) -> list[tuple]:
    return [tuple(_ts(r[c]) if c in ("window_start", "window_end", "emit_time") else r[c]
                  for c in COLUMNS) for r in fig["expected"]]


@pytest.fixture
def paper_split(spark, paper_tables, tmp_path):
    """The paper's rows split at an arrival instant: ``scores_history`` (before it) and
    the stream ``scores_live`` (from it on, then the sentinel)."""
    frame = pd.read_csv(PAPER / "events.csv", parse_dates=["event_time", "arrival_time"])
    for col in ("event_time", "arrival_time"):
        frame[col] = frame[col].dt.tz_localize("UTC")

    def split(at: str, trickle: bool = False) -> Path:
        cut = int((frame["arrival_time"] < pd.Timestamp(at, tz="UTC")).sum())
        path = tmp_path / f"live-{cut}"
        _split(spark, frame, cut, path, "scores_live", "scores_history", trickle=trickle)
        return path

    yield split
    for q in spark.streams.active:
        q.stop()
    for v in ("scores_live", "scores_history", "scores_live_all"):
        spark.catalog.dropTempView(v)


def _create(spark, name: str, fig: str, head: str = "") -> None:
    from dfsql.continuous_queries import QUERIES

    query = FIGURES[fig]["query"].replace("FROM scores", "FROM scores_live")
    dfsql.sql(f"CREATE STREAMING QUERY {name}{head} BACKFILL FROM scores_history AS {query}",
              spark)
    QUERIES.running[name].query.processAllAvailable()


@pytest.mark.parametrize("fig,cut", [
    ("fig14_sessions_retracting", "2015-09-01 12:05:00"),  # the cut
    ("fig14_sessions_retracting", "2015-09-01 12:07:00"),  # the streams guide's cut
    ("fig13_fixed_early_ontime_late", "2015-09-01 12:06:30"),
    ("fig13_fixed_early_ontime_late", "2015-09-01 12:08:30"),  # all but the last row
])
def test_a_backfilled_directory_holds_the_papers_panes(spark, paper_split, tmp_path, fig, cut):
    paper_split(cut)
    out = tmp_path / "panes"
    _create(spark, "backfilled", fig, f" INTO DIRECTORY '{out}'")
    got = spark.read.parquet(str(out)).select(*COLUMNS).collect()
    want = _paper_rows(FIGURES[fig])
    assert sorted(map(tuple, got), key=repr) == sorted(want, key=repr)
    assert len(got) == len(want) >= 9
    dfsql.sql("STOP STREAMING QUERY backfilled", spark)


def test_a_backfilled_table_holds_the_live_windows(spark, paper_split):
    paper_split("2015-09-01 12:07:10")
    said: list[str] = []
    with listening(said.append):  # issue #51: the backfill says what it does
        _create(spark, "backfilled_table", "fig14_sessions_retracting")
    assert said == ["backfill: replaying the history of scores_live from scores_history, "
                    "as the state of the stream's first micro-batch (its panes reach the "
                    "sink with that batch)"]
    rows = spark.sql("SELECT * FROM global_temp.backfilled_table ORDER BY window_start")
    assert [tuple(r) for r in rows.collect()] == FIG14_TABLE
    dfsql.sql("STOP STREAMING QUERY backfilled_table", spark)


@pytest.mark.parametrize("seed,window,trigger,emit,watermark", [
    (11, "SESSIONS(GAP 30 SECONDS)", "EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
     "ACCUMULATING AND RETRACTING", "DELAY 20 SECONDS"),
    (12, "FIXED(1 MINUTE)", "AT WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROW",
     "ACCUMULATING AND RETRACTING", "PERCENTILE 90"),
    (13, "SLIDING(1 MINUTE, EVERY 20 SECONDS)", "REPEAT WATERMARK", "DISCARDING",
     "DELAY 20 SECONDS"),
])
def test_history_and_stream_equal_the_replay_of_both(spark, tmp_path, seed, window, trigger,
                                                     emit, watermark):
    """Random workloads cut at a random row (an instant may fall on both sides): the
    sink's rows, batch by batch, are the bounded replay's of all the rows before the
    stream's frontier, in order."""
    frame = _workload(seed)
    cut = int(np.random.default_rng(200 + seed).integers(1, len(frame) - 1))
    _split(spark, frame, cut, tmp_path / "in", "live_src", "history_src")
    q = QUERY.format(window=window, trigger=trigger, emit=emit).replace(
        "WATERMARK DELAY 20 SECONDS", f"WATERMARK {watermark}")
    batches: list[list] = []
    try:
        query = dfsql.start(q.format(t="live_src"), spark=spark, backfill="history_src",
                            sink=lambda b, i: batches.append(b.collect()),
                            checkpoint=str(tmp_path / "ck"), trigger={"availableNow": True})
        query.awaitTermination()
        frontier = frame["arrival_time"].max().to_pydatetime().replace(tzinfo=None) + \
            pd.Timedelta(hours=1)
        replay = [r for r in dfsql.sql(q.format(t="live_src_all"), spark).collect()
                  if r.emit_time < frontier]
    finally:
        for v in ("live_src", "history_src", "live_src_all"):
            spark.catalog.dropTempView(v)
    streamed = [r for b in batches for r in b]
    assert len(replay) > 50
    assert streamed == replay
    # the history's rows came with the first micro-batch
    first_arrival = frame["arrival_time"].iloc[cut].to_pydatetime().replace(tzinfo=None)
    assert sum(r.emit_time < first_arrival for r in batches[0]) == \
        sum(r.emit_time < first_arrival for r in replay)


def test_a_restart_after_the_first_batch_reads_no_history(spark, paper_split, tmp_path):
    """The history's state and panes are committed with the first micro-batch: a restart
    from that checkpoint does not read the history again (it may be gone), and the sink
    gets no row twice."""
    path = paper_split("2015-09-01 12:07:10", trickle=True)
    later = sorted(path.glob("*.parquet"))[1:]  # held back: the first run reads one file
    held = path.parent / "held"
    held.mkdir()
    for f in later:
        f.rename(held / f.name)  # a rename keeps the file's modification time
    fig = FIGURES["fig14_sessions_retracting"]
    query = fig["query"].replace("FROM scores", "FROM scores_live")
    batches: dict[int, list] = {}

    def sink(b, i):
        batches[i] = [tuple(r) for r in b.select(*COLUMNS).collect()]

    ck = str(tmp_path / "ck")
    once = dfsql.start(query, sink=sink, checkpoint=ck, backfill="scores_history",
                       trigger={"availableNow": True}, spark=spark)
    once.awaitTermination()
    assert list(batches) == [0]
    spark.catalog.dropTempView("scores_history")
    for f in later:
        (held / f.name).rename(f)
    rest = dfsql.start(query, sink=sink, checkpoint=ck, backfill="scores_history",
                       trigger={"availableNow": True}, spark=spark)
    rest.awaitTermination()
    assert sorted(batches) == [0, 1, 2, 3]  # three files after the first, and the sentinel
    got = [r for i in sorted(batches) for r in batches[i]]
    assert sorted(got, key=repr) == sorted(_paper_rows(fig), key=repr)


@pytest.mark.parametrize("head,query_edit,line,col,words", [
    # the history is not there: Spark's message, at the name
    (" BACKFILL FROM no_such_history", None, 1, 42, "no_such_history"),
    # the history lacks a column the query reads from its stream
    (" BACKFILL FROM (SELECT key, event_time, arrival_time FROM scores_history)", None, 1, 42,
     "value"),
    # a stream is no history
    (" BACKFILL FROM scores_live", None, 1, 42, "bounded"),
    # the engine's clock: no PROCESSING TIME to order the history by
    (" BACKFILL FROM scores_history", ("PROCESSING TIME arrival_time", ""), 1, 42,
     "PROCESSING TIME"),
    (" BACKFILL scores_history", None, 1, 37, "FROM"),
    (" BACKFILL FROM", None, 1, 42, "table"),
])
def test_backfill_mistakes_are_positioned_and_start_nothing(spark, paper_split, head,
                                                            query_edit, line, col, words):
    paper_split("2015-09-01 12:05:00")
    query = FIGURES["fig14_sessions_retracting"]["query"].replace("FROM scores",
                                                                 "FROM scores_live")
    query = query.replace("WATERMARK FROM paper_watermarks", "WATERMARK DELAY 1 MINUTE")
    if query_edit:
        query = query.replace(*query_edit)
    with pytest.raises(DfsqlError) as info:
        dfsql.sql(f"CREATE STREAMING QUERY bad{head} AS {query}", spark)
    assert (info.value.line, info.value.column) == (line, col), info.value
    assert words in str(info.value)
    assert info.value.hint
    assert not spark.streams.active
    assert dfsql.sql("SHOW STREAMING QUERIES", spark).collect() == []


def test_a_first_batch_without_arrivals_still_delivers_the_history(spark, paper_split,
                                                                   tmp_path):
    """The stream's first micro-batch holds one row that never arrives (NULL arrival
    time): no bucket has an element or a watermark point, yet each is called (with an
    empty points blob) and emits its history's rows then."""
    import os

    import pyarrow.parquet as pq

    path = paper_split("2015-09-01 12:07:10", trickle=True)
    first = pq.read_table(sorted(path.glob("*.parquet"))[0]).slice(0, 1).to_pandas()
    first["arrival_time"] = pd.NaT
    first["arrival_time"] = first["arrival_time"].dt.tz_localize("UTC")
    nowhere = path / "part-null.parquet"
    first.to_parquet(nowhere, index=False, coerce_timestamps="us")
    os.utime(nowhere, (1_699_999_999, 1_699_999_999))  # read first
    fig = FIGURES["fig14_sessions_retracting"]
    batches: dict[int, list] = {}

    def sink(b, i):
        batches[i] = [tuple(r) for r in b.select(*COLUMNS).collect()]

    q = dfsql.start(fig["query"].replace("FROM scores", "FROM scores_live"), sink=sink,
                    checkpoint=str(tmp_path / "ck"), backfill="scores_history",
                    trigger={"availableNow": True}, spark=spark)
    q.awaitTermination()
    before_cut = [r for r in _paper_rows(fig) if r[COLUMNS.index("emit_time")] <
                  datetime(2015, 9, 1, 12, 6, 20)]  # the history's last arrival
    assert len(before_cut) == 3
    assert sorted(batches[0], key=repr) == sorted(before_cut, key=repr)
    got = [r for i in sorted(batches) for r in batches[i]]
    assert sorted(got, key=repr) == sorted(_paper_rows(fig), key=repr)


def test_backfill_needs_buckets_of_keys(spark, paper_split):
    from dfsql.spark.stream.plan import BUCKETS_CONF

    paper_split("2015-09-01 12:05:00")
    query = FIGURES["fig14_sessions_retracting"]["query"].replace("FROM scores",
                                                                 "FROM scores_live")
    spark.conf.set(BUCKETS_CONF, "-1")
    try:
        with pytest.raises(DfsqlError) as info:
            dfsql.start(query, sink=lambda b, i: None, backfill="scores_history", spark=spark)
    finally:
        spark.conf.unset(BUCKETS_CONF)
    assert "buckets" in str(info.value) and info.value.hint
    assert not spark.streams.active
