"""Aggregates over replayed, merging sessions in every EMIT mode equal a brute-force reference.

The model (``dfsql.model``, no Spark) says which panes fire and which input rows each pane
covers; every aggregate is then computed here in plain Python over those rows: SUM,
COUNT(*), COUNT(x), COUNT(DISTINCT), AVG, MIN/MAX on numbers and strings,
percentile_approx, collect_list / collect_set (sorted), max_by / min_by and FILTER. HAVING
keeps exactly the reference rows that satisfy it (docs/reference.md#emit: a pane that no longer
passes HAVING still retracts the row emitted before it, so a retraction row is kept exactly
when the row it repeats was emitted).

The data (three keys, a watermark table) is chosen so that over processing time sessions
merge: two early-emitted sessions bridged by an out-of-order element, a late element
bridging an on-time window with a newer one (a LATE merged pane), sessions that grow by
extension, a pane whose only element has a NULL value, empty DISCARDING panes, a sum that
falls below the HAVING bound, an element dropped beyond ALLOWED LATENESS and a window
still open at the end of the input.
"""

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

T0 = datetime(2024, 5, 6, 8, 0, 0)
US = 1_000_000
T0_US = calendar.timegm(T0.timetuple()) * US

#: (key, x, s, y, event second, arrival second) after T0; y is unique (max_by/min_by ties).
ROWS = [
    # a: [0,90) and [140,200) emit early panes, then e=85 bridges them (-2 -7 +14 style);
    # [0,230) fires ON_TIME with nothing new; e=190 arrives late and bridges it with
    # [230,290) into a window created late (LATE pane 0). kiwi's x is NULL.
    ("a", 4, "pear", 11, 0, 5), ("a", -2, "fig", 3, 30, 20), ("a", 7, "apple", 25, 140, 45),
    ("a", 5, "date", 8, 85, 100), ("a", None, "kiwi", 30, 170, 130),
    ("a", 6, "plum", 14, 230, 410), ("a", 5, "lime", 2, 190, 430),
    # b: a session grows by extension; its sum goes 9 -> 8 -> 11 (HAVING SUM(x) > 8 flips);
    # duplicates 3, 3, 3; later a second session still open at the end of the input.
    ("b", 9, "mango", 7, 10, 15), ("b", -4, "alpha", 19, 50, 70), ("b", 3, "zulu", 1, 100, 110),
    ("b", 3, "echo", 22, 130, 150), ("b", 3, "beta", 5, 80, 250),
    ("b", 2, "kilo", 33, 820, 830), ("b", 5, "sierra", 6, 845, 850),
    # c: [20,80) and [150,210) bridged by two out-of-order elements in one pane; nu comes
    # after the watermark passed window_end + ALLOWED LATENESS and is dropped.
    ("c", 2, "x-ray", 4, 20, 30), ("c", 8, "omega", 16, 150, 160), ("c", 2, "delta", 9, 95, 170),
    ("c", 1, "gamma", 27, 60, 175), ("c", 4, "nu", 12, 5, 800),
]
#: The watermark table: (processing second, watermark second), two minutes behind.
MARKS = [(p, p - 120) for p in range(30, 901, 30)]

CLAUSES = ("WINDOW SESSIONS(GAP 1 MINUTE) ON et WATERMARK FROM agg_marks "
           "PROCESSING TIME at ALLOWED LATENESS 5 MINUTES "
           "TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK EMIT {mode}")
SELECT = """SELECT key, SUM(x) AS total, COUNT(*) AS n, COUNT(x) AS nx,
       COUNT(DISTINCT x) AS nd, COUNT(DISTINCT s) AS nds, AVG(x) AS mean,
       MIN(x) AS lo, MAX(x) AS hi, MIN(s) AS s_lo, MAX(s) AS s_hi,
       percentile_approx(x, 0.5, 10000) AS median,
       percentile_approx(x, array(0.25, 0.75), 10000) AS quartiles,
       array_sort(collect_list(x)) AS xs, array_sort(collect_set(s)) AS ss,
       max_by(s, y) AS newest, min_by(s, y) AS oldest,
       SUM(x) FILTER (WHERE x > 3) AS big, COUNT(*) FILTER (WHERE x < 0) AS n_neg
FROM agg_rows GROUP BY key
"""
AGGS = ["total", "n", "nx", "nd", "nds", "mean", "lo", "hi", "s_lo", "s_hi", "median",
        "quartiles", "xs", "ss", "newest", "oldest", "big", "n_neg"]
