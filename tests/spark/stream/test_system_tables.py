"""The system tables and the metrics of a continuous query in this process (issue #56;
docs/guides/watching.md): ``system.streaming_progress`` has one row per micro-batch
(the last ``dfsql.progress.batches`` of them), ``system.streaming_queries`` SHOW's rows,
any SQL runs over them, and the Prometheus counters, scraped over HTTP, equal what the
stream was fed; late and dropped rows equal a bounded replay's counts of the same rows
(EXPLAIN WATERMARK), derived here by hand first.
"""

from __future__ import annotations

import re
import time
import urllib.request
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from in_process import shell_on

import dfsql
from dfsql.continuous_queries import QUERIES
from tests.conftest import wait_until
from tests.spark import feeds

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
#: (k, v, event time, arrival), seconds after T0; one file each, one micro-batch each.
#: FIXED(10 s), DELAY 0: the 31 moves the watermark to 31; ALLOWED LATENESS 10 s keeps a
#: window until the watermark reaches its end + 10 s.
ROWS = [
    ("a", 1, 12, 12),   # [10, 20): on time
    ("a", 2, 31, 31),   # [30, 40): on time; the watermark is 31 from now on
    ("a", 4, 15, 40),   # [10, 20): ended (20 <= 31), and 20 + 10 <= 31: dropped
    ("a", 8, 25, 41),   # [20, 30): ended (30 <= 31), 30 + 10 > 31: late, kept
    ("a", 16, 33, 42),  # [30, 40): on time
    ("a", 32, 28, 43),  # [20, 30): late, kept
    ("a", 64, 5, 44),   # [0, 10): dropped
]
#: a batch runs the rows that arrived before its frontier (its own last arrival): the
#: batch b runs row b - 1; the eighth file is the sentinel (arrival an hour later)
LATE = [0, 0, 0, 0, 1, 0, 1, 0]
DROPPED = [0, 0, 0, 1, 0, 0, 0, 1]
QUERY = ("SELECT k, SUM(v) AS total FROM {t} GROUP BY k WINDOW FIXED(10 SECONDS) ON et "
         "WATERMARK DELAY 0 SECONDS PROCESSING TIME at ALLOWED LATENESS 10 SECONDS")
KEPT = 3  # dfsql.progress.batches: the table keeps the last 3 batches


def _frame() -> pd.DataFrame:
    def at(s: int) -> datetime:
        return T0 + timedelta(seconds=s)

    frame = pd.DataFrame({"k": [r[0] for r in ROWS], "v": [r[1] for r in ROWS],
                          "event_time": [at(r[2]) for r in ROWS],
                          "arrival_time": [at(r[3]) for r in ROWS]})
    return feeds.with_sentinel(frame).rename(columns={"event_time": "et",
                                                      "arrival_time": "at"})


