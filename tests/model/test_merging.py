"""Merging windows (docs/reference.md#trigger): trigger state on merge, node by node, and merge
identity — expectations derived by hand from the trigger specification (seed 001) and
docs/reference.md#trigger, not from the code's output.

Notation in comments: ``EC(k)[n]`` is ElemCount(k) having counted n elements, ``EOW``
EndOfWindow, ``W1``/``W2`` the merged windows with ends ``E1 = 10`` and ``E2 = 20``.
"""

from __future__ import annotations

import pytest

from dfsql.language.model_run import run
from dfsql.model.triggers import (
    AfterAll,
    AfterEach,
    AfterFirst,
    AtPeriod,
    Ctx,
    Done,
    ElemCount,
    EndOfWindow,
    OrFinally,
    Repeat,
    SinceEarliestElem,
    merge_triggers,
)

E1, E2 = 10, 20
NONE_PASSED, W1_PASSED, ALL_PASSED = 5, 15, 25


def merge(a, b, wm):
    return merge_triggers([a, b], [E1, E2], wm)


# ---------------------------------------------------------------- node by node


def test_row_count_counts_add() -> None:
    # further(EC(3)[1], EC(3)[1]) = EC(3)[2]; rewinding a count changes nothing
    assert merge(ElemCount(3, 1), ElemCount(3, 1), NONE_PASSED) == ElemCount(3, 2)
    assert merge(ElemCount(3, 1), ElemCount(3, 1), W1_PASSED) == ElemCount(3, 2)
    # further(Done(EC(3)), EC(3)[2]) = Done(EC(3)): the further one
    assert merge(Done(ElemCount(3)), ElemCount(3, 2), NONE_PASSED) == Done(ElemCount(3))


def test_processing_time_delay_keeps_earliest_start() -> None:
    a, b = SinceEarliestElem(delay=5, first=7), SinceEarliestElem(delay=5, first=3)
    assert merge(a, b, NONE_PASSED) == SinceEarliestElem(delay=5, first=3)
    assert merge(SinceEarliestElem(delay=5), b, W1_PASSED) == b  # no element: no start
    # ready at 3 + 5 = 8, not at 7 + 5
    assert merge(a, b, NONE_PASSED).ready(Ctx(now=8, watermark=0, window_end=E2))


def test_period_keeps_earliest_unfired_element() -> None:
    a, b = AtPeriod(period=60, first=70), AtPeriod(period=60, first=50)
    assert merge(a, b, NONE_PASSED) == AtPeriod(period=60, first=50)  # fires at 60, not 120


def test_watermark_rewinds_only_when_some_but_not_all_passed() -> None:
    fired = Done(EndOfWindow())  # W1's on-time pane fired when the watermark passed E1
    # W1 passed, W2 not: the merged window's end (20) is ahead: EOW again
    assert merge(fired, EndOfWindow(), W1_PASSED) == EndOfWindow()
    # both passed: every output is allowed, progress kept
    assert merge(fired, Done(EndOfWindow()), ALL_PASSED) == Done(EndOfWindow())


def test_any_merges_child_by_child() -> None:
    a = AfterFirst((ElemCount(2, 1), SinceEarliestElem(delay=5, first=3)))
    b = AfterFirst((ElemCount(2, 1), SinceEarliestElem(delay=5, first=1)))
    m = merge(a, b, NONE_PASSED)
    assert m == AfterFirst((ElemCount(2, 2), SinceEarliestElem(delay=5, first=1)))
    assert m.ready(Ctx(now=0, watermark=0, window_end=E2))  # two rows now


def test_all_merges_child_by_child() -> None:
    a = AfterAll((Done(ElemCount(1)), EndOfWindow()))
    b = AfterAll((ElemCount(1), EndOfWindow()))
    assert merge(a, b, NONE_PASSED) == AfterAll((Done(ElemCount(1)), EndOfWindow()))


def test_repeat_merges_its_child() -> None:
    m = merge(Repeat(ElemCount(2, 1)), Repeat(ElemCount(2, 1)), NONE_PASSED)
    assert m == Repeat(ElemCount(2, 2)) and m.ready(Ctx(0, 0, E2))


def test_finally_merges_main_and_final() -> None:
    a = OrFinally(Repeat(ElemCount(2, 1)), ElemCount(5, 3))
    b = OrFinally(Repeat(ElemCount(2, 0)), ElemCount(5, 1))
    assert merge(a, b, NONE_PASSED) == OrFinally(Repeat(ElemCount(2, 1)), ElemCount(5, 4))


def test_then_continues_from_the_furthest_child() -> None:
    # docs/reference.md#trigger: AfterEach(<done>, R2) ⊕ AfterEach(R1, R2) = AfterEach(<done>, R2')
    a = AfterEach((Done(ElemCount(2)), ElemCount(3, 1)))
    b = AfterEach((ElemCount(2, 1), ElemCount(3, 1)))
    assert merge(a, b, NONE_PASSED) == AfterEach((Done(ElemCount(2)), ElemCount(3, 2)))
    # with a rewind (W1 passed), each sequence restarts the children after its first
    # live one (the seed's rewind): b's count for the second child is gone
    assert merge(a, b, W1_PASSED) == AfterEach((Done(ElemCount(2)), ElemCount(3, 1)))


