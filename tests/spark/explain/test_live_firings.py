"""Why a running continuous query has or has not produced a window's pane (issue #34,
item 3; docs/guides/streams.md#continuous-queries-as-statements): ``EXPLAIN FIRINGS FOR STREAMING QUERY q [WHERE p]`` reads the
query's state and gives, for every live window now, the last pane it emitted and a
WAITING row saying what it waits for.

Expected rows come from the paper by hand (the stream read up to 12:06:20, with and
without a backfill) and, over random workloads cut at random points, from a bounded
EXPLAIN FIRINGS of the rows that arrived before the stream's frontier (an independent
path: the replay's driver over the rows, not the bucket processor's state)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dfsql
from dfsql.errors import DfsqlError
from tests.conftest import modified_in_order, paper_stream_dir
from tests.spark.feeds import FIG14
from tests.spark.feeds import STREAM_QUERY as QUERY
from tests.spark.feeds import start as _start
from tests.spark.feeds import t as _t
from tests.spark.feeds import workload as _workload

EVERY = "EVERY 1 MINUTE in EVERY 1 MINUTE UNTIL WATERMARK, before UNTIL, THEN branch 1"
CLOCK = "; the query's clock stands at"
COLUMNS = ("key", "window_start", "window_end", "at", "event", "watermark", "pane_index",
           "pane_timing", "detail")




def _waits(end: str, trigger: str) -> str:
    return (f"watermark 12:02:00 < window end {end} (held by paper_watermarks: its last "
            f"mark is 12:02:00); the trigger waits for {trigger}; the query's clock stands "
            "at 12:06:20, the input's latest arrival")


#: Figure 14's query having read the rows that arrived up to 12:06:20 (the 8 arriving
#: then is read, not yet run: its instant is the frontier). By hand from the paper: at
#: 12:05:00 the mark 12:01:40 passes [12:00:30,12:01:30)'s end with its period (ON_TIME
#: 5) and the period fires [12:02:10,12:03:10) early (7); at 12:06:00 the period fires
#: [12:03:20,12:05:00) early (3+4+3 = 10). The first window waits for nothing (it is
#: kept for late data), the other two for the watermark (12:02:00 since 12:06:00), their
#: periods starting again with their next element.
PAPER_NOW = [
    ("k", _t("12:00:30"), _t("12:01:30"), _t("12:05:00"), "FIRE", _t("12:01:40"), 0,
     "ON_TIME", f"{EVERY} and WATERMARK in EVERY 1 MINUTE UNTIL WATERMARK, after UNTIL, "
                "THEN branch 1; emits total=5"),
    ("k", _t("12:02:10"), _t("12:03:10"), _t("12:05:00"), "FIRE", _t("12:01:40"), 0,
     "EARLY", f"{EVERY}; emits total=7"),
    ("k", _t("12:03:20"), _t("12:05:00"), _t("12:06:00"), "FIRE", _t("12:02:00"), 0,
     "EARLY", f"{EVERY}; emits total=10"),
    ("k", _t("12:02:10"), _t("12:03:10"), _t("12:06:20"), "WAITING", _t("12:02:00"), None,
     None, _waits("12:03:10", "EVERY 1 MINUTE (from the next element on) or WATERMARK")),
    ("k", _t("12:03:20"), _t("12:05:00"), _t("12:06:20"), "WAITING", _t("12:02:00"), None,
     None, _waits("12:05:00", "EVERY 1 MINUTE (from the next element on) or WATERMARK")),
]




#: the query the tests that only read a running query's state share (below)
SHARED = "fig14_words"


@pytest.fixture(scope="module")
def _shared_scores(spark, paper_tables, tmp_path_factory):
    """The paper's rows up to 12:06's file as the stream ``scores_shared`` (as
    ``paper_live`` gives ``scores_live``, under a name its teardown leaves alone); the
    query :func:`fig14_query` started over it is stopped at the module's end."""
    from dfsql.continuous_queries import QUERIES

    tmp = tmp_path_factory.mktemp("fig14_shared")
    files = tmp / "all"
    paper_stream_dir(files)
    live = tmp / "live"
    live.mkdir()
    for f in sorted(files.glob("*.parquet"))[:3]:  # 12:04, 12:05 and 12:06
        shutil.copy2(f, live / f.name)
    schema = spark.read.parquet(str(live)).schema
    spark.readStream.schema(schema).parquet(str(live)).createOrReplaceTempView("scores_shared")
    yield "scores_shared"
    if SHARED in QUERIES.running:
        dfsql.sql(f"STOP STREAMING QUERY {SHARED}", spark)
    spark.catalog.dropTempView("scores_shared")


