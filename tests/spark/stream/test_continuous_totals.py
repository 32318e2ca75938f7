"""SHOW STREAMING QUERIES' figures through idle periods, restarts and ALTER (issue #51,
item 1): computed from the batches the query ran (its progress log), never from
Spark's progress reports alone.

While a stream is idle Spark posts a report every ``noDataProgressEventInterval`` (10 s;
200 ms here) that ran no batch but carries the next batch's id with no rows: SHOW took
it for that batch and skipped the real one when it came. Expected figures come from the
rows fed (docs/reference.md "SHOW STREAMING QUERIES", docs/guides/streams.md): input
rows counted, the frontier the latest arrival, the DELAY watermark the largest event
time arrived less the delay."""

from __future__ import annotations

import base64
import pickle
import subprocess
import sys
import time
import warnings
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.errors import PySparkException

import dfsql
from dfsql.session import setting_while
from dfsql.spark.stream.sink import QUIET
from dfsql.spark.stream.sinks import batch_rows
from tests.conftest import modified_in_order

IDLE = "spark.sql.streaming.noDataProgressEventInterval"
T0 = datetime(2026, 1, 1)
SCHEMA = "k STRING, v BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP"


def _feed(src: Path, i: int, rows: list[tuple[str, int, datetime, datetime]]) -> None:
    """One file of ``rows``, written elsewhere and renamed in (a file stream must never
    see half a file), the ``i``-th in the stream's order."""
    frame = pd.DataFrame(rows, columns=["k", "v", "event_time", "arrival_time"])
    tmp = src.parent / f".{src.name}-{i:04d}.parquet"
    frame.to_parquet(tmp, index=False, coerce_timestamps="us")
    modified_in_order(tmp, i)
    tmp.rename(src / f"part-{i:04d}.parquet")


def _shown(spark, name: str):
    return next(r for r in dfsql.sql("SHOW STREAMING QUERIES", spark).collect()
                if r.name == name)


def _running(name: str):
    from dfsql.continuous_queries import QUERIES

    return QUERIES.running[name].query


@pytest.fixture
def trickle(spark, tmp_path):
    """An empty stream directory read as ``trickle`` (the first file comes later)."""
    src = tmp_path / "trickle"
    src.mkdir()
    spark.readStream.schema(SCHEMA).parquet(str(src)).createOrReplaceTempView("trickle")
    yield src
    for q in spark.streams.active:
        q.stop()
    spark.catalog.dropTempView("trickle")


QUERY = ("SELECT k, COUNT(*) AS n FROM trickle GROUP BY k WINDOW FIXED(1 HOUR) ON "
         "event_time WATERMARK DELAY {delay} PROCESSING TIME arrival_time")
NATIVE = ("SELECT k, COUNT(*) AS n FROM trickle GROUP BY k WINDOW FIXED(1 HOUR) ON "
          "event_time WATERMARK DELAY 10 MINUTES")


@pytest.mark.parametrize("query,watermark", [
    # dfsql's executor: PROCESSING TIME's clock. The frontier is the latest arrival,
    # 03:01; the instants before it are complete (rows of 03:01 may still come), so the
    # watermark is that of the rows arrived before it: 02:00 less 10 minutes
    (QUERY.format(delay="10 MINUTES"), "2026-01-01 01:50:00"),
    # Spark's own operator (the engine's clock): every batch is complete, and Spark's
    # watermark is the largest event time read, 03:00, less 10 minutes
    (NATIVE, "2026-01-01 02:50:00"),
])
def test_idle_gaps_longer_than_sparks_report_interval(spark, trickle, query, watermark):
    """One row per file, four files with idle gaps between them longer than Spark's
    idle-report interval: SHOW counts the four rows and stands at the fourth."""
    with setting_while(spark, IDLE, "200ms"):
        dfsql.sql(f"CREATE STREAMING QUERY idle_gaps AS {query}", spark)
    try:
        q = _running("idle_gaps")
        for i in range(4):
            _feed(trickle, i, [("a", i, T0 + timedelta(hours=i),
                                T0 + timedelta(hours=i, minutes=1))])
            q.processAllAvailable()
            time.sleep(1.0)  # idle: Spark reports "batch i+1" several times, with no rows
        row = _shown(spark, "idle_gaps")
        assert (row.input_rows, row.watermark) == (4, watermark)
        if "PROCESSING TIME" in query:
            assert (row.frontier, row.inputs) == ("2026-01-01 03:01:00",
                                                  "rows: 2026-01-01 03:01:00")
        # every batch with data ran, and the idle reports are no batches
        ran = [p["batchId"] for p in q.recentProgress if "addBatch" in p["durationMs"]]
        assert row.batches == max(ran) + 1
    finally:
        dfsql.sql("STOP STREAMING QUERY idle_gaps", spark)


