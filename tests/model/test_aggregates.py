"""The aggregate kernels (dfsql.model.aggregates) against each pane's own elements.

Over random inputs, windows, triggers and accumulation modes, each pane's COUNT, SUM,
MIN, MAX and AVG from the kernels (one pass over deltas and cover pairs) equal the same
SQL aggregate written plainly over the rows the pane aggregates (``pane_members``), NULLs
and FILTERs skipped, NaN ordered above every number as Spark orders it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfsql.model import clauses as c
from dfsql.model import group_also_by_window, timeline_for
from dfsql.model.aggregates import Route, SumOverflow, pane_aggregate
from dfsql.model.group_also_by_window import pane_members

S = 1_000_000


def _sec(n: int) -> c.Duration:
    return c.Duration(n * S)


WINDOWS = [c.FixedWindows(size=_sec(60)), c.SlidingWindows(size=_sec(60), period=_sec(20)),
           c.SessionWindows(gap=_sec(30)), c.GlobalWindows()]
EOW = c.EndOfWindow()
TRIGGERS = [c.Repeat(sub=EOW),
            c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=c.AtPeriod(period=_sec(30))),
                                          final=EOW), c.Repeat(sub=EOW))),
            c.Repeat(sub=c.ElemCount(count=2))]


def _sql_aggregate(how: str, vals: list):
    """The aggregate as SQL defines it over one pane's values (None is NULL)."""
    seen = [v for v in vals if v is not None]
    if how == "count":
        return len(seen)
    if not seen:
        return None
    if how == "sum":
        return sum(seen)
    if how == "avg":
        return sum(seen) / len(seen)
    nan = [v for v in seen if isinstance(v, float) and math.isnan(v)]
    num = [v for v in seen if not (isinstance(v, float) and math.isnan(v))]
    if how == "max":
        return math.nan if nan else max(num)
    return min(num) if num else math.nan


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), st.sampled_from(WINDOWS), st.sampled_from(TRIGGERS),
       st.sampled_from(list(c.Accumulation)), st.sampled_from(["int", "float"]))
def test_kernels_equal_each_panes_aggregate(data, window, trigger, acc, kind):
    n = data.draw(st.integers(0, 16))
    et = np.asarray(data.draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)),
                    np.int64) * 10 * S
    arrival = et + np.asarray(data.draw(st.lists(st.integers(0, 10), min_size=n, max_size=n)),
                              np.int64) * 10 * S
    key = np.asarray(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), np.int64)
    o = np.lexsort((arrival, key))
    key, et, arrival = key[o], et[o], arrival[o]
    if kind == "int":
        vals = data.draw(st.lists(st.one_of(st.none(), st.integers(-100, 100)),
                                  min_size=n, max_size=n))
    else:
        vals = data.draw(st.lists(st.one_of(st.none(), st.integers(-20, 20).map(lambda x: x / 4),
                                            st.just(math.nan)), min_size=n, max_size=n))
    where = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    clauses = c.Clauses(window=window, watermark=c.WatermarkDelay(delay=_sec(20)),
                        trigger=trigger, accumulation=acc, allowed_lateness=_sec(30),
                        processing_time=c.Expr("arrival_time"))
    tl = timeline_for(clauses.watermark, et, arrival)
    res = group_also_by_window(key, et, arrival, clauses, tl)
    n_panes = len(res.panes.pane_id)
    inst = res.instances
    route = Route(inst.first_pane, res.cover.pane_id, res.cover.delta_id, n_panes)
    not_null = np.asarray([v is not None for v in vals], bool)
    dtype = np.int64 if kind == "int" else np.float64
    filled = np.asarray([0 if v is None else v for v in vals], dtype)
    members = pane_members(res)
    for how in ("count", "sum", "min", "max", "avg"):
        for filtered in (False, True):
            counted = not_null & where if filtered else not_null
            got, has = pane_aggregate(how, route, filled[inst.row], counted[inst.row])
            for p, rows in enumerate(members):
                want = _sql_aggregate(how, [vals[r] if counted[r] else None
                                            for r in rows.tolist()])
                value = got[p].item() if has[p] else None
                assert _same(value, want), (how, filtered, p, value, want)
                if how in ("count", "sum") and kind == "int":
                    assert got.dtype == np.int64


def test_sum_wraps_or_raises_as_java_long():
    route = Route(np.array([0, 0]), np.array([0]), np.array([0]), 1)
    big = np.array([2 ** 62, 2 ** 62], np.int64)
    got, _ = pane_aggregate("sum", route, big)
    assert got[0] == -(2 ** 63)  # Java's long addition
    with pytest.raises(SumOverflow):
        pane_aggregate("sum", route, big, overflow="raise")
    avg, _ = pane_aggregate("avg", route, big, overflow="raise")
    assert avg[0] == 2.0 ** 62  # AVG sums doubles: no overflow


def test_min_max_keep_the_type():
    route = Route(np.array([0, 0, 1]), np.array([0, 1, 1]), np.array([0, 0, 1]), 2)
    for v in (np.array([3, 1, 2], np.int32), np.array([True, False, True]),
              np.array([1.5, 0.5, 2.5], np.float32)):
        lo, has = pane_aggregate("min", route, v)
        hi, _ = pane_aggregate("max", route, v)
        assert lo.dtype == v.dtype and hi.dtype == v.dtype and has.all()
        assert lo.tolist() == [min(v[:2]), min(v)] and hi.tolist() == [max(v[:2]), max(v)]
