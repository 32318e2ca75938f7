"""What judging statements on Spark's plan costs the endpoint, in the same run.

Two ``dfsql serve`` endpoints in this process over one Spark: ``judged`` (the default: a
data root, no JVM functions: every statement is parsed by Spark's parser and its tree
read before it runs, see ``dfsql/server/judge.py``) and ``open`` (``--allow-any-path
--allow-jvm-functions``: nothing is judged, as before any judge existed). A PyHive
client (NOSASL) of each runs, interleaved round by round:

* ``select``: ``SELECT 1 AS one``, ``--statements`` times (statements per second);
* ``ddl``: ``CREATE OR REPLACE TEMPORARY VIEW bench_v AS SELECT id FROM range(10)``,
  ``--statements`` times;
* ``windowed``: issue #22's retracting sessions workload (``bench_spark.py``'s
  ``sessions_early_late_retracting``) over the generator's ``--events`` events, fetched
  whole (seconds per query); the target is at most 10 % more than ``open``.

Usage::

    python benchmarks/bench_judge.py [--events 200000] [--statements 200] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_spark import WORKLOADS, cached_events, dataset  # noqa: E402

QUERY = WORKLOADS["sessions_early_late_retracting"][0]
SELECT = "SELECT 1 AS one"
DDL = "CREATE OR REPLACE TEMPORARY VIEW bench_v AS SELECT id FROM range(10)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--statements", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)

    from pyhive import hive

    import dfsql
    from dfsql.server import Server

    spark = dfsql.session()
    cached_events(spark, args.events, view=None)

    def setup(session) -> None:
        # the cached frame under the same plan: each client session reads it from memory
        session.read.parquet(str(dataset(args.events))).createOrReplaceTempView("events")

    root = tempfile.mkdtemp(prefix="bench-judge-")
    servers = {
        "judged": Server(spark, port=0, auth="NOSASL", data_roots=[root],
                         session_setup=setup).start(),
        "open": Server(spark, port=0, auth="NOSASL", data_roots=None,
                       allow_jvm_functions=True, session_setup=setup).start(),
    }
    cursors = {k: hive.connect(host="127.0.0.1", port=s.port, auth="NOSASL").cursor()
               for k, s in servers.items()}

    def statements(cur, text: str) -> float:
        t0 = time.perf_counter()
        for _ in range(args.statements):
            cur.execute(text)
            cur.fetchall()
        return args.statements / (time.perf_counter() - t0)

    def windowed(cur) -> float:
        t0 = time.perf_counter()
        cur.execute(QUERY)
        rows = len(cur.fetchall())
        assert rows > 0
        return time.perf_counter() - t0

    sides = {("select", k): (lambda c=c: statements(c, SELECT)) for k, c in cursors.items()}
    sides |= {("ddl", k): (lambda c=c: statements(c, DDL)) for k, c in cursors.items()}
    sides |= {("windowed", k): (lambda c=c: windowed(c)) for k, c in cursors.items()}
    for fn in sides.values():  # warm-up
        fn()
    got: dict[tuple[str, str], list[float]] = {k: [] for k in sides}
    for r in range(args.runs):
        order = list(sides) if r % 2 == 0 else [(w, k) for w, k in
                                                 sorted(sides, key=lambda s: s[1] != "open")]
        for key in order:
            got[key].append(sides[key]())
            print(json.dumps({"what": key[0], "server": key[1], "round": r,
                              "value": round(got[key][-1], 4)}), flush=True)
    print("\n| what | open | judged | judged / open |\n|---|---:|---:|---:|")
    for what, unit in (("select", "stmt/s"), ("ddl", "stmt/s"), ("windowed", "s")):
        o, j = statistics.median(got[(what, "open")]), statistics.median(got[(what, "judged")])
        ratios = [a / b for a, b in zip(got[(what, "judged")], got[(what, "open")],
                                        strict=True)]
        print(f"| {what} ({unit}) | {o:.3g} | {j:.3g} | {statistics.median(ratios):.3f} |")
    for s in servers.values():
        s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
