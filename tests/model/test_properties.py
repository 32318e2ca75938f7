"""Property tests of the driver on random inputs (small, so the suite stays fast)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfsql.model import aggregate, group_also_by_window, timeline_for
from dfsql.model import clauses as c
from dfsql.model.fastpath import plan_for
from dfsql.model.group_also_by_window import canonical
from dfsql.model.windows import merge_sessions
from tests.agree import assert_same_rows
from tests.model.strategies import (
    ACC,
    EOW,
    FAST_TRIGGERS,
    OPEN_TRIGGERS,
    OTHER_TRIGGERS,
    P30,
    ROW,
    WINDOWS,
    _clauses,
    _sec,
    _wm,
    inputs,
)


def _same(a, b) -> None:
    for part in ("panes", "retractions", "cover", "instances"):
        pa, pb = getattr(a, part), getattr(b, part)
        for f in pa.__dataclass_fields__:
            np.testing.assert_array_equal(getattr(pa, f), getattr(pb, f), err_msg=f"{part}.{f}")
    assert a.end_time == b.end_time


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), WINDOWS.filter(lambda w: not w.merging), st.sampled_from(FAST_TRIGGERS), ACC,
       st.sampled_from([0, 60, 100_000]), st.booleans())
def test_fast_path_equals_state_machine(data, window, trigger, acc, lateness, batch) -> None:
    k, e, a, _ = data.draw(inputs(batch))
    wm, series = _wm(data.draw)
    cl = _clauses(window, trigger, acc, lateness, wm, batch)
    assert plan_for(cl) is not None
    tl = timeline_for(cl.watermark, e, a, series)
    _same(group_also_by_window(k, e, a, cl, tl, fast=True),
          group_also_by_window(k, e, a, cl, tl, fast=False))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), st.sampled_from(FAST_TRIGGERS + OTHER_TRIGGERS), ACC)
def test_batch_sessions_fast_equals_state_machine(data, trigger, acc) -> None:
    k, e, a, _ = data.draw(inputs(True))
    cl = _clauses(c.SessionWindows(gap=_sec(30)), trigger, acc, 0, c.WatermarkDelay(), True)
    tl = timeline_for(cl.watermark, e, a)
    _same(group_also_by_window(k, e, a, cl, tl, fast=True),
          group_also_by_window(k, e, a, cl, tl, fast=False))


SESSION_FAST_TRIGGERS = [
    c.Repeat(sub=EOW),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=P30), final=EOW), c.Repeat(sub=EOW))),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=c.AtPeriod(period=_sec(70))), final=EOW),
                      c.Repeat(sub=EOW))),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=ROW), final=EOW), c.Repeat(sub=EOW))),
]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), st.sampled_from(SESSION_FAST_TRIGGERS), ACC,
       st.sampled_from([0, 60, 100_000]), st.sampled_from([15, 30, 80]))
def test_replayed_sessions_fast_equals_state_machine(data, trigger, acc, lateness, gap) -> None:
    """Replayed sessions: the chain fast path (with its hand-off of interleaving keys to
    the state machine) gives exactly the state machine's panes."""
    k, e, a, _ = data.draw(inputs())
    wm, series = _wm(data.draw)
    cl = _clauses(c.SessionWindows(gap=_sec(gap)), trigger, acc, lateness, wm, False)
    tl = timeline_for(cl.watermark, e, a, series)
    _same(group_also_by_window(k, e, a, cl, tl, fast=True),
          group_also_by_window(k, e, a, cl, tl, fast=False))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), WINDOWS, st.sampled_from(FAST_TRIGGERS + OTHER_TRIGGERS), ACC,
       st.sampled_from([0, 60]), st.booleans(), st.sampled_from([None, False]))
def test_unordered_result_is_the_same_panes(data, window, trigger, acc, lateness, batch,
                                            fast) -> None:
    """``ordered=False`` (the Spark executor's choice) numbers panes by position only:
    put in canonical order, it is exactly the ordered result, on every path."""
    k, e, a, _ = data.draw(inputs(batch))
    wm, series = _wm(data.draw)
    cl = _clauses(window, trigger, acc, lateness, wm, batch)
    tl = timeline_for(cl.watermark, e, a, series)
    _same(canonical(group_also_by_window(k, e, a, cl, tl, fast=fast, ordered=False)),
          group_also_by_window(k, e, a, cl, tl, fast=fast))


def _run(data, window, trigger, acc, lateness):
    k, e, a, v = data.draw(inputs())
    wm, series = _wm(data.draw)
    cl = _clauses(window, trigger, acc, lateness, wm, False)
    return k, e, a, v, cl, group_also_by_window(k, e, a, cl, timeline_for(wm, e, a, series))


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), WINDOWS, st.sampled_from(FAST_TRIGGERS + OTHER_TRIGGERS),
       st.sampled_from([0, 60]))