PANE_COLS = ["window_start", "window_end", "pane_index", "pane_timing", "is_last", "emit_time",
             "is_retraction"]
COLUMNS = ["key", *AGGS, *PANE_COLS]
HAVING = "HAVING SUM(x) > 8\n"
MODES = ["DISCARDING", "ACCUMULATING", "ACCUMULATING AND RETRACTING"]

KEY, TOTAL = 0, 1
WS, WE, IDX, TIMING, LAST, EMIT, RETR = (COLUMNS.index(c) for c in PANE_COLS)


def _t(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _col(row: tuple, name: str):
    return row[COLUMNS.index(name)]


def _percentile(xs: list[int], q: float) -> int:
    """Spark's percentile_approx when its summary holds every value (checked on Spark for
    q in 0.1..0.9 and n <= 11): the smallest element whose 1-based rank is >= q * n."""
    return sorted(xs)[max(0, math.ceil(q * len(xs)) - 1)]


def _aggregates(rows: list[tuple]) -> list:
    """The SELECT's aggregates, by brute force, in AGGS order (Spark's empty-group values)."""
    xs = [r[1] for r in rows if r[1] is not None]
    ss = [r[2] for r in rows]
    big = [x for x in xs if x > 3]
    return [
        sum(xs) if xs else None, len(rows), len(xs), len(set(xs)), len(set(ss)),
        sum(xs) / len(xs) if xs else None,
        min(xs, default=None), max(xs, default=None),
        min(ss, default=None), max(ss, default=None),
        _percentile(xs, 0.5) if xs else None,
        [_percentile(xs, 0.25), _percentile(xs, 0.75)] if xs else None,
        sorted(xs), sorted(set(ss)),
        max(rows, key=lambda r: r[3])[2] if rows else None,
        min(rows, key=lambda r: r[3])[2] if rows else None,
        sum(big) if big else None, sum(1 for x in xs if x < 0),
    ]


def _model(mode: str):
    """The model's run over ROWS (sorted by key then arrival, as it requires)."""
    cl = parse_clauses(CLAUSES.format(mode=mode))
    keys = sorted({r[0] for r in ROWS})
    rows = sorted(ROWS, key=lambda r: (r[0], r[5]))
    kid = np.array([keys.index(r[0]) for r in rows], np.int64)
    et = np.array([T0_US + r[4] * US for r in rows], np.int64)
    at = np.array([T0_US + r[5] * US for r in rows], np.int64)
    series = [(T0_US + p * US, T0_US + w * US) for p, w in MARKS]
    res = group_also_by_window(kid, et, at, cl, timeline_for(cl.watermark, et, at, series))
    return keys, rows, res


def _reference(mode: str) -> list[tuple]:
    """Every pane row and retraction row of the model, aggregated over the pane's rows."""
    keys, rows, res = _model(mode)
    members = pane_members(res)
    p = res.panes

    def ts(us: int) -> datetime:
        return T0 + timedelta(microseconds=int(us) - T0_US)

    def row(pid: int, emit: int, retraction: bool) -> tuple:
        values = _aggregates([rows[i] for i in members[pid]])
        return (keys[int(p.key[pid])], *values, ts(p.window_start[pid]), ts(p.window_end[pid]),
                int(p.pane_index[pid]), TIMING_NAMES[int(p.timing[pid])], bool(p.is_last[pid]),
                ts(emit), retraction)

    out = [row(i, int(p.emit_time[i]), False) for i in range(len(p.pane_id))]
    out += [row(int(r), int(t), True) for r, t in zip(
        res.retractions.retracted_pane_id, res.retractions.emit_time, strict=True)]
    return out


def _order(r: tuple) -> tuple:
    """docs/reference.md#output-columns: emit_time, the GROUP BY key (where a retraction sorts among its
    key's rows depends on the row that replaces it: tests/spark/replay/test_changelog_order.py)."""
    return (r[EMIT], r[KEY])


def _canonical(rows: list[tuple]) -> list[tuple]:
    """§7 order leaves ties (e.g. an EARLY and the closing pane of one window at the end
    instant); break them by the remaining columns."""
    return sorted(rows, key=lambda r: (_order(r), repr(r)))


def _run(spark, having: str, mode: str) -> list[tuple]:
    df = dfsql.sql(SELECT + having + CLAUSES.format(mode=mode), spark)
    assert df.columns == COLUMNS
    got = [tuple(r) for r in df.collect()]
    assert [_order(r) for r in got] == sorted(_order(r) for r in got)  # §7 row order
    return got


@pytest.fixture(scope="module")
def agg_rows(spark):
    values = ",\n".join(
        f"('{k}', {'NULL' if x is None else x}, '{s}', {y}, "
        f"TIMESTAMP'{_t(e)}', TIMESTAMP'{_t(a)}')" for k, x, s, y, e, a in ROWS)
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW agg_rows AS
        SELECT key, CAST(x AS BIGINT) AS x, s, CAST(y AS INT) AS y, et, at
        FROM VALUES {values} AS t(key, x, s, y, et, at)""")
    marks = ", ".join(f"(TIMESTAMP'{_t(p)}', TIMESTAMP'{_t(w)}')" for p, w in MARKS)
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW agg_marks AS
        SELECT * FROM VALUES {marks} AS t(processing_time, watermark)""")


