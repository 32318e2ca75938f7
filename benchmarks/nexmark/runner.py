"""Nexmark's queries through dfsql and through Spark alone, in one process, per core.

``python -m benchmarks.nexmark run --events N [N ...] [--queries q5 q7 …]
[--mode batch replay stream] [--runs R] [--check]`` generates the events once per size (the
generator's Parquet directories under ``benchmarks/data/nexmark-N``), caches the three
tables in memory (as Nexmark's own runs generate in memory), and times every query on
both sides, each written to Spark's ``noop`` sink so the whole plan runs and nothing is
collected:

* **dfsql**: ``queries/qN.sql``, dfsql's dialect (``WINDOW SLIDING/FIXED/SESSIONS``);
* **native**: the same query in Spark's own SQL — ``native/qN.sql`` for the windowed
  ones (``window()``, ``session_window()``), else the query's own text through
  ``spark.sql`` (a query without dfsql's clauses is Spark SQL already).

Modes: ``batch`` runs the queries as written (a default trigger: Spark's own window
operator underneath); ``replay`` adds ``WATERMARK DELAY 3 SECONDS PROCESSING TIME
arrival_time`` to every window (the generator delays no event more than 3 seconds, so
no bid is late and the rows are batch's), which makes dfsql replay the events in arrival
order through its trigger machinery. The ``*_retracting`` variants (early, on-time and
late panes, retractions) run in replay only and have no native side. ``stream`` runs
q0, q5, q7, q11 and q12 live, over the bids as a file stream in arrival order, as
continuous queries on both sides (benchmarks/nexmark/live.py: its own table, events/s
sustained).

Printed per query: rows out, seconds (median of ``--runs``), events/s per core for both
sides (all of the run's events — people, auctions and bids — over the wall time, divided
by the session's task slots), the ratio dfsql / native, and Flink's published per-core
figures (nexmark/nexmark's GUIDE_V1 example, Flink 1.13–2.0, and GUIDE_V2, Flink ≥ 2.0)
where there are some. ``--check`` also compares each query's rows with the native side's
as multisets (an independent computation of the same events). ``--json FILE`` writes the
rows of the table for benchmarks/RESULTS.md."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUERIES = HERE / "queries"
NATIVE = HERE / "native"
DATA = HERE.parent / "data"

#: the queries in Nexmark's order (queries/qN.sql); the retracting variants after them
ORDER = ("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q11", "q12", "q14", "q15",
         "q16", "q17", "q18", "q19", "q20", "q22")
RETRACTING = ("q5_retracting", "q7_retracting", "q11_retracting")
#: Flink's published events/s per core: GUIDE_V1's example (Flink 1.13–2.0), GUIDE_V2's
FLINK = {"q5": (22_100, 74_500), "q7": (12_300, 22_900), "q8": (146_100, 162_000),
         "q11": (39_700, 46_000), "q12": (75_700, 194_000)}
#: what replay mode adds after a window's ON: a watermark on the arrival clock that no
#: generated event is behind (the generator's delays are at most 3 seconds)
REPLAY_TIME = " WATERMARK DELAY 3 SECONDS PROCESSING TIME arrival_time"


@dataclass(frozen=True)
class Timing:
    """One query on both sides, one mode."""

    query: str
    mode: str
    rows: int
    dfsql_s: float
    native_s: float | None
    events: int
    cores: int
    same_rows: bool | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.native_s is None else self.dfsql_s / self.native_s

    def per_core(self, seconds: float | None) -> float | None:
        return None if seconds is None else self.events / seconds / self.cores


def query_text(name: str, mode: str) -> str:
    """The dfsql text of ``name`` in ``mode`` (replay: the arrival clock after every ON,
    unless the query has its own PROCESSING TIME)."""
    text = (QUERIES / f"{name}.sql").read_text()
    if mode == "replay" and "PROCESSING TIME" not in text:
        text = re.sub(r"(WINDOW [A-Z]+\([^)]*\) ON date_time)", r"\1" + REPLAY_TIME, text)
    return text


def native_text(name: str) -> str | None:
    """Spark's own text of ``name``: its native file, or the query itself when it has no
    dfsql clause; None for a retracting variant (no engine has its panes)."""
    if name in RETRACTING:
        return None
    native = NATIVE / f"{name}.sql"
    return native.read_text() if native.exists() else (QUERIES / f"{name}.sql").read_text()


def is_windowed(name: str) -> bool:
    return "WINDOW " in (QUERIES / f"{name}.sql").read_text()


def dataset(events: int, seed: int = 1) -> Path:
    """The generator's directories for ``events`` events (made once)."""
    out = DATA / f"nexmark-{events}"
    if not (out / "bid").exists():
        subprocess.run([sys.executable, "-m", "benchmarks.nexmark", "generate", "--events",
                        str(events), "--out", str(out), "--seed", str(seed)], check=True,
                       cwd=HERE.parents[1])
    return out


def register(spark, data: Path, cache: bool = True) -> int:
    """The three tables as temp views ``person``, ``auction``, ``bid`` (cached and
    counted: generation is not what is timed); the number of events."""
    total = 0
    for kind in ("person", "auction", "bid"):
        df = spark.read.parquet(str(data / kind))
        if cache:
            df = df.cache()
        total += df.count()
        df.createOrReplaceTempView(kind)
    return total


