"""Any Spark aggregate, in every EMIT mode, over sessions that merge while replayed, equals a
brute-force reference: the model's panes, each aggregated in plain Python over the rows it
covers (retractions repeat the value of the pane they retract)."""

from __future__ import annotations

import calendar
import math
from datetime import datetime, timedelta

import numpy as np
import pytest

import dfsql
from dfsql.language import parse_clauses
from dfsql.model import group_also_by_window, pane_members, timeline_for
from dfsql.model.panes import TIMING_NAMES

T0 = datetime(2024, 3, 1, 9, 0, 0)
US = 1_000_000
T0_US = calendar.timegm(T0.timetuple()) * US


def _t(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


# (key, x, s, y, event second, arrival second). Key "a": two sessions that a late element
# bridges (a merge of two live windows with panes), then a late element after the on-time
# pane; key "b": a session that grows, with duplicate x values; one element too late.
ROWS = [
    ("a", 4, "pear", 1, 0, 5), ("a", 2, "fig", 2, 20, 25), ("a", 7, "apple", 3, 150, 152),
    ("a", 4, "kiwi", 4, 170, 175), ("a", 5, "date", 5, 90, 200), ("a", 1, "lime", 6, 30, 260),
    ("a", 9, "plum", 7, 60, 330), ("a", 3, "yuzu", 8, 400, 402),
    ("b", 3, "x-ray", 9, 10, 12), ("b", 3, "alpha", 10, 40, 44), ("b", 8, "mango", 11, 70, 71),
    ("b", 3, "zulu", 12, 100, 160), ("b", 6, "beta", 13, 130, 131), ("b", 2, "omega", 14, 5, 900),
    ("b", 4, "echo", 15, 300, 305), ("b", 6, "delta", 16, 320, 321),
]

CLAUSES = ("WINDOW SESSIONS(GAP 1 MINUTE) ON et WATERMARK DELAY 30 SECONDS "
           "PROCESSING TIME at ALLOWED LATENESS 5 MINUTES "
           "TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK EMIT {mode}")
SELECT = """SELECT key, SUM(x) AS total, COUNT(*) AS n, COUNT(DISTINCT x) AS nd, AVG(x) AS mean,
       MIN(x) AS lo, MAX(x) AS hi, MIN(s) AS first_s, MAX(s) AS last_s,
       percentile_approx(x, 0.5, 10000) AS median, array_sort(collect_list(x)) AS xs,
       max_by(s, y) AS newest, SUM(x) FILTER (WHERE x > 3) AS big
FROM agg_events GROUP BY key
"""
MODES = ["DISCARDING", "ACCUMULATING", "ACCUMULATING AND RETRACTING"]


def _median(xs: list[int]) -> int | None:
    """Spark's percentile_approx on few values: the smallest v with rank(v) >= 0.5 n."""
    if not xs:
        return None
    return sorted(xs)[max(0, math.ceil(0.5 * len(xs)) - 1)]


def _values(rows: list[tuple]) -> tuple:
    xs = [r[1] for r in rows]
    if not rows:
        return (None, 0, 0, None, None, None, None, None, None, [], None, None)
    big = [x for x in xs if x > 3]
    return (sum(xs), len(xs), len(set(xs)), round(sum(xs) / len(xs), 9), min(xs), max(xs),
            min(r[2] for r in rows), max(r[2] for r in rows), _median(xs), sorted(xs),
            max(rows, key=lambda r: r[3])[2], sum(big) if big else None)


def _reference(mode: str) -> list[tuple]:
    """Panes of the model, aggregated by brute force over each pane's rows."""
    cl = parse_clauses(CLAUSES.format(mode=mode))
    keys = sorted({r[0] for r in ROWS})
    order = sorted(range(len(ROWS)), key=lambda i: (ROWS[i][0], ROWS[i][5], i))
    rows = [ROWS[i] for i in order]
    kid = np.array([keys.index(r[0]) for r in rows], np.int64)
    et = np.array([T0_US + r[4] * US for r in rows], np.int64)
    at = np.array([T0_US + r[5] * US for r in rows], np.int64)
    res = group_also_by_window(kid, et, at, cl, timeline_for(cl.watermark, et, at))
    members = pane_members(res)
    p = res.panes

    def ts(us: int) -> datetime:
        return T0 + timedelta(microseconds=int(us) - T0_US)

    def row(pid: int, emit: int, retraction: bool) -> tuple:
        return (keys[int(p.key[pid])], *_values([rows[i] for i in members[pid]]),
                ts(p.window_start[pid]), ts(p.window_end[pid]), int(p.pane_index[pid]),
                TIMING_NAMES[int(p.timing[pid])], bool(p.is_last[pid]), ts(emit), retraction)

    out = [row(i, int(p.emit_time[i]), False) for i in range(len(p.pane_id))]
    out += [row(int(r), int(t), True) for r, t in zip(
        res.retractions.retracted_pane_id, res.retractions.emit_time, strict=True)]
    return out


def _spark_rows(df) -> list[tuple]:
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in df.collect()]


@pytest.fixture(scope="module")
def agg_events(spark):
    spark.createDataFrame(
        [(k, x, s, y, _t(e), _t(a)) for k, x, s, y, e, a in ROWS],
        "key STRING, x BIGINT, s STRING, y INT, et TIMESTAMP, at TIMESTAMP",
    ).createOrReplaceTempView("agg_events")


@pytest.mark.parametrize("mode", MODES)
def test_every_aggregate_matches_the_reference(spark, agg_events, mode):
    df = dfsql.sql(SELECT + CLAUSES.format(mode=mode), spark)
    got = _spark_rows(df)
    want = _reference(mode)
    assert sorted(got, key=repr) == sorted(want, key=repr)
    assert got == sorted(got, key=lambda r: (r[-2], not r[-1], r[0], r[13]))  # §7 order
    # the data really merges sessions: a window emitted early lies inside a later, bigger one
    spans = {(r[0], r[13], r[14]) for r in got}
    assert any(k == k2 and (s, e) != (s2, e2) and s2 <= s and e <= e2
               for k, s, e in spans for k2, s2, e2 in spans)
    if mode == "ACCUMULATING AND RETRACTING":
        assert sum(r[-1] for r in got) >= 3
    if mode == "DISCARDING":  # some pane holds no new element: empty-set aggregates
        assert any(r[2] == 0 and r[1] is None and r[10] == [] for r in got)


@pytest.mark.parametrize("mode", MODES)
def test_having_filters_pane_rows(spark, agg_events, mode):
    df = dfsql.sql(SELECT + "HAVING SUM(x) > 10\n" + CLAUSES.format(mode=mode), spark)
    got = _spark_rows(df)
    want = [r for r in _reference(mode) if r[1] is not None and r[1] > 10]
    assert sorted(got, key=repr) == sorted(want, key=repr)
    assert got and len(got) < len(_reference(mode))