@pytest.fixture
def fig14_query(spark, _shared_scores) -> str:
    """Figure 14's query running over the rows up to 12:06:20, its name. The tests given
    it only read its state (EXPLAIN FIRINGS, SHOW, the shell), which reading does not
    change, so they share one query (one start and its micro-batches instead of one per
    test): started here when no test of the module has started it yet, or when another
    test's teardown stopped every stream (``paper_live``'s)."""
    from dfsql.continuous_queries import QUERIES

    running = QUERIES.running.get(SHARED)
    if running is None or not running.query.isActive:
        if running is not None:
            dfsql.sql(f"STOP STREAMING QUERY {SHARED}", spark)
        _start(spark, SHARED, FIG14.replace("FROM scores", f"FROM {_shared_scores}"))
    return SHARED


def test_a_running_query_says_what_each_live_window_waits_for(spark, fig14_query):
    rows = dfsql.sql(f"EXPLAIN FIRINGS FOR STREAMING QUERY {fig14_query}", spark).collect()
    assert [tuple(r) for r in rows] == PAPER_NOW
    assert tuple(rows[0].asDict()) == COLUMNS
    # WHERE narrows the rows as a bounded EXPLAIN FIRINGS' WHERE does
    waiting = dfsql.sql(f"EXPLAIN FIRINGS FOR STREAMING QUERY {fig14_query}\nWHERE event = "
                        "'WAITING' AND window_start > TIMESTAMP '2015-09-01 12:03:00'",
                        spark).collect()
    assert [tuple(r) for r in waiting] == PAPER_NOW[-1:]
    # what SHOW says of the same moment
    shown = dfsql.sql("SHOW STREAMING QUERIES", spark).collect()[0]
    assert (shown.frontier, shown.watermark) == ("2015-09-01 12:06:20", "2015-09-01 12:02:00")


@pytest.mark.parametrize("statement, message, at", [
    ("EXPLAIN FIRINGS FOR STREAMING QUERY nobody", "no continuous query named nobody",
     (1, 37)),
    ("EXPLAIN FIRINGS FOR STREAMING QUERY fig14_words\nWHERE no_such_column = 1",
     "no_such_column", (2, 7)),
    ("EXPLAIN FIRINGS FOR STREAMING fig14_words", "expected QUERY", (1, 31)),
    ("EXPLAIN FIRINGS FOR STREAMING QUERY fig14_words ORDER BY at", "unexpected 'ORDER'",
     (1, 49)),
])
def test_mistakes_are_positioned(spark, fig14_query, statement, message, at):
    assert fig14_query == "fig14_words"  # the name the statements give
    with pytest.raises(DfsqlError, match=message) as info:
        dfsql.sql(statement, spark).collect()
    assert (info.value.line, info.value.column) == at


def test_the_shell_explains_a_running_query_by_its_name(spark, fig14_query, capsys):
    """``\\explain firings q [WHERE …]`` in the shell: the statement's rows, printed; a
    mistake in the WHERE placed where it was typed on the command's line."""
    from tests.in_process import shell_on

    shell = shell_on(spark)
    capsys.readouterr()
    shell.command(f"\\explain firings {fig14_query} WHERE event = 'WAITING'")
    out = capsys.readouterr().out
    assert out.count("WAITING") == 2 and "EVERY 1 MINUTE (from the next element on)" in out
    assert "2 rows" in out
    with pytest.raises(DfsqlError, match="nope") as info:
        shell.command(f"\\explain firings {fig14_query} WHERE nope = 1")
    assert (info.value.line, info.value.column) == (1, 36)


