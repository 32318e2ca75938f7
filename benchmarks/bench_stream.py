"""Live streams: dfsql against Spark's own streaming ``session_window``, in the same run.

The generator's events (``gen_events.py --split-files 20``, rows in arrival order) are
read as a parquet stream, 2 files per micro-batch (10 micro-batches), ``availableNow``,
into the ``noop`` sink, each run from a fresh checkpoint. Native: ``withWatermark`` +
``groupBy(key, session_window)`` in append mode (10 seconds of delay), on Spark's default
(HDFS-backed) state store; dfsql on RocksDB, which ``transformWithState`` requires. dfsql:

* ``default``: SESSIONS(GAP 30 SECONDS), WATERMARK DELAY 10 SECONDS, default trigger, on
  the engine's clock (no PROCESSING TIME): dfsql compiles it to Spark's own operator, on
  the RocksDB store ``dfsql.session`` configures;
* ``default_column``: the same with PROCESSING TIME arrival_time (the clock from the
  column: dfsql's own executor);
* ``retracting``: the column's clock with ``TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN
  REPEAT WATERMARK EMIT ACCUMULATING AND RETRACTING``.

The figure is the median of ``--runs`` runs after one warm-up, and the ratio dfsql /
native. Usage::

    python benchmarks/bench_stream.py [--events 1000000] [--runs 3] [--files-per-batch 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GEN = HERE / "gen_events.py"
DATA = HERE / "data"

DFSQL = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM live GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS {tail}")
TAILS = {"default": "",
         "default_column": "PROCESSING TIME arrival_time",
         "retracting": "PROCESSING TIME arrival_time "
                       "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
                       "EMIT ACCUMULATING AND RETRACTING"}


def dataset(events: int, files: int = 20) -> Path:
    """The generator's rows cut into ``files`` files of contiguous arrival time
    (modification times in that order, which is the order a file stream reads them)."""
    name = f"stream_{events}" if files == 20 else f"stream_{events}_{files}"
    out = DATA / f"{name}.parquet"
    split = DATA / f"{name}.stream"
    if not split.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(GEN), "--events", str(events), "--keys", "10000",
                        "--seed", "1", "--split-files", str(files), "--out", str(out),
                        "--quiet"], check=True)
    return split


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--files-per-batch", type=int, default=2)
    ap.add_argument("--buckets", type=int, nargs="+", default=[0],
                    help="state designs: buckets of user keys (0 = the default, the shuffle "
                         "partitions); -1 = one state key per user key")
    ap.add_argument("--only", nargs="*", default=list(TAILS))
    ap.add_argument("--warmups", type=int, default=1)
    ap.add_argument("--conf", nargs="*", default=[], metavar="KEY=VALUE",
                    help="session settings for both sides (spark.sql.shuffle.partitions=2)")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F  # noqa: N812

    import dfsql
    from dfsql.spark.stream.plan import BUCKETS_CONF

    spark = dfsql.session()
    for kv in args.conf:
        spark.conf.set(*kv.split("=", 1))
    src = dataset(args.events)
    schema = spark.read.parquet(str(src)).schema
    tmp = Path(tempfile.mkdtemp(prefix="dfsql-bench-stream-"))

    def live():
        return (spark.readStream.schema(schema)
                .option("maxFilesPerTrigger", args.files_per_batch).parquet(str(src)))

    def run(df) -> None:
        ck = tmp / "ck"
        shutil.rmtree(ck, ignore_errors=True)
        q = (df.writeStream.format("noop").option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())
        q.awaitTermination()

    store = "spark.sql.streaming.stateStore.providerClass"

    def native():
        # Spark's default state store (HDFS-backed, in memory): native's fastest
        spark.conf.set(store, "org.apache.spark.sql.execution.streaming.state."
                              "HDFSBackedStateStoreProvider")
        df = live().withWatermark("event_time", "10 seconds")
        run(df.groupBy("key", F.session_window("event_time", "30 seconds"))
            .agg(F.sum("value").alias("total"), F.count("*").alias("n")))

    def ours(tail: str, buckets: int):
        spark.conf.unset(store)  # the session's default: dfsql picks RocksDB where it must
        spark.conf.set(BUCKETS_CONF, str(max(buckets, 0) if buckets else ""))
        if buckets == 0:
            spark.conf.unset(BUCKETS_CONF)
        live().createOrReplaceTempView("live")
        run(dfsql.sql(DFSQL.format(tail=tail), spark))

    variants = [(name, b) for b in args.buckets for name in args.only]
    fns = [native] + [lambda n=n, b=b: ours(TAILS[n], b) for n, b in variants]
    labels = ["native"] + [f"{n}, " + ("per user key" if b < 0 else
                                       f"{b or 'shuffle partitions'} buckets")
                           for n, b in variants]
    for _ in range(args.warmups):
        for fn in fns:
            fn()  # JIT, caches, Python workers
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(args.runs):
        for label, fn, ts in zip(labels, fns, times, strict=True):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
            print(f"# {label}: {ts[-1]:.2f} s", flush=True)
    med = [statistics.median(ts) for ts in times]
    for label, t in zip(labels[1:], med[1:], strict=True):
        print(json.dumps({"events": args.events, "workload": label,
                          "native_s": round(med[0], 3), "dfsql_s": round(t, 3),
                          "ratio": round(t / med[0], 2)}), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
