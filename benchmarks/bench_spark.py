"""dfsql on Spark against native Spark, in the same run, on the benchmark generator's data.

Workloads (LANGUAGE.md queries over ``benchmarks/gen_events.py`` output, 10k keys):

* FIXED(1 MINUTE), default trigger, batch    vs  ``groupBy(key, window(event_time, '1 minute'))``
* SESSIONS(GAP 30 SECONDS), default trigger  vs  ``groupBy(key, session_window(...))``
* SESSIONS + ``EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK``, ACCUMULATING AND
  RETRACTING, PROCESSING TIME replay, WATERMARK DELAY 10 SECONDS  vs  native sessions

Each is written to the ``noop`` sink (so the whole plan runs and nothing is collected);
the figure is the median of ``--runs`` runs (interleaved) after one warm-up, and the ratio
dfsql / native. A replayed result comes in LANGUAGE.md §7's changelog order (emit time,
keys, window_start), a global sort that plain ``GROUP BY session_window()`` does not do;
a batch result is unordered, as native's. The native query with ``ORDER BY key, start``
is timed too (``native_ord_s``, ``ratio_ord``).
Usage::

    python benchmarks/bench_spark.py [--events 1000000 4000000] [--runs 3] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GEN = HERE / "gen_events.py"
DATA = HERE / "data"

WORKLOADS = {
    "fixed_default": (
        "SELECT key, SUM(value) AS total, COUNT(*) AS n FROM events GROUP BY key "
        "WINDOW FIXED(1 MINUTE) ON event_time",
        "SELECT key, window.start, window.end, SUM(value) AS total, COUNT(*) AS n FROM events "
        "GROUP BY key, window(event_time, '1 minute')",
    ),
    "sessions_default": (
        "SELECT key, SUM(value) AS total, COUNT(*) AS n FROM events GROUP BY key "
        "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time",
        "SELECT key, session_window.start, session_window.end, SUM(value) AS total, "
        "COUNT(*) AS n FROM events GROUP BY key, session_window(event_time, '30 seconds')",
    ),
    "sessions_replay_retracting": (
        "SELECT key, SUM(value) AS total, COUNT(*) AS n FROM events GROUP BY key "
        "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
        "PROCESSING TIME arrival_time "
        "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
        "EMIT ACCUMULATING AND RETRACTING",
        "SELECT key, session_window.start, session_window.end, SUM(value) AS total, "
        "COUNT(*) AS n FROM events GROUP BY key, session_window(event_time, '30 seconds')",
    ),
}


def dataset(events: int) -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    out = DATA / f"ev_{events}.parquet"
    if not out.exists():
        subprocess.run([sys.executable, str(GEN), "--events", str(events), "--keys", "10000",
                        "--seed", "1", "--out", str(out), "--quiet"], check=True)
    return out


def timed(fns, runs: int) -> list[float]:
    """Median seconds of each function; runs interleaved, so that a change in the machine's
    load over the benchmark weighs on every side alike."""
    for fn in fns:
        fn()  # warm-up: JIT, caches, Python workers
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000, 4_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)

    import dfsql

    spark = dfsql.session()
    results = []
    for n in args.events:
        spark.read.parquet(str(dataset(n))).createOrReplaceTempView("events")
        for name, (ours, native) in WORKLOADS.items():
            if args.only and name not in args.only:
                continue

            def run_ours(q=ours):
                dfsql.sql(q, spark).write.format("noop").mode("overwrite").save()

            def run_native(q=native):
                spark.sql(q).write.format("noop").mode("overwrite").save()

            def run_native_ordered(q=native + " ORDER BY key, start"):
                spark.sql(q).write.format("noop").mode("overwrite").save()

            t_native, t_ordered, t_ours = timed([run_native, run_native_ordered, run_ours],
                                                args.runs)
            row = {"events": n, "workload": name, "native_s": round(t_native, 3),
                   "native_ord_s": round(t_ordered, 3), "dfsql_s": round(t_ours, 3),
                   "ratio": round(t_ours / t_native, 2),
                   "ratio_ord": round(t_ours / t_ordered, 2)}
            results.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{'events':>9} {'workload':<28} {'native s':>9} {'ordered s':>9} {'dfsql s':>9} "
          f"{'ratio':>6} {'/ord':>6}")
    for r in results:
        print(f"{r['events']:>9} {r['workload']:<28} {r['native_s']:>9} {r['native_ord_s']:>9} "
              f"{r['dfsql_s']:>9} {r['ratio']:>6} {r['ratio_ord']:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