def test_a_backfilled_query_explains_its_history_too(spark, paper_live):
    """The rows before 12:05 as the history, the stream from there: the same state."""
    first = sorted(paper_live.glob("*.parquet"))[0]  # 12:04's rows: the history's
    history = first.parent.parent / "history"
    history.mkdir()
    first.rename(history / first.name)
    spark.read.parquet(str(history)).createOrReplaceTempView("scores_before")
    _start(spark, "fig14_backfilled", FIG14.replace("FROM scores", "FROM scores_live"),
           " BACKFILL FROM scores_before")
    rows = dfsql.sql("EXPLAIN FIRINGS FOR STREAMING QUERY fig14_backfilled", spark).collect()
    assert [tuple(r) for r in rows] == PAPER_NOW
    dfsql.sql("STOP STREAMING QUERY fig14_backfilled", spark)


def test_a_query_without_a_batch_or_on_sparks_operator_is_refused(spark, paper_live,
                                                                   tmp_path):
    """Before its first micro-batch a query has no state; a query Spark's own streaming
    aggregation runs keeps Spark's state, which dfsql does not read: each said, placed."""
    empty = tmp_path / "empty"
    empty.mkdir()
    schema = spark.table("scores_live").schema
    spark.readStream.schema(schema).parquet(str(empty)).createOrReplaceTempView("scores_none")
    dfsql.sql("CREATE STREAMING QUERY nothing_yet AS "
              + FIG14.replace("FROM scores", "FROM scores_none"), spark)
    with pytest.raises(DfsqlError, match="has not completed a micro-batch") as info:
        dfsql.sql("EXPLAIN FIRINGS FOR STREAMING QUERY nothing_yet", spark)
    assert (info.value.line, info.value.column) == (1, 37)
    _start(spark, "native_now", "SELECT key, SUM(value) AS total FROM scores_live GROUP BY "
                                "key WINDOW FIXED(1 MINUTE) ON event_time")
    with pytest.raises(DfsqlError, match="Spark's own streaming aggregation"):
        dfsql.sql("EXPLAIN FIRINGS FOR STREAMING QUERY native_now", spark)
    for name in ("nothing_yet", "native_now"):
        dfsql.sql(f"STOP STREAMING QUERY {name}", spark)
    spark.catalog.dropTempView("scores_none")


# --------------------------------------------------------------------------- property


def _gapped(seed: int) -> tuple[pd.DataFrame, list[int]]:
    """A random workload with two quiet spells of 10 minutes at random rows: each
    cut there ends a file whose last row (NULL event time: no window, no watermark)
    arrives 5 minutes after the rows before it, and is the stream's frontier."""
    frame = _workload(seed, n=240)
    rng = np.random.default_rng(300 + seed)
    cuts = sorted(rng.choice(np.arange(60, len(frame) - 20), 2, replace=False).tolist())
    for c in cuts:
        shift = pd.Timedelta(minutes=10)
        frame.loc[c:, "arrival_time"] += shift
        frame.loc[c:, "event_time"] += shift
    return frame, cuts


def _clock_row(frame: pd.DataFrame, upto: int) -> pd.DataFrame:
    row = frame.iloc[upto - 1:upto].copy()
    row["arrival_time"] += pd.Timedelta(minutes=5)
    row["event_time"] = pd.Series([pd.NaT], row.index, frame["event_time"].dtype)
    return row


def _write(frame: pd.DataFrame, path: Path, i: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    part = path / f"part-{i:04d}.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), part,
                   coerce_timestamps="us")
    modified_in_order(part, i)


def _bounded_now(spark, q: str, frame: pd.DataFrame, upto: int):
    """(WAITING rows, the last pane of every window live at its end, the windows whose
    final pane the end of input fired) of a bounded EXPLAIN FIRINGS over the rows before
    the cut, and its end instant. A running query has no end of input: it WAITS for those
    windows too, where the bounded run, whose +inf fired them, has no WAITING row."""
    spark.createDataFrame(frame.iloc[:upto]).createOrReplaceTempView("bounded_src")
    rows = [tuple(r) for r in dfsql.sql(f"EXPLAIN FIRINGS {q.format(t='bounded_src')}",
                                        spark).collect()]
    end = max(r[3] for r in rows)
    live = {r[:3] for r in rows if r[4] == "EXPIRE" and r[3] == end and "end of input" in r[8]}
    last = {}
    for r in rows:
        if r[4] == "FIRE" and r[5] is not None:  # not the end of input's +inf panes
            last[r[:3]] = r
    fires = sorted((last[w] for w in live if w in last), key=repr)
    waiting = sorted((r for r in rows if r[4] == "WAITING"), key=repr)
    fired_at_end = {r[:3] for r in rows if r[4] == "FIRE" and "watermark → +inf" in r[8]}
    return waiting, fires, fired_at_end, end


