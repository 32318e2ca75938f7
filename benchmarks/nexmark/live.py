"""Nexmark live: ``python -m benchmarks.nexmark run --events N --mode stream [--queries
q0 q5 q7 q11 q12] [--files-per-trigger F] [--check]``.

The bids arrive as a **file stream in arrival order**: the run's bounded bid table (the
generator's, as batch and replay read it) is cut into files of one second of arrival
time each (the generator's own layout, ``part-NNNNNN.parquet``, sorted by
``arrival_time``), their modification times set in that order (Spark's file source
reads the oldest first), and a last file closes the stream (below). Before each query
starts, the files are linked into a fresh stream directory, each appearing whole at
once (a hard link is atomic: the stream never reads half a file). All the files are
there when the query starts, and Spark reads ``--files-per-trigger`` of them (seconds
of arrival) per micro-batch: the query runs as fast as it can, so its processed
events/s, once warmed up, is the highest arrival rate it keeps up with.

* **dfsql**: the query's replay text (``WATERMARK DELAY 3 SECONDS PROCESSING TIME
  arrival_time`` after each window: docs/guides/streams.md#live-streams, the stream
  gives the replay's rows) over the streaming view ``bid``: the streaming DataFrame
  :func:`dfsql.sql` returns for the whole statement, started in append mode into
  Spark's ``noop`` sink (:func:`dfsql.start` streams a statement's windowed block,
  which for q5 and q7 is an inner one; q0 has none, and dfsql hands it to Spark);
* **native**: the same query in Spark's own structured streaming over the same files:
  ``withWatermark`` (``date_time``, 3 seconds; q12 ``arrival_time``, 0), ``window()`` /
  ``session_window()`` (``native/qN.sql``; q5 ``native/q5_stream.sql``, which keeps the
  window struct so its watermark reaches the join), append mode, the same sink.

**Closing the stream.** A stream has no end, so the replay's final +inf watermark never
comes: the last windows close only when the watermark passes them. The last file holds
two rows, an hour of arrival after the last bid: a *closing bid* (every column NULL but
its event and arrival time, an hour ahead) that moves both sides' watermarks past every
window, and a *heartbeat* (NULL event time, a second later) that lets the closing bid
play through (dfsql holds rows at the frontier for the next one). The closing bid's own
windows never close; q0, a pass-through, returns both rows, and the rows counted and
compared leave them out (``auction IS NULL``: no generated bid has one).

Reported per query and side: rows, the wall time from the start to the stream's end,
the micro-batches, and **events/s sustained** — the rows of every micro-batch after the
first (which pays for planning and warm-up) over the time from that batch's start to
the last one's end, in events as the other modes count them (all events, people and
auctions too: bids times events / bids), per core. ``--check`` writes both sides to
Parquet directories instead of ``noop`` and compares each, as multisets, with the
replay mode's rows of the same events (pane columns aside)."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

import dfsql
from benchmarks.nexmark import runner
from benchmarks.nexmark.config import BASE_TIME_US
from benchmarks.nexmark.generator import SCHEMAS, _in_arrival_order, _micros, _write_spans
from dfsql.spark.stream.sinks import STORE_CONF

#: the queries live mode runs (issue #55: q0, q5, q7, q11, q12)
LIVE = ("q0", "q5", "q7", "q11", "q12")
FILE_SECONDS = 1.0
FILES_PER_TRIGGER = 10
#: the closing bid's lead over the last arrival (past every window, session and delay)
CLOSING_LEAD_US = 3_600_000_000
#: the native side's watermark per query (column, delay): dfsql's is in its text
NATIVE_WATERMARK = {"q12": ("arrival_time", "0 seconds")}
DEFAULT_WATERMARK = ("date_time", "3 seconds")
#: the streamed results' closing rows (q0 passes the closing bid through)
CLOSING_ROWS = "auction IS NULL AND bidder IS NULL AND price IS NULL"


@dataclass(frozen=True)
class Side:
    """One side's run of one query."""

    rows: int | None
    seconds: float
    batches: int
    #: bids per second over the micro-batches after the first (None: fewer than two)
    bids_per_s: float | None
    #: why the side could not run the query (the first line of its error), or None
    error: str | None = None


