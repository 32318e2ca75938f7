"""EXPLAIN WATERMARK against the query it explains, in the same run, on the generator's data.

The query is issue #22's workload (``bench_spark.py``'s ``sessions_early_late_retracting``:
SESSIONS(GAP 30 SECONDS), WATERMARK DELAY 10 SECONDS, PROCESSING TIME, ALLOWED LATENESS
1 MINUTE, early panes every 10 s, retractions). The plain side runs it to the ``noop``
sink (the whole plan, nothing collected); the EXPLAIN side replays it under its own
watermark and the ``--try`` ones (five by default: two DELAYs, two PERCENTILEs and
PERFECT) and collects the rows. Sides alternate, one warm-up each, events cached;
``ratio_med`` is the median of the rounds' own ratios (explain / plain); the target is at
most 3.

Usage::

    python benchmarks/bench_explain.py [--events 1000000] [--runs 3]
                                       [--try "DELAY 0 SECONDS" "PERFECT" ...]
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

QUERY = WORKLOADS["sessions_early_late_retracting"][0]
TRIES = ["DELAY 0 SECONDS", "DELAY 30 SECONDS", "PERCENTILE 99",
         "PERCENTILE 90 DELAY 5 SECONDS", "PERFECT"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--try", dest="tries", nargs="+", default=TRIES)
    args = ap.parse_args(argv)

    import dfsql

    spark = dfsql.session()
    explain = f"EXPLAIN WATERMARK {QUERY} TRY {', '.join(args.tries)}"
    for n in args.events:
        events = spark.read.parquet(str(dataset(n))).cache()
        events.count()
        events.createOrReplaceTempView("events")
        shown: list = []

        def plain() -> None:
            dfsql.sql(QUERY, spark).write.format("noop").mode("overwrite").save()

        def explained(shown: list = shown) -> None:
            shown[:] = dfsql.sql(explain, spark).collect()

        load0 = os.getloadavg()[0]
        t_plain, t_explain = timed([plain, explained], args.runs)
        ratios = [e / p for p, e in zip(t_plain, t_explain, strict=True)]
        print(json.dumps({
            "events": n, "watermarks": 1 + len(args.tries), "runs": args.runs,
            "plain_s": round(statistics.median(t_plain), 2),
            "explain_s": round(statistics.median(t_explain), 2),
            "ratio_med": round(statistics.median(ratios), 2),
            "ratios": [round(r, 2) for r in ratios],
            "load": [round(load0, 1), round(os.getloadavg()[0], 1)]}), flush=True)
        for r in shown:
            print("  " + " | ".join(str(v) for v in r), flush=True)
        events.unpersist()
    return 0


if __name__ == "__main__":
    sys.exit(main())
