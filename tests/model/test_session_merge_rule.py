"""The session merge rule (docs/reference.md#window, SESSIONS), one home: ``model.windows``.
An element at t has the proto-window [t, t+gap); windows are half-open and merge, per
key, with every window they overlap (``overlaps``: a.start < b.end and b.start < a.end),
transitively (``merge_sessions``); a window inside a live session leaves it the same
window (``within``: no new window, pane_index keeps counting). Spark's closed-gap
``session_window`` is given the model's ``closed_gap_sessions``.

Every path holds it at the boundaries, by hand, GAP 30 SECONDS: [0, 30) and [30, 60)
touch and stay two; 0 and 30 s - 1 µs overlap by 1 µs and merge into [0, 60 s - 1 µs);
0, 58 and then 29 chain into [0, 88); 0, 30, 60 stay three. The paths: the rule's
functions, the model's drivers (batch, state machine, sessions fast path), the Spark
batch SQL (``session_window``), the Spark replay, and the stream's bucket processor
(driven in memory, micro-batch by micro-batch, its retention between them).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from in_process import MemoryState

import dfsql
from dfsql.language import parse_statement
from dfsql.language.model_run import run
from dfsql.language.rewrite import rewrite
from dfsql.model.clauses import Duration, SessionWindows
from dfsql.model.windows import (
    closed_gap_sessions,
    merge_sessions,
    overlaps,
    sessions,
    within,
)
from dfsql.spark.stream import plan as S

S_ = 1_000_000
T0 = datetime(2024, 1, 1)
GAP = "SESSIONS(GAP 30 SECONDS)"

# (name, event times in arrival order in µs, the sessions [start, end) µs -> element count)
CASES = [
    ("touching stay two", [0, 30 * S_], {(0, 30 * S_): 1, (30 * S_, 60 * S_): 1}),
    ("overlap by 1 µs merges", [0, 30 * S_ - 1], {(0, 60 * S_ - 1): 2}),
    ("a late row chains two", [0, 58 * S_, 29 * S_], {(0, 88 * S_): 3}),
    ("touching chain stays three", [0, 30 * S_, 60 * S_],
     {(0, 30 * S_): 1, (30 * S_, 60 * S_): 1, (60 * S_, 90 * S_): 1}),
]
IDS = [c[0] for c in CASES]


def _t(us: int) -> datetime:
    return T0 + timedelta(microseconds=us)


def _us(t: datetime) -> int:
    return (t - T0) // timedelta(microseconds=1)


# ------------------------------------------------------------------ the rule itself


def test_overlap_is_the_rule_touching_is_not() -> None:
    assert not overlaps(0, 30, 30, 60) and not overlaps(30, 60, 0, 30)
    assert overlaps(0, 30, 29, 59) and overlaps(29, 59, 0, 30)
    assert within(20, 50, 0, 50) and within(0, 30, 0, 50)
    assert not within(21, 51, 0, 50)


@pytest.mark.parametrize("name,times,want", CASES, ids=IDS)
def test_merge_sessions_and_sessions(name, times, want) -> None:
    t = np.asarray(times, np.int64)
    key = np.zeros(len(t), np.int64)
    _, ms, me = merge_sessions(key, t, t + 30 * S_)
    got: dict[tuple[int, int], int] = {}
    for s, e in zip(ms.tolist(), me.tolist(), strict=True):
        got[(s, e)] = got.get((s, e), 0) + 1
    assert got == want
    _, s2, e2 = sessions(SessionWindows(gap=Duration(30 * S_)), key, t)
    assert s2.tolist() == ms.tolist() and e2.tolist() == me.tolist()


@pytest.mark.parametrize("gap", [1, 2, 7, 30])
def test_closed_gap_sessions_equal_half_open_overlap(gap) -> None:
    """A closed-gap engine merges t2 >= t1 iff t2 <= t1 + its gap, and ends a session at
    its last time + its gap: with the model's parameters that is the half-open rule."""
    cg = closed_gap_sessions(gap)
    for d in range(3 * gap):
        assert (d <= cg.gap) == bool(overlaps(0, gap, d, d + gap)), (gap, d)
    assert 5 + cg.gap + cg.end_shift == 5 + gap


# ------------------------------------------------------------------ the model's drivers


