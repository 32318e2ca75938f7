"""SLIDING windows whose period exceeds their size (docs/reference.md#window): sampling windows with
gaps between them. An element in a gap belongs to no window: it is outside the result,
not a dropped element, and (as any element) it still moves the watermark."""

from __future__ import annotations

import numpy as np
import pytest

from dfsql.model import clauses as c
from dfsql.model import group_also_by_window, timeline_for
from dfsql.model.windows import NULL_EVENT_TIME, assign

D = c.Duration
#: every [s, s+10) with s ≡ 5 (mod 30): [-25, -15), [5, 15), [35, 45), ...
SAMPLING = c.SlidingWindows(size=D(10), period=D(30), offset=D(5))


def test_an_element_in_a_gap_gets_no_window() -> None:
    t = np.array([5, 14, 15, 34, 35, -16, -25, -15])
    row, start, end = assign(SAMPLING, t)
    # by hand: 5 and 14 in [5, 15); 15 and 34 in the gap [15, 35); 35 in [35, 45);
    # -16 and -25 in [-25, -15); -15 in the gap [-15, 5)
    assert row.tolist() == [0, 1, 4, 5, 6]
    assert start.tolist() == [5, 5, 35, -25, -25]
    assert (end - start).tolist() == [10] * 5


@pytest.mark.parametrize("fast", [True, False])
def test_a_replayed_element_in_a_gap_is_not_dropped_but_moves_the_watermark(fast) -> None:
    cl = c.Clauses(window=SAMPLING, watermark=c.WatermarkDelay(delay=D(0)),
                   processing_time=c.Expr("arrival_time"))
    # (event time, arrival): 7 in [5, 15); 20 in the gap, arriving at 21; 8 arrives at 30,
    # after the watermark passed 15: late for [5, 15) and dropped; 25 is in the gap and
    # arrives after the watermark passed 20 (late, were it in a window): not dropped;
    # 40 in [35, 45); a NULL event time: dropped (reason: null event time)
    et = np.array([7, 20, 8, 25, 40, NULL_EVENT_TIME])
    at = np.array([10, 21, 30, 31, 41, 42])
    key = np.zeros(len(et), np.int64)
    res = group_also_by_window(key, et, at, cl, timeline_for(cl.watermark, et, at), fast=fast)
    p = res.panes
    got = sorted(zip(p.window_start.tolist(), p.window_end.tolist(), p.emit_time.tolist(),
                     strict=True))
    # [5, 15) fires at 21, when the gap element moves the watermark to 20 >= 15;
    # [35, 45) only at the end of the input (instant 42), with the +inf watermark
    assert got == [(5, 15, 21), (35, 45, 42)]
    d = res.dropped
    assert sorted(d.row.tolist()) == [2, 5]  # the late 8 and the NULL time; no gap element
    members = sorted(res.instances.row[res.instances.first_pane >= 0].tolist())
    assert members == [0, 4]


def test_batch_sampling_windows_count_only_their_elements() -> None:
    cl = c.Clauses(window=SAMPLING)
    et = np.array([5, 14, 15, 34, 35, NULL_EVENT_TIME])
    key = np.array([0, 1, 0, 0, 0, 0])
    res = group_also_by_window(key, et, None, cl, timeline_for(cl.watermark, et, None))
    p = res.panes
    assert sorted(zip(p.key.tolist(), p.window_start.tolist(), strict=True)) == \
        [(0, 5), (0, 35), (1, 5)]
    assert res.dropped.row.tolist() == [5]