@pytest.fixture(scope="module")
def watched(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("system")
    frame = _frame()
    feeds.write_parts(frame, list(range(1, len(frame))), tmp / "in")
    schema = spark.read.parquet(str(tmp / "in")).schema
    # the rows the stream ran: all but the sentinel (its frontier, never run)
    spark.read.parquet(str(tmp / "in")).where("et IS NOT NULL").createOrReplaceTempView(
        "watched_all")
    (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
     .parquet(str(tmp / "in")).createOrReplaceTempView("watched_live"))
    spark.conf.set("dfsql.progress.batches", str(KEPT))
    try:
        dfsql.sql(f"CREATE STREAMING QUERY watched CHECKPOINT '{tmp / 'ck'}' AS "
                  + QUERY.format(t="watched_live"), spark)
    finally:
        spark.conf.unset("dfsql.progress.batches")
    QUERIES.running["watched"].query.processAllAvailable()
    yield tmp / "ck"
    dfsql.sql("STOP STREAMING QUERY watched", spark)


def test_progress_has_the_last_batches_with_their_late_and_dropped_rows(spark, watched):
    rows = dfsql.sql("SELECT batch_id, input_rows, late_rows, dropped_rows, watermark, "
                     "frontier FROM system.streaming_progress WHERE query = 'watched' "
                     "ORDER BY batch_id", spark).collect()
    assert [r.batch_id for r in rows] == [5, 6, 7]  # batches 0..7, the last 3 kept
    assert [r.input_rows for r in rows] == [1, 1, 1]
    assert [r.late_rows for r in rows] == LATE[5:]
    assert [r.dropped_rows for r in rows] == DROPPED[5:]
    # the frontier: the batch's last arrival (44 s, then the sentinel an hour later)
    assert rows[1].frontier == datetime(2024, 1, 1, 0, 0, 44)
    assert rows[2].watermark == datetime(2024, 1, 1, 0, 0, 33)  # the largest event time


def test_the_log_folds_what_it_no_longer_keeps(watched):
    """Batches 0-2 folded into one record at batch 6 (every 3 batches, those 3 behind the
    last 3): the log keeps 6 files, its counts whole."""
    from dfsql.spark.stream import progress_log

    _, records = progress_log.read_log(None, str(watched))
    assert [(r["batch_id"], r.get("folded", 1)) for r in records] == [
        (2, 3), (3, 1), (4, 1), (5, 1), (6, 1), (7, 1)]
    assert sum(r["input_rows"] for r in records) == len(ROWS) + 1


def test_any_sql_runs_over_the_system_tables(spark, watched):
    [row] = dfsql.sql(
        "SELECT q.name, q.batches, q.input_rows, COUNT(*) AS kept, MAX(p.batch_id) AS last "
        "FROM system.streaming_queries q JOIN `system`.`STREAMING_PROGRESS` AS p "
        "ON p.query = q.name WHERE q.name = 'watched' GROUP BY q.name, q.batches, "
        "q.input_rows", spark).collect()
    assert tuple(row) == ("watched", 8, len(ROWS) + 1, KEPT, 7)


def test_a_replay_counts_the_same_late_and_dropped_rows(spark, watched):
    """EXPLAIN WATERMARK's late_rows counts every row behind the watermark (the 4, 8, 32
    and 64), dropped or not; its dropped_rows those not processed (the 4 and 64)."""
    [own, _] = dfsql.sql(f"EXPLAIN WATERMARK {QUERY.format(t='watched_all')} TRY PERFECT",
                         spark).collect()
    assert (own.late_rows, own.dropped_rows) == (4, 2)
    assert (sum(LATE), sum(DROPPED)) == (own.late_rows - own.dropped_rows, own.dropped_rows)


def _scrape(port: int, query: str = "watched") -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("dfsql_") and f'query="{query}"' in line:
            name, value = line.rsplit(" ", 1)
            out[name.split("{")[0]] = float(value)
    return out


def test_the_metrics_count_every_batch_fed(spark, watched):
    server = dfsql.serve_metrics(0, spark=spark)
    try:
        assert server.host == "127.0.0.1"
        asked = time.time()
        got = _scrape(server.port)
        answered = time.time()
    finally:
        server.close()
    assert got["dfsql_input_rows_total"] == len(ROWS) + 1  # the sentinel's file too
    assert got["dfsql_late_rows_total"] == sum(LATE) == 2
    assert got["dfsql_dropped_rows_total"] == sum(DROPPED) == 2
    assert got["dfsql_batch_duration_seconds_count"] == 8
    # the last batch's: watermark 33 s, frontier the sentinel's arrival (an hour on)
    wm = T0.timestamp() + 33
    assert got["dfsql_watermark_seconds"] == wm
    assert got["dfsql_frontier_seconds"] - wm == 44 + 3600 - 33
    # the lag: the wall clock at the scrape minus the watermark (docs/guides/watching.md)
    assert asked - wm <= got["dfsql_watermark_lag_seconds"] <= answered - wm


def test_the_shell_reads_them_too(spark, watched, capsys):
    shell = shell_on(spark)
    shell.statement("SELECT query, SUM(late_rows) AS late, SUM(dropped_rows) AS dropped "
                    "FROM system.streaming_progress WHERE query = 'watched' GROUP BY query")
    out = capsys.readouterr().out
    assert re.search(r"\|\s*watched\s*\|\s*1\s*\|\s*1\s*\|", out), out  # batches 5-7
    assert "1 row" in out, out


def test_a_batch_whose_record_a_kill_lost_is_marked_not_skipped(spark, watched):
    """Killed between a batch's commit and its record: before the restart the batch gets
    a record marked lost (no gap in the ids); while Spark still reports the batch (this
    process), the next read writes its real record back."""
    from dfsql.spark.stream import progress_log

    (watched / progress_log.LOG / f"{7:010d}.json").unlink()
    progress_log.mark_lost(spark, str(watched))
    _, records = progress_log.read_log(None, str(watched))
    assert [r["batch_id"] for r in records] == [2, 3, 4, 5, 6, 7]
    assert records[-1]["lost"] and records[-1]["input_rows"] == 0
    [last] = dfsql.sql("SELECT batch_id, input_rows, dropped_rows FROM "
                       "system.streaming_progress WHERE query = 'watched' AND batch_id = 7",
                       spark).collect()
    assert tuple(last) == (7, 1, 1)


def test_a_stream_dfsql_start_started_is_in_the_metrics_while_it_runs(spark, watched):
    """dfsql.start with a name and a checkpoint: the same counters as the continuous
    query over the same rows (derived above), and gone from /metrics once stopped; SHOW
    and the system tables list continuous queries only."""
    query = dfsql.start(QUERY.format(t="watched_live"), sink="memory", name="started",
                        checkpoint=str(watched.parent / "started"), spark=spark)
    server = dfsql.serve_metrics(0, spark=spark)
    try:
        query.processAllAvailable()
        # each batch's record is written when Spark's listener bus reports it, which may
        # come after processAllAvailable returns: a later scrape has it
        assert wait_until(lambda: _scrape(server.port, "started").get(
            "dfsql_batch_duration_seconds_count") == 8, 120)
        got = _scrape(server.port, "started")
        assert got["dfsql_input_rows_total"] == len(ROWS) + 1
        assert got["dfsql_late_rows_total"] == sum(LATE) == 2
        assert got["dfsql_dropped_rows_total"] == sum(DROPPED) == 2
        assert got["dfsql_batch_duration_seconds_count"] == 8
        assert got["dfsql_watermark_seconds"] == T0.timestamp() + 33
        names = {r.name for r in dfsql.sql("SELECT name FROM system.streaming_queries",
                                           spark).collect()}
        assert "started" not in names and "watched" in names
        query.stop()
        assert _scrape(server.port, "started") == {}
        assert _scrape(server.port)["dfsql_input_rows_total"] == len(ROWS) + 1
    finally:
        query.stop()
        server.close()