def test_show_after_a_restart_keeps_the_last_committed_figures(spark, trickle, tmp_path):
    """Stopped and started again from its checkpoint (as a restarted server starts a kept
    query), before any new row: SHOW shows what the batches before did, not NULLs; a
    new row then adds to them."""
    from dfsql.continuous import restart, stop_all
    from dfsql.continuous_queries import QUERIES
    from dfsql.language.continuous import parse_continuous

    ck = tmp_path / "ck"
    text = (f"CREATE STREAMING QUERY restarted CHECKPOINT '{ck}' AS "
            + QUERY.format(delay="0 SECONDS"))
    dfsql.sql(text, spark)
    try:
        q = _running("restarted")
        for i in range(2):
            _feed(trickle, i, [("a", i, T0 + timedelta(hours=i), T0 + timedelta(hours=i))])
            q.processAllAvailable()
        before = _shown(spark, "restarted")  # the watermark: the rows before the frontier's
        assert (before.input_rows, before.watermark, before.frontier) == (
            2, "2026-01-01 00:00:00", "2026-01-01 01:00:00")
        stop_all()  # as a server shutting down
        restart(parse_continuous(text), text, spark)
        after = _shown(spark, "restarted")
        assert (after.input_rows, after.watermark, after.frontier, after.batches) == (
            2, "2026-01-01 00:00:00", "2026-01-01 01:00:00", before.batches)
        _feed(trickle, 2, [("a", 2, T0 + timedelta(hours=2), T0 + timedelta(hours=2))])
        QUERIES.running["restarted"].query.processAllAvailable()
        assert _shown(spark, "restarted").input_rows == 3
    finally:
        dfsql.sql("STOP STREAMING QUERY restarted", spark)


def test_readers_keep_the_old_table_until_the_restated_one_replaces_it(spark, paper_live):
    """Issue #51, item 2: a reader polling ``global_temp.q`` every 100 ms (another session,
    as a dashboard's) through an ALTER sees the old table, then the restated one —
    never no rows, never a table between the two. Figure 14's query (sessions, GAP 1
    MINUTE) over the rows up to 12:06:20 holds the sessions 5, 7 and 10; GAP 5 MINUTES
    restates it as the one session of 22 (tests/spark/stream/test_alter.py derives both)."""
    import threading

    from tests.spark.feeds import FIG14, GAP5
    from tests.spark.feeds import start as _start

    _start(spark, "readers", FIG14.replace("FROM scores", "FROM scores_live"))
    reader = spark.newSession()
    seen: list[tuple] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            seen.append(tuple(sorted(r.total for r in reader.sql(
                "SELECT total FROM global_temp.readers").collect())))
            time.sleep(0.1)

    polling = threading.Thread(target=poll)
    polling.start()
    try:
        time.sleep(0.3)
        dfsql.sql("ALTER STREAMING QUERY readers AS "
                  + GAP5.replace("FROM scores", "FROM scores_live"), spark)
        _running("readers").processAllAvailable()
        time.sleep(0.3)
    finally:
        done.set()
        polling.join()
        dfsql.sql("STOP STREAMING QUERY readers", spark)
    assert seen[0] == (5, 7, 10) and seen[-1] == (22,)
    assert set(seen) == {(5, 7, 10), (22,)}, seen
    # the old table until the new one, then the new one only
    first_new = seen.index((22,))
    assert all(s == (5, 7, 10) for s in seen[:first_new])
    assert all(s == (22,) for s in seen[first_new:])


