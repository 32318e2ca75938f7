"""The window assignment rule (docs/reference.md#window), one home: ``model.windows`` (``Grid``,
``grid`` and ``assign``). FIXED(size, OFFSET o) puts t in ``[start, start+size)`` with
start ≡ o (mod size); SLIDING(size, EVERY period, OFFSET o) in every ``[s, s+size)`` with
s ≡ o (mod period) containing t — none when period > size and t falls in a gap (a
sampling window: in no window, not dropped); GLOBAL in ``[-inf, +inf)``; SESSIONS in the
proto-window ``[t, t+gap)``. Every path holds to it at the boundaries, by hand: the model's
``assign``, the batch plan's Spark SQL (Spark's ``window()`` as
``dfsql.spark.window_assignment.grid_sql`` renders the grid) and the replay's
``by_window`` (the element's window starts in µs, from the same function): t on a window
start, one µs before it, negative and epoch times, OFFSET, SLIDING with period < size and
with period > size (t in the gap)."""

from __future__ import annotations

import numpy as np
import pytest

import dfsql
from dfsql.language.names import EVENT_TIME
from dfsql.language.parse import parse_clauses
from dfsql.model.windows import NEG_INF, POS_INF, assign

S = 1_000_000
M = 60 * S
Y2024 = 1_704_067_200 * S  # 2024-01-01 00:00:00 UTC, on a minute

#: window spec -> {event time (µs): the starts of its windows, by hand}
CASES = {
    "FIXED(1 MINUTE)": {
        0: [0], M - 1: [0], M: [M], -1: [-M], -M: [-M], -M - 1: [-2 * M],
        Y2024: [Y2024], Y2024 - 1: [Y2024 - M]},
    "FIXED(1 MINUTE, OFFSET 10 SECONDS)": {  # starts ..., -110 s, -50 s, 10 s, 70 s
        10 * S: [10 * S], 10 * S - 1: [-50 * S], 0: [-50 * S], -50 * S: [-50 * S],
        -50 * S - 1: [-110 * S], 70 * S: [70 * S]},
    "SLIDING(1 MINUTE, EVERY 1 MINUTE)": {0: [0], -1: [-M]},
    "SLIDING(1 MINUTE, EVERY 20 SECONDS)": {  # three windows each, starts in (t - 60 s, t]
        0: [-40 * S, -20 * S, 0], -1: [-60 * S, -40 * S, -20 * S],
        20 * S - 1: [-40 * S, -20 * S, 0], 20 * S: [-20 * S, 0, 20 * S]},
    "SLIDING(50 SECONDS, EVERY 20 SECONDS, OFFSET 5 SECONDS)": {  # starts ≡ 5 s mod 20 s
        5 * S: [-35 * S, -15 * S, 5 * S], 5 * S - 1: [-35 * S, -15 * S],
        -45 * S: [-75 * S, -55 * S], -45 * S - 1: [-95 * S, -75 * S, -55 * S]},
    "SLIDING(1 MINUTE, EVERY 3 MINUTES)": {  # [0, 1 min), [3 min, 4 min), ...: gaps
        0: [0], M - 1: [0], M: [], 3 * M - 1: [], 3 * M: [3 * M], -1: [],
        -2 * M - 1: [-3 * M], -2 * M: []},
    "SLIDING(1 MINUTE, EVERY 3 MINUTES, OFFSET 30 SECONDS)": {  # [-150 s, -90 s), [30 s, 90 s)
        30 * S: [30 * S], 30 * S - 1: [], 90 * S - 1: [30 * S], 90 * S: [],
        -90 * S - 1: [-150 * S], -150 * S: [-150 * S]},
}


def _spec(window: str):
    return parse_clauses(f"WINDOW {window} ON et").window


def _size(window: str) -> int:
    return _spec(window).size.micros


def _expected(window: str) -> set[tuple[int, int, int]]:
    """(row, start, end) by hand; rows number the event times in CASES' order."""
    size = _size(window)
    return {(row, s, s + size) for row, starts in enumerate(CASES[window].values())
            for s in starts}


@pytest.mark.parametrize("window", CASES)
def test_model_assigns_by_hand(window) -> None:
    row, start, end = assign(_spec(window), np.array(list(CASES[window]), np.int64))
    assert set(zip(row.tolist(), start.tolist(), end.tolist(), strict=True)) == \
        _expected(window)


def test_global_and_session_proto_windows() -> None:
    t = np.array([-1, 0, M], np.int64)
    _, start, end = assign(_spec("GLOBAL"), t)
    assert start.tolist() == [NEG_INF] * 3 and end.tolist() == [POS_INF] * 3
    _, start, end = assign(_spec("SESSIONS(GAP 10 SECONDS)"), t)
    assert start.tolist() == [-1, 0, M] and end.tolist() == [10 * S - 1, 10 * S, M + 10 * S]


def _events(spark, window: str):
    values = ", ".join(f"({row}, {t})" for row, t in enumerate(CASES[window]))
    return spark.sql(f"SELECT CAST(r AS BIGINT) AS r, timestamp_micros(t) AS et "
                     f"FROM VALUES {values} AS v(r, t)")


@pytest.mark.parametrize("window", CASES)
def test_batch_sql_assigns_the_same(spark, window) -> None:
    """The batch path: one group per (row, window), so each row's windows are the result."""
    _events(spark, window).createOrReplaceTempView("assigned")
    df = dfsql.sql(f"SELECT r, COUNT(*) AS n FROM assigned GROUP BY r WINDOW {window} ON et",
                   spark)
    got = df.selectExpr("r", "unix_micros(window_start) AS s",
                        "unix_micros(window_end) AS e").collect()
    assert {(x.r, x.s, x.e) for x in got} == _expected(window)


@pytest.mark.parametrize("window", CASES)
def test_replay_by_window_assigns_the_same(spark, window) -> None:
    """The replay: each element once per window start (FIXED: its one start)."""
    from dfsql.spark.replay.panes import WINDOW_START, by_window

    inp = _events(spark, window).withColumnRenamed("et", EVENT_TIME)
    out, extra, driver = by_window(inp, parse_clauses(f"WINDOW {window} ON et"))
    assert extra == [WINDOW_START]
    size = _size(window)
    got = {(x.r, x[WINDOW_START], x[WINDOW_START] + size) for x in out.collect()}
    assert got == _expected(window)
    # FIXED: the driver assigns the one window again; SLIDING: it runs each element's
    # pre-assigned window [start, start + size), the start standing for the event time
    if window.startswith("FIXED"):
        assert driver.window == _spec(window)
    else:
        _, s, e = assign(driver.window, np.array([-size], np.int64))
        assert (int(s[0]), int(e[0])) == (-size, 0)


def test_replay_by_window_keeps_a_null_event_time(spark) -> None:
    """The driver drops and counts a NULL event time, so by_window keeps its row."""
    from dfsql.spark.replay.panes import WINDOW_START, by_window

    inp = spark.sql(f"SELECT CAST(NULL AS TIMESTAMP) AS {EVENT_TIME}")
    for window in ("FIXED(1 MINUTE)", "SLIDING(1 MINUTE, EVERY 20 SECONDS)",
                   "SLIDING(1 MINUTE, EVERY 3 MINUTES)"):
        out, _, _ = by_window(inp, parse_clauses(f"WINDOW {window} ON et"))
        assert [r[WINDOW_START] for r in out.collect()] == [None], window
