"""The model's changelog ranks (:mod:`dfsql.model.changelog`, used by the replay and the
stream) place a merging changelog's rows (§7) in linear time, trusting a check that the
model's panes come in (key, emit time, window) order; the plain definition sorts every
row by §7's tuple. On random inputs, through the fast paths and the state machine,
both give the same ranks."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfsql.model import clauses as c
from dfsql.model import timeline_for
from dfsql.model.changelog import (
    changelog_ranks,
    changelog_ranks_by_sort,
    emission_place,
    nondecreasing,
    retraction_place,
)
from dfsql.model.group_also_by_window import drive

S = 1_000_000
EOW = c.EndOfWindow()
TRIGGERS = [
    c.Repeat(sub=EOW),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=c.AtPeriod(period=c.Duration(30 * S))),
                                  final=EOW), c.Repeat(sub=EOW))),
    c.Repeat(sub=c.ElemCount(count=1)),
    c.Repeat(sub=c.ElemCount(count=2)),
    c.AfterEach(subs=(c.AfterAll(subs=(c.ElemCount(count=2),
                                       c.AtPeriod(period=c.Duration(30 * S)))),
                      c.Repeat(sub=EOW))),
]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), st.sampled_from(TRIGGERS), st.sampled_from([None, False]),
       st.sampled_from([0, 60, 100_000]), st.sampled_from([15, 30, 80]))
def test_linear_ranks_equal_the_sorted_definition(data, trigger, fast, lateness, gap) -> None:
    n = data.draw(st.integers(0, 30))
    e = np.asarray(data.draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)),
                   np.int64) * 10 * S
    a = e + np.asarray(data.draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)),
                       np.int64) * 10 * S
    k = np.asarray(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), np.int64)
    o = np.lexsort((a, k))
    k, e, a = k[o], e[o], a[o]
    cl = c.Clauses(window=c.SessionWindows(gap=c.Duration(gap * S)),
                   watermark=c.WatermarkDelay(delay=c.Duration(30 * S)), trigger=trigger,
                   accumulation=c.Accumulation.ACCUMULATING_AND_RETRACTING,
                   allowed_lateness=c.Duration(lateness * S),
                   processing_time=c.Expr("arrival_time"))
    r = drive(k, e, a, cl, timeline_for(cl.watermark, e, a), fast=fast, ordered=False)
    ranks = changelog_ranks(r, r.pane_window_start)
    np.testing.assert_array_equal(ranks, changelog_ranks_by_sort(r, r.pane_window_start))
    # every row has its own place
    n_panes, retracted = len(r.pane_key), r.retraction_pane
    places = np.concatenate([emission_place(ranks), retraction_place(ranks[retracted])])
    assert len(np.unique(places)) == n_panes + len(retracted)


def test_nondecreasing_is_lexicographic() -> None:
    a = np.array([0, 0, 1, 1])
    assert nondecreasing(a, np.array([5, 6, 0, 1]))
    assert not nondecreasing(a, np.array([5, 4, 0, 1]))
    assert nondecreasing(np.array([0, 1]), np.array([9, 0]))  # decided by the first column
    assert not nondecreasing(np.array([1, 0]), np.array([0, 9]))
