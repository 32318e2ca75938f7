"""Several inputs on one clock (docs/reference.md#processing-time): a stream of rows and a ``WATERMARK FROM``
stream of marks (or of writers' notes), each cut into micro-batches on its own, give
the bounded replay of the same rows and marks before the query's frontier — the
earliest of the inputs' latest arrivals — however Spark cuts them, also when one input
runs several micro-batches ahead of the other.

Each input is a directory of parquet files read one (or a few) files per micro-batch;
the cuts of the two are drawn independently. Both end with a sentinel at the same
instant, an hour after the last row (rows: a NULL event time, which belongs to no window;
marks: the last mark repeated), so the final frontier is that instant.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dfsql
from tests.spark.feeds import paper_events as _paper_events
from tests.spark.feeds import with_sentinel as _with_sentinel
from tests.spark.feeds import workload as _workload
from tests.spark.feeds import write_parts as _write_parts

PAPER = Path(__file__).resolve().parents[3] / "examples" / "paper"
FIGURES = json.loads((PAPER / "figures.json").read_text())["figures"]
WITH_MARKS = [f for f in FIGURES if "WATERMARK FROM paper_watermarks" in f["query"]]

QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK FROM {m}{tail} "
         "PROCESSING TIME arrival_time ALLOWED LATENESS 30 SECONDS "
         "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
         "EMIT ACCUMULATING AND RETRACTING")


def _marks(frame: pd.DataFrame, rng, by: bool) -> pd.DataFrame:
    """A mark every 20 s of processing time: the largest event time arrived so far less a
    random 10-40 s (not monotone: the watermark takes the largest so far). By writer:
    w2 notes only in the first third, 30 s behind w1, then goes quiet. The last mark
    repeats at the rows' sentinel instant."""
    rows = frame.iloc[:-1]
    ticks = pd.date_range(rows["arrival_time"].min(), rows["arrival_time"].max(), freq="20s")
    seen = [rows.loc[rows["arrival_time"] <= t, "event_time"].max() for t in ticks]
    lag = rng.integers(10, 40, len(ticks))
    marks = pd.DataFrame({"processing_time": ticks, "watermark": [
        s - pd.Timedelta(seconds=int(d)) for s, d in zip(seen, lag, strict=True)]})
    marks = marks[marks["watermark"].notna()]
    end = marks.iloc[-1:].assign(processing_time=frame["arrival_time"].iloc[-1])
    if not by:
        return pd.concat([marks, end], ignore_index=True)
    w2 = marks.iloc[:len(marks) // 3].assign(
        writer="w2", watermark=lambda m: m["watermark"] - pd.Timedelta(seconds=30))
    notes = pd.concat([marks.assign(writer="w1"), w2, end.assign(writer="w1")],
                      ignore_index=True)
    return notes.rename(columns={"watermark": "noted_time"})[
        ["writer", "processing_time", "noted_time"]].sort_values(
        "processing_time", kind="stable", ignore_index=True)


def _latest_per_batch(arrivals: pd.Series, cuts: list[int], per_batch: int) -> list:
    """An input's latest arrival after each micro-batch (files of ``cuts`` and the last
    row alone, as :func:`_run` writes them; ``per_batch`` files a batch)."""
    bounds = [*cuts, len(arrivals) - 1, len(arrivals)]
    files = [arrivals.iloc[b - 1] for b in bounds]
    return files[per_batch - 1::per_batch] + ([files[-1]] if len(files) % per_batch else [])


def _lead(frame, marks, cuts, mcuts, per_batch) -> float:
    """The largest gap, in seconds, between the two inputs' latest arrivals after any
    micro-batch (sentinels included): how far one runs ahead of the other."""
    a = _latest_per_batch(frame["arrival_time"], cuts, per_batch[0])
    b = _latest_per_batch(marks["processing_time"], mcuts, per_batch[1])
    n = max(len(a), len(b))
    a, b = a + [a[-1]] * (n - len(a)), b + [b[-1]] * (n - len(b))
    return max(abs((x - y).total_seconds()) for x, y in zip(a, b, strict=True))


