"""A continuous query started over its history (``BACKFILL``, issue #34) against the same
events fed to it as micro-batches, in the same run.

The generator's events (``gen_events.py --split-files F``, rows in arrival order; F is
``--split-files``, 20 by default): the first F − 1 files are the history, the last one the
live stream. Three ways to the same
panes, each into a no-op sink through ``dfsql.start`` (the sink gets every micro-batch in
§7's changelog order), each from a fresh checkpoint:

* ``backfill``: ``dfsql.start(query, backfill=<the 19 files, bounded>)`` over a stream of
  the last file: one micro-batch, which replays the history first;
* ``micro-batches``: all 20 files as a stream, ``--files-per-batch`` per micro-batch
  (the history fed as a live stream would have been);
* ``replay``: the bounded replay of all 20 files (``dfsql.sql``), the floor a backfill is
  measured against.

Query: the column's clock, SESSIONS(GAP 30 SECONDS), WATERMARK DELAY 10 SECONDS, and
``--trigger`` (default: the retracting trigger of ``bench_stream.py``). The figure is the
median of ``--runs`` runs after one warm-up; the ratios are micro-batches / backfill (the
speed-up) and backfill / replay. Usage::

    python benchmarks/bench_backfill.py [--events 4000000] [--runs 3] [--split-files 20]
        [--files-per-batch 1] [--trigger retracting|default]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stream import dataset  # noqa: E402

QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
         "PROCESSING TIME arrival_time {trigger}")
TRIGGERS = {"retracting": "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
                          "EMIT ACCUMULATING AND RETRACTING",
            "default": ""}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--files-per-batch", type=int, default=1)
    ap.add_argument("--split-files", type=int, default=20,
                    help="files the events are cut into (the live stream's micro-batches)")
    ap.add_argument("--trigger", choices=list(TRIGGERS), default="retracting")
    args = ap.parse_args(argv)

    import dfsql

    spark = dfsql.session()
    src = dataset(args.events, args.split_files)
    files = sorted(src.glob("*.parquet"))
    schema = spark.read.parquet(str(src)).schema
    tmp = Path(tempfile.mkdtemp(prefix="dfsql-bench-backfill-"))
    last = tmp / "last"
    last.mkdir()
    shutil.copy2(files[-1], last / files[-1].name)
    spark.read.parquet(*[str(f) for f in files[:-1]]).createOrReplaceTempView("history")
    spark.read.parquet(str(src)).createOrReplaceTempView("everything")
    query = QUERY.format(t="{t}", trigger=TRIGGERS[args.trigger])

    def noop(batch, _batch_id) -> None:
        batch.write.format("noop").mode("overwrite").save()

    def streamed(path: Path, backfill: str | None) -> None:
        ck = tmp / "ck"
        shutil.rmtree(ck, ignore_errors=True)
        (spark.readStream.schema(schema).option("maxFilesPerTrigger", args.files_per_batch)
         .parquet(str(path)).createOrReplaceTempView("live"))
        q = dfsql.start(query.format(t="live"), sink=noop, checkpoint=str(ck),
                        trigger={"availableNow": True}, backfill=backfill, spark=spark)
        q.awaitTermination()

    def replay() -> None:
        dfsql.sql(query.format(t="everything"), spark).write.format("noop").mode(
            "overwrite").save()

    fns = {"backfill": lambda: streamed(last, "history"),
           "micro-batches": lambda: streamed(src, None),
           "replay": replay}
    for fn in fns.values():
        fn()  # warm-up: JIT, caches, Python workers
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(args.runs):
        for label, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t0)
            print(f"# {label}: {times[label][-1]:.2f} s", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    batches = -(-len(files) // args.files_per_batch)
    print(json.dumps({"events": args.events, "trigger": args.trigger,
                      "history_files": len(files) - 1, "micro_batches": batches,
                      **{f"{k}_s": round(v, 2) for k, v in med.items()},
                      "speedup": round(med["micro-batches"] / med["backfill"], 2),
                      "backfill_vs_replay": round(med["backfill"] / med["replay"], 2)}),
          flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