@dataclass(frozen=True)
class StreamTiming:
    """One query, both sides, live."""

    query: str
    dfsql: Side
    native: Side
    events: int
    bids: int
    cores: int
    files_per_trigger: int
    #: each side's rows against the replay's (None: not checked)
    same_rows: bool | None = None
    native_same_rows: bool | None = None

    def per_core(self, side: Side) -> float | None:
        """Events/s sustained per core, all events counted as the other modes do."""
        if side.bids_per_s is None:
            return None
        return side.bids_per_s * self.events / self.bids / self.cores


def chunks(bounded: Path, out: Path, file_seconds: float = FILE_SECONDS) -> list[Path]:
    """The bid stream of ``bounded`` (the generator's directories) as files of
    ``file_seconds`` of arrival time under ``out`` (made once), the closing file last;
    modification times in arrival order. Returns the files in that order."""
    done = out / "_complete"
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        table = _in_arrival_order(pq.read_table(bounded / "bid", schema=SCHEMAS["bid"]))
        _write_spans(table, out, BASE_TIME_US, round(file_seconds * 1_000_000), None)
        pq.write_table(closing(table), out / "part-999999999.parquet")
        files = sorted(out.glob("part-*.parquet"))
        now = time.time_ns() - len(files) * 1_000_000
        for i, f in enumerate(files):  # 1 ms apart: Spark reads the oldest first
            os.utime(f, ns=(now + i * 1_000_000, now + i * 1_000_000))
        done.touch()
    return sorted(out.glob("part-*.parquet"))


def closing(bids: pa.Table) -> pa.Table:
    """The closing bid and the heartbeat after it (see the module doc)."""
    last = int(max(_micros(bids, "arrival_time").max(), _micros(bids, "date_time").max()))
    at = (last + CLOSING_LEAD_US) // 60_000_000 * 60_000_000  # a whole minute
    ts = SCHEMAS["bid"].field("date_time").type
    cols = {f.name: pa.nulls(2, f.type) for f in SCHEMAS["bid"]}
    cols["date_time"] = pa.array([at + 1_000_000, None], pa.int64()).cast(ts)
    cols["arrival_time"] = pa.array([at + 1_000_000, at + 2_000_000], pa.int64()).cast(ts)
    return pa.table(cols, schema=SCHEMAS["bid"])


def feed(files: list[Path], stream: Path) -> None:
    """Every file linked into ``stream`` (fresh), in arrival order, each whole at once."""
    shutil.rmtree(stream, ignore_errors=True)
    stream.mkdir(parents=True)
    for f in files:
        os.link(f, stream / f.name)


def _stream(spark: SparkSession, stream: Path, files_per_trigger: int) -> DataFrame:
    return (spark.readStream.schema(spark.table("bid").schema)
            .option("maxFilesPerTrigger", files_per_trigger).parquet(str(stream)))


def _sustained(progress: list) -> tuple[int, float | None]:
    """(micro-batches with rows, bids/s over those after the first)."""
    with_rows = [p for p in progress if p.numInputRows > 0]
    warm = with_rows[1:]
    if not warm:
        return len(with_rows), None
    began = _instant(warm[0].timestamp)
    ended = max(_instant(p.timestamp) + p.durationMs["triggerExecution"] / 1000 for p in warm)
    return len(with_rows), sum(p.numInputRows for p in warm) / (ended - began)


