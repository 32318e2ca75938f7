"""The comparison that holds two paths to the same rows (tests/agree.py) fails on a
planted difference: one row's value changed, one retraction missing, one pane_timing
changed (issue #53, item 6). Without this a harness that always agreed would pass."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from dfsql.language.model_run import run
from tests.agree import assert_same_rows, difference

T0 = datetime(2024, 1, 1)
#: one key's session grown by a second row: an EARLY pane, its retraction when the
#: session merges, the merged session's panes (docs/reference.md#emit, #window)
TEXT = ("WINDOW SESSIONS(GAP 30 SECONDS) ON event_time PROCESSING TIME arrival_time "
        "TRIGGER EVERY 1 ROW EMIT ACCUMULATING AND RETRACTING")
DATA = [("a", 2, T0, T0), ("a", 3, T0 + timedelta(seconds=20), T0 + timedelta(seconds=30))]
#: (key, window_start, window_end, pane_index, pane_timing, is_last, emit_time,
#: is_retraction, value), the order of tests/spark/test_paths_agree.py's rows
TIMING, RETRACTION, VALUE = 4, 7, 8


def _rows() -> list[tuple]:
    return [(r["key"], r["window_start"], r["window_end"], r["pane_index"],
             r["pane_timing"], r["is_last"], r["emit_time"], r["is_retraction"], r["value"])
            for r in run(DATA, TEXT, aggregate=sum)]


def test_the_same_rows_in_another_order_agree() -> None:
    rows = _rows()
    assert_same_rows(rows, list(reversed(rows)))


def test_the_planted_run_has_a_retraction_to_drop() -> None:
    # by hand: the first row's session [0s, 30s) fires (2) and is retracted when the
    # second row merges it into [0s, 50s), which fires 2 + 3
    rows = _rows()
    assert [r[VALUE] for r in rows if r[RETRACTION]] == [2]
    assert 5 in [r[VALUE] for r in rows if not r[RETRACTION]]


def _changed(row: tuple, at: int, value: object) -> tuple:
    return (*row[:at], value, *row[at + 1:])


def test_a_changed_value_fails() -> None:
    rows = _rows()
    planted = [_changed(rows[0], VALUE, rows[0][VALUE] + 1), *rows[1:]]
    with pytest.raises(AssertionError, match="only in stream"):
        assert_same_rows(planted, rows, ("stream", "replay"))
    assert difference(planted, rows) == ([planted[0]], [rows[0]])


def test_a_missing_retraction_fails() -> None:
    rows = _rows()
    at = next(i for i, r in enumerate(rows) if r[RETRACTION])
    planted = rows[:at] + rows[at + 1:]
    with pytest.raises(AssertionError):
        assert_same_rows(planted, rows)
    assert difference(planted, rows) == ([], [rows[at]])


def test_a_changed_pane_timing_fails() -> None:
    rows = _rows()
    other = "LATE" if rows[-1][TIMING] != "LATE" else "EARLY"
    planted = [*rows[:-1], _changed(rows[-1], TIMING, other)]
    with pytest.raises(AssertionError):
        assert_same_rows(rows, planted)
    assert difference(rows, planted) == ([rows[-1]], [planted[-1]])


def test_a_duplicated_row_fails() -> None:
    rows = _rows()
    with pytest.raises(AssertionError):
        assert_same_rows([*rows, rows[0]], rows)