def test_discarding_panes_partition_kept_elements(data, window, trigger, lateness) -> None:
    k, e, a, v, cl, r = _run(data, window, trigger, c.Accumulation.DISCARDING, lateness)
    inst = r.instances
    kept = inst.first_pane >= 0
    assert np.all((inst.drop_reason == 0) == kept)  # every kept element is emitted
    np.testing.assert_array_equal(r.cover.pane_id, r.cover.delta_id)
    assert aggregate(r, v, "sum").sum() == v[inst.row[kept]].sum()
    assert aggregate(r, v, "count").sum() == kept.sum()


def _batch_values(k, e, window, v) -> dict:
    cl = _clauses(window, c.Repeat(sub=EOW), c.Accumulation.ACCUMULATING, 0,
                  c.WatermarkDelay(), True)
    r = group_also_by_window(k, e, None, cl, timeline_for(cl.watermark, e, None))
    s = aggregate(r, v, "sum")
    p = r.panes
    return {(int(p.key[i]), int(p.window_start[i]), int(p.window_end[i])): int(s[i])
            for i in range(len(s))}


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), WINDOWS, st.sampled_from(OPEN_TRIGGERS),
       st.sampled_from([c.Accumulation.ACCUMULATING,
                        c.Accumulation.ACCUMULATING_AND_RETRACTING]))
def test_last_accumulating_pane_is_batch_value(data, window, trigger, acc) -> None:
    k, e, a, v, cl, r = _run(data, window, trigger, acc, 10**6)  # nothing is dropped
    assert np.all(r.instances.first_pane >= 0)
    s = aggregate(r, v, "sum")
    p = r.panes
    last: dict = {}
    for i in range(len(s)):  # panes are in emit order
        last[(int(p.key[i]), int(p.window_start[i]), int(p.window_end[i]))] = int(s[i])
    batch = _batch_values(k, e, window, v)
    assert {w: last[w] for w in batch} == batch


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), WINDOWS, st.sampled_from(FAST_TRIGGERS + OTHER_TRIGGERS),
       st.sampled_from([0, 60, 10**6]))
def test_retraction_invariant_after_every_pane(data, window, trigger, lateness) -> None:
    k, e, a, v, cl, r = _run(data, window, trigger, c.Accumulation.ACCUMULATING_AND_RETRACTING,
                             lateness)
    s = aggregate(r, v, "sum")
    p, rt = r.panes, r.retractions
    rows = [(int(p.emit_time[i]), 1, i, 1) for i in range(len(s))]
    rows += [(int(t), 0, int(i), -1) for i, t in zip(rt.retracted_pane_id, rt.emit_time,
                                                     strict=True)]
    rows.sort()
    signed: dict = defaultdict(int)
    current: dict = {}  # window -> value of its live row (None once retracted)
    times = sorted({x[0] for x in rows})
    j = 0
    for t in times:
        while j < len(rows) and rows[j][0] == t:
            _, _, i, sign = rows[j]
            w = (int(p.key[i]), int(p.window_start[i]), int(p.window_end[i]))
            signed[w] += sign * int(s[i])
            current[w] = int(s[i]) if sign > 0 else None
            j += 1
        for w, val in current.items():  # after every emission instant
            assert signed[w] == (val or 0)
    # each pane is retracted at most once, never before it was emitted
    assert len(set(rt.retracted_pane_id.tolist())) == len(rt.retracted_pane_id)
    assert np.all(rt.emit_time >= p.emit_time[rt.retracted_pane_id])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 100), st.integers(1, 20)),
                max_size=30), st.randoms())
def test_session_merge_is_order_independent(ws, rnd) -> None:
    k = np.asarray([w[0] for w in ws], np.int64)
    s = np.asarray([w[1] for w in ws], np.int64)
    e = s + np.asarray([w[2] for w in ws], np.int64)
    _, ms, me = merge_sessions(k, s, e)
    perm = list(range(len(ws)))
    rnd.shuffle(perm)
    _, ps, pe = merge_sessions(k[perm], s[perm], e[perm])
    np.testing.assert_array_equal(ms[perm], ps)
    np.testing.assert_array_equal(me[perm], pe)
    # transitive and maximal: merged windows of a key are disjoint and cover their members
    for key in set(k.tolist()):
        b = sorted(set(zip(ms[k == key].tolist(), me[k == key].tolist(), strict=True)))
        assert all(b[i][1] <= b[i + 1][0] for i in range(len(b) - 1))
    assert np.all((ms <= s) & (e <= me))


