"""Hypothesis strategies the model's property tests share: random windows, triggers,
watermarks and inputs (tests/model/test_properties.py, test_firings.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from dfsql.model import clauses as c

S = 1_000_000


D = c.Duration


def _sec(n: int) -> c.Duration:
    return D(n * S)


WINDOWS = st.sampled_from([
    c.GlobalWindows(), c.FixedWindows(size=_sec(60)), c.FixedWindows(size=_sec(60), offset=_sec(20)),
    c.SlidingWindows(size=_sec(60), period=_sec(20)),
    c.SlidingWindows(size=_sec(50), period=_sec(20), offset=_sec(5)),
    # sampling windows (period > size): elements in the gaps are in no window (§3)
    c.SlidingWindows(size=_sec(40), period=_sec(90), offset=_sec(30)),
    c.SessionWindows(gap=_sec(30)),
])


EOW = c.EndOfWindow()


P30, P45 = c.AtPeriod(period=_sec(30)), c.AtPeriod(period=_sec(45))


ROW, ROWS3 = c.ElemCount(count=1), c.ElemCount(count=3)


FAST_TRIGGERS = [
    c.Repeat(sub=EOW), EOW, c.AfterEach(subs=(EOW, c.Repeat(sub=EOW))),
    c.OrFinally(main=c.Repeat(sub=P30), final=EOW),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=P30), final=EOW), c.Repeat(sub=EOW))),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=P30), final=EOW), c.Repeat(sub=P45))),
    c.AfterEach(subs=(EOW, c.Repeat(sub=P45))), c.Repeat(sub=P30),
    # a new element fires at its own instant (EVERY 1 ROW): the instants of a 1 µs period
    c.Repeat(sub=ROW), c.OrFinally(main=c.Repeat(sub=ROW), final=EOW),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=ROW), final=EOW), c.Repeat(sub=ROW))),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=P30), final=EOW), c.Repeat(sub=ROW))),
    # EVERY n ROWS: where the count reaches n, counted again from zero (model.count_fires)
    c.Repeat(sub=c.ElemCount(count=2)), c.OrFinally(main=c.Repeat(sub=ROWS3), final=EOW),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=ROWS3), final=EOW), c.Repeat(sub=EOW))),
    # AT WATERMARK EARLY EVERY 3 ROWS LATE EVERY 1 ROW; a late count starts after on time
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=ROWS3), final=EOW), c.Repeat(sub=ROW))),
    c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=ROWS3), final=EOW),
                      c.Repeat(sub=c.ElemCount(count=2)))),
    c.AfterEach(subs=(EOW, c.Repeat(sub=ROWS3))),
]


OTHER_TRIGGERS = [
    c.Repeat(sub=c.ElemCount(count=2)), c.Never(),
    c.OrFinally(main=c.Repeat(sub=c.SinceEarliestElem(delay=_sec(25))), final=EOW),
    c.AfterEach(subs=(c.AfterAll(subs=(c.ElemCount(count=2), P30)), c.Repeat(sub=EOW))),
    c.Repeat(sub=c.AfterFirst(subs=(c.ElemCount(count=3), EOW))),
]


ACC = st.sampled_from(list(c.Accumulation))


# triggers never done, so nothing is closed
OPEN_TRIGGERS = [FAST_TRIGGERS[i] for i in (0, 2, 4, 5, 6, 7)] + [OTHER_TRIGGERS[0]]


@st.composite
def inputs(draw, batch: bool = False):
    n = draw(st.integers(0, 14))
    et = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    dl = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    ks = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    e = np.asarray(et, np.int64) * 10 * S
    a = e + np.asarray(dl, np.int64) * 10 * S
    k = np.asarray(ks, np.int64)
    o = np.lexsort((a, k))
    return k[o], e[o], (None if batch else a[o]), np.arange(1, n + 1)[o]


def _wm(draw) -> tuple[c.Watermark, list | None]:
    kind = draw(st.sampled_from(["delay", "from", "perfect", "pct"]))
    if kind == "delay":
        return c.WatermarkDelay(delay=_sec(draw(st.sampled_from([0, 30, 90])))), None
    if kind == "perfect":
        return c.WatermarkPerfect(), None
    if kind == "pct":
        return c.WatermarkPercentile(percentile=50.0, delay=_sec(10)), None
    pts = draw(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 50)), max_size=5))
    return c.WatermarkFrom(table="w"), [(p * 10 * S, w * 10 * S) for p, w in pts]


def _clauses(window, trigger, acc, lateness, wm, batch) -> c.Clauses:
    return c.Clauses(window=window, watermark=wm, trigger=trigger, accumulation=acc,
                     allowed_lateness=_sec(lateness),
                     processing_time=None if batch else c.Expr("arrival_time"))