def _sessions_of(rows) -> dict[tuple[int, int], int]:
    """{(window_start, window_end) µs: count} of each window's final pane."""
    return {(_us(r["window_start"]), _us(r["window_end"])): r["value"] for r in rows
            if r["key"] == "a" and r["is_last"]}


@pytest.mark.parametrize("fast", [None, False])
@pytest.mark.parametrize("name,times,want", CASES, ids=IDS)
def test_model_batch(name, times, want, fast) -> None:
    rows = [("a", 1, _t(t), None) for t in times]
    assert _sessions_of(run(rows, f"WINDOW {GAP}", aggregate=len, fast=fast)) == want


REPLAY = (f"WINDOW {GAP} WATERMARK DELAY 10 MINUTES PROCESSING TIME arrival_time "
          "EMIT ACCUMULATING")


@pytest.mark.parametrize("fast", [None, False])  # None: the sessions fast path
@pytest.mark.parametrize("name,times,want", CASES, ids=IDS)
def test_model_replay(name, times, want, fast) -> None:
    rows = [("a", 1, _t(t), _t(S_ * (i + 1))) for i, t in enumerate(times)]
    assert _sessions_of(run(rows, REPLAY, aggregate=len, fast=fast)) == want


# The merge identity, replayed (DELAY 0, lateness 1 hour, EMIT ACCUMULATING): a@0 (at 1 s)
# and a@20 (at 2 s) make [0, 50); b@100 (at 3 s) moves the watermark to 100 s, so [0, 50)
# fires ON_TIME at 3 s (pane 0, count 2). A late a@20 s (at 4 s) has [20, 50) inside it:
# the same window, a LATE pane 1; a@20 s + 1 µs grows it to [0, 50 s + 1 µs): a new window,
# its LATE pane 0 (a window created by a merge starts again at 0, §7).
IDENTITY = ("WINDOW SESSIONS(GAP 30 SECONDS) WATERMARK DELAY 0 SECONDS PROCESSING TIME "
            "arrival_time ALLOWED LATENESS 1 HOUR EMIT ACCUMULATING")
IDENTITY_CASES = [
    (20 * S_, [(0, 50 * S_, 0, "ON_TIME", 3, 2), (0, 50 * S_, 1, "LATE", 4, 3)]),
    (20 * S_ + 1, [(0, 50 * S_, 0, "ON_TIME", 3, 2), (0, 50 * S_ + 1, 0, "LATE", 4, 3)]),
]


def _identity_rows(late: int):
    return [("a", 1, _t(0), _t(S_)), ("a", 1, _t(20 * S_), _t(2 * S_)),
            ("b", 1, _t(100 * S_), _t(3 * S_)), ("a", 1, _t(late), _t(4 * S_))]