@pytest.mark.parametrize("mode", MODES)
def test_aggregates_match_reference(spark, agg_rows, mode):
    got = _run(spark, "", mode)
    want = _reference(mode)
    assert _canonical(got) == _canonical(want)

    # not vacuous: every timing, a last pane, windows that grow or merge away
    assert {r[TIMING] for r in got} == {"EARLY", "ON_TIME", "LATE"}
    assert any(r[LAST] for r in got)
    ever = {(r[KEY], r[WS], r[WE]) for r in got}
    final = {w for w in ever
             if not any(v[0] == w[0] and v != w and v[1] <= w[1] and w[2] <= v[2] for v in ever)}
    assert len(final) < len(ever)
    assert len(final) == 4  # a [0,290), b [10,190), b [820,905), c [20,210)
    _, _, res = _model(mode)
    assert len(res.dropped.row) == 1  # nu
    if mode == "DISCARDING":
        assert not any(r[RETR] for r in got)
        # an empty pane (the ON_TIME pane after an early one) and a pane of a NULL x only
        assert any(_col(r, "n") == 0 and _col(r, "xs") == [] for r in got)
        assert any(_col(r, "n") == 1 and _col(r, "nx") == 0 for r in got)
    if mode == "ACCUMULATING AND RETRACTING":
        by_time: dict[tuple, list[tuple]] = {}
        for r in got:
            by_time.setdefault((r[KEY], r[EMIT]), []).append(r)

        def bridged(rs: list[tuple]) -> bool:
            """Two windows retracted and one window spanning both inserted (Figure 14)."""
            gone = {(r[WS], r[WE]) for r in rs if r[RETR]}
            return any(not r[RETR] and len([g for g in gone if r[WS] <= g[0] and g[1] <= r[WE]
                                            and g != (r[WS], r[WE])]) >= 2 for r in rs)

        assert any(bridged(rs) for rs in by_time.values())
        # summing with retractions negated leaves each final window's last value, and
        # nothing of the windows merged away
        net: dict[tuple, int] = {}
        last: dict[tuple, tuple] = {}
        for r in got:
            w = (r[KEY], r[WS], r[WE])
            net[w] = net.get(w, 0) + (-1 if r[RETR] else 1) * _col(r, "n")
            if not r[RETR] and (w not in last or r[IDX] > last[w][IDX]):
                last[w] = r
        assert {w: v for w, v in net.items() if v} == {w: _col(last[w], "n") for w in final}