def _cuts(rng, n: int, files: int) -> list[int]:
    return sorted(rng.choice(np.arange(1, n - 1), files - 1, replace=False).tolist())


def _run(spark, tmp: Path, frame, marks, query: str, cuts, mcuts, per_batch=(1, 1)):
    """(the stream's rows in order; the replay's rows before the final frontier)."""
    _write_parts(frame, [*cuts, len(frame) - 1], tmp / "in")
    _write_parts(marks, [*mcuts, len(marks) - 1], tmp / "marks")
    views = {}
    for name, sub, n in (("rows", "in", per_batch[0]), ("marks", "marks", per_batch[1])):
        path = str(tmp / sub)
        spark.read.parquet(path).createOrReplaceTempView(f"si_{name}_bounded")
        (spark.readStream.schema(spark.read.parquet(path).schema)
         .option("maxFilesPerTrigger", n).parquet(path)
         .createOrReplaceTempView(f"si_{name}_live"))
        views[name] = f"si_{name}"
    got: list = []
    q = dfsql.start(query.format(t="si_rows_live", m="si_marks_live"),
                    sink=lambda b, i: got.extend(b.collect()),
                    checkpoint=str(tmp / "ck"), trigger={"availableNow": True}, spark=spark)
    q.awaitTermination()
    frontier = frame["arrival_time"].max().to_pydatetime().replace(tzinfo=None)
    want = [r for r in dfsql.sql(query.format(t="si_rows_bounded", m="si_marks_bounded"),
                                 spark).collect() if r.emit_time < frontier]
    return got, want


@pytest.mark.parametrize("seed,by", [(11, False), (12, False), (13, True)])
def test_rows_and_marks_cut_independently_equal_the_replay(spark, tmp_path, seed, by):
    """Random independent cuts of both streams and random files per micro-batch: the
    result is the replay's. BY writer with IDLE TIMEOUT (w2 goes quiet): the cuts are
    drawn so that neither input runs a timeout ahead, so no input is let pass."""
    rng = np.random.default_rng(seed)
    frame = _with_sentinel(_workload(seed), pd.Timedelta(minutes=2))
    marks = _marks(frame, rng, by)
    timeout = 300
    for _ in range(1000):
        cuts = _cuts(rng, len(frame), int(rng.integers(3, 9)))
        mcuts = _cuts(rng, len(marks), int(rng.integers(3, 9)))
        per_batch = (1, int(rng.integers(1, 3)))
        lead = _lead(frame, marks, cuts, mcuts, per_batch)
        if lead > 60 and (not by or lead < timeout):
            break
    else:
        raise AssertionError("no cuts drawn")
    tail = f" BY writer IDLE TIMEOUT {timeout} SECONDS" if by else ""
    got, want = _run(spark, tmp_path, frame, marks, QUERY.format(t="{t}", m="{m}", tail=tail),
                     cuts, mcuts, per_batch)
    assert len(want) > 30 and any(r.is_retraction for r in want)
    assert got == want


@pytest.mark.parametrize("fig,marks_ahead", [(f, i % 2 == 0) for i, f in enumerate(WITH_MARKS)],
                         ids=[f["name"] for f in WITH_MARKS])