def test_a_batch_cancelled_by_a_stop_prints_no_java_stack(spark):
    """Issue #51, item 6: at ALTER the old query's sink may be cancelled mid-batch;
    pyspark's ``toPandas`` then warned with Spark's whole Java stack into the user's
    program. The failure still raises (the batch runs again, or never), without it. The
    filter is the process's, which pytest resets around each test: so the warning filters
    are a user's program's, read from a fresh Python that imported dfsql as one does (no
    JVM of its own: the failing batch runs in this session), and without dfsql's filter
    the same batch does warn (the check can fail)."""
    fresh = subprocess.run([sys.executable, "-c", """
import base64, pickle, sys, warnings
import dfsql
from dfsql.spark.stream.sinks import batch_rows
sys.stdout.write(base64.b64encode(pickle.dumps(warnings.filters)).decode())
"""], capture_output=True, text=True, timeout=600, check=True)
    programs = pickle.loads(base64.b64decode(fresh.stdout))

    def warned(filters: list) -> list[warnings.WarningMessage]:
        with warnings.catch_warnings(record=True) as seen:  # restores pytest's on exit
            warnings.filters[:] = filters  # (entering invalidated the warnings seen before)
            with pytest.raises(PySparkException, match="cancelled"):  # still raises
                batch_rows(spark.range(3).selectExpr("raise_error('cancelled') AS x"))
        return [w for w in seen if issubclass(w.category, UserWarning)]

    assert warned(programs) == []
    # (Spark's own log of the failed task is the log's: log4j, at the level it is set)
    without = [f for f in programs if getattr(f[1], "pattern", f[1]) != QUIET]
    assert len(without) == len(programs) - 1
    assert any("toPandas attempted" in str(w.message) for w in warned(without))


def _restarted(spark, name: str) -> None:
    """Stop the query as a server shutting down stops its queries, and start it again
    from its checkpoint, as the restarted server starts a kept one (its latest
    version's statement, what ALTER made of it)."""
    from dfsql.continuous import restart, stop_all
    from dfsql.continuous_queries import QUERIES
    from dfsql.language.continuous import parse_continuous

    r = QUERIES.running[name]
    stop_all()
    restart(parse_continuous(r.text), r.text, spark, r.owner, r.altered, r.history)


def _expected(rows: list[tuple], delay: timedelta) -> tuple[int, str | None, str]:
    """(input rows, watermark, frontier) of the rows read so far, by the rules: every row
    counted; one input, so the frontier is its latest arrival; the instants before it
    are complete, and the DELAY watermark there is the largest event time arrived before
    it less the delay (None: no row arrived before it)."""
    frontier = max(r[3] for r in rows)
    before = [r[2] for r in rows if r[3] < frontier]
    return (len(rows), str(max(before) - delay) if before else None, str(frontier))


@given(st.data())
@settings(max_examples=3, deadline=None, derandomize=True, print_blob=True,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],  # a run is a stream's
          suppress_health_check=list(HealthCheck))
def test_show_equals_the_rows_read_through_idle_restarts_and_alter(spark, tmp_path_factory,
                                                                   data):
    """Over random feeds (files of 1-3 rows, late rows among them), random idle gaps
    longer than Spark's idle-report interval, random restarts and one ALTER (the
    watermark's delay changed): after every file SHOW's input_rows, watermark and
    frontier are those of the rows read so far."""
    tmp = tmp_path_factory.mktemp("show_prop")
    src, ck = tmp / "trickle", tmp / "ck"
    src.mkdir()
    spark.readStream.schema(SCHEMA).parquet(str(src)).createOrReplaceTempView("trickle")
    files = data.draw(st.integers(3, 6), label="files")
    alter_at = data.draw(st.integers(0, files - 2), label="alter after file")
    delays = (timedelta(minutes=10), timedelta(minutes=data.draw(st.integers(0, 30))))
    read: list[tuple] = []
    arrival = T0
    with setting_while(spark, IDLE, "200ms"):
        dfsql.sql(f"CREATE STREAMING QUERY prop CHECKPOINT '{ck}' AS "
                  + QUERY.format(delay="10 MINUTES"), spark)
        try:
            for i in range(files):
                rows = []
                for _ in range(data.draw(st.integers(1, 3), label="rows")):
                    arrival += timedelta(minutes=data.draw(st.integers(0, 20)))
                    late = timedelta(minutes=data.draw(st.integers(0, 90)))
                    rows.append((data.draw(st.sampled_from("ab")), i, arrival - late,
                                 arrival))
                _feed(src, i, rows)
                read += rows
                _running("prop").processAllAvailable()
                if data.draw(st.booleans(), label="idle"):
                    time.sleep(0.7)
                if data.draw(st.booleans(), label="restart"):
                    _restarted(spark, "prop")
                delay = delays[i > alter_at]
                if i == alter_at:
                    dfsql.sql("ALTER STREAMING QUERY prop AS " + QUERY.format(
                        delay=f"{delays[1].seconds // 60} MINUTES"), spark)
                    _running("prop").processAllAvailable()
                    delay = delays[1]
                row = _shown(spark, "prop")
                assert (row.input_rows, row.watermark, row.frontier) == _expected(
                    read, delay), (i, alter_at)
        finally:
            dfsql.sql("STOP STREAMING QUERY prop", spark)
            spark.catalog.dropTempView("trickle")
