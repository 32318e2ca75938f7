"""dfsql on Spark against native Spark, in the same run, on the benchmark generator's data.

Workloads (docs/reference.md queries over ``benchmarks/gen_events.py`` output, 10k keys):

* FIXED(1 MINUTE), default trigger, batch    vs  ``groupBy(key, window(event_time, '1 minute'))``
* SESSIONS(GAP 30 SECONDS), default trigger  vs  ``groupBy(key, session_window(...))``
* SESSIONS + ``EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK``, ACCUMULATING AND
  RETRACTING, PROCESSING TIME replay, WATERMARK DELAY 10 SECONDS  vs  native sessions
* the same with ALLOWED LATENESS 1 MINUTE (issue #22's workload: early panes every 10 s,
  late panes for a minute, retractions)  vs  native sessions

Each is written to the ``noop`` sink (so the whole plan runs and nothing is collected);
the figure is the median of ``--runs`` runs (interleaved) after one warm-up, and the ratio
dfsql / native; ``ratio_med`` is the median of each round's own ratio (the two sides of a
round ran back to back, so a change in the machine's load weighs on both alike). The
events table is cached in memory first (``--no-cache`` reads the parquet file each run).
``--spark-aggregates`` times a third side: dfsql with its replay's aggregates left to
Spark (``dfsql.replay.aggregateKernels=false``, the path before the driver computed them),
so before and after are measured in one process too. ``--stages`` prints, for one more run of each side, every Spark job and stage it ran with
its wall time, task time and shuffle records (Spark's status store: works without the UI). A replayed result comes in docs/reference.md#output-columns's changelog order (emit time,
keys, window_start), a global sort that plain ``GROUP BY session_window()`` does not do;
a batch result is unordered, as native's. The native query with ``ORDER BY key, start``
is timed too (``native_ord_s``, ``ratio_ord``).
Usage::

    python benchmarks/bench_spark.py [--events 1000000 4000000] [--runs 3] [--only NAME]
                                     [--no-ordered] [--no-cache] [--stages]
                                     [--spark-aggregates] [--no-warmup]
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
    "sessions_early_late_retracting": (
        "SELECT key, SUM(value) AS total, COUNT(*) AS n FROM events GROUP BY key "
        "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
        "PROCESSING TIME arrival_time ALLOWED LATENESS 1 MINUTE "
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


def cached_events(spark, events: int, view: str | None = "events"):
    """The generator's ``events`` rows read, cached in memory (and counted, so the cache
    is filled before anything is timed), registered as ``view`` unless None."""
    frame = spark.read.parquet(str(dataset(events))).cache()
    frame.count()
    if view is not None:
        frame.createOrReplaceTempView(view)
    return frame


def timed(fns, runs: int, warmup: bool = True) -> list[list[float]]:
    """Seconds of each function in each round; runs interleaved, so that a change in the
    machine's load over the benchmark weighs on every side alike."""
    for fn in fns if warmup else ():
        fn()  # warm-up: JIT, caches, Python workers
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return times


def stage_report(spark, first_job: int) -> list[dict]:
    """Every job from ``first_job`` on and its stages, from Spark's status store (kept with
    the UI off): wall time, summed task time, tasks and shuffle records per stage."""
    store = spark.sparkContext._jsc.sc().statusStore()  # noqa: SLF001
    jobs = store.jobsList(None)
    out = []
    for i in range(jobs.size()):
        j = jobs.apply(i)
        if j.jobId() < first_job:
            continue
        t0, t1 = j.submissionTime(), j.completionTime()
        wall = (t1.get().getTime() - t0.get().getTime()) if t0.isDefined() and \
            t1.isDefined() else None
        stages = []
        ids = j.stageIds()
        for k in range(ids.size()):
            sid = ids.apply(k)
            for a in range(store.stageData(sid, False, None, False, None).size()):
                st = store.stageData(sid, False, None, False, None).apply(a)
                if st.status().toString() == "SKIPPED":
                    continue
                s0, s1 = st.submissionTime(), st.completionTime()
                stages.append({
                    "stage": sid, "name": st.name(), "tasks": st.numTasks(),
                    "wall_ms": (s1.get().getTime() - s0.get().getTime())
                    if s0.isDefined() and s1.isDefined() else None,
                    "task_ms": st.executorRunTime(),
                    "in_rec": st.inputRecords(), "shuf_read": st.shuffleReadRecords(),
                    "shuf_write": st.shuffleWriteRecords(), "out_rec": st.outputRecords()})
        out.append({"job": j.jobId(), "wall_ms": wall, "stages": sorted(
            stages, key=lambda x: x["stage"])})
    return sorted(out, key=lambda x: x["job"])


