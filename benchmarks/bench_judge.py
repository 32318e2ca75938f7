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
  whole (seconds per query); the target is at most 10 % more than ``open``;
* ``small``: a windowed query over a small csv table (``--small-rows`` rows under the
  data root, made by ``CREATE TEMPORARY VIEW … USING csv OPTIONS (header, inferSchema,
  timestampFormat)`` through each client) whose aggregate calls ``from_json`` with an
  options map: every rule of the judge, the option keys' too (issue #52), over a query
  whose own work is small (seconds per query, the mean of 5; the same ≤ 10 % target).

The last column is the judge's own time (every outermost ``Judge.refusal``: parse,
walk, rules) as a share of the judged side's wall time, read directly in the same
rounds: on a loaded machine the two sides' times differ by more than that.

Usage::

    python benchmarks/bench_judge.py [--events 200000] [--statements 200] [--runs 3]
        [--small-rows 2000]
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
SMALL_VIEWS = (
    "CREATE OR REPLACE TEMPORARY VIEW small_csv USING csv OPTIONS (path '{path}', "
    "header 'true', inferSchema 'true', timestampFormat 'yyyy-MM-dd HH:mm:ss')",
    "CREATE OR REPLACE TEMPORARY VIEW small AS SELECT key, value, CAST(event_time AS "
    "TIMESTAMP) AS event_time FROM small_csv")
SMALL = ("SELECT key, SUM(value) AS total, MAX(from_json(concat('{\"a\": ', value, '}'), "
         "'a INT', map('mode', 'PERMISSIVE')).a) AS a FROM small GROUP BY key "
         "WINDOW FIXED(1 MINUTE) ON event_time")


def small_table(root: str, rows: int) -> str:
    """``rows`` rows of 10 keys over an hour of event time, as one csv file."""
    path = Path(root) / "small.csv"
    lines = ["key,value,event_time"]
    lines += [f"k{i % 10},{i % 97},2026-01-01 00:{(i * 7) % 60:02d}:{i % 60:02d}"
              for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--statements", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small-rows", type=int, default=2000)
    args = ap.parse_args(argv)

    from pyhive import hive

    import dfsql
    from dfsql.server import Server
    from dfsql.server.judge import Judge

    # the judge's own time, read directly (load on a shared machine makes two sides'
    # wall times differ by more than the judgement costs): each outermost judgement
    spent = [0.0]
    judge_refusal = Judge.refusal

    def timed(self, spark, text, nesting=0):
        t0 = time.perf_counter()
        try:
            return judge_refusal(self, spark, text, nesting)
        finally:
            if nesting == 0:
                spent[0] += time.perf_counter() - t0

    Judge.refusal = timed  # type: ignore[method-assign]

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
    small = small_table(root, args.small_rows)
    for cur in cursors.values():
        for view in SMALL_VIEWS:
            cur.execute(view.format(path=small))

    def statements(cur, text: str) -> float:
        t0 = time.perf_counter()
        for _ in range(args.statements):
            cur.execute(text)
            cur.fetchall()
        return args.statements / (time.perf_counter() - t0)

    def windowed(cur, query: str = QUERY) -> float:
        t0 = time.perf_counter()
        cur.execute(query)
        rows = len(cur.fetchall())
        assert rows > 0
        return time.perf_counter() - t0

    sides = {("select", k): (lambda c=c: statements(c, SELECT)) for k, c in cursors.items()}
    sides |= {("ddl", k): (lambda c=c: statements(c, DDL)) for k, c in cursors.items()}
    sides |= {("windowed", k): (lambda c=c: windowed(c)) for k, c in cursors.items()}
    sides |= {("small", k): (lambda c=c: sum(windowed(c, SMALL) for _ in range(5)) / 5)
              for k, c in cursors.items()}
    for fn in sides.values():  # warm-up
        fn()
    got: dict[tuple[str, str], list[float]] = {k: [] for k in sides}
    share: dict[str, list[float]] = {w: [] for w, _ in sides}  # judging / judged wall
    for r in range(args.runs):
        order = list(sides) if r % 2 == 0 else [(w, k) for w, k in
                                                 sorted(sides, key=lambda s: s[1] != "open")]
        for key in order:
            before, t0 = spent[0], time.perf_counter()
            got[key].append(sides[key]())
            if key[1] == "judged":
                share[key[0]].append((spent[0] - before) / (time.perf_counter() - t0))
            print(json.dumps({"what": key[0], "server": key[1], "round": r,
                              "value": round(got[key][-1], 4)}), flush=True)
    print("\n| what | open | judged | judged / open | judging's own share |\n"
          "|---|---:|---:|---:|---:|")
    for what, unit in (("select", "stmt/s"), ("ddl", "stmt/s"), ("windowed", "s"),
                       ("small", "s")):
        o, j = statistics.median(got[(what, "open")]), statistics.median(got[(what, "judged")])
        ratios = [a / b for a, b in zip(got[(what, "judged")], got[(what, "open")],
                                        strict=True)]
        print(f"| {what} ({unit}) | {o:.3g} | {j:.3g} | {statistics.median(ratios):.3f} | "
              f"{statistics.median(share[what]):.1%} |")
    for s in servers.values():
        s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