@pytest.mark.parametrize("mode", MODES)
def test_having_keeps_the_reference_rows_that_pass(spark, agg_rows, mode):
    got = _run(spark, HAVING, mode)
    reference = _reference(mode)
    # a pane row is kept when it passes; a retraction row repeats an earlier pane's values,
    # so it is kept exactly when that pane passed (and was emitted), whatever follows it
    want = [r for r in reference if r[TOTAL] is not None and r[TOTAL] > 8]
    assert _canonical(got) == _canonical(want)
    assert 0 < len(got) < len(reference)
    if mode == "ACCUMULATING AND RETRACTING":
        # b's [10,70) (sum 9) is retracted by the pane of [10,160) (sum 8), which fails
        # HAVING: a retraction with no insertion for its key at that instant
        inserted = {(r[KEY], r[EMIT]) for r in got if not r[RETR]}
        assert any(r[RETR] and (r[KEY], r[EMIT]) not in inserted for r in got)
        # and a's [0,90) (sum 2) and [140,200) (sum 7) were never emitted, so their merge
        # into [0,200) (sum 14) inserts with no retraction
        retracted = {(r[KEY], r[EMIT]) for r in got if r[RETR]}
        assert (("a", _t(120)) in inserted) and ("a", _t(120)) not in retracted


#: Aggregates Spark can combine across deltas (the two-level plan): per pane, each
#: delta of elements is aggregated once and merged into every pane covering it.
DECOMPOSABLE = ["total", "n", "nx", "lo", "hi", "s_lo", "s_hi", "big", "n_neg"]


@pytest.mark.parametrize("mode", MODES)
def test_decomposable_aggregates_two_level(spark, agg_rows, mode):
    from dfsql.api import planned_of
    from dfsql.spark.replay.pane_sql import two_level_merges as _two_level

    select = """SELECT key, SUM(x) AS total, COUNT(*) AS n, COUNT(x) AS nx, MIN(x) AS lo,
       MAX(x) AS hi, MIN(s) AS s_lo, MAX(s) AS s_hi, SUM(x) FILTER (WHERE x > 3) AS big,
       COUNT(*) FILTER (WHERE x < 0) AS n_neg FROM agg_rows GROUP BY key
"""
    df = dfsql.sql(select + CLAUSES.format(mode=mode), spark)
    plan = planned_of(df).blocks[0].plan
    assert _two_level(plan, plan.input_df()) is not None  # the plan under test
    got = [tuple(r) for r in df.collect()]
    keep = [0, *[1 + AGGS.index(a) for a in DECOMPOSABLE],
            *range(1 + len(AGGS), len(COLUMNS))]
    want = [tuple(r[i] for i in keep) for r in _reference(mode)]
    assert sorted(got, key=repr) == sorted(want, key=repr)
    # the full SELECT (COUNT DISTINCT, percentiles, ...) takes the one-level plan
    full = planned_of(dfsql.sql(SELECT + CLAUSES.format(mode=mode), spark)).blocks[0].plan
    assert _two_level(full, full.input_df()) is None
    # the merge keeps the one-level type (a SUM of SUMs of DECIMAL(10,2) would widen)
    dec = dfsql.sql("SELECT key, SUM(CAST(x AS DECIMAL(10, 2))) AS dec, SUM(x) AS total "
                    "FROM agg_rows GROUP BY key " + CLAUSES.format(mode=mode), spark)
    assert dec.schema["dec"].dataType.simpleString() == "decimal(20,2)"
    rows = dec.collect()
    assert rows and all((r.dec is None and r.total is None) or r.dec == r.total for r in rows)
