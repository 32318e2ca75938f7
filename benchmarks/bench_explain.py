"""EXPLAIN FIRINGS and EXPLAIN WATERMARK against the query they explain, in the same run.

On the benchmark generator's data (``gen_events.py``, 10k Zipf keys), issue #22's
workload (``bench_spark.py``'s ``sessions_early_late_retracting``: SESSIONS(GAP 30
SECONDS), WATERMARK DELAY 10 SECONDS, PROCESSING TIME, ALLOWED LATENESS 1 MINUTE, early
panes every 10 s, retractions) is timed these ways, interleaved after one warm-up each,
events cached, each written to the ``noop`` sink:

* ``query``: the plain query (``dfsql.sql``), its whole changelog;
* ``native``: Spark's own ``session_window`` aggregation (for scale);
* ``firings_median_key`` and ``firings_hot_key``: ``EXPLAIN FIRINGS <query> WHERE key =
  <k>`` for the key of median row count and for the hottest key (Zipf: about a tenth of
  the rows): the key's conjunct filters the input before the replay (the watermark, which
  is global, still reads every row), and the general state machine — per-element Python,
  not the vectorised fast path the query takes — records that key's events;
* ``watermark``: ``EXPLAIN WATERMARK <query> TRY`` the ``--try`` watermarks (five by
  default: two DELAYs, two PERCENTILEs and PERFECT; six replays with the query's own),
  over one read and one shuffle; the target is at most 3x the query.

``--full`` also times ``EXPLAIN FIRINGS <query>`` over every key (the state machine, in
Python, over every event: slow by design — explaining is for a key or a window).
``--only firings|watermark`` times one statement beside the query and native.

Usage::

    python benchmarks/bench_explain.py [--events 1000000] [--runs 3] [--full]
                                       [--only firings|watermark] [--try "DELAY 0 SECONDS" ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_spark import WORKLOADS, dataset, timed  # noqa: E402

QUERY, NATIVE = WORKLOADS["sessions_early_late_retracting"]
TRIES = ["DELAY 0 SECONDS", "DELAY 30 SECONDS", "PERCENTILE 99",
         "PERCENTILE 90 DELAY 5 SECONDS", "PERFECT"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="also explain every key")
    ap.add_argument("--only", choices=["firings", "watermark"])
    ap.add_argument("--try", dest="tries", nargs="+", default=TRIES)
    args = ap.parse_args(argv)

    import dfsql

    spark = dfsql.session()
    print(f"load: {os.getloadavg()}", flush=True)
    events = spark.read.parquet(str(dataset(args.events))).cache()
    events.createOrReplaceTempView("events")
    n = events.count()
    per_key = events.groupBy("key").count().orderBy("count", ascending=False).collect()
    hot, median = per_key[0], per_key[len(per_key) // 2]
    counted: dict[str, int] = {}
    shown: list = []

    def noop(df, name: str) -> None:
        df.write.format("noop").mode("overwrite").save()
        if name not in counted:
            counted[name] = df.count()

    def firings(key: str, name: str):
        return lambda: noop(dfsql.sql(f"EXPLAIN FIRINGS {QUERY} WHERE key = '{key}'", spark),
                            name)

    def watermark() -> None:  # a few rows: collected
        shown[:] = dfsql.sql(f"EXPLAIN WATERMARK {QUERY} TRY {', '.join(args.tries)}",
                             spark).collect()

    sides = {"native": lambda: noop(spark.sql(NATIVE), "native"),
             "query": lambda: noop(dfsql.sql(QUERY, spark), "query")}
    if args.only != "watermark":
        sides["firings_median_key"] = firings(median["key"], "firings_median_key")
        sides["firings_hot_key"] = firings(hot["key"], "firings_hot_key")
    if args.only != "firings":
        sides["watermark"] = watermark
    if args.full:
        sides["firings_all"] = lambda: noop(dfsql.sql(f"EXPLAIN FIRINGS {QUERY}", spark),
                                            "firings_all")
    times = dict(zip(sides, timed(list(sides.values()), args.runs), strict=True))
    med = {name: statistics.median(t) for name, t in times.items()}
    row = {"events": n, "hot_key_rows": hot["count"], "median_key_rows": median["count"],
           **{f"{name}_s": round(v, 3) for name, v in med.items()},
           "rows": counted,
           **{f"{name} / query": round(statistics.median(
               [a / b for a, b in zip(times[name], times["query"], strict=True)]), 2)
              for name in sides if name != "query"},
           "runs": {name: [round(x, 3) for x in t] for name, t in times.items()},
           "load": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    for r in shown:
        print("  " + " | ".join(str(v) for v in r), flush=True)
    events.unpersist()
    return 0


if __name__ == "__main__":
    sys.exit(main())
