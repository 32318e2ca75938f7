"""EXPLAIN FIRINGS against the query it explains, in the same run (LANGUAGE.md §8b).

On the benchmark generator's data (``gen_events.py``, 10k Zipf keys), the issue #22
workload — sessions, early panes every 10 s, late panes for a minute, retractions — is
timed three ways, interleaved after one warm-up, each written to the ``noop`` sink:

* ``query``: the plain query (``dfsql.sql``), its whole changelog;
* ``native``: Spark's own ``session_window`` aggregation (for scale);
* ``firings_median_key`` and ``firings_hot_key``: ``EXPLAIN FIRINGS <query> WHERE key =
  <k>`` for the key of median row count and for the hottest key (Zipf: about a tenth of
  the rows): the key's conjunct filters the input before the replay (the watermark, which
  is global, still reads every row), and the general state machine — per-element Python,
  not the vectorised fast path the query takes — records that key's events.

``--full`` also times ``EXPLAIN FIRINGS <query>`` over every key (the state machine, in
Python, over every event: slow by design — explaining is for a key or a window).

Usage::

    python benchmarks/bench_explain.py [--events 1000000] [--runs 3] [--full]
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="also explain every key")
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

    def noop(df, name: str) -> None:
        df.write.format("noop").mode("overwrite").save()
        if name not in counted:
            counted[name] = df.count()

    sides = {"native": lambda: noop(spark.sql(NATIVE), "native"),
             "query": lambda: noop(dfsql.sql(QUERY, spark), "query"),
             "firings_median_key": lambda: noop(dfsql.sql(
                 f"EXPLAIN FIRINGS {QUERY} WHERE key = '{median['key']}'", spark),
                 "firings_median_key"),
             "firings_hot_key": lambda: noop(dfsql.sql(
                 f"EXPLAIN FIRINGS {QUERY} WHERE key = '{hot['key']}'", spark),
                 "firings_hot_key")}
    if args.full:
        sides["firings_all"] = lambda: noop(dfsql.sql(f"EXPLAIN FIRINGS {QUERY}", spark),
                                            "firings_all")
    times = timed(list(sides.values()), args.runs)
    med = {name: statistics.median(t) for name, t in zip(sides, times, strict=True)}
    row = {"events": n, "hot_key_rows": hot["count"], "median_key_rows": median["count"],
           **{f"{name}_s": round(v, 3) for name, v in med.items()},
           "rows": counted,
           "median_key / query": round(med["firings_median_key"] / med["query"], 2),
           "hot_key / query": round(med["firings_hot_key"] / med["query"], 2),
           "query / native": round(med["query"] / med["native"], 2),
           "runs": {name: [round(x, 3) for x in t] for name, t in zip(sides, times,
                                                                       strict=True)},
           "load": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    events.unpersist()
    return 0


if __name__ == "__main__":
    sys.exit(main())
