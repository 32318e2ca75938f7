"""The floor of a micro-batch: one new row, through dfsql and through Spark's own operator.

A live query's latency and a test's time are bounded below by what one micro-batch costs
when almost nothing arrives. This measures it at steady state: each query first reads a
file of ``--warm`` rows (sessions open over ``--keys`` keys), then ``--batches`` files of
one row each, one micro-batch per file (and, where the watermark moves, a batch
without data, not counted) (``maxFilesPerTrigger`` 1, ``processAllAvailable``
after each file is written), into the ``noop`` sink. The figures are the medians of the
one-row batches' ``durationMs`` from Spark's progress events — the whole trigger and its
parts (planning, the write-ahead log, the batch's jobs, the commit) — per query:

* ``native``: ``withWatermark`` + ``groupBy(key, session_window)`` in append mode on
  Spark's default (HDFS-backed) state store: Spark's own floor;
* ``default``: SESSIONS(GAP 30 SECONDS), WATERMARK DELAY 10 SECONDS on the engine's clock
  (dfsql compiles it to Spark's operator, on RocksDB);
* ``column``: the same with PROCESSING TIME arrival_time (dfsql's bucket processor);
* ``retracting``: the column's clock, early and late panes, accumulating and retracting.

Usage::

    python benchmarks/bench_batch_floor.py [--batches 10] [--warm 1000] [--keys 100]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

DFSQL = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM live GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS {tail}")
TAILS = {"default": "",
         "column": "PROCESSING TIME arrival_time",
         "retracting": "PROCESSING TIME arrival_time "
                       "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
                       "EMIT ACCUMULATING AND RETRACTING"}
PARTS = ("triggerExecution", "queryPlanning", "walCommit", "addBatch", "commitOffsets",
         "latestOffset", "getBatch")


def _frames(warm: int, keys: int, batches: int):
    """The warm-up file's rows and one row per later file, in arrival order (numpy, no
    Python loop over rows)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(7)
    t0 = pd.Timestamp("2026-01-01")
    at = t0 + pd.to_timedelta(np.arange(warm) * 100, unit="ms")
    first = pd.DataFrame({
        "key": rng.integers(0, keys, warm).astype("int64"),
        "value": rng.integers(1, 10, warm).astype("int64"),
        "event_time": at - pd.to_timedelta(rng.integers(0, 5000, warm), unit="ms"),
        "arrival_time": at})
    later_at = at[-1] + pd.to_timedelta((np.arange(batches) + 1) * 1000, unit="ms")
    later = pd.DataFrame({"key": rng.integers(0, keys, batches).astype("int64"),
                          "value": np.ones(batches, "int64"),
                          "event_time": later_at - pd.Timedelta(seconds=1),
                          "arrival_time": later_at})
    micros = {"event_time": "datetime64[us]", "arrival_time": "datetime64[us]"}
    return first.astype(micros), later.astype(micros)  # parquet's microsecond timestamps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--warm", type=int, default=1000)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--only", nargs="*", default=["native", *TAILS])
    ap.add_argument("--rounds", type=int, default=2, help="each query this many times, "
                    "alternating; the first round warms the JVM and is not counted")
    ap.add_argument("--conf", nargs="*", default=[], metavar="KEY=VALUE",
                    help="session settings to try (a state store's, say)")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F  # noqa: N812

    import dfsql

    spark = dfsql.session()
    for kv in args.conf:
        spark.conf.set(*kv.split("=", 1))
    first, later = _frames(args.warm, args.keys, args.batches)
    tmp = Path(tempfile.mkdtemp(prefix="dfsql-bench-floor-"))
    schema = spark.createDataFrame(first.head(1)).schema
    store = "spark.sql.streaming.stateStore.providerClass"

    def measure(name: str) -> list[dict]:
        src, ck = tmp / f"{name}-in", tmp / f"{name}-ck"
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(ck, ignore_errors=True)
        src.mkdir()
        first.to_parquet(src / "part-00000.parquet")
        live = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(
            str(src))
        if name == "native":
            spark.conf.set(store, "org.apache.spark.sql.execution.streaming.state."
                                  "HDFSBackedStateStoreProvider")
            df = (live.withWatermark("event_time", "10 seconds")
                  .groupBy("key", F.session_window("event_time", "30 seconds"))
                  .agg(F.sum("value").alias("total"), F.count("*").alias("n")))
        else:
            spark.conf.unset(store)  # dfsql picks RocksDB where it must
            live.createOrReplaceTempView("live")
            df = dfsql.sql(DFSQL.format(tail=TAILS[name]), spark)
        q = df.writeStream.format("noop").option("checkpointLocation", str(ck)).start()
        try:
            q.processAllAvailable()  # the warm file
            for i in range(len(later)):
                # written aside and renamed in: the stream never lists a half-written file
                part = tmp / f"{name}-{i}.parquet"
                later.iloc[i:i + 1].to_parquet(part)
                part.rename(src / f"part-{i + 1:05d}.parquet")
                q.processAllAvailable()
            # the one-row batches (a watermark's move may add a batch without data)
            return [p.durationMs for p in q.recentProgress if p.numInputRows == 1]
        finally:
            q.stop()

    names = [n for n in args.only if n == "native" or n in TAILS]
    per: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(args.rounds):
        for n in names:
            t0 = time.perf_counter()
            batches = measure(n)
            if r > 0 or args.rounds == 1:
                per[n].extend(batches)
            print(f"# round {r} {n}: {len(batches)} one-row batches in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    native = statistics.median(d["triggerExecution"] for d in per["native"]) \
        if per.get("native") else None
    for n in names:
        med = {k: statistics.median(d.get(k, 0) for d in per[n]) for k in PARTS}
        row = {"query": n, "batches": len(per[n]), **{f"{k}_ms": v for k, v in med.items()}}
        if native and n != "native":
            row["ratio"] = round(med["triggerExecution"] / native, 2)
        print(json.dumps(row), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