@pytest.mark.parametrize("fast", [None, False])
@pytest.mark.parametrize("late,want", IDENTITY_CASES, ids=["inside", "grows by 1 µs"])
def test_model_row_inside_a_session_creates_no_window(late, want, fast) -> None:
    got = [(_us(r["window_start"]), _us(r["window_end"]), r["pane_index"], r["pane_timing"],
            _us(r["emit_time"]) // S_, r["value"])
           for r in run(_identity_rows(late), IDENTITY, aggregate=len, fast=fast)
           if r["key"] == "a"]
    assert got == want


# ------------------------------------------------------------------ Spark


def _view(spark, rows, name: str) -> str:
    spark.createDataFrame(
        [(k, v, et, at) for k, v, et, at in rows],
        "k STRING, v BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP",
    ).createOrReplaceTempView(name)
    return name


@pytest.mark.parametrize("name,times,want", CASES, ids=IDS)
def test_spark_batch_sql(spark, name, times, want) -> None:
    """No PROCESSING TIME: Spark's own session_window, given the model's closed gap."""
    v = _view(spark, [("a", 1, _t(t), None) for t in times], "merge_rule_batch")
    df = dfsql.sql(f"SELECT k, COUNT(*) AS n FROM {v} GROUP BY k WINDOW {GAP} ON event_time",
                   spark)
    assert {(_us(r.window_start), _us(r.window_end)): r.n for r in df.collect()} == want


@pytest.mark.parametrize("times,want", [
    ([0, 0], {(0, 1): 2}), ([0, 1], {(0, 1): 1, (1, 2): 1})], ids=["equal", "touching"])
def test_spark_batch_sql_one_microsecond_gap(spark, times, want) -> None:
    """GAP 1 µs: a closed gap of 0, run as a 1 µs FIXED window."""
    assert closed_gap_sessions(1).gap == 0
    v = _view(spark, [("a", 1, _t(t), None) for t in times], "merge_rule_1us")
    df = dfsql.sql(f"SELECT k, COUNT(*) AS n FROM {v} GROUP BY k "
                   "WINDOW SESSIONS(GAP 0.001 MS) ON event_time", spark)
    assert {(_us(r.window_start), _us(r.window_end)): r.n for r in df.collect()} == want


@pytest.mark.parametrize("late,want", IDENTITY_CASES, ids=["inside", "grows by 1 µs"])
def test_spark_replay_row_inside_a_session(spark, late, want) -> None:
    v = _view(spark, _identity_rows(late), "merge_rule_replay")
    clauses = IDENTITY.replace("WINDOW SESSIONS(GAP 30 SECONDS)",
                               "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time")
    df = dfsql.sql(f"SELECT k, COUNT(*) AS n FROM {v} GROUP BY k {clauses}", spark)
    got = [(_us(r.window_start), _us(r.window_end), r.pane_index, r.pane_timing,
            _us(r.emit_time) // S_, r.n) for r in df.collect() if r.k == "a"]
    assert got == want


# ------------------------------------------------------------------ the stream


def _stream(clauses: str, rows) -> list[tuple]:
    """The bucket processor (one bucket, in memory), one micro-batch per arrival; then
    a last one so the final arrival's instant is complete. Rows of key a:
    (window_start, window_end, pane_index, pane_timing, emit_time s, count)."""
    stmt = parse_statement(f"SELECT k, COUNT(*) AS n FROM t GROUP BY k {clauses}")
    block = stmt.blocks[-1]
    rewrite(block, stmt.source)
    out = ["__k0", "__a0", "window_start", "window_end", "pane_index", "pane_timing",
           "is_last", "emit_time", "is_retraction", "__sort_rank",
           S.ROW_KIND, *S.STATS_FIELDS]
    p = S.BucketProcessor(block.clauses, ["__k0"], [], [("__a0", "count", None)], out)

    p.state = MemoryState()
    last = max(_us(at) for *_, at in rows)
    got = []
    for k, _, et, at in [*rows, ("z", 1, _t(0), _t(last + S_))]:
        part = pd.DataFrame({"__k0": [k], "__et": pd.array([_us(et)], dtype="Int64"),
                             "__at": [_us(at)], S.BUCKET: np.zeros(1, np.int32)})
        table = pa.Table.from_pandas(part, preserve_index=False)
        packed = pa.Table.from_batches(list(S.Packer(1)(table.to_batches()))).to_pandas()
        for frame in p.handleInputRows((0,), iter([packed])):
            got += [(int(r["window_start"]), int(r["window_end"]), int(r["pane_index"]),
                     r["pane_timing"], int(r["emit_time"]) // S_, int(r["__a0"]))
                    for r in frame.to_dict("records")
                    if r["__k0"] == "a" and r[S.ROW_KIND] != S.STATS]
    return got


@pytest.mark.parametrize("name,times,want", CASES, ids=IDS)
def test_stream(name, times, want) -> None:
    """DELAY 10 MINUTES holds every window until b@1 hour moves the watermark past it."""
    rows = [("a", 1, _t(t), _t(S_ * (i + 1))) for i, t in enumerate(times)]
    rows.append(("b", 1, _t(3600 * S_), _t(S_ * (len(times) + 1))))
    got = _stream(REPLAY.replace(GAP, f"{GAP} ON event_time"), rows)
    assert {(s, e): n for s, e, *_, n in got} == want
    assert len(got) == len(want)


@pytest.mark.parametrize("late,want", IDENTITY_CASES, ids=["inside", "grows by 1 µs"])
def test_stream_row_inside_a_session_creates_no_window(late, want) -> None:
    clauses = IDENTITY.replace("WINDOW SESSIONS(GAP 30 SECONDS)",
                               "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time")
    assert _stream(clauses, _identity_rows(late)) == want
