"""Streams on the engine's clock (no PROCESSING TIME: each micro-batch is one instant):
random micro-batches, running them, and holding a stream to the bounded replay of its rows
on that clock. Shared by tests/spark/stream/test_stream_engine_clock.py and the tests that
run other windows on that clock."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd

import dfsql
from tests.spark.feeds import T0
from tests.spark.feeds import write_parts as _write_parts

#: the replay's processing time of micro-batch N: P0 + N seconds
P0 = datetime(2030, 1, 1)


def _batches(seed: int, n: int, k: int) -> list[pd.DataFrame]:
    """``n`` rows of three keys in ``k`` micro-batches: event times out of order (up to
    a minute behind the batch's newest), some rows later than that, a few NULL times."""
    rng = np.random.default_rng(seed)
    et = np.sort(rng.integers(0, 3000, n)).astype(float)
    at = et + rng.integers(0, 60, n)
    at[rng.random(n) < 0.08] += 200
    o = np.argsort(at, kind="stable")
    et = et[o]
    et[rng.random(n) < 0.02] = np.nan
    frame = pd.DataFrame({
        "key": rng.choice(["a", "b", "c"], n),
        "value": rng.integers(1, 10, n).astype(np.int64),
        "event_time": [pd.NaT if np.isnan(s) else T0 + timedelta(seconds=int(s)) for s in et],
    })
    cuts = sorted(rng.choice(np.arange(1, n), k - 1, replace=False).tolist())
    return [frame.iloc[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]


def _instant(n: int) -> datetime:
    return P0 + timedelta(seconds=n)


QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n, MAX(value) AS hi FROM {src} "
         "GROUP BY key WINDOW {window} ON event_time {tail}")


def engine_clock_equals_replay(spark, tmp_path, seed: int, window: str, delay: int) -> None:
    """A stream on the engine's clock equals the bounded replay of its rows on that
    clock: batch N's rows arriving at instant N, Spark's watermark as marks."""
    batches = _batches(seed, 240, 5)
    frame = pd.concat(batches, ignore_index=True)
    got, _, q = _run(spark, tmp_path, f"live_ec_{seed}", batches, QUERY.format(
        src="{src}", window=window, tail=f"WATERMARK DELAY {delay} SECONDS"))
    assert sum(p.observedMetrics["dfsql"]["panes"] for p in q.recentProgress
               if "dfsql" in p.observedMetrics) == len(got)

    # the replay of the same rows on that clock: batch N's rows arrive at instant N; the
    # watermark at N (N >= 1, including the data-less batch after the last) is the
    # largest event time of batches 0..N-1 minus the delay
    k = len(batches)
    arrivals = np.concatenate([[i] * len(b) for i, b in enumerate(batches)])
    bounded = frame.assign(arrival_time=[_instant(int(i)) for i in arrivals])
    spark.createDataFrame(bounded).createOrReplaceTempView("bounded_ec")
    seen = pd.Series([b["event_time"].max() for b in batches]).cummax()
    marks = [(_instant(n), (seen[n - 1] - timedelta(seconds=delay)).to_pydatetime()
              .replace(tzinfo=None)) for n in range(1, k + 1)]
    # a last mark one instant on: the replay's end-of-input flush (+inf) happens there,
    # after everything the stream fires, and is left out
    marks.append((_instant(k + 1), marks[-1][1]))
    spark.createDataFrame(marks, "processing_time TIMESTAMP, watermark TIMESTAMP") \
        .createOrReplaceTempView("marks_ec")
    replay = dfsql.sql(QUERY.format(
        src="bounded_ec", window=window,
        tail="WATERMARK FROM marks_ec PROCESSING TIME arrival_time"), spark).collect()
    want = [((r.emit_time - P0).seconds, *r[:-2], r.is_retraction) for r in replay
            if r.emit_time < _instant(k + 1)]
    # (batch, key, total, n, hi, window_start, window_end, pane_index, pane_timing,
    # is_last, [emit_time,] is_retraction): the stream's emit time is its batch's clock
    got = [(*g[:-2], g[-1]) for g in got]
    assert len(want) > 10
    assert got == want
    assert all(g[8] == "ON_TIME" and g[9] for g in got)


def _run(spark, tmp_path, name: str, batches: list[pd.DataFrame], query: str) -> tuple:
    """Stream ``batches`` (one file each) through ``query`` (reading ``{src}``): the rows
    as (batch id, *row), each batch's timestamp (ms) from the offset log, the query."""
    import json

    src = tmp_path / f"in_{name}"
    frame = pd.concat(batches, ignore_index=True)
    _write_parts(frame, list(np.cumsum([len(b) for b in batches])[:-1]), src)
    schema = spark.read.parquet(str(src)).schema
    (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
     .createOrReplaceTempView(name))
    got: list[tuple] = []
    ck = tmp_path / f"ck_{name}"
    q = dfsql.start(query.format(src=name), sink=lambda b, i: got.extend(
        (i, *r) for r in b.collect()), checkpoint=str(ck), trigger={"availableNow": True},
        spark=spark)
    q.awaitTermination()
    stamps = {}
    for f in (ck / "offsets").iterdir():
        if f.name.isdigit():
            meta = json.loads(f.read_text().splitlines()[1])
            stamps[int(f.name)] = int(meta["batchTimestampMs"])
    return got, stamps, q
