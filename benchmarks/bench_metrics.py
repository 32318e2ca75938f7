"""What a Prometheus scrape every second costs a running continuous query (issue #56;
docs/guides/watching.md#metrics): the same stream run side by side with and without a
thread that reads ``/metrics`` once a second. The target: under 2% added time.

The generator's events (``gen_events.py --split-files 20``, rows in arrival order) are a
parquet stream read ``--files-per-batch`` files per micro-batch by ``CREATE STREAMING
QUERY`` (so the query has a progress log, which the scrapes read) with dfsql's own
executor (PROCESSING TIME arrival_time), from a fresh checkpoint each run; the time is
from the statement to the last file processed (``processAllAvailable``). Runs alternate,
without and with the scrapes, after one warm-up of each; the figure is the median of
``--runs`` runs of each, and the ratio; and how long one scrape takes (its share of each
second bounds what it can add, where the machine's noise hides a 2% difference). Usage::

    python benchmarks/bench_metrics.py [--events 1000000] [--runs 5] [--files-per-batch 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench_stream import dataset

QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM live GROUP BY key "
         "WINDOW FIXED(1 MINUTE) ON event_time WATERMARK DELAY 10 SECONDS "
         "PROCESSING TIME arrival_time")


def _scraping(url: str, stop: threading.Event, seen: list[float]) -> None:
    """Read ``url`` once a second until ``stop``; each scrape's seconds into ``seen``."""
    while not stop.wait(1.0):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=60) as r:
            r.read()
        seen.append(time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files-per-batch", type=int, default=1)
    args = ap.parse_args(argv)

    import dfsql
    from dfsql.continuous_queries import QUERIES

    spark = dfsql.session()
    src = dataset(args.events)
    schema = spark.read.parquet(str(src)).schema
    tmp = Path(tempfile.mkdtemp(prefix="dfsql-bench-metrics-"))
    server = dfsql.serve_metrics(0, spark=spark)
    url = f"http://127.0.0.1:{server.port}/metrics"

    scrape_s: list[float] = []

    def run(scraped: bool) -> tuple[float, int]:
        (spark.readStream.schema(schema).option("maxFilesPerTrigger", args.files_per_batch)
         .parquet(str(src)).createOrReplaceTempView("live"))
        ck = tmp / "ck"
        shutil.rmtree(ck, ignore_errors=True)
        stop, seen = threading.Event(), []
        scraper = threading.Thread(target=_scraping, args=(url, stop, seen), daemon=True)
        t0 = time.perf_counter()
        if scraped:
            scraper.start()
        dfsql.sql(f"CREATE STREAMING QUERY bench_watched CHECKPOINT '{ck}' AS {QUERY}", spark)
        QUERIES.running["bench_watched"].query.processAllAvailable()
        took = time.perf_counter() - t0
        stop.set()
        if scraped:
            scraper.join()
        dfsql.sql("STOP STREAMING QUERY bench_watched", spark)
        scrape_s.extend(seen)
        return took, len(seen)

    for scraped in (False, True):  # warm-up: JIT, caches, Python workers
        run(scraped)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.runs):
        for scraped in (False, True):
            took, scrapes = run(scraped)
            times[scraped].append(took)
            print(f"# {'scraped every 1 s' if scraped else 'no scrapes'}: {took:.2f} s"
                  + (f" ({scrapes} scrapes)" if scraped else ""), flush=True)
    server.close()
    plain, watched = (statistics.median(times[k]) for k in (False, True))
    print(json.dumps({"events": args.events, "files_per_batch": args.files_per_batch,
                      "runs": args.runs, "plain_s": round(plain, 3),
                      "scraped_s": round(watched, 3),
                      "added_pct": round(100 * (watched / plain - 1), 2),
                      # what the scrapes themselves take: a bound on their share of a
                      # second, whatever the machine's noise
                      "scrape_ms_median": round(1000 * statistics.median(scrape_s), 1),
                      "scrape_ms_max": round(1000 * max(scrape_s), 1)}), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
