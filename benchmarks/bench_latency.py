"""Early-pane latency on a live stream: from a row's arrival to the first pane that holds it.

Spark's ``rate`` source offers ``--rate`` rows a second (10,000), each stamped with the
instant it is offered (its arrival); key = row number mod ``--keys`` (1,000), event time
= arrival. Three queries read the same source, one at a time, each into a
``foreachBatch`` sink that materialises the batch (``toArrow``) and stamps it with the
wall clock at that moment:

* ``native``: Spark's own streaming aggregation, ``groupBy(key, window(event_time,
  '1 minute'))`` in update mode (every micro-batch emits each window its rows touched),
  on Spark's default state store;
* ``engine``: dfsql, ``WINDOW FIXED(1 MINUTE) ON event_time TRIGGER EVERY 1 SECOND EMIT
  ACCUMULATING`` on the engine's clock (a row arrives with its micro-batch);
* ``column``: the same with ``PROCESSING TIME arrival_time`` (the source's stamp);
* ``engine_each_row``: the engine's clock with ``TRIGGER EVERY 1 ROW`` (a pane for every
  micro-batch that brings a window rows, as Spark's update mode emits).

Every query aggregates ``COUNT(*)``, ``MIN`` and ``MAX`` of the arrival (µs) per key and
window, cumulatively, so each output row says how many rows it holds and the span of
their arrivals; the rows new in it are the difference from the window's previous output,
evenly spaced in arrival (the source spaces a key's rows evenly: one every ``keys / rate``
seconds). Each such row's latency is the sink's stamp less its arrival
(:func:`row_arrivals`). Outputs stamped in the first ``--warmup`` seconds are left out;
the figures are p50 / p90 / p99 over the rows of the next ``--seconds``: from the stamp,
and from the row's release (``released_``): the rate source offers a whole second's rows
once that second is over (:func:`released`), so up to a second of the first figure is the
source's on every side, and the second is what the query's micro-batches and trigger add.

``EVERY 1 SECOND`` fires a window's early pane at the first processing-time second
boundary after its new rows (docs/reference.md#trigger: an aligned period): by design a row waits up to
a second more than in an operator that emits every micro-batch, so the native figures
are the floor Spark's machinery allows, not the same semantics; ``engine_each_row`` is
dfsql with native's semantics.

Usage::

    python benchmarks/bench_latency.py [--rate 10000] [--keys 1000] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

DFSQL = ("SELECT key, COUNT(*) AS n, MIN(arrival_us) AS oldest, MAX(arrival_us) AS newest "
         "FROM live GROUP BY key WINDOW FIXED(1 MINUTE) ON event_time "
         "WATERMARK DELAY 5 SECONDS {clock}TRIGGER {trigger} EMIT ACCUMULATING")
#: dfsql's queries: name -> (clock, trigger)
VARIANTS = {"engine": ("", "EVERY 1 SECOND"),
            "column": ("PROCESSING TIME arrival_time ", "EVERY 1 SECOND"),
            "engine_each_row": ("", "EVERY 1 ROW")}
QUANTILES = (0.5, 0.9, 0.99)


def row_arrivals(out: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each row's arrival and the stamp of the first output that holds it (seconds; two
    arrays, one element a row).

    ``out``: one row per output of a window, ``sink_s`` (wall clock, seconds), ``key``,
    ``window_start``, and the window's cumulative ``n`` (rows), ``oldest`` and ``newest``
    (arrival, µs). The rows new in an output are ``n`` less the window's previous ``n``,
    spread evenly over (previous ``newest``, ``newest``]; in its first output, evenly over
    [``oldest``, ``newest``]."""
    out = out.sort_values(["key", "window_start", "sink_s", "n"], kind="stable")
    group = out.groupby(["key", "window_start"], sort=False)
    n = out["n"].to_numpy(np.int64)
    newest = out["newest"].to_numpy(np.float64) / 1e6
    oldest = out["oldest"].to_numpy(np.float64) / 1e6
    prev_n = group["n"].shift(1).fillna(0).to_numpy(np.int64)
    prev_newest = group["newest"].shift(1).to_numpy(np.float64) / 1e6
    new = n - prev_n
    first = np.isnan(prev_newest)
    # the arrival before the first new one: the previous output's newest, or one step
    # before the oldest (the first output's rows include both ends)
    span = newest - oldest
    step_first = np.divide(span, new - 1, out=np.zeros_like(span), where=new > 1)
    base = np.where(first, oldest - step_first, prev_newest)
    keep = new > 0
    new, base, newest = new[keep], base[keep], newest[keep]
    sink = out["sink_s"].to_numpy(np.float64)[keep]
    step = (newest - base) / new
    # j-th new row of an output (0 = the newest): arrival = newest - j * step
    j = np.arange(new.sum()) - np.repeat(np.cumsum(new) - new, new)
    arrival = np.repeat(newest, new) - j * np.repeat(step, new)
    return arrival, np.repeat(sink, new)


