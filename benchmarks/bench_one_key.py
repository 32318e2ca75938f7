"""One hot key: the driver's cost must follow the events, not the sessions it ever had.

Run: ``.venv/bin/python benchmarks/bench_one_key.py [max_events]``. One key in bursts
(about 8 events a session, so 1M events make about 125k sessions), early firings
(``EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK``, retracting), at doubling
sizes: the vectorised sessions path must stay linear and at >= 1M events/s. The general
state machine (per-element Python) runs the closing trigger ``EVERY 1 MINUTE UNTIL
WATERMARK`` — every window closes, and a closed window must cost nothing once the
watermark passes its expiry — on smaller sizes; its time per event must not grow either.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_model import EVERY_UNTIL_THEN, MIN, S, session_workload  # noqa: E402
from dfsql.model import clauses as c  # noqa: E402
from dfsql.model import group_also_by_window, timeline_for  # noqa: E402

EVERY_UNTIL = c.OrFinally(main=c.Repeat(sub=c.AtPeriod(period=MIN)), final=c.EndOfWindow())


def _clauses(trigger: c.Trigger) -> c.Clauses:
    return c.Clauses(window=c.SessionWindows(gap=c.Duration(30 * S)),
                     watermark=c.WatermarkDelay(delay=c.Duration(10 * S)),
                     processing_time=c.Expr("arrival_time"),
                     allowed_lateness=c.Duration(60 * S), trigger=trigger,
                     accumulation=c.Accumulation.ACCUMULATING_AND_RETRACTING)


def measure(clauses: c.Clauses, n: int, fast: bool | None, runs: int) -> tuple[float, int]:
    k, e, a = session_workload(n)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        tl = timeline_for(clauses.watermark, e, a)
        r = group_also_by_window(k, e, a, clauses, tl, fast=fast, ordered=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(r.panes.pane_id)


def series(name: str, clauses: c.Clauses, sizes: list[int], fast: bool | None,
           runs: int) -> list[float]:
    per_event = []
    for n in sizes:
        med, panes = measure(clauses, n, fast, runs)
        per_event.append(med / n)
        print(f"{name:<44} events={n:>9,} sessions~{n // 8:>8,} panes={panes:>8,} "
              f"{med:7.3f}s {n / med:>12,.0f} events/s", flush=True)
    print(f"{name:<44} time per event, largest / smallest size: "
          f"{per_event[-1] / per_event[0]:.2f} (1.0 = linear)", flush=True)
    return per_event


def main() -> None:
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    sizes = [top // 8, top // 4, top // 2, top]
    series("sessions fast path, early firings", _clauses(EVERY_UNTIL_THEN), sizes, True, 3)
    small = [s // 40 for s in sizes[:3]]
    series("state machine, closing trigger", _clauses(EVERY_UNTIL), small, False, 1)


if __name__ == "__main__":
    main()
