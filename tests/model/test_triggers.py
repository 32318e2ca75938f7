"""The trigger specification's functions, node by node, on hand-worked examples."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from dfsql.model import clauses as c
from dfsql.model import triggers as tr
from dfsql.model.triggers import (
    AfterAll,
    AfterEach,
    AfterFirst,
    AtPeriod,
    Ctx,
    Done,
    ElemCount,
    EndOfWindow,
    Never,
    OrFinally,
    Repeat,
    SinceEarliestElem,
    merge_triggers,
)

END = 100
BEFORE = Ctx(now=0, watermark=50, window_end=END)  # watermark before the window end
AFTER = Ctx(now=0, watermark=END, window_end=END)  # watermark at the end: passed


def feed(t: tr.Node, *arrivals: int) -> tr.Node:
    for p in arrivals:
        t = t.on_element(p)
    return t


# ---------------------------------------------------------------- leaves


def test_elem_count() -> None:
    t = ElemCount(2)
    assert not t.ready(BEFORE) and not t.is_done()
    t = feed(t, 1)
    assert not t.ready(BEFORE)
    t = feed(t, 2)
    assert t.ready(BEFORE)
    n = t.next(BEFORE)
    assert n == Done(ElemCount(2)) and n.is_done() and n.ready(BEFORE)  # P(Done) = True
    assert n.restart() == ElemCount(2)
    assert t.rewind() == t and n.rewind() == n  # only EndOfWindow rewinds


def test_end_of_window() -> None:
    t = EndOfWindow()
    assert not t.ready(BEFORE) and t.ready(AFTER)
    assert t.ready(Ctx(0, END + 5, END))
    n = t.next(AFTER)
    assert n.is_done() and n.rewind() == EndOfWindow()  # rewind(Done(EOW)) = EOW
    assert n.restart() == EndOfWindow()


def test_end_of_global_window_only_at_final_watermark() -> None:
    from dfsql.model.windows import POS_INF

    t = EndOfWindow()
    assert not t.ready(Ctx(0, POS_INF - 1, POS_INF))
    assert t.ready(Ctx(0, POS_INF, POS_INF))


def test_since_earliest_elem() -> None:
    t = SinceEarliestElem(delay=10)
    assert not t.ready(Ctx(1000, 0, END)) and t.next_timer(0) is None
    t = feed(t, 5, 7)
    assert t.next_timer(0) == 15 and t.next_timer(15) is None
    assert not t.ready(Ctx(14, 0, END)) and t.ready(Ctx(15, 0, END))
    assert t.next(Ctx(15, 0, END)) == Done(SinceEarliestElem(delay=10))


def test_at_period_aligned_and_boundary_inclusive() -> None:
    t = feed(AtPeriod(period=60), 65)
    assert t.next_timer(0) == 120
    assert not t.ready(Ctx(119, 0, END)) and t.ready(Ctx(120, 0, END))
    # an element arriving exactly on a boundary belongs to the pane fired at it
    t = feed(AtPeriod(period=60), 120)
    assert t.ready(Ctx(120, 0, END))


def test_never() -> None:
    t = feed(Never(), 1, 2, 3)
    assert not t.ready(AFTER) and not t.is_done()


# ---------------------------------------------------------------- composites


def test_after_first() -> None:
    t = feed(AfterFirst((ElemCount(2), EndOfWindow())), 1)
    assert not t.ready(BEFORE) and t.ready(AFTER)
    n = t.next(AFTER)  # nextIfReady on each: only EOW was ready
    assert n == AfterFirst((ElemCount(2, 1), Done(EndOfWindow())))
    assert n.is_done()  # isDone(AfterFirst) = any
    assert n.restart() == AfterFirst((ElemCount(2), EndOfWindow()))


def test_after_all() -> None:
    t = feed(AfterAll((ElemCount(1), EndOfWindow())), 1)
    assert not t.ready(BEFORE) and t.ready(AFTER)
    n = t.next(AFTER)
    assert n == AfterAll((Done(ElemCount(1)), Done(EndOfWindow())))
    assert n.is_done()
    half = AfterAll((Done(ElemCount(1)), EndOfWindow()))
    assert not half.is_done()  # isDone(AfterAll) = all


def test_after_each_sequence() -> None:
    t = AfterEach((ElemCount(2), ElemCount(1)))
    t = feed(t, 1)
    assert not t.ready(BEFORE)  # P is the first live child's
    t = feed(t, 2)
    assert t.ready(BEFORE)
    t = t.next(BEFORE)
    # the active child is done; the next one restarts (its elements were emitted)
    assert t == AfterEach((Done(ElemCount(2)), ElemCount(1)))
    assert not t.is_done() and not t.ready(BEFORE)
    t = feed(t, 3)
    assert t.ready(BEFORE)
    t = t.next(BEFORE)
    assert t.is_done() and t.ready(BEFORE)


def test_after_each_feeds_every_child() -> None:
    t = feed(AfterEach((EndOfWindow(), ElemCount(3))), 1, 2)
    assert t.subs[1] == ElemCount(3, 2)  # kept for `further` when merging


def test_repeat_restarts_done_child() -> None:
    t = feed(Repeat(ElemCount(2)), 1, 2)
    assert t.ready(BEFORE)
    n = t.next(BEFORE)
    assert n == Repeat(ElemCount(2)) and not n.is_done()  # isDone(Repeat) = False
    # Repeat(AfterEach(A, B)) moves inside, restarts only when the sequence is done
    r = feed(Repeat(AfterEach((ElemCount(1), ElemCount(1)))), 1)
    r = r.next(BEFORE)
    assert r == Repeat(AfterEach((Done(ElemCount(1)), ElemCount(1))))
    r = feed(r, 2).next(BEFORE)
    assert r == Repeat(AfterEach((ElemCount(1), ElemCount(1))))


def test_or_finally_subtlety_final_keeps_its_elements() -> None:
    # main = Repeat(ElemCount(2)), final = ElemCount(3): final counts since the start
    t = feed(OrFinally(Repeat(ElemCount(2)), ElemCount(3)), 1, 2)
    assert t.ready(BEFORE)
    t = t.next(BEFORE)
    assert t == OrFinally(Repeat(ElemCount(2)), ElemCount(3, 2))  # final kept its 2
    assert not t.is_done()
    t = feed(t, 3)
    assert t.ready(BEFORE)  # final: 3 elements in all (main saw only 1)
    t = t.next(BEFORE)
    assert t.is_done()  # isDone(orFinally) = either


def test_or_finally_until_watermark() -> None:
    t = feed(OrFinally(Repeat(AtPeriod(period=60)), EndOfWindow()), 30)
    assert t.ready(Ctx(60, 0, END))
    t = t.next(Ctx(60, 0, END))
    assert not t.is_done() and not t.ready(Ctx(61, 0, END))
    assert t.ready(Ctx(61, END, END))
    assert t.next(Ctx(61, END, END)).is_done()


def test_build_collapses_repeat_of_repeat() -> None:
    n = tr.build(c.Repeat(sub=c.Repeat(sub=c.ElemCount(count=2))))
    assert n == Repeat(ElemCount(2))
    fig13 = c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=c.AtPeriod(period=c.Duration(60))),
                                          final=c.EndOfWindow()),
                              c.Repeat(sub=c.EndOfWindow())))
    assert tr.build(fig13) == AfterEach((OrFinally(Repeat(AtPeriod(period=60)),
                                                   EndOfWindow()), Repeat(EndOfWindow())))


# ---------------------------------------------------------------- merging


def test_rewind() -> None:
    assert Done(EndOfWindow()).rewind() == EndOfWindow()
    assert Done(ElemCount(2)).rewind() == Done(ElemCount(2))
    assert ElemCount(2, 1).rewind() == ElemCount(2, 1)
    t = AfterEach((Done(ElemCount(1)), Done(EndOfWindow()), feed(ElemCount(2), 1)))
    # rewind children up to the first live one (after rewinding), restart the rest
    assert t.rewind() == AfterEach((Done(ElemCount(1)), EndOfWindow(), ElemCount(2)))
    assert t.rewind().rewind() == t.rewind()  # idempotent
    u = AfterEach((feed(ElemCount(5), 1), Done(EndOfWindow()), feed(ElemCount(2), 1)))
    assert u.rewind() == AfterEach((ElemCount(5, 1), EndOfWindow(), ElemCount(2)))
    assert Repeat(AfterFirst((Done(EndOfWindow()), ElemCount(1)))).rewind() == Repeat(
        AfterFirst((EndOfWindow(), ElemCount(1))))


def test_further_and_state_merge() -> None:
    assert ElemCount(3).further(Done(ElemCount(3))) == Done(ElemCount(3))
    assert Done(ElemCount(3)).further(ElemCount(3, 2)) == Done(ElemCount(3))
    assert ElemCount(3, 1).further(ElemCount(3, 2)) == ElemCount(3, 3)  # counts add
    assert AtPeriod(period=60, first=70).further(AtPeriod(period=60, first=50)) == AtPeriod(
        period=60, first=50)


def test_after_each_merge_example() -> None:
    # The specification: AfterEach(R1, R2, R3) ⊕ AfterEach(<done>, <done>, R3)
    #                    = AfterEach(<done>, R2', R3)
    r1, r2, r3 = ElemCount(1), EndOfWindow(), ElemCount(2)
    w1 = AfterEach((r1, r2, r3))  # its window ends at 200: not reached
    w2 = AfterEach((Done(r1), Done(r2), r3))  # its window ended at 100: passed
    merged = merge_triggers([w1, w2], [200, 100], watermark=150)  # some, not all: rewind
    assert merged == AfterEach((Done(r1), EndOfWindow(), r3))
    assert merge_triggers([w2, w1], [100, 200], 150) == merged  # commutative
    # both ends reached: no rewind, progress is kept
    assert merge_triggers([w1, w2], [200, 100], 200) == AfterEach((Done(r1), Done(r2), r3))


# ---------------------------------------------------------------- properties

LEAVES = st.sampled_from([ElemCount(1), ElemCount(2), ElemCount(3), EndOfWindow(),
                          AtPeriod(period=10), SinceEarliestElem(delay=7), Never()])


def once(depth: int) -> st.SearchStrategy[tr.Node]:
    if depth == 0:
        return LEAVES
    sub = once(depth - 1)
    return st.one_of(LEAVES, st.lists(sub, min_size=1, max_size=3).map(
        lambda s: AfterFirst(tuple(s))), st.lists(sub, min_size=1, max_size=3).map(
        lambda s: AfterAll(tuple(s))), st.lists(sub, min_size=1, max_size=3).map(
        lambda s: AfterEach(tuple(s))))


TRIGGERS = st.one_of(once(2), once(2).map(Repeat),
                     st.tuples(once(1).map(Repeat), once(1)).map(lambda x: OrFinally(*x)))
CTXS = st.builds(lambda n, w: Ctx(n, w, 50), st.integers(0, 100), st.integers(0, 100))


@settings(max_examples=150, deadline=None)
@given(TRIGGERS, st.lists(st.integers(0, 100), max_size=4), CTXS,
       st.lists(st.integers(0, 100), max_size=3), st.integers(0, 30), st.integers(0, 30))
def test_monotone(t: tr.Node, els: list[int], ctx: Ctx, more: list[int], dn: int,
                  dw: int) -> None:
    """P(e1..en, t) => P(e1..en+k, t+Δ): more elements and later clocks keep it ready."""
    t = feed(t, *sorted(els))
    if t.ready(ctx):
        later = Ctx(ctx.now + dn, ctx.watermark + dw, ctx.window_end)
        assert feed(t, *sorted(x + ctx.now for x in more)).ready(later)


def _progress(t: tr.Node, steps: list[tuple[int, int, int]], end: int) -> tr.Node:
    """A window ending at ``end`` that saw ``steps`` (arrival, delay, watermark)."""
    for p, n, w in steps:
        t = feed(t, p)
        ctx = Ctx(p + n, w, end)
        if not t.is_done() and t.ready(ctx):
            t = t.next(ctx)
    return t


STEPS = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20), st.integers(0, 80)),
                 max_size=4)
ENDS = st.integers(30, 70)


@settings(max_examples=150, deadline=None)
@given(TRIGGERS, STEPS, STEPS, STEPS, ENDS, ENDS, ENDS, st.integers(0, 80))
def test_merge_commutative(t: tr.Node, s1, s2, s3, e1: int, e2: int, e3: int, wm: int) -> None:
    """One merge event is one n-ary operation: the order of the windows does not matter;
    where no rewind is involved (none or all ends passed) it is associative as well."""
    ws = [(_progress(t, s1, e1), e1), (_progress(t, s2, e2), e2), (_progress(t, s3, e3), e3)]
    results = set()
    for perm in itertools.permutations(ws):
        results.add(merge_triggers([x for x, _ in perm], [e for _, e in perm], wm))
    assert len(results) == 1
    passed = [wm >= e for e in (e1, e2, e3)]
    if all(passed) or not any(passed):
        (a, ea), (b, eb), (d, ed) = ws
        left = merge_triggers([merge_triggers([a, b], [ea, eb], wm), d], [max(ea, eb), ed], wm)
        right = merge_triggers([a, merge_triggers([b, d], [eb, ed], wm)], [ea, max(eb, ed)], wm)
        assert left == right == results.pop()


def test_batch_trigger_note_only_for_a_trigger_that_cannot_act() -> None:
    from dfsql.language.parse import parse_clauses
    from dfsql.model.triggers import batch_trigger_note

    w = "WINDOW FIXED(1 HOUR) ON ts "
    note = batch_trigger_note(parse_clauses(w + "TRIGGER EVERY 10 MINUTES"))
    assert note is not None and note.startswith("note: the TRIGGER has no effect on a batch")
    assert batch_trigger_note(parse_clauses(w + "TRIGGER AFTER 3 ROWS")) == note
    for quiet in ("", "TRIGGER WATERMARK", "TRIGGER REPEAT WATERMARK",
                  "PROCESSING TIME at TRIGGER EVERY 10 MINUTES"):
        assert batch_trigger_note(parse_clauses(w + quiet)) is None, quiet