def _source(spark, rate: int, keys: int):
    from pyspark.sql import functions as F  # noqa: N812

    return (spark.readStream.format("rate").option("rowsPerSecond", rate)
            .option("numPartitions", 2).load()
            .select((F.col("value") % keys).alias("key"),
                    F.col("timestamp").alias("event_time"),
                    F.col("timestamp").alias("arrival_time"),
                    F.unix_micros("timestamp").alias("arrival_us")))


def _query(spark, name: str, rate: int, keys: int):
    from pyspark.sql import functions as F  # noqa: N812

    import dfsql

    live = _source(spark, rate, keys)
    if name == "native":
        return (live.withWatermark("event_time", "5 seconds")
                .groupBy("key", F.window("event_time", "1 minute"))
                .agg(F.count("*").alias("n"), F.min("arrival_us").alias("oldest"),
                     F.max("arrival_us").alias("newest"))
                .select("key", F.col("window.start").alias("window_start"), "n", "oldest",
                        "newest"))
    live.createOrReplaceTempView("live")
    clock, trigger = VARIANTS[name]
    return dfsql.sql(DFSQL.format(clock=clock, trigger=trigger), spark)


def measure(spark, name: str, rate: int, keys: int, warmup: float, seconds: float,
            ck: Path) -> dict:
    """One query's run: the latencies of the rows its outputs held after the warm-up."""
    import pyarrow as pa

    store = "spark.sql.streaming.stateStore.providerClass"
    if name == "native":
        spark.conf.set(store, "org.apache.spark.sql.execution.streaming.state."
                              "HDFSBackedStateStoreProvider")
    else:
        spark.conf.unset(store)  # dfsql picks the store its plan needs
    outputs: list[pa.Table] = []

    def sink(batch, _batch_id) -> None:
        t = batch.select("key", "window_start", "n", "oldest", "newest").toArrow()
        stamp = time.time()
        outputs.append(t.append_column("sink_s", pa.array(np.full(t.num_rows, stamp))))

    df = _query(spark, name, rate, keys)
    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(ck))
    if name == "native":
        writer = writer.outputMode("update")
    t0 = time.time()
    q = writer.start()
    try:
        time.sleep(warmup + seconds)
    finally:
        q.stop()
    batches = [p.durationMs["triggerExecution"] for p in q.recentProgress if p.numInputRows]
    row = {"query": name, "batch_ms_median": float(np.median(batches)) if batches else None}
    if not outputs:
        return row
    out = pa.concat_tables(outputs).to_pandas()
    arrival, stamp = row_arrivals(out)
    steady = stamp >= t0 + warmup
    arrival, stamp = arrival[steady], stamp[steady]
    row["rows"] = int(len(arrival))
    row |= _quantiles("", stamp - arrival)
    row |= _quantiles("released_", stamp - released(arrival, out["oldest"].min() / 1e6))
    return row


def released(arrival: np.ndarray, created: float) -> np.ndarray:
    """When the rate source hands a row to the stream: it offers the rows stamped in
    each whole second since it was created (the first row's stamp) once that second is
    over (the rows of second s are stamped evenly from its start)."""
    return created + np.floor(arrival - created + 1e-6) + 1


def _quantiles(prefix: str, seconds: np.ndarray) -> dict:
    return {f"{prefix}p{round(q * 100)}_s": round(float(np.quantile(seconds, q)), 3)
            for q in QUANTILES} if len(seconds) else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rounds", type=int, default=1, help="each query this many times, "
                    "alternating")
    ap.add_argument("--only", nargs="*", default=["native", *VARIANTS])
    args = ap.parse_args(argv)

    import os

    import dfsql

    spark = dfsql.session()
    tmp = Path(tempfile.mkdtemp(prefix="dfsql-bench-latency-"))
    print(f"# load: {os.getloadavg()}", flush=True)
    try:
        for r in range(args.rounds):
            for name in args.only:
                row = measure(spark, name, args.rate, args.keys, args.warmup, args.seconds,
                              tmp / f"{name}-{r}")
                print(json.dumps({"round": r, **row, "load": os.getloadavg()[0]}), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