def test_at_watermark_early_late() -> None:
    # AT WATERMARK EARLY EVERY 60 LATE EVERY 2 ROWS
    #   = AfterEach(OrFinally(Repeat(AtPeriod 60), EOW), Repeat(EC(2)))
    def tree(first, eow, late_n):
        return AfterEach((OrFinally(Repeat(AtPeriod(period=60, first=first)), eow),
                          Repeat(ElemCount(2, late_n))))

    w1_late = tree(None, Done(EndOfWindow()), 1)  # W1 passed: in its late phase
    w2_early = tree(70, EndOfWindow(), 1)  # W2 early, an element waiting since 70
    # some passed: rewind — W1 goes back to its early phase; late counts restart
    assert merge(w1_late, w2_early, W1_PASSED) == tree(70, EndOfWindow(), 0)
    # all passed (W2 fired its on-time pane too): no rewind, the late phase goes on
    w2_late = tree(None, Done(EndOfWindow()), 0)
    assert merge(w1_late, w2_late, ALL_PASSED) == tree(None, Done(EndOfWindow()), 1)


# ---------------------------------------------------------------- end to end


def _panes(rows, *cols):
    return [tuple(r[c] for c in cols) for r in rows]


def test_section_5_example_after_2_rows_then_after_3_rows() -> None:
    # rows at t=0,1 arriving together (100), then t=2,3 (101), then t=4,5 (102)
    els = [("k", 1, t, 100 + t // 2) for t in range(6)]
    rows = run(els, "WINDOW SESSIONS(GAP 10 SECONDS) PROCESSING TIME arrival "
                    "TRIGGER AFTER 2 ROWS THEN AFTER 3 ROWS")
    # one EARLY pane of 2 rows; after the third batch one pane of all 6 rows, the last
    # (the sessions grew, so each merged window starts counting panes again at 0)
    assert _panes(rows, "window_start", "window_end", "pane_index", "pane_timing", "is_last",
                  "emit_time", "value") == [
        (0, 11, 0, "EARLY", False, 100, 2),
        (0, 15, 0, "EARLY", True, 102, 6),
    ]


@pytest.mark.parametrize("fast", [None, False])
def test_merge_identity_keeps_pane_count(fast) -> None:
    # The example: the third row [2, 12) falls inside the session [0, 15)
    rows = run([("a", 1, 0, 1), ("a", 2, 5, 2), ("a", 3, 2, 3)],
               "WINDOW SESSIONS(GAP 10 SECONDS) PROCESSING TIME x TRIGGER EVERY 1 ROW",
               fast=fast)
    assert _panes(rows, "window_start", "window_end", "pane_index", "emit_time", "value") == [
        (0, 10, 0, 1, 1),
        (0, 15, 0, 2, 3),  # [0, 10) grew: a new window
        (0, 15, 1, 3, 6),  # the same window: it keeps counting
    ]


# Watermark series (processing time, watermark): passes 10 at p=5, then stays at 10.
WM = [(1, 0), (5, 10), (9, 10)]
LATE = "ALLOWED LATENESS 1 MINUTE"


@pytest.mark.parametrize("fast", [None, False])
def test_on_time_then_late_pane_of_one_window(fast) -> None:
    # [0, 10) gets its ON_TIME pane at 5; a late row at 6 falls inside it (merge
    # identity): a LATE pane of the same window, pane_index 1 — not a new window's 0
    rows = run([("a", 1, 0, 1), ("a", 2, 0, 6)],
               f"WINDOW SESSIONS(GAP 10 SECONDS) WATERMARK FROM w PROCESSING TIME x {LATE}",
               watermarks=WM, fast=fast)
    assert _panes(rows, "window_end", "pane_index", "pane_timing", "emit_time", "value") == [
        (10, 0, "ON_TIME", 5, 1),
        (10, 1, "LATE", 6, 3),
        # at the end the watermark becomes +inf: no elements pending, the window expires
    ]


def test_first_pane_after_the_watermark_passed_is_on_time() -> None:
    # EVERY 1 ROW: an EARLY pane at 1; the watermark passes 10 at 5 with nothing new
    # (no pane); a late row inside the window at 6 fires its first pane since the
    # watermark passed: ON_TIME (the window existed before it passed), pane_index 1
    rows = run([("a", 1, 0, 1), ("a", 2, 0, 6)],
               f"WINDOW SESSIONS(GAP 10 SECONDS) WATERMARK FROM w PROCESSING TIME x {LATE} "
               "TRIGGER EVERY 1 ROW", watermarks=WM)
    assert _panes(rows, "pane_index", "pane_timing", "emit_time", "value") == [
        (0, "EARLY", 1, 1), (1, "ON_TIME", 6, 3)]


@pytest.mark.parametrize("fast", [None, False])
def test_identity_with_early_firings_and_retractions(fast) -> None:
    # EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK (the sessions fast path's
    # trigger), retracting; the watermark passes 13 at 40. Rows: t=0 arrives 1; t=3
    # arrives 12 ([3, 13) grows [0, 10) to [0, 13): a new window); t=1 arrives 24
    # ([1, 11) lies inside [0, 13): the same window, which keeps counting panes).
    rows = run([("a", 1, 0, 1), ("a", 2, 3, 12), ("a", 4, 1, 24)],
               "WINDOW SESSIONS(GAP 10 SECONDS) WATERMARK FROM w PROCESSING TIME x "
               "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
               "EMIT ACCUMULATING AND RETRACTING", watermarks=[(1, 0), (40, 20)], fast=fast)
    assert _panes(rows, "window_end", "pane_index", "pane_timing", "emit_time", "value",
                  "is_retraction") == [
        (10, 0, "EARLY", 10, 1, False),  # the period boundary after 1
        (10, 0, "EARLY", 20, 1, True),  # [0, 10) merged away: retracted
        (13, 0, "EARLY", 20, 3, False),  # boundary 20
        (13, 0, "EARLY", 30, 3, True),
        (13, 1, "EARLY", 30, 7, False),  # boundary 30, after the row at 24
        (13, 1, "EARLY", 40, 7, True),
        (13, 2, "ON_TIME", 40, 7, False),  # the watermark passes 13 at 40
    ]
