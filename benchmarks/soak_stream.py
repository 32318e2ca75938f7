"""Soak: a live stream at a steady rate for minutes, with SESSIONS, early firings, late
data and retractions; does dfsql keep up, and do its state and memory stop growing?

Spark's ``rate`` source offers ``--rate`` rows per second. Each run of 50 consecutive
rows is one user key's burst (20,000 keys, so a key comes back every 50 s); event time is
the row's timestamp minus up to 6 s of jitter (so sessions merge, some rows come late
and some too late to keep),
and the timestamp is the arrival (``PROCESSING TIME``). The query::

    SESSIONS(GAP 1 SECOND), WATERMARK DELAY 2 SECONDS, ALLOWED LATENESS 2 SECONDS,
    TRIGGER EVERY 1 SECOND UNTIL WATERMARK THEN REPEAT WATERMARK,
    EMIT ACCUMULATING AND RETRACTING

runs with a 5-second processing-time trigger into a callable sink that counts rows.
Every ``--sample`` seconds it records: rows in and processed per second (Spark's
progress), the elements the state holds and the late rows (dfsql's metrics in the
progress' ``observedMetrics``), the JVM's heap in use after a full GC (driver and
executor: one JVM in local mode) and the resident memory of Spark's Python workers.

An element can only be needed while its window is live: for at most jitter + gap +
delay + lateness = 11 s of event time after it arrives, plus a trigger period; so the
state should never hold more than ``16 × rate`` elements however long it runs.

Usage (the test suite runs a short one: 40 s of samples at 5,000 events/s, once the
stream is running)::

    python benchmarks/soak_stream.py [--seconds 1200] [--rate 20000] [--sample 10] [--settle 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

KEYS = 20_000
BURST = 50
QUERY = ("SELECT key, SUM(v) AS total, COUNT(*) AS n FROM soak GROUP BY key "
         "WINDOW SESSIONS(GAP 1 SECOND) ON event_time WATERMARK DELAY 2 SECONDS "
         "PROCESSING TIME arrival_time ALLOWED LATENESS 2 SECONDS "
         "TRIGGER EVERY 1 SECOND UNTIL WATERMARK THEN REPEAT WATERMARK "
         "EMIT ACCUMULATING AND RETRACTING")
#: the most event time an element stays needed after it arrives (see the module doc)
LIVE_SECONDS = 6 + 1 + 2 + 2
#: the micro-batch period
TRIGGER_SECONDS = 5


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _python_workers_rss(jvm_pid: int) -> int:
    """Resident memory of the Python processes Spark's JVM started (its workers)."""
    total = 0
    for pid in _descendants(jvm_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"python" in cmd:
            total += _rss(pid)
    return total


def _heap_after_gc_mb(heap_pools) -> int:
    """The heap in use as the collector left it after its last collection (the System.gc()
    just before): what is live, not what the running stream allocated since."""
    return round(sum(pool.getCollectionUsage().getUsed() for pool in heap_pools) / 2**20)


def soak(spark, seconds: float, rate: int, sample: float, checkpoint: str,
         log=print, settle: float = 0.0) -> list[dict]:
    """Run the soak query for ``seconds`` and return one record per sample.

    With ``settle`` > 0, sampling starts only once the first batch with rows has finished
    (waiting at most ``settle`` seconds): a short run then samples the stream running, not
    the start-up of Spark's Python workers, which on a busy machine can take half a minute.
    ``t`` still counts from the query's start (the rate source's rows do too)."""
    import dfsql

    (spark.readStream.format("rate").option("rowsPerSecond", rate)
     .option("numPartitions", 2).load()
     .selectExpr(f"CAST(pmod(value DIV {BURST}, {KEYS}) AS INT) AS key",
                 "CAST(pmod(value, 7) AS BIGINT) AS v",
                 "timestamp - make_dt_interval(0, 0, 0, pmod(value * 7919, 6000) / 1000.0) "
                 "AS event_time",
                 "timestamp AS arrival_time")
     .createOrReplaceTempView("soak"))
    out_rows = [0]

    def count(batch, _batch_id):
        out_rows[0] += batch.count()

    jvm = spark.sparkContext._jvm
    jvm_pid = int(jvm.ProcessHandle.current().pid())
    heap_pools = [pool for pool in jvm.java.lang.management.ManagementFactory
                  .getMemoryPoolMXBeans()
                  if str(pool.getType()) == "Heap memory" and pool.getCollectionUsage()]
    q = dfsql.start(QUERY, sink=count, checkpoint=checkpoint,
                    trigger={"processingTime": f"{TRIGGER_SECONDS} seconds"}, spark=spark)
    samples: list[dict] = []
    seen: set[int] = set()
    progress: list[dict] = []
    t0 = time.monotonic()

    def collect() -> None:
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        for p in q.recentProgress:
            if p.batchId not in seen:
                seen.add(p.batchId)
                progress.append(json.loads(p.json))

    try:
        while settle and time.monotonic() - t0 < settle and not any(
                p["numInputRows"] for p in progress):
            time.sleep(0.5)
            collect()
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            time.sleep(sample)
            collect()
            jvm.java.lang.System.gc()
            recent = [p for p in progress
                      if p["numInputRows"] and p["batchId"] >= max(seen) - 4]
            m = progress[-1].get("observedMetrics", {}).get("dfsql", {}) if progress else {}
            rec = {
                "t": round(time.monotonic() - t0, 1),
                "batches": len(progress),
                "rows_in": sum(p["numInputRows"] for p in progress),
                "rows_out": out_rows[0],
                "processed_per_s": round(sum(p["numInputRows"] for p in recent) / max(
                    1e-9, sum(p["durationMs"]["triggerExecution"] for p in recent) / 1000)),
                "state_elements": m.get("state_elements"),
                "late_dropped": sum(p.get("observedMetrics", {}).get("dfsql", {})
                                    .get("late_dropped") or 0 for p in progress),
                "heap_mb": _heap_after_gc_mb(heap_pools),
                "workers_mb": round(_python_workers_rss(jvm_pid) / 2**20),
            }
            samples.append(rec)
            log(json.dumps(rec))
    finally:
        q.stop()
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=1200)
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--sample", type=float, default=10)
    ap.add_argument("--settle", type=float, default=0,
                    help="wait up to this many seconds for the first batch with rows "
                         "before sampling (as the test does)")
    args = ap.parse_args(argv)
    import tempfile

    import dfsql

    spark = dfsql.session()
    with tempfile.TemporaryDirectory(prefix="dfsql-soak-") as tmp:
        samples = soak(spark, args.seconds, args.rate, args.sample, str(Path(tmp) / "ck"),
                       settle=args.settle)
    half = samples[len(samples) // 2:]
    print(json.dumps({
        "seconds": args.seconds, "rate": args.rate,
        "rows_in": samples[-1]["rows_in"], "rows_out": samples[-1]["rows_out"],
        "processed_per_s_min_2nd_half": min(s["processed_per_s"] for s in half),
        "state_elements_max": max(s["state_elements"] or 0 for s in samples),
        "state_bound": (LIVE_SECONDS + TRIGGER_SECONDS) * args.rate,
        "heap_mb_min_1st_2nd_half": [min(s["heap_mb"] for s in samples[1:len(samples) // 2]),
                                     min(s["heap_mb"] for s in half)],
        "heap_mb_2nd_half": [min(s["heap_mb"] for s in half), max(s["heap_mb"] for s in half)],
        "workers_mb_2nd_half": [min(s["workers_mb"] for s in half),
                                max(s["workers_mb"] for s in half)],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
