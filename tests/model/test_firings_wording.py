"""EXPLAIN FIRINGS' wording (issue #51): durations as the language writes them (the
default watermark's ``DELAY 0 SECONDS``, never ``0 MICROSECONDS``); a detail's times in
one form (all times of day, or all with their dates when one is on another day than the
row's); and ``WAITING`` only for a window whose final pane never fired (docs/reference.md,
"Explaining time"), after what fired at the same instant."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from dfsql.model import clauses as c
from dfsql.model import firings as f
from dfsql.model import group_also_by_window, timeline_for
from dfsql.model.result import end_floor_of
from dfsql.model.trigger_notation import duration_text

MIN = c.Duration(60_000_000)
UTC = dt.timezone.utc


def _at(text: str) -> int:
    """``HH:MM:SS`` on 2015-09-01, or a whole ``YYYY-MM-DD HH:MM:SS``, in microseconds."""
    if len(text) == 8:
        text = "2015-09-01 " + text
    t = dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return int(t.timestamp() * 1_000_000)


def _run(cl: c.Clauses, e: list[str], a: list[str]) -> f.Events:
    """One key's replay of elements at event times ``e`` arriving at ``a``: its events,
    the WAITING rows' holder as the replay words it."""
    k = np.zeros(len(e), np.int64)
    et, at = np.array([_at(x) for x in e]), np.array([_at(x) for x in a])
    tl = timeline_for(cl.watermark, et, at, None)
    end = end_floor_of(cl.trigger, int(at.max()), tl)
    rec = f.Recorder(cl, UTC, f.final_watermark(cl, tl, end), f.holder_text(cl, tl, end, UTC))
    res = group_also_by_window(k, et, at, cl, tl, recorder=rec)
    return f.events(res, rec, k, et, at, tl)


def _life(ev: f.Events) -> list[tuple[str, str, str]]:
    """(at, event, detail) of every row but the elements', in the result's order."""
    keep = ~np.isin(ev.code, [f.ELEMENT, f.LATE_ELEMENT, f.DROPPED])
    return [(f.time_text(t, UTC), f.EVENT_NAMES[code], d) for t, code, d in zip(
        ev.at[keep].tolist(), ev.code[keep].tolist(), ev.detail[keep].tolist(), strict=True)]


@pytest.mark.parametrize("micros, text", [
    (0, "0 SECONDS"),  # the default watermark's delay: a duration the language writes
    (1, "1 MICROSECOND"),
    (1_500, "1500 MICROSECONDS"),
    (1_000, "1 MILLISECOND"),
    (1_500_000, "1500 MILLISECONDS"),
    (90_000_000, "90 SECONDS"),
    (60_000_000, "1 MINUTE"),
    (7_200_000_000, "2 HOURS"),
    (86_400_000_000 * 3, "3 DAYS"),
])
def test_a_duration_in_the_largest_unit_that_divides_it(micros: int, text: str) -> None:
    assert duration_text(c.Duration(micros)) == text


def test_a_window_fired_by_the_end_of_input_does_not_wait() -> None:
    """FIXED(1 MINUTE), the default trigger (REPEAT WATERMARK) and watermark (DELAY 0);
    elements at 12:00:30 (arriving 12:00:40) and 12:01:20 (arriving 12:01:30). The input
    ends at 12:01:30 with the watermark at 12:01:20, the latest event time: [12:00,12:01)
    fired on time when the second element took the watermark past 12:01:00;
    [12:01,12:02) fires only because the end of input takes the watermark to +inf. Its
    final pane fired: no WAITING row."""
    cl = c.Clauses(window=c.FixedWindows(size=MIN), processing_time=c.Expr("p"))
    ev = _run(cl, ["12:00:30", "12:01:20"], ["12:00:40", "12:01:30"])
    assert [(t, name) for t, name, _ in _life(ev)] == [
        ("2015-09-01 12:01:30", "FIRE"), ("2015-09-01 12:01:30", "EXPIRE"),
        ("2015-09-01 12:01:30", "FIRE"), ("2015-09-01 12:01:30", "EXPIRE")]
    assert _life(ev)[2][2].endswith("end of input: watermark → +inf")


def test_a_window_whose_final_pane_never_fired_waits_after_its_last_pane() -> None:
    """FIXED(1 MINUTE), TRIGGER EVERY 1 ROW, DELAY 0 (the default): elements at 12:00:30
    (arriving 12:00:40) and 12:00:50 (arriving 12:01:00) fire an EARLY pane each. The
    input ends at 12:01:00 with the watermark at 12:00:50 < the window's end 12:01:00, and
    at +inf nothing is left to emit: the window never had its final pane, so it WAITS,
    and says so after the pane that fired at 12:01:00, before its state is released."""
    cl = c.Clauses(window=c.FixedWindows(size=MIN), processing_time=c.Expr("p"),
                   trigger=c.Repeat(sub=c.ElemCount(count=1)))
    ev = _run(cl, ["12:00:30", "12:00:50"], ["12:00:40", "12:01:00"])
    life = _life(ev)
    assert [(t, name) for t, name, _ in life] == [
        ("2015-09-01 12:00:40", "FIRE"), ("2015-09-01 12:01:00", "FIRE"),
        ("2015-09-01 12:01:00", "WAITING"), ("2015-09-01 12:01:00", "EXPIRE")]
    assert life[2][2] == ("watermark 12:00:50 < window end 12:01:00 (held by the latest "
                          "event time, 12:00:50, minus DELAY 0 SECONDS); the trigger waits "
                          "for EVERY 1 ROW (0 of 1 so far)")


def test_a_detail_across_midnight_dates_all_its_times() -> None:
    """SESSIONS(GAP 1 MINUTE): an element at 23:59:30 (arriving 00:00:20 the next day)
    makes [23:59:30,00:00:30); one at 00:00:10 (arriving 00:00:30) joins it: at 00:00:30 on
    2015-09-02 the MERGE row names windows of both days, so every time in it carries its
    date, not only the day before's."""
    cl = c.Clauses(window=c.SessionWindows(gap=MIN), processing_time=c.Expr("p"))
    ev = _run(cl, ["2015-09-01 23:59:30", "2015-09-02 00:00:10"],
              ["2015-09-02 00:00:20", "2015-09-02 00:00:30"])
    [merge] = [d for _, name, d in _life(ev) if name == "MERGE"]
    assert merge.startswith(
        "[2015-09-01 23:59:30,2015-09-02 00:00:30) + element "
        "[2015-09-02 00:00:10,2015-09-02 00:01:10) → [2015-09-01 23:59:30,2015-09-02 "
        "00:01:10); trigger state: "), merge
    # a detail whose times are all on the row's day keeps the times of day
    [expire] = [d for _, name, d in _life(ev) if name == "EXPIRE"]
    assert expire == ("state released at the end of input (watermark → +inf passed window "
                      "end + lateness 00:01:10)")
