"""Every path that computes panes agrees, row for row, on random inputs (issue #10).

For random rows (several keys, merging sessions, late rows, NULL event times) and random
clauses (every window, every trigger node, every EMIT mode, lateness, watermark forms):

* the model's general state machine (``fast=False``),
* the model with its fast paths where they apply (``fast=None``; ``fast=True`` is asserted
  to be taken where the clauses are in a fast path's shape),
* the replay on Spark (``PROCESSING TIME``, ``mapInArrow`` driver), and
* for a batch input (no PROCESSING TIME), Spark's native window()/session_window()
  aggregation against the model's batch run,

give the same multiset of rows (tests/agree.py, shown to fail on a planted difference in
tests/test_agree.py). Order is docs/reference.md#output-columns's business, tested elsewhere.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dfsql
from dfsql.language import parse_clauses
from dfsql.language.model_run import run
from dfsql.model.fastpath import plan_for
from dfsql.model.sessions_fast import early_period
from tests.agree import assert_same_rows

#: the replay's drivers over keys spread across partitions, held to the model (tests/conftest.py)
pytestmark = pytest.mark.shuffle_partitions(2)

T0 = datetime(2024, 1, 1)

WINDOWS = [
    "FIXED(60 SECONDS)", "FIXED(60 SECONDS, OFFSET 20 SECONDS)",
    "SLIDING(60 SECONDS, EVERY 20 SECONDS)", "SESSIONS(GAP 30 SECONDS)",
    "SESSIONS(GAP 45 SECONDS)", "GLOBAL",
]
# Every node of the trigger grammar, alone and composed (docs/reference.md#trigger).
TRIGGERS = [
    None,  # the default: REPEAT WATERMARK
    "AT WATERMARK",
    "EVERY 30 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
    "EVERY 30 SECONDS UNTIL WATERMARK",
    "AT WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROW",
    "AT WATERMARK EARLY EVERY 30 SECONDS LATE EVERY 45 SECONDS",
    "EVERY 2 ROWS",
    "AFTER 2 ROWS THEN AFTER 3 ROWS",
    "REPEAT AFTER 25 SECONDS",
    "REPEAT ANY(AFTER 3 ROWS, AT WATERMARK)",
    "ALL(AFTER 2 ROWS, AFTER 30 SECONDS) THEN REPEAT WATERMARK",
    "EVERY 1 ROW FINALLY AFTER 4 ROWS",
    "NEVER",
]
EMITS = ["EMIT DISCARDING", "EMIT ACCUMULATING", "EMIT ACCUMULATING AND RETRACTING"]
WATERMARKS = ["", "WATERMARK DELAY 30 SECONDS", "WATERMARK PERCENTILE 50",
              "WATERMARK PERFECT"]


@st.composite
def rows(draw):
    n = draw(st.integers(1, 18))
    out = []
    for _ in range(n):
        key = draw(st.sampled_from(["a", "b", "c"]))
        et = draw(st.one_of(st.none(), st.integers(0, 24)))  # tens of seconds; some NULL
        delay = draw(st.integers(0, 12))  # late rows come with long delays
        arrival = (et if et is not None else draw(st.integers(0, 24))) + delay
        value = draw(st.integers(1, 9))
        out.append((key, value, None if et is None else T0 + timedelta(seconds=10 * et),
                    T0 + timedelta(seconds=10 * arrival)))
    return out


@st.composite
def clauses(draw, batch: bool):
    window = draw(st.sampled_from(WINDOWS))
    text = f"WINDOW {window} ON event_time"
    if not batch:
        wm = draw(st.sampled_from(WATERMARKS))
        text += f" {wm} PROCESSING TIME arrival_time".replace("  ", " ")
        lateness = draw(st.sampled_from([0, 30, 600]))
        if lateness:
            text += f" ALLOWED LATENESS {lateness} SECONDS"
        trigger = draw(st.sampled_from(TRIGGERS))
        if trigger:
            text += f" TRIGGER {trigger}"
    return text + " " + draw(st.sampled_from(EMITS))


def _model(data, text: str, fast: bool | None):
    return sorted(
        (r["key"], r["window_start"], r["window_end"], r["pane_index"], r["pane_timing"],
         r["is_last"], r["emit_time"], r["is_retraction"], r["value"])
        for r in run(data, text, aggregate=sum, fast=fast))


def _spark(spark, data, text: str):
    spark.createDataFrame(
        data, "key STRING, value BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP"
    ).createOrReplaceTempView("paths_events")
    df = dfsql.sql(f"SELECT key, SUM(value) AS total FROM paths_events GROUP BY key {text}",
                   spark)
    # SQL's SUM over a pane with no elements (a discarding on-time pane) is NULL, the
    # model's 0
    return sorted((r.key, r.window_start, r.window_end, r.pane_index, r.pane_timing,
                   r.is_last, r.emit_time, r.is_retraction, r.total or 0)
                  for r in df.collect())


def _model_paths_agree(data, text: str) -> list:
    general = _model(data, text, fast=False)
    cl = parse_clauses(text)
    if plan_for(cl) is not None or (cl.processing_time is not None and early_period(cl)[0]):
        assert_same_rows(_model(data, text, fast=True), general, ("fast path", "state machine"))
    assert_same_rows(_model(data, text, fast=None), general, ("model", "state machine"))
    return general


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows(), clauses(batch=False))
def test_model_paths_agree(data, text) -> None:
    """State machine == fast paths (model only: many examples, milliseconds each)."""
    _model_paths_agree(data, text)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows(), clauses(batch=False))
def test_replay_agrees_with_the_model(spark, data, text) -> None:
    assert_same_rows(_spark(spark, data, text), _model_paths_agree(data, text),
                     ("Spark", "model"))


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows(), clauses(batch=True))
def test_batch_agrees_with_the_model(spark, data, text) -> None:
    assert_same_rows(_spark(spark, data, text), _model_paths_agree(data, text),
                     ("Spark", "model"))
