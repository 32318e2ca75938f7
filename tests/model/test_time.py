"""Time in a replay (docs/reference.md#window, #watermark): where a replay ends, a percentile watermark that
moves between arrivals, and NULL event times — hand-derived expectations."""

from __future__ import annotations

import numpy as np
import pytest

from dfsql.language import parse_clauses
from dfsql.language.model_run import run
from dfsql.model import group_also_by_window, timeline_for
from dfsql.model.panes import DROP_NULL_TIME
from dfsql.model.watermarks import inputs_frontier
from dfsql.model.windows import NEG_INF

S = 1_000_000


def _panes(rows, *cols):
    return [tuple(r[c] for c in cols) for r in rows]


@pytest.mark.parametrize("fast", [None, False])
def test_replay_runs_to_the_last_watermark_row(fast) -> None:
    # The last arrival is at 2, the watermark series goes on to 20 without reaching the
    # window's end 10 (it stays at 3). The replay ends at 20, the latest instant of its
    # input, so the window's final pane is emitted there — not at 10, its last change.
    rows = run([("a", 1, 0, 1), ("a", 2, 5, 2)],
               "WINDOW FIXED(10 SECONDS) WATERMARK FROM w PROCESSING TIME x "
               "TRIGGER AT WATERMARK EARLY EVERY 1 ROW",
               watermarks=[(1, 0), (2, 0), (10, 3), (20, 3)], fast=fast)
    assert _panes(rows, "pane_index", "pane_timing", "is_last", "emit_time", "value") == [
        (0, "EARLY", False, 1, 1), (1, "EARLY", False, 2, 3), (2, "ON_TIME", True, 20, 3)]


@pytest.mark.parametrize("fast", [None, False])
def test_replay_end_carried_to_the_period_after_the_last_watermark_row(fast) -> None:
    # EVERY 1 MINUTE: the period in progress at the latest input instant (70 s, a
    # watermark row) ends at 120 s; the watermark never reaches 10 s before that.
    rows = run([("a", 1, 0, 1)],
               "WINDOW FIXED(10 SECONDS) WATERMARK FROM w PROCESSING TIME x "
               "TRIGGER EVERY 1 MINUTE UNTIL WATERMARK",
               watermarks=[(1, 0), (70, 3)], fast=fast)
    assert _panes(rows, "pane_index", "pane_timing", "is_last", "emit_time", "value") == [
        (0, "EARLY", False, 60, 1), (1, "ON_TIME", True, 120, 1)]


@pytest.mark.parametrize("fast", [None, False])
def test_percentile_watermark_moves_between_arrivals(fast) -> None:
    # PERCENTILE 50: the first row (event 0, arrival 5) has delay 5, so the watermark is
    # p - 5 and passes [0, 10)'s end at p = 15, between arrivals — not at the next
    # arrival (30). At 30 the delays are {5, 1}: the median (nearest rank) is 1, so the
    # watermark is 29 and [20, 30) closes with the replay's end (30).
    rows = run([("a", 1, 0, 5), ("a", 2, 29, 30)],
               "WINDOW FIXED(10 SECONDS) WATERMARK PERCENTILE 50 PROCESSING TIME x",
               fast=fast)
    assert _panes(rows, "window_start", "pane_timing", "emit_time", "value") == [
        (0, "ON_TIME", 15, 1), (20, "ON_TIME", 30, 2)]


@pytest.mark.parametrize("fast", [None, False])
def test_percentile_sessions_close_between_arrivals(fast) -> None:
    # sessions (the sessions fast path's default trigger): [0, 10) closes at 15 too
    rows = run([("a", 1, 0, 5), ("b", 2, 29, 30)],
               "WINDOW SESSIONS(GAP 10 SECONDS) WATERMARK PERCENTILE 50 PROCESSING TIME x",
               fast=fast)
    assert _panes(rows, "key", "window_end", "emit_time") == [("a", 10, 15), ("b", 39, 30)]


QUERIES = [
    "WINDOW FIXED(10 SECONDS) PROCESSING TIME x",
    "WINDOW SESSIONS(GAP 10 SECONDS) PROCESSING TIME x",
    "WINDOW SESSIONS(GAP 10 SECONDS) PROCESSING TIME x TRIGGER EVERY 1 ROW",
    "WINDOW SLIDING(20 SECONDS, EVERY 10 SECONDS)",
    "WINDOW GLOBAL ON t PROCESSING TIME x",
]


@pytest.mark.parametrize("query", QUERIES)
def test_null_event_time_belongs_to_no_window(query) -> None:
    # event times 0, NULL, 5 (arrivals 1, 2, 3): the NULL row is dropped, with its
    # reason and the watermark in effect when it arrived (5 - 0 delay... the max event
    # time seen before 2 is 0), and takes part in no pane and no watermark.
    cl = parse_clauses(query)
    key = np.zeros(3, np.int64)
    et = np.array([0, NEG_INF, 5 * S], np.int64)
    at = None if cl.processing_time is None else np.array([1, 2, 3], np.int64) * S
    tl = timeline_for(cl.watermark, et, at)
    res = group_also_by_window(key, et, at, cl, tl)
    d = res.dropped
    assert d.row.tolist() == [1] and d.drop_reason.tolist() == [DROP_NULL_TIME]
    assert d.watermark_at_arrival.tolist() == [0 if at is not None else NEG_INF]
    kept = res.instances.first_pane >= 0
    assert sorted(set(res.instances.row[kept].tolist())) == [0, 2]
    if at is not None:  # the NULL row moved no watermark: it is max(0, 5) = 5 at 3
        assert tl.at(3 * S) == 5 * S and tl.at(2 * S) == 0


def test_null_event_time_through_run() -> None:
    rows = run([("a", 1, 0, 1), ("a", 2, None, 2), ("a", 4, 5, 3)],
               "WINDOW FIXED(10 SECONDS) PROCESSING TIME x")
    assert _panes(rows, "window_start", "value") == [(0, 5)]


def test_the_frontier_is_the_earliest_input_unless_one_is_idle():
    """The model's rule, by hand: complete before each input's latest arrival; an input
    quiet for the timeout or longer of the newest input's time no longer holds it."""
    neg = np.iinfo(np.int64).min
    assert inputs_frontier([50, 80]) == 50
    assert inputs_frontier([neg, 80]) == neg  # the marks have sent nothing: held
    assert inputs_frontier([neg, neg]) == neg
    assert inputs_frontier([50, 80], idle_timeout=30) == 80  # quiet 30: let pass
    assert inputs_frontier([51, 80], idle_timeout=30) == 51
    # nothing yet from one input: quiet since the first instant any input reached
    assert inputs_frontier([neg, 80], idle_timeout=30, first=60) == neg
    assert inputs_frontier([neg, 90], idle_timeout=30, first=60) == 90
