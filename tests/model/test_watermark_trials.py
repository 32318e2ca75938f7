"""EXPLAIN WATERMARK's statistics in the model (:mod:`dfsql.model.watermark_trials`).

Each trial must be what the query gives when run alone under that watermark: checked on
random workloads against the general state machine's own run, counted independently
here (late rows by a loop over the rows and their windows), with the input cut into key
slices whose statistics are merged, as the executor's partitions are.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfsql.model import clauses as c
from dfsql.model import group_also_by_window, timeline_for
from dfsql.model.panes import ON_TIME
from dfsql.model.result import end_floor_of
from dfsql.model.watermark_trials import MAX_EXACT, Latencies, TrialStats, run_trials
from dfsql.model.windows import POS_INF, assign

S = 1_000_000
EOW = c.EndOfWindow()
EARLY_ONTIME_LATE = c.AfterEach(subs=(
    c.OrFinally(main=c.Repeat(sub=c.AtPeriod(period=c.Duration(30 * S))), final=EOW),
    c.Repeat(sub=EOW)))
WINDOWS = [c.FixedWindows(size=c.Duration(60 * S)),
           c.SlidingWindows(size=c.Duration(60 * S), period=c.Duration(20 * S)),
           c.SessionWindows(gap=c.Duration(30 * S)), c.GlobalWindows()]
TRIGGERS = [c.Repeat(sub=EOW), EARLY_ONTIME_LATE, EOW, c.Repeat(sub=c.ElemCount(count=2))]
WATERMARKS = [c.WatermarkDelay(), c.WatermarkDelay(delay=c.Duration(40 * S)),
              c.WatermarkPerfect(), c.WatermarkPercentile(percentile=50.0)]


def _nearest_rank(values: list[int], q: float) -> int | None:
    if not values:
        return None
    return int(np.percentile(np.asarray(values), q, method="inverted_cdf"))


def _alone(key, et, pt, clauses: c.Clauses, tl) -> tuple:
    """The query run alone under ``tl`` (state machine), counted here: (rows, late rows,
    dropped rows, panes, retractions, ON_TIME latency p50, p90, p99)."""
    res = group_also_by_window(key, et, pt, clauses, tl, fast=False)
    late = 0
    for i in range(len(et)):
        wm = int(tl.at(int(pt[i]) - 1))  # before the arrival instant's own move
        _, _, ends = assign(clauses.window, et[i:i + 1])
        late += bool(any(int(e) <= wm for e in ends))
    p = res.panes
    lat = sorted(int(p.emit_time[j] - p.window_end[j]) for j in range(len(p.pane_id))
                 if p.timing[j] == ON_TIME and p.window_end[j] < POS_INF)
    return (len(et), late, len(set(res.dropped.row.tolist())), len(p.pane_id),
            len(res.retractions.retracted_pane_id),
            *(_nearest_rank(lat, q) for q in (50, 90, 99)))


def _row(s: TrialStats) -> tuple:
    return (s.rows, s.late_rows, s.dropped_rows, s.panes, s.retractions,
            *(s.latencies.percentile(q) for q in (50, 90, 99)))


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 16))
    et = np.asarray(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)), np.int64)
    delay = np.asarray(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), np.int64)
    key = np.asarray(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), np.int64)
    e, a = et * 10 * S, (et + delay) * 10 * S
    o = np.lexsort((a, key))
    clauses = c.Clauses(window=draw(st.sampled_from(WINDOWS)), on=c.Expr("t"),
                        processing_time=c.Expr("p"),
                        trigger=draw(st.sampled_from(TRIGGERS)),
                        accumulation=draw(st.sampled_from(list(c.Accumulation))),
                        allowed_lateness=c.Duration(draw(st.sampled_from([0, 20])) * S))
    return key[o], e[o], a[o], clauses


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_each_trial_is_the_query_run_alone_with_that_watermark(workload) -> None:
    key, et, pt, clauses = workload
    last = int(pt.max())
    tls = [timeline_for(w, et, pt) for w in WATERMARKS]
    trials = [(tl, end_floor_of(clauses.trigger, last, tl)) for tl in tls]
    # two slices of keys, as two partitions would get them, merged
    low = key <= 0
    parts = [run_trials(key[m], et[m], pt[m], clauses, trials) for m in (low, ~low) if m.any()]
    merged = [TrialStats() for _ in trials]
    for part in parts:
        merged = [a.merge(b) for a, b in zip(merged, part, strict=True)]
    for tl, got in zip(tls, merged, strict=True):
        assert _row(got) == _alone(key, et, pt, clauses, tl)


def test_latencies_are_exact_when_few_and_within_one_percent_when_many() -> None:
    """Up to MAX_EXACT distinct values the percentiles are the nearest-rank ones exactly;
    beyond, each value is rounded up to three significant digits, so a percentile P' of
    the exact P has P <= P' < P + |P| / 100 — merged from two halves as from the whole."""
    few = Latencies.of(np.array([30, 10, 20, 10]))
    assert (few.percentile(25), few.percentile(50), few.percentile(51), few.percentile(100)) \
        == (10, 10, 20, 30)
    assert few.exact and Latencies.empty().percentile(50) is None

    rng = np.random.default_rng(7)
    values = rng.integers(-5_000_000, 600_000_000, size=3 * MAX_EXACT)
    half = len(values) // 2
    merged = Latencies.of(values[:half]).merge(Latencies.of(values[half:]))
    whole = Latencies.of(values)
    assert not merged.exact and merged.n == len(values)
    for q in (1, 50, 90, 99, 100):
        exact = _nearest_rank(values.tolist(), q)
        assert merged.percentile(q) == whole.percentile(q)
        got = merged.percentile(q)
        assert exact <= got and (got - exact < abs(exact) / 100 or got == exact)
