"""Replay on Spark equals the model run over the whole input at once (many keys).

Spark runs the driver on slices of keys (one per partition and batch); the model runs
every key together. Equal results mean that nothing a slice decides depends on which
keys it holds — in particular all slices share the instant at which the watermark
becomes +inf (final panes' emit_time) even when their own arrivals end earlier.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

import dfsql
from dfsql.language.model_run import run

T0 = datetime(2024, 1, 1, 12, 0, 0)


def _data() -> list[tuple]:
    rng = np.random.default_rng(7)
    rows = []
    for _ in range(240):
        key = f"k{int(rng.integers(0, 8))}"
        # key k0 stops early: its own arrivals end long before the input does
        et = T0 + timedelta(seconds=int(rng.integers(0, 300 if key == "k0" else 1200)))
        delay = int(rng.exponential(40)) + (240 if rng.random() < 0.05 else 0)
        rows.append((key, int(rng.integers(1, 10)), et, et + timedelta(seconds=delay)))
    return rows


ROWS = _data()
# The watermark table stops advancing at 12:15, so later windows close only at the end.
MARKS = [(T0 + timedelta(minutes=m), T0 + timedelta(minutes=m - 2)) for m in range(0, 16)]

QUERIES = [
    "WINDOW FIXED(2 MINUTES) ON event_time WATERMARK FROM marks PROCESSING TIME arrival_time "
    "ALLOWED LATENESS 3 MINUTES TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK "
    "EMIT ACCUMULATING AND RETRACTING",
    "WINDOW SLIDING(2 MINUTES, EVERY 1 MINUTE) ON event_time WATERMARK DELAY 30 SECONDS "
    "PROCESSING TIME arrival_time ALLOWED LATENESS 1 MINUTE EMIT DISCARDING",
    "WINDOW SESSIONS(GAP 45 SECONDS) ON event_time WATERMARK FROM marks "
    "PROCESSING TIME arrival_time ALLOWED LATENESS 2 MINUTES "
    "TRIGGER EVERY 30 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
    "EMIT ACCUMULATING AND RETRACTING",
    "WINDOW SESSIONS(GAP 45 SECONDS) ON event_time WATERMARK DELAY 20 SECONDS "
    "PROCESSING TIME arrival_time EMIT ACCUMULATING",
    "WINDOW SESSIONS(GAP 1 MINUTE) ON event_time WATERMARK FROM marks "
    "PROCESSING TIME arrival_time ALLOWED LATENESS 5 MINUTES "
    "TRIGGER REPEAT ANY(AFTER 3 ROWS, AT WATERMARK) EMIT DISCARDING",
]


@pytest.fixture(scope="module")
def replay_tables(spark):
    spark.createDataFrame(
        ROWS, "key STRING, value BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP"
    ).createOrReplaceTempView("replay_events")
    spark.createDataFrame(MARKS, "processing_time TIMESTAMP, watermark TIMESTAMP") \
        .createOrReplaceTempView("marks")


@pytest.mark.parametrize("clauses", QUERIES, ids=["fixed", "sliding", "sessions-retracting",
                                                   "sessions-default", "sessions-general"])
def test_replay_equals_model(spark, replay_tables, clauses):
    df = dfsql.sql("SELECT key, COUNT(*) AS n, SUM(value) AS total FROM replay_events "
                   f"GROUP BY key {clauses}", spark)
    got = sorted((r.key, r.window_start, r.window_end, r.pane_index, r.pane_timing, r.is_last,
                  r.emit_time, r.is_retraction, r.n, r.total or 0) for r in df.collect())
    counts = run(ROWS, clauses, aggregate=len, watermarks=MARKS)
    sums = run(ROWS, clauses, aggregate=sum, watermarks=MARKS)
    want = sorted((a["key"], a["window_start"], a["window_end"], a["pane_index"],
                   a["pane_timing"], a["is_last"], a["emit_time"], a["is_retraction"],
                   a["value"], b["value"]) for a, b in zip(counts, sums, strict=True))
    assert got == want
    assert len(got) > 20
    # the case that needs one shared end instant: a key whose own arrivals end before
    # the final round still gets its final panes at the end of the whole input
    end = max(g[6] for g in got)
    last_arrival = {}
    for key, _v, _e, at in ROWS:
        last_arrival[key] = max(at, last_arrival.get(key, at))
    assert any(g[6] == end and last_arrival[g[0]] < end for g in got)