def _pane_rows(res) -> list[tuple]:
    p = res.panes
    rows = sorted(zip(p.key.tolist(), p.window_start.tolist(), p.window_end.tolist(),
                      p.pane_index.tolist(), p.timing.tolist(), p.is_last.tolist(),
                      p.emit_time.tolist(), strict=True))
    retr = sorted(zip((p.key[res.retractions.retracted_pane_id]).tolist(),
                      (p.window_start[res.retractions.retracted_pane_id]).tolist(),
                      res.retractions.emit_time.tolist(), strict=True))
    return rows + [("retraction", *r) for r in retr]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), WINDOWS, st.sampled_from(FAST_TRIGGERS + OTHER_TRIGGERS), ACC,
       st.sampled_from([0, 60, 100_000]))
def test_key_slices_share_the_end(data, window, trigger, acc, lateness) -> None:
    """Running keys in slices (as Spark does) with the whole input's end floor gives the
    panes of one run over every key: nothing a slice decides depends on the others."""
    from dfsql.model.group_also_by_window import end_floor_of

    k, e, a, _ = data.draw(inputs())
    if len(k) == 0:
        return
    wm, series = _wm(data.draw)
    cl = _clauses(window, trigger, acc, lateness, wm, False)
    tl = timeline_for(cl.watermark, e, a, series)
    whole = _pane_rows(group_also_by_window(k, e, a, cl, tl))
    floor = end_floor_of(cl.trigger, int(a.max()))
    parts = []
    for key in np.unique(k):
        m = k == key
        parts += _pane_rows(group_also_by_window(k[m], e[m], a[m], cl, tl, end_floor=floor))
    assert_same_rows(parts, whole, ("key slices", "one run"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([
    0, 1, -5, 10**6, -(2**62), 2**62, 2**63 - 1, -(2**63)])), max_size=30),
       st.integers(0, 40))
def test_segmented_cummax_is_running_max_per_key(pairs, extra) -> None:
    """Both branches (value range small enough to lift keys apart, or not) equal a plain
    per-key running max."""
    from dfsql.model.windows import segmented_cummax

    pairs = sorted(pairs, key=lambda p: p[0]) + [(9, v) for v in range(extra)]
    k = np.array([p[0] for p in pairs], np.int64)
    e = np.array([p[1] for p in pairs], np.int64)
    want, run, prev = [], None, None
    for kk, v in zip(k.tolist(), e.tolist(), strict=True):
        run = v if kk != prev else max(run, v)
        prev = kk
        want.append(run)
    np.testing.assert_array_equal(segmented_cummax(e, k), np.array(want, np.int64))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**40), 2**40), st.integers(0, 6)), max_size=20))
def test_concat_ranges_is_the_ranges_one_after_another(ranges) -> None:
    """The expansion of cover pairs and pane members: range r is start_r, start_r + 1, ...
    (length_r of them), the ranges in order."""
    from dfsql.model.windows import concat_ranges

    want = [s + i for s, n in ranges for i in range(n)]
    starts = np.array([s for s, _ in ranges], np.int64)
    lengths = np.array([n for _, n in ranges], np.int64)
    np.testing.assert_array_equal(concat_ranges(starts, lengths), np.array(want, np.int64))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), WINDOWS, st.sampled_from(FAST_TRIGGERS + OTHER_TRIGGERS),
       st.sampled_from([0, 60]), st.sampled_from([None, False]))
def test_each_retraction_names_the_pane_that_replaces_it(data, window, trigger, lateness,
                                                        fast) -> None:
    """docs/reference.md#emit and #output-columns: a retraction is emitted with the pane that replaces it — the same
    key, at the same instant, a window that contains the retracted one (its own next pane,
    or the merged window's) — exactly once per pane replaced."""
    k, e, a, _ = data.draw(inputs())
    wm, series = _wm(data.draw)
    cl = _clauses(window, trigger, c.Accumulation.ACCUMULATING_AND_RETRACTING, lateness, wm,
                  False)
    res = group_also_by_window(k, e, a, cl, timeline_for(cl.watermark, e, a, series),
                               fast=fast)
    p, r = res.panes, res.retractions
    old, new = r.retracted_pane_id, r.replacing_pane_id
    assert len(set(old.tolist())) == len(old)
    assert (p.key[old] == p.key[new]).all() and (p.emit_time[new] == r.emit_time).all()
    assert (p.window_start[new] <= p.window_start[old]).all()
    assert (p.window_end[new] >= p.window_end[old]).all()
    same = (p.window_start[new] == p.window_start[old]) & (p.window_end[new] == p.window_end[old])
    assert (p.pane_index[new][same] == p.pane_index[old][same] + 1).all()
    assert (p.emit_time[old] <= r.emit_time).all()