def test_paper_figures_with_a_stream_of_marks(spark, paper_tables, tmp_path, fig, marks_ahead):
    """Figures 12-14 with ``paper_watermarks`` streamed beside the rows: one input a file
    of one or two rows per micro-batch, the other in two files, so it runs ahead (the
    marks in every other figure, the rows in the rest). The stream is the replay, and
    the replay is the figure."""
    frame = _with_sentinel(_paper_events())
    marks = spark.table("paper_watermarks").toPandas()
    for col in marks.columns:
        marks[col] = pd.to_datetime(marks[col]).dt.tz_localize("UTC")
    marks = pd.concat([marks, marks.iloc[-1:].assign(
        processing_time=frame["arrival_time"].iloc[-1])], ignore_index=True)
    # the one input two rows a file (the marks: one), the other in two files
    small = list(range(2, len(frame) - 1, 2)), list(range(1, len(marks) - 1))
    halves = [(len(frame) - 1) // 2], [(len(marks) - 1) // 2]
    cuts, mcuts = (halves[0], small[1]) if not marks_ahead else (small[0], halves[1])
    query = fig["query"].replace("FROM scores", "FROM {t}").replace(
        "FROM paper_watermarks", "FROM {m}")
    got, want = _run(spark, tmp_path, frame, marks, query, cuts, mcuts)
    assert got == want
    expected = [r for r in fig["expected"] if r["emit_time"] is not None]
    assert [r.total for r in want] == [r["total"] for r in expected]


def test_a_quiet_input_holds_the_frontier_until_its_idle_timeout(spark, tmp_path):
    """The marks stop half-way through the rows: without IDLE TIMEOUT the frontier stays
    at the last mark's arrival (nothing after it is emitted); with IDLE TIMEOUT 1 MINUTE
    it passes them, and the result is the replay of the same rows and marks."""
    rng = np.random.default_rng(21)
    frame = _with_sentinel(_workload(21))
    marks = _marks(frame, rng, False).iloc[:-1]
    marks = marks.iloc[:len(marks) // 2]
    last_mark = marks["processing_time"].iloc[-1].to_pydatetime().replace(tzinfo=None)
    # while the marks last, each micro-batch of both covers the same stretch of
    # processing time (neither input runs a timeout ahead); then only rows come. Four
    # files of rows and the sentinel's: what is held and what passes is the replay's,
    # which no cut changes
    cuts = _cuts(rng, len(frame), 4)
    bounds = [frame["arrival_time"].iloc[c] for c in cuts]
    mcuts = sorted({int((marks["processing_time"] < b).sum()) for b in bounds} -
                   {0, len(marks) - 1, len(marks)})
    q = QUERY.format(t="{t}", m="{m}", tail="")
    held, want = _run(spark, tmp_path / "held", frame, marks, q, cuts, mcuts)
    assert held == [r for r in want if r.emit_time < last_mark]
    assert len(held) > 5 and len(held) < len(want) - 10
    passed, want = _run(spark, tmp_path / "passed", frame, marks,
                        QUERY.format(t="{t}", m="{m}", tail=" IDLE TIMEOUT 1 MINUTE"),
                        cuts, mcuts)
    assert passed == want



def test_show_says_which_input_holds_the_frontier(spark, tmp_path):
    """SHOW STREAMING QUERIES (docs/guides/streams.md#continuous-queries-as-statements, "why no output"): each input's latest
    processing time, the frontier, and the input it stands at. The marks stop half-way
    through the rows: the frontier is the last mark's arrival, held by the marks."""
    from dfsql.continuous_queries import QUERIES

    rng = np.random.default_rng(22)
    frame = _with_sentinel(_workload(22))
    marks = _marks(frame, rng, False).iloc[:-1]
    marks = marks.iloc[:len(marks) // 2]
    _write_parts(frame, [len(frame) // 2], tmp_path / "in")
    _write_parts(marks, [len(marks) // 2], tmp_path / "marks")
    for name, sub in (("show_rows", "in"), ("show_marks", "marks")):
        path = str(tmp_path / sub)
        (spark.readStream.schema(spark.read.parquet(path).schema).parquet(path)
         .createOrReplaceTempView(name))
    try:
        dfsql.sql("CREATE STREAMING QUERY held_by_marks AS " +
                  QUERY.format(t="show_rows", m="show_marks", tail=""), spark)
        QUERIES.running["held_by_marks"].query.processAllAvailable()
        [shown] = dfsql.sql("SHOW STREAMING QUERIES", spark).collect()
    finally:
        for q in spark.streams.active:
            q.stop()
        dfsql.sql("STOP STREAMING QUERY held_by_marks", spark)
        for name in ("show_rows", "show_marks"):
            spark.catalog.dropTempView(name)

    def when(t) -> str:
        return str(t.to_pydatetime().replace(tzinfo=None))

    last_mark = when(marks["processing_time"].iloc[-1])
    assert shown.frontier == last_mark
    assert shown.inputs == f"rows: {when(frame['arrival_time'].iloc[-1])}; marks: {last_mark}"
    assert shown.held_by == "marks"
