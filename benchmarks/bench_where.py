"""What "time belongs to the input" costs a replay with a WHERE (issue #32), in one run.

A retracting session replay (bench_spark.py's ``sessions_replay_retracting``) over the
benchmark generator's events, three ways, interleaved, median of ``--runs``:

* ``where``: ``… FROM events WHERE value % 2 = 0 …``: every row drives the watermark
  and the replay's end, the kept half enters windows (the rule);
* ``subquery``: ``FROM (SELECT * FROM events WHERE value % 2 = 0)``: only the kept half
  drives time (what WHERE did before; another input now);
* ``unfiltered``: no filter, every row in windows;

and native Spark's ``session_window`` over the filtered rows, the ratio's base. Each is
written to the ``noop`` sink. Usage::

    python benchmarks/bench_where.py [--events 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_spark import cached_events, timed  # noqa: E402

CLAUSES = ("GROUP BY key WINDOW SESSIONS(GAP 30 SECONDS) ON event_time "
           "WATERMARK DELAY 10 SECONDS PROCESSING TIME arrival_time "
           "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
           "EMIT ACCUMULATING AND RETRACTING")
SIDES = {
    "where": f"SELECT key, SUM(value) AS total FROM events WHERE value % 2 = 0 {CLAUSES}",
    "subquery": "SELECT key, SUM(value) AS total FROM (SELECT * FROM events WHERE "
                f"value % 2 = 0) AS e {CLAUSES}",
    "unfiltered": f"SELECT key, SUM(value) AS total FROM events {CLAUSES}",
}
NATIVE = ("SELECT key, session_window.start, session_window.end, SUM(value) AS total "
          "FROM events WHERE value % 2 = 0 GROUP BY key, session_window(event_time, "
          "'30 seconds')")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)

    import dfsql

    spark = dfsql.session()
    cached_events(spark, args.events)

    def run(q: str, windowed: bool = True):
        def go():
            df = dfsql.sql(q, spark) if windowed else spark.sql(q)
            df.write.format("noop").mode("overwrite").save()
        return go

    fns = [run(NATIVE, windowed=False), *[run(q) for q in SIDES.values()]]
    times = timed(fns, args.runs)
    native = statistics.median(times[0])
    row = {"events": args.events, "native_s": round(native, 3), "load": os.getloadavg()[0]}
    for name, ts in zip(SIDES, times[1:], strict=True):
        row[f"{name}_s"] = round(statistics.median(ts), 3)
        row[f"{name}_ratio"] = round(statistics.median(ts) / native, 2)
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
