"""Windows on the processing-time clock itself (dfsql.model.clock_windows, issue #55):
which clauses make the replay the batch aggregation, and each window's emit instant,
against values derived by hand from docs/reference.md's watermark and replay-end rules."""

from __future__ import annotations

import numpy as np
import pytest

from dfsql.language import parse_clauses
from dfsql.model.clock_windows import (
    arrival_group,
    clock_grid,
    emit_instants,
    end_range,
    floor_end,
)
from dfsql.model.windows import grid

S = 1_000_000  # µs per second


@pytest.mark.parametrize("text", [
    "WINDOW FIXED(10 SECONDS) ON t PROCESSING TIME t",
    "WINDOW SLIDING(20 SECONDS, EVERY 10 SECONDS) ON t WATERMARK DELAY 3 SECONDS "
    "PROCESSING TIME t",
    "WINDOW FIXED(10 SECONDS) ON t WATERMARK DELAY 0 SECONDS PROCESSING TIME t "
    "ALLOWED LATENESS 1 MINUTE TRIGGER AT WATERMARK",
    "WINDOW FIXED(10 SECONDS) ON t PROCESSING TIME t EMIT ACCUMULATING AND RETRACTING",
])
def test_the_clock_as_time_is_the_batch_aggregation(text) -> None:
    assert clock_grid(parse_clauses(text)) is not None


@pytest.mark.parametrize("text", [
    # time is not the clock: elements can be late
    "WINDOW FIXED(10 SECONDS) ON e PROCESSING TIME t",
    # a table's watermark can run ahead of the clock
    "WINDOW FIXED(10 SECONDS) ON t WATERMARK FROM marks PROCESSING TIME t",
    # rises between arrivals, or looks ahead: another emit instant
    "WINDOW FIXED(10 SECONDS) ON t WATERMARK PERCENTILE 50 PROCESSING TIME t",
    "WINDOW FIXED(10 SECONDS) ON t WATERMARK PERFECT PROCESSING TIME t",
    # early panes
    "WINDOW FIXED(10 SECONDS) ON t PROCESSING TIME t TRIGGER EVERY 5 SECONDS",
    "WINDOW FIXED(10 SECONDS) ON t PROCESSING TIME t TRIGGER EVERY 2 ROWS",
    # the on-time pane is not the last while the lateness runs
    "WINDOW FIXED(10 SECONDS) ON t PROCESSING TIME t ALLOWED LATENESS 1 MINUTE",
    "WINDOW FIXED(10 SECONDS) ON t PROCESSING TIME t ALLOWED LATENESS 0 SECONDS LATE ROWS INTO late_v",
    "WINDOW SESSIONS(GAP 10 SECONDS) ON t PROCESSING TIME t",
    "WINDOW FIXED(10 SECONDS) ON t",  # a batch already
])
def test_other_clauses_keep_the_replay(text) -> None:
    assert clock_grid(parse_clauses(text)) is None


def test_window_ends_and_groups_by_hand() -> None:
    g = grid(parse_clauses("WINDOW SLIDING(20 SECONDS, EVERY 10 SECONDS, OFFSET 5 SECONDS) "
                           "ON t PROCESSING TIME t").window)
    # the ends are 5 + 20 (mod 10): ..., 15, 25, 35, ... seconds
    assert floor_end(np.array([15, 24, 25, -1]) * S, g).tolist() == [15 * S, 15 * S, 25 * S,
                                                                     -5 * S]
    # an arrival at 40 s with a 3 s delay: watermark 37 s, which has reached the end 35 s
    assert int(arrival_group(40 * S, g, 3 * S)) == 35 * S
    # arrivals in [12 s, 41 s]: the first window holding 12 s is [-5, 15), the last
    # holding 41 s is [35, 55): ends 15, 25, 35, 45, 55
    assert end_range(g, 12 * S, 41 * S) == (15 * S, 5)


def test_emit_instants_by_hand() -> None:
    """FIXED(10 s), arrivals at 0, 1, 5, 12, 31, 33, 44, 70 s. DELAY 0: a window fires at
    the first arrival at or after its end; the last one at the replay's end, 70 s.
    DELAY 15 s: at the first arrival 15 s or more after its end."""
    g = grid(parse_clauses("WINDOW FIXED(10 SECONDS) ON t PROCESSING TIME t").window)
    arrivals = np.array([0, 1, 5, 12, 31, 33, 44, 70]) * S
    ends = np.array([10, 20, 40, 50, 80]) * S
    for delay, want in ((0, [12, 31, 44, 70, 70]), (15 * S, [31, 44, 70, 70, 70])):
        groups = arrival_group(arrivals, g, delay)
        keys, first = np.unique(groups, return_index=True)  # arrivals ascending
        got = emit_instants(ends, keys, arrivals[first], int(arrivals.max()))
        assert (got // S).tolist() == want
    assert emit_instants(ends, np.empty(0, np.int64), np.empty(0, np.int64), 7).tolist() == \
        [7] * 5