def print_stages(label: str, jobs: list[dict]) -> None:
    total = sum(j["wall_ms"] or 0 for j in jobs)
    print(f"-- {label}: {len(jobs)} jobs, {total / 1000:.2f} s of job wall time", flush=True)
    for j in jobs:
        print(f"   job {j['job']}: {(j['wall_ms'] or 0) / 1000:.2f} s")
        for st in j["stages"]:
            print(f"      stage {st['stage']:>4} {(st['wall_ms'] or 0) / 1000:6.2f} s wall "
                  f"{st['task_ms'] / 1000:6.2f} s tasks {st['tasks']:>4} tasks  "
                  f"in {st['in_rec']:>9} shuffle r/w {st['shuf_read']:>9}/"
                  f"{st['shuf_write']:>9}  {st['name'][:40]}", flush=True)


def last_job(spark) -> int:
    ids = spark.sparkContext._jsc.sc().statusStore().jobsList(None)  # noqa: SLF001
    return max((ids.apply(i).jobId() for i in range(ids.size())), default=-1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000, 4_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--no-ordered", action="store_true",
                    help="do not time the native query with ORDER BY")
    ap.add_argument("--no-cache", action="store_true", help="read the parquet file each run")
    ap.add_argument("--stages", action="store_true",
                    help="print the jobs and stages of one more run of each side")
    ap.add_argument("--spark-aggregates", action="store_true",
                    help="also time dfsql with the replay's aggregates left to Spark")
    ap.add_argument("--no-warmup", action="store_true", help="no warm-up run (16M events)")
    args = ap.parse_args(argv)

    import os

    import dfsql
    from dfsql.spark.replay.kernels import KERNELS_CONF

    spark = dfsql.session()
    print(f"load: {os.getloadavg()}", flush=True)
    results = []
    for n in args.events:
        events = spark.read.parquet(str(dataset(n)))
        if not args.no_cache:
            events = events.cache()
            events.count()
        events.createOrReplaceTempView("events")
        for name, (ours, native) in WORKLOADS.items():
            if args.only and name not in args.only:
                continue
            def run_ours(q=ours):
                dfsql.sql(q, spark).write.format("noop").mode("overwrite").save()

            def run_native(q=native):
                spark.sql(q).write.format("noop").mode("overwrite").save()

            def run_native_ordered(q=native + " ORDER BY key, start"):
                spark.sql(q).write.format("noop").mode("overwrite").save()

            def run_spark_aggregates():
                spark.conf.set(KERNELS_CONF, "false")
                try:
                    run_ours()
                finally:
                    spark.conf.unset(KERNELS_CONF)

            sides = [run_native, run_ours]
            if args.spark_aggregates:
                sides.insert(1, run_spark_aggregates)
            if not args.no_ordered:
                sides.insert(1, run_native_ordered)
            times = timed(sides, args.runs, not args.no_warmup)
            if args.stages:
                # one more run of each side, reading the jobs it ran
                staged = [(run_native, "native"), (run_ours, "dfsql")]
                if args.spark_aggregates:
                    staged.insert(1, (run_spark_aggregates, "dfsql, Spark aggregates"))
                for fn, side in staged:
                    first = last_job(spark) + 1
                    fn()
                    print_stages(f"{n} {name} {side}", stage_report(spark, first))
            t_native, t_ours = statistics.median(times[0]), statistics.median(times[-1])
            t_ordered = statistics.median(times[1]) if not args.no_ordered else float("nan")
            ratios = [o / t for o, t in zip(times[-1], times[0], strict=True)]
            row = {"events": n, "workload": name, "native_s": round(t_native, 3),
                   "native_ord_s": round(t_ordered, 3), "dfsql_s": round(t_ours, 3),
                   "ratio": round(t_ours / t_native, 2),
                   "ratio_med": round(statistics.median(ratios), 2),
                   "ratios": [round(r, 2) for r in ratios],
                   "ratio_ord": round(t_ours / t_ordered, 2), "load": os.getloadavg()[0]}
            if args.spark_aggregates:
                before = times[-2]
                row.update({"spark_aggs_s": round(statistics.median(before), 3),
                            "ratio_spark_aggs_med": round(statistics.median(
                                [b / t for b, t in zip(before, times[0], strict=True)]), 2)})
            results.append(row)
            print(json.dumps(row), flush=True)
        if not args.no_cache:
            events.unpersist()
    print(f"\n{'events':>9} {'workload':<31} {'native s':>9} {'ordered s':>9} {'dfsql s':>9} "
          f"{'ratio':>6} {'r.med':>6} {'/ord':>6}")
    for r in results:
        print(f"{r['events']:>9} {r['workload']:<31} {r['native_s']:>9} {r['native_ord_s']:>9} "
              f"{r['dfsql_s']:>9} {r['ratio']:>6} {r['ratio_med']:>6} {r['ratio_ord']:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
