"""Timeline.ahead_of_processing_time: the first instant a watermark passed processing
time (no row happens after it arrives, so only a mis-dated row or mark moves it there);
the dropped-row warning names it (docs/reference.md "ALLOWED LATENESS")."""

from __future__ import annotations

import numpy as np

from dfsql.model.watermarks import POS_INF, Timeline, delay_timeline


def test_a_row_dated_ahead_moves_a_delay_watermark_past_the_clock():
    # arrivals 5, 12, 20, 25; the row arriving at 20 is dated 1,000; DELAY 10
    tl = delay_timeline(np.array([5, 12, 1000, 21]), np.array([5, 12, 20, 25]), 10)
    assert tl.ahead_of_processing_time() == (20, 990)


def test_a_watermark_behind_or_at_the_clock_is_not_ahead():
    assert delay_timeline(np.array([5, 12, 30]), np.array([5, 12, 30]), 0) \
        .ahead_of_processing_time() is None
    assert Timeline.of([], []).ahead_of_processing_time() is None
    # the end of a bounded input: +inf is not a row from the future
    assert Timeline.of([10, 20], [5, POS_INF]).ahead_of_processing_time() is None


def test_a_rising_watermark_ahead_when_its_lag_is_negative():
    # PERCENTILE: p - lag; a lag of -5 (rows dated 5 after they arrive) puts it at p + 5
    tl = Timeline.rising(np.array([10, 20]), np.array([3, -5]))
    assert tl.ahead_of_processing_time() == (20, 25)