@pytest.mark.parametrize("seed,window,trigger,emit", [
    (21, "SESSIONS(GAP 30 SECONDS)", "EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
     "ACCUMULATING AND RETRACTING"),
    (22, "FIXED(1 MINUTE)", "AT WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROW",
     "ACCUMULATING"),
    (23, "SLIDING(1 MINUTE, EVERY 20 SECONDS)", "REPEAT ANY(AFTER 3 ROWS, AFTER 15 SECONDS)",
     "DISCARDING"),
])
def test_a_running_query_now_equals_the_bounded_explain_at_its_frontier(
        spark, tmp_path, seed, window, trigger, emit):
    """Random workloads: a random history backfilled, then the stream read to a random
    cut, then to another. At each, EXPLAIN FIRINGS FOR STREAMING QUERY gives the WAITING
    rows a bounded EXPLAIN FIRINGS of the rows before the frontier gives at its end (and
    one for each window whose final pane only that run's end of input fired), and the
    last pane of each window still live there."""
    from dfsql.continuous_queries import QUERIES

    frame, cuts = _gapped(seed)
    history = int(np.random.default_rng(400 + seed).integers(1, cuts[0]))
    q = QUERY.format(window=window, trigger=trigger, emit=emit)
    live = tmp_path / "live"
    live.mkdir()
    spark.createDataFrame(frame.iloc[:history]).createOrReplaceTempView("history_src")
    _write(pd.concat([frame.iloc[history:cuts[0]], _clock_row(frame, cuts[0])]), live, 0)
    schema = spark.read.parquet(str(live)).schema
    spark.readStream.schema(schema).parquet(str(live)).createOrReplaceTempView("live_src")
    try:
        dfsql.sql("CREATE STREAMING QUERY random_now BACKFILL FROM history_src AS "
                  + q.format(t="live_src"), spark)
        running = QUERIES.running["random_now"].query
        told = 0
        for i, upto in enumerate(cuts):
            if i:
                _write(pd.concat([frame.iloc[cuts[i - 1]:upto], _clock_row(frame, upto)]),
                       live, i)
            running.processAllAvailable()
            frontier = (frame["arrival_time"].iloc[upto - 1] + pd.Timedelta(minutes=5)) \
                .to_pydatetime().replace(tzinfo=None)
            waiting, fires, fired_at_end, end = _bounded_now(spark, q, frame, upto)
            assert end < frontier  # the bounded run's end is the same state
            now = [tuple(r) for r in dfsql.sql(
                "EXPLAIN FIRINGS FOR STREAMING QUERY random_now", spark).collect()]
            got_fires = sorted((r for r in now if r[4] == "FIRE"), key=repr)
            assert got_fires == fires and len(fires) >= 3
            got_waiting = [r for r in now if r[4] == "WAITING"]
            assert {r[3] for r in got_waiting} <= {frontier}
            assert all(CLOCK in r[8] for r in got_waiting)
            got = sorted(((*r[:3], end, *r[4:8], r[8].split(CLOCK)[0]) for r in got_waiting),
                         key=repr)
            assert [r for r in got if r[:3] not in fired_at_end] == waiting
            assert {r[:3] for r in got} - {r[:3] for r in waiting} == fired_at_end
            told += len(got)
        assert told  # some window was waiting at some cut
    finally:
        if "random_now" in QUERIES.running:
            dfsql.sql("STOP STREAMING QUERY random_now", spark)
        for v in ("live_src", "history_src", "bounded_src"):
            spark.catalog.dropTempView(v)
