"""Driver throughput of dfsql.model on one key with 1M elements.

Run: ``.venv/bin/python -m benchmarks.bench_model [n]``. Prints the median of a few runs
in elements/s for the default trigger, ``EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT
WATERMARK`` (both on FIXED(1 MINUTE), fast path) and sessions with retractions (the
sessions chain fast path, and the general state machine on fewer elements since it is
per-element Python).
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from dfsql.model import clauses as c
from dfsql.model import group_also_by_window, timeline_for

S = 1_000_000
MIN = c.Duration(60 * S)
EOW = c.EndOfWindow()
EVERY_UNTIL_THEN = c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=c.AtPeriod(period=MIN)),
                                                 final=EOW), c.Repeat(sub=EOW)))


def workload(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One key; ~100 elements/s of event time; arrival delays up to 2 min (some late)."""
    rng = np.random.default_rng(seed)
    et = np.sort(rng.integers(0, n * 10_000, n)).astype(np.int64)  # µs
    delay = rng.exponential(5 * S, n).astype(np.int64)
    delay[rng.random(n) < 0.01] += 120 * S  # 1% stragglers
    at = et + delay
    o = np.argsort(at, kind="stable")
    return np.zeros(n, np.int64), et[o], at[o]


def session_workload(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One key in bursts (like the generator's): ~8 events 0–15 s apart, bursts separated
    by more than the 30 s gap; arrival delays ~2 s, 1% stragglers a minute late."""
    rng = np.random.default_rng(seed)
    new_burst = rng.random(n) < 1 / 8
    step = np.where(new_burst, 36 * S + rng.exponential(30 * S, n),
                    np.minimum(rng.exponential(3 * S, n), 15 * S))
    et = np.cumsum(step).astype(np.int64)
    delay = rng.exponential(2 * S, n).astype(np.int64)
    delay[rng.random(n) < 0.01] += 60 * S
    at = et + delay
    o = np.argsort(at, kind="stable")
    return np.zeros(n, np.int64), et[o], at[o]


def bench(name: str, clauses: c.Clauses, n: int, runs: int, fast: bool | None,
          gen=None) -> None:
    k, e, a = (gen or workload)(n)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        tl = timeline_for(clauses.watermark, e, a)
        r = group_also_by_window(k, e, a, clauses, tl, fast=fast)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"{name:<58} n={n:>9,} panes={len(r.panes.pane_id):>8,} "
          f"median {med:7.3f}s  {n / med:>12,.0f} elements/s")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    base = dict(window=c.FixedWindows(size=MIN), watermark=c.WatermarkDelay(delay=c.Duration(10 * S)),
                processing_time=c.Expr("arrival_time"), allowed_lateness=c.Duration(5 * 60 * S))
    bench("FIXED(1 MINUTE), default trigger (fast path)", c.Clauses(**base), n, 5, True)
    bench("FIXED(1 MINUTE), EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT (fast)",
          c.Clauses(**base, trigger=EVERY_UNTIL_THEN), n, 5, True)
    bench("FIXED(1 MINUTE), same trigger, general state machine",
          c.Clauses(**base, trigger=EVERY_UNTIL_THEN), n // 10, 3, False)
    sess = c.Clauses(**dict(base, window=c.SessionWindows(gap=c.Duration(30 * S))),
                     trigger=EVERY_UNTIL_THEN,
                     accumulation=c.Accumulation.ACCUMULATING_AND_RETRACTING)
    bench("SESSIONS(GAP 30s) EVERY…THEN REPEAT, RETRACTING (chain fast path)", sess, n, 3,
          True, session_workload)
    bench("SESSIONS(GAP 30s) same, general state machine", sess, n // 10, 3, False,
          session_workload)


if __name__ == "__main__":
    main()