def _timed(run, runs: int) -> float:
    seconds = []
    for _ in range(runs):
        began = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds)


def measure(spark, name: str, mode: str, runs: int, events: int, check: bool) -> Timing:
    """One query, both sides, after one warm-up each."""
    import dfsql

    text, native = query_text(name, mode), native_text(name)

    def ours():
        dfsql.sql(text, spark).write.format("noop").mode("overwrite").save()

    def theirs():
        spark.sql(native).write.format("noop").mode("overwrite").save()

    ours()
    if native is not None:
        theirs()
    ours_s = _timed(ours, runs)
    native_s = _timed(theirs, runs) if native is not None else None
    result = dfsql.sql(text, spark)
    rows = result.count()
    same = None
    if check and native is not None:
        mine = result.drop(*_pane_columns(result.columns))
        other = spark.sql(native)
        same = mine.exceptAll(other).isEmpty() and other.exceptAll(mine).isEmpty()
    return Timing(name, mode, rows, ours_s, native_s, events,
                  spark.sparkContext.defaultParallelism, same)


def _pane_columns(columns: list[str]) -> list[str]:
    """The pane columns a windowed result adds (docs/reference.md#output-columns)."""
    from dfsql.model.pane_columns import PANE_COLUMNS

    return [c for c in columns if c in PANE_COLUMNS]


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(timings: list[Timing]) -> str:
    """The printed table, one row per query and mode."""
    head = (f"{'query':<15} {'mode':<7} {'rows':>10} {'dfsql s':>8} {'native s':>8} "
            f"{'ratio':>6} {'dfsql ev/s/core':>16} {'native ev/s/core':>17} "
            f"{'Flink V1':>9} {'Flink V2':>9} {'same':>5}")
    lines = [head, "-" * len(head)]
    for t in timings:
        v1, v2 = FLINK.get(t.query, (None, None))
        lines.append(
            f"{t.query:<15} {t.mode:<7} {t.rows:>10} {t.dfsql_s:>8.2f} "
            f"{_fmt(t.native_s, '.2f'):>8} {_fmt(t.ratio, '.2f'):>6} "
            f"{_fmt(t.per_core(t.dfsql_s), ',.0f'):>16} "
            f"{_fmt(t.per_core(t.native_s), ',.0f'):>17} {_fmt(v1, ',.0f'):>9} "
            f"{_fmt(v2, ',.0f'):>9} {'' if t.same_rows is None else str(t.same_rows):>5}")
    return "\n".join(lines)


def run(argv: list[str]) -> int:
    """``python -m benchmarks.nexmark run …`` (see the module doc)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.nexmark run")
    p.add_argument("--events", type=int, nargs="+", default=[1_000_000])
    p.add_argument("--queries", nargs="+", default=[*ORDER, *RETRACTING])
    p.add_argument("--mode", nargs="+", choices=("batch", "replay", "stream"),
                   default=["batch", "replay"],
                   help="stream: live, over a file stream (benchmarks/nexmark/live.py)")
    p.add_argument("--files-per-trigger", type=int, default=10,
                   help="stream: files (seconds of arrival) per micro-batch (default 10)")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--check", action="store_true")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    import dfsql

    spark = dfsql.session()
    spark.sparkContext.setLogLevel("ERROR")
    timings: list[Timing] = []
    live_timings: list = []
    for n in args.events:
        events = register(spark, dataset(n, args.seed))
        for mode in args.mode:
            if mode == "stream":
                live_timings += _live(spark, n, args, events)
                continue
            for name in args.queries:
                if mode == "batch" and name in RETRACTING:
                    continue  # its panes need the arrival clock
                if mode == "replay" and not is_windowed(name):
                    continue  # nothing to replay: batch's run is the query
                timings.append(measure(spark, name, mode, args.runs, events, args.check))
                print(table(timings[-1:]).splitlines()[-1], flush=True)
    if timings:
        print(table(timings))
    if live_timings:
        from benchmarks.nexmark import live

        print(live.table(live_timings))
    if args.json:
        args.json.write_text(json.dumps([asdict(t) for t in [*timings, *live_timings]],
                                        indent=1))
    return 0 if all(t.same_rows is not False for t in timings) and all(
        False not in (t.same_rows, t.native_same_rows) for t in live_timings) else 1


def _live(spark, n: int, args: argparse.Namespace, events: int) -> list:
    """Live mode's queries for ``n`` events (benchmarks/nexmark/live.py), each printed as
    it ends."""
    from benchmarks.nexmark import live

    work = live.work_dir(n)
    files = live.chunks(dataset(n, args.seed), work / "files")
    live.warm_up(spark, files, work, args.files_per_trigger)
    out = []
    for name in (q for q in args.queries if q in live.LIVE):
        out.append(live.measure(spark, name, files, work, args.runs, args.files_per_trigger,
                                args.check, events))
        print("\n".join(live.table(out[-1:]).splitlines()[2:]), flush=True)
    return out