def _instant(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _timed(start: Callable[..., object], *args: object) -> tuple[float, list]:
    """Seconds from ``start(*args)`` to the stream's end (``availableNow``), and its
    progress reports."""
    began = time.perf_counter()
    query = start(*args)
    query.awaitTermination()  # type: ignore[attr-defined]
    return time.perf_counter() - began, list(query.recentProgress)  # type: ignore[attr-defined]


def native_stream_text(name: str) -> str:
    """Spark's own streaming text of ``name``: ``native/qN_stream.sql`` where the batch
    text cannot stream, else the runner's native text."""
    own = runner.NATIVE / f"{name}_stream.sql"
    text = own.read_text() if own.exists() else runner.native_text(name)
    assert text is not None, name
    return text


def _write(df: DataFrame, out: Path | None, checkpoint: Path):
    writer = (df.writeStream.outputMode("append").trigger(availableNow=True)
              .option("checkpointLocation", str(checkpoint)))
    if out is None:
        return writer.format("noop").start()
    return writer.format("parquet").option("path", str(out)).start()


def _start(spark: SparkSession, side: str, name: str, live: DataFrame, out: Path | None,
           checkpoint: Path):
    """Start ``name`` on ``side`` over the stream ``live`` (registered as ``bid``)."""
    if side == "native":
        column, delay = NATIVE_WATERMARK.get(name, DEFAULT_WATERMARK)
        live.withWatermark(column, delay).createOrReplaceTempView("bid")
        return _write(spark.sql(native_stream_text(name)), out, checkpoint)
    live.createOrReplaceTempView("bid")
    # the whole statement's stream (dfsql.start streams a statement's windowed block,
    # which for q5 and q7 is an inner one: their joins would be left out)
    return _write(dfsql.sql(runner.query_text(name, "replay"), spark), out, checkpoint)


def _rows(spark: SparkSession, out: Path) -> DataFrame:
    """A side's streamed rows, its pane columns and the closing rows left out."""
    df = spark.read.parquet(str(out))
    df = df.drop(*runner._pane_columns(df.columns))
    if {"auction", "bidder", "price"} <= set(df.columns):
        df = df.where(f"NOT ({CLOSING_ROWS})")
    return df


def _same(a: DataFrame, b: DataFrame) -> bool:
    return a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty()


def _output_rows(progress: list) -> int | None:
    """The rows a side wrote, from Spark's progress (None where the sink reports none)."""
    rows = [p.sink.numOutputRows for p in progress]
    return None if any(r is None or r < 0 for r in rows) else sum(rows)


def _one_run(spark: SparkSession, side: str, name: str, files: list[Path], work: Path,
             run: int, schema: object, files_per_trigger: int,
             expected: DataFrame | None) -> tuple[Side, bool | None]:
    """One run of one side: the files fed afresh, the query started over them, and
    (with ``expected``) its rows compared."""
    feed(files, work / "stream")
    out = work / f"out-{name}-{side}-{run}" if expected is not None else None
    checkpoint = work / f"ck-{name}-{side}-{run}"
    for old in (out, checkpoint):  # an earlier run's
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    live = (spark.readStream.schema(schema).option("maxFilesPerTrigger", files_per_trigger)
            .parquet(str(work / "stream")))
    store = spark.conf.get(STORE_CONF, None)
    try:
        seconds, progress = _timed(_start, spark, side, name, live, out, checkpoint)
    finally:  # dfsql.sql set RocksDB for its stream (the bucket processor's store)
        if store is None:
            spark.conf.unset(STORE_CONF)
        else:
            spark.conf.set(STORE_CONF, store)
    batches, rate = _sustained(progress)
    rows, same = _output_rows(progress), None
    if out is not None:
        got = _rows(spark, out)
        rows, same = got.count(), _same(got, expected)
    elif rows is not None and name == "q0":
        rows -= 2  # the closing bid and the heartbeat, passed through
    return Side(rows, seconds, batches, rate), same


def measure(spark: SparkSession, name: str, files: list[Path], work: Path, runs: int,
            files_per_trigger: int, check: bool, events: int) -> StreamTiming:
    """``name`` live on both sides over ``files``, each ``runs`` times (medians); the
    session's bounded ``bid`` view is the replay's input and is put back after."""
    bounded = spark.table("bid")
    bids = bounded.count()
    expected = None
    if check:
        replay = dfsql.sql(runner.query_text(name, "replay"), spark)
        expected = replay.drop(*runner._pane_columns(replay.columns)).cache()
        expected.count()
    sides: dict[str, Side] = {}
    same: dict[str, bool | None] = {}
    try:
        for side in ("dfsql", "native"):
            try:
                runs_of = [_one_run(spark, side, name, files, work, r, bounded.schema,
                                    files_per_trigger, expected) for r in range(runs)]
            except Exception as e:  # a query the side cannot stream: reported, not fatal
                sides[side] = Side(None, float("nan"), 0, None, _first_line(e))
                continue
            rates = [s.bids_per_s for s, _ in runs_of if s.bids_per_s is not None]
            last = runs_of[-1][0]
            sides[side] = Side(last.rows, statistics.median(s.seconds for s, _ in runs_of),
                               last.batches, statistics.median(rates) if rates else None)
            same[side] = None if expected is None else all(ok for _, ok in runs_of)
    finally:
        bounded.createOrReplaceTempView("bid")
        if expected is not None:
            expected.unpersist()
    return StreamTiming(name, sides["dfsql"], sides["native"], events, bids,
                        spark.sparkContext.defaultParallelism, files_per_trigger,
                        same.get("dfsql"), same.get("native"))


def _first_line(e: Exception) -> str:
    return f"{type(e).__name__}: " + (str(e).strip().splitlines() or [""])[0][:300]


def warm_up(spark: SparkSession, files: list[Path], work: Path, files_per_trigger: int) -> None:
    """One untimed native q0 over the stream: the JVM's first stream (class loading, the
    JIT) is not charged to whichever query and side comes first."""
    bounded = spark.table("bid")
    try:
        _one_run(spark, "native", "q0", files, work, -1, bounded.schema, files_per_trigger,
                 None)
    finally:
        bounded.createOrReplaceTempView("bid")


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(timings: list[StreamTiming]) -> str:
    """The printed table of live mode, one row per query."""
    head = (f"{'query':<6} {'mode':<7} {'rows':>10} {'dfsql s':>8} {'native s':>8} "
            f"{'batches':>7} {'dfsql ev/s/core':>16} {'native ev/s/core':>17} "
            f"{'native/dfsql':>12} {'Flink V1':>9} {'Flink V2':>9} {'same':>5} {'native same':>11}")
    lines = [head, "-" * len(head)]
    for t in timings:
        v1, v2 = runner.FLINK.get(t.query, (None, None))
        ours, theirs = t.per_core(t.dfsql), t.per_core(t.native)
        ratio = None if ours is None or theirs is None else theirs / ours
        lines.append(
            f"{t.query:<6} {'stream':<7} {_fmt(t.dfsql.rows, 'd'):>10} {t.dfsql.seconds:>8.2f} "
            f"{t.native.seconds:>8.2f} {t.dfsql.batches:>7} {_fmt(ours, ',.0f'):>16} "
            f"{_fmt(theirs, ',.0f'):>17} {_fmt(ratio, '.2f'):>12} {_fmt(v1, ',.0f'):>9} "
            f"{_fmt(v2, ',.0f'):>9} {_fmt(t.same_rows, ''):>5} "
            f"{_fmt(t.native_same_rows, ''):>11}")
    lines += [f"  {t.query} {side}: {s.error}" for t in timings
              for side, s in (("dfsql", t.dfsql), ("native", t.native)) if s.error]
    return "\n".join(lines)


def work_dir(events: int) -> Path:
    """Where live mode keeps its files for ``events`` events (beside the generator's)."""
    return runner.DATA / f"nexmark-{events}-live"
