"""Exactly once (issue #11): kill -9 the driver of a running stream, restart it from its
checkpoint (in the test's own driver), and the file sink holds exactly what an
uninterrupted run writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stream_job import QUERY

import dfsql
from dfsql.session import setting_while
from tests.spark.feeds import workload as _workload
from tests.spark.feeds import write_parts as _write_parts

#: restarts of state kept in several partitions (tests/conftest.py)
pytestmark = pytest.mark.shuffle_partitions(2)

JOB = Path(__file__).with_name("stream_job.py")
ROOT = Path(__file__).resolve().parents[3]


def _job(src: Path, sink: Path, ck: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.Popen([sys.executable, str(JOB), str(src), str(sink), str(ck)],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _commits(ck: Path) -> int:
    d = ck / "commits"
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.exists() else 0


def _rows(spark, path: Path) -> list:
    return sorted(tuple(r) for r in spark.read.parquet(str(path)).collect())


def test_kill_9_mid_stream_then_restart_writes_exactly_the_uninterrupted_result(spark,
                                                                                tmp_path):
    frame = _workload(7, n=400)
    src = tmp_path / "in"
    _write_parts(frame, list(range(50, len(frame), 50)), src)  # 8 micro-batches
    sink, ck = tmp_path / "out", tmp_path / "ck"
    job = _job(src, sink, ck)
    # the same query, uninterrupted, in this process, while the job's JVM starts
    schema = spark.read.parquet(str(src)).schema
    (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
     .createOrReplaceTempView("live"))
    reference = dfsql.start(QUERY, sink=str(tmp_path / "ref"),
                            checkpoint=str(tmp_path / "ck_ref"),
                            trigger={"availableNow": True}, spark=spark)
    deadline = time.monotonic() + 240
    while _commits(ck) < 3:
        assert job.poll() is None, job.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the stream did not commit 3 batches in time"
        time.sleep(0.2)
    os.killpg(job.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
    job.wait()
    done_before = _commits(ck)
    assert 3 <= done_before < 8
    # restarted from the killed driver's checkpoint and sink by another driver: this
    # session's (a second job would start a second JVM for the same restart; the killed
    # JVM is gone either way, and the query's own view ``live`` is the job's)
    dfsql.start(QUERY, sink=str(sink), checkpoint=str(ck), trigger={"availableNow": True},
                spark=spark).awaitTermination()
    # 8 files, one per batch; but a kill between the file source's log entry for batch N
    # and the offset log's lets the restart plan batch N over two files (Spark's
    # FileStreamSource numbers its next batch after its own log), so 7 is also a full run.
    # The rows below are the real test: a batch's cut does not change them.
    assert _commits(ck) in (7, 8)

    reference.awaitTermination()
    got, want = _rows(spark, sink), _rows(spark, tmp_path / "ref")
    assert len(want) > 100
    assert got == want  # no duplicate pane, no missing pane
    # every retraction follows its pane (a retraction repeats an emitted row)
    # (key, total, n, window_start, window_end, pane_index, pane_timing, is_last, emit_time,
    # is_retraction): a retraction repeats an emitted row but for the last two
    emitted = {r[:8] for r in got if not r[9]}
    assert all(r[:8] in emitted for r in got if r[9])


@pytest.fixture(autouse=True)
def _no_leftover_streams(spark):
    yield
    for q in spark.streams.active:
        q.stop()


def test_a_restart_with_other_shuffle_partitions_keeps_its_buckets(spark, tmp_path) -> None:
    """The bucket processor keys its state by ``pmod(hash(key), buckets)``, the buckets
    being the shuffle partitions; a restart whose session says another number must still
    find each key's state where the first start put it. Key ``a`` (bucket 0 of 2, 2 of 4)
    sends events at 0, 10, 20 s before the restart and 30, 40 s after: with a gap of 30 s
    they are one session [12:00:00, 12:01:10) of 5, ON_TIME when ``b``'s arrival at
    12:03:21 moves the watermark (200 s - 5 s) past its end. Before the fix the restart
    split it in two (read a file per micro-batch: [12:00:00, 12:00:50) = 3 and
    [12:00:30, 12:01:00) = 1). Each start reads its files in one micro-batch: on
    PROCESSING TIME's clock the cuts do not change the panes, and the state the restart
    must find is the first start's either way."""
    import shutil
    from datetime import datetime

    import pandas as pd

    t0 = pd.Timestamp("2026-01-01 12:00:00")
    events = [0, 10, 20, 30, 40, 200, 1000]
    frame = pd.DataFrame({
        "key": ["a"] * 5 + ["b", "z"], "value": [1] * 7,
        "event_time": [t0 + pd.Timedelta(seconds=s) for s in events],
        "arrival_time": [t0 + pd.Timedelta(seconds=s + 1) for s in events]})
    parts = tmp_path / "parts"
    _write_parts(frame, [1, 2, 3, 4, 5, 6], parts)
    files = sorted(parts.glob("*.parquet"))
    src = tmp_path / "src"
    src.mkdir()
    for f in files[:3]:
        shutil.copy2(f, src / f.name)  # its modification time: the order it is read in
    schema = spark.read.parquet(str(parts)).schema
    spark.readStream.schema(schema).parquet(str(src)).createOrReplaceTempView("restart_src")
    q = ("SELECT key, SUM(value) AS total FROM restart_src GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 5 SECONDS "
         "PROCESSING TIME arrival_time")
    rows: list = []
    ck = tmp_path / "ck"
    try:
        for partitions, batch in ((2, files[:3]), (4, files[3:])):
            for f in batch:
                shutil.copy2(f, src / f.name)  # its modification time: the order it is read in
            with setting_while(spark, "spark.sql.shuffle.partitions", str(partitions)):
                dfsql.start(q, sink=lambda b, _i: rows.extend(b.collect()),
                            checkpoint=str(ck), trigger={"availableNow": True},
                            spark=spark).awaitTermination()
                # the session keeps its own setting; the query ran on the checkpoint's
                assert spark.conf.get("spark.sql.shuffle.partitions") == str(partitions)
    finally:
        spark.catalog.dropTempView("restart_src")
    assert [(r.key, r.total, r.window_start, r.window_end, r.pane_timing, r.emit_time)
            for r in rows] == [("a", 5, datetime(2026, 1, 1, 12), datetime(2026, 1, 1, 12, 1, 10),
                                "ON_TIME", datetime(2026, 1, 1, 12, 3, 21))]


def _file_manager(query) -> str:
    """The class the running query writes its offset log (and checkpoint) with."""
    return query._jsq.streamingQuery().offsetLog().fileManager().getClass().getSimpleName()


def test_a_local_checkpoint_is_written_without_a_process_per_path(spark, tmp_path) -> None:
    """A query whose checkpoint is on the local disk writes it through Hadoop's FileSystem
    API (FileContext's renames start a ``readlink`` per path without Hadoop's native
    library); a checkpoint elsewhere keeps Spark's choice; the session's own setting is
    left as it was. The kill -9 test above holds the FileSystem writer to exactly once."""
    from dfsql.spark.stream.checkpoint import (
        FILE_MANAGER_CONF,
        FILE_SYSTEM_MANAGER,
        file_manager_for,
    )

    assert file_manager_for(spark, str(tmp_path / "ck")) == FILE_SYSTEM_MANAGER
    assert file_manager_for(spark, f"file:{tmp_path}/ck") == FILE_SYSTEM_MANAGER
    assert file_manager_for(spark, None) == FILE_SYSTEM_MANAGER  # Spark's temporary one
    assert file_manager_for(spark, "hdfs://namenode:8020/ck") is None
    assert file_manager_for(spark, "s3a://bucket/ck") is None
    _write_parts(_workload(5, 20), [10], tmp_path / "in")
    (spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema)
     .parquet(str(tmp_path / "in")).createOrReplaceTempView("fm_src"))
    query = dfsql.start(QUERY.replace("FROM live", "FROM fm_src"), sink="memory", name="fm_panes",
                        checkpoint=str(tmp_path / "ck"), spark=spark)
    try:
        assert _file_manager(query) == "FileSystemBasedCheckpointFileManager"
        assert spark.conf.get(FILE_MANAGER_CONF, None) is None
    finally:
        query.stop()
    plain = spark.readStream.format("rate").load().writeStream.format("noop").start()
    try:  # a stream dfsql did not start: Spark's own choice
        assert _file_manager(plain) == "FileContextBasedCheckpointFileManager"
    finally:
        plain.stop()


def test_a_write_cut_before_its_rename_does_not_stop_a_kept_query(spark, tmp_path):
    """A kill between Spark's write of a log entry and its rename leaves a hidden
    temporary file; for a stateful query killed before its first entry, Spark then
    refuses the checkpoint. The server removes such files before it starts a kept
    query again (``dfsql.server.state.drop_unfinished_writes``), and the query runs."""
    from pyspark.errors import StreamingQueryException

    from dfsql.server.state import drop_unfinished_writes

    src, ck = tmp_path / "in", tmp_path / "ck"
    spark.createDataFrame([("a",), ("a",), ("b",)], "k STRING").write.parquet(str(src))
    cut = [ck / "offsets" / ".0.5d1c2b7e-0f4e-4a8c-9a57-1d2f0c3b4a5e.tmp",
           ck / "offsets" / "..0.5d1c2b7e-0f4e-4a8c-9a57-1d2f0c3b4a5e.tmp.crc"]
    cut[0].parent.mkdir(parents=True)
    for f in cut:
        f.touch()

    def run() -> list:
        got: list = []
        q = (spark.readStream.schema("k STRING").parquet(str(src)).groupBy("k").count()
             .writeStream.outputMode("complete").option("checkpointLocation", str(ck))
             .foreachBatch(lambda b, _: got.extend(tuple(r) for r in b.collect()))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return sorted(got)

    with pytest.raises(StreamingQueryException, match="should be empty on batch 0"):
        run()
    assert sorted(drop_unfinished_writes(ck)) == sorted(cut)
    assert run() == [("a", 2), ("b", 1)]
    # the entries Spark renamed into place are the log itself: kept
    assert drop_unfinished_writes(ck) == [] and (ck / "offsets" / "0").exists()
