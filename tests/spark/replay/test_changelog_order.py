"""docs/reference.md#output-columns's row order of a changelog: at one instant, a retraction sorts
immediately before the row that replaces it (the window's next pane, or the merged
window's pane), several retractions in their own window_start order. A batch result
comes in no particular order (no global sort), as any Spark SQL result without ORDER BY.
"""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import dfsql
from dfsql.language.model_run import run

PAPER = Path(__file__).resolve().parents[3] / "examples" / "paper"
FIG14 = "\n".join(line for line in (PAPER / "fig14_sessions_retracting.sql").read_text()
                  .splitlines() if not line.startswith("--")).strip().rstrip(";")


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.fixture(scope="module")
def fig14_tables(spark):
    (spark.read.option("header", True)
     .schema("key STRING, value BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP")
     .csv(str(PAPER / "events.csv")).createOrReplaceTempView("order_scores"))
    (spark.read.option("header", True).schema("processing_time TIMESTAMP, watermark TIMESTAMP")
     .csv(str(PAPER / "watermarks.csv")).createOrReplaceTempView("order_watermarks"))


def _fig14_model():
    with open(PAPER / "events.csv") as f:
        ev = [(r["key"], int(r["value"]), _ts(r["event_time"]), _ts(r["arrival_time"]))
              for r in csv.DictReader(f)]
    with open(PAPER / "watermarks.csv") as f:
        wm = [(_ts(r["processing_time"]), _ts(r["watermark"])) for r in csv.DictReader(f)]
    clauses = FIG14[FIG14.index("WINDOW"):].replace(" ON event_time", "")
    return run(ev, clauses, watermarks=wm)


# Figure 14 (paper §2.4), hand-read: at 12:07 the late 8 (event 12:02:50) joins the
# sessions [12:02:10, 12:03:10) = 7 and [12:03:20, 12:05:00) = 10 into [12:02:10, 12:05:00)
# = 25, which fires ON_TIME; at 12:07:20 the 9 (event 12:01:20) merges [12:00:30, 12:01:30)
# = 5 and the 25 into [12:00:30, 12:05:00) = 39, a LATE pane.
FIG14_AT_1207 = [(True, 7), (True, 10), (False, 25)]
FIG14_AT_120720 = [(True, 5), (True, 25), (False, 39)]


def _at(rows, t, get):
    return [(get(r, "is_retraction"), get(r, "value")) for r in rows if get(r, "emit_time") == t]


def test_model_fig14_retractions_sort_before_the_merged_pane():
    rows = _fig14_model()
    get = dict.__getitem__
    assert _at(rows, _ts("2015-09-01 12:07:00"), get) == FIG14_AT_1207
    assert _at(rows, _ts("2015-09-01 12:07:20"), get) == FIG14_AT_120720


def test_replay_fig14_retractions_sort_before_the_merged_pane(spark, fig14_tables):
    q = FIG14.replace("FROM scores", "FROM order_scores").replace(
        "paper_watermarks", "order_watermarks")
    rows = dfsql.sql(q, spark).collect()

    def get(r, name):
        return r["total"] if name == "value" else r[name]

    assert _at(rows, _ts("2015-09-01 12:07:00"), get) == FIG14_AT_1207
    assert _at(rows, _ts("2015-09-01 12:07:20"), get) == FIG14_AT_120720


EARLY_ONTIME = ("WINDOW FIXED(10 SECONDS) {on}WATERMARK DELAY 60 SECONDS PROCESSING TIME {pt} "
                "TRIGGER AT WATERMARK EARLY EVERY 1 ROW EMIT ACCUMULATING AND RETRACTING")
# Hand derivation: a's 1 arrives at 1 s (EARLY pane 0 = 1); a's 2 and b's 4 arrive at 2 s,
# the end of the input: EARLY panes fire (a: 3, b: 4), then the watermark goes to +inf
# and ON_TIME panes fire at the same instant. Per key: +EARLY, -EARLY, +ON_TIME.
EARLY_ONTIME_ROWS = [
    ("a", 1, 0, "EARLY", False, 1),
    ("a", 2, 0, "EARLY", True, 1), ("a", 2, 1, "EARLY", False, 3),
    ("a", 2, 1, "EARLY", True, 3), ("a", 2, 2, "ON_TIME", False, 3),
    ("b", 2, 0, "EARLY", False, 4), ("b", 2, 0, "EARLY", True, 4),
    ("b", 2, 1, "ON_TIME", False, 4),
]


def test_model_early_then_on_time_at_one_instant():
    rows = run([("a", 1, 0, 1), ("a", 2, 5, 2), ("b", 4, 3, 2)],
               EARLY_ONTIME.format(on="", pt="x"))
    assert [(r["key"], r["emit_time"], r["pane_index"], r["pane_timing"], r["is_retraction"],
             r["value"]) for r in rows] == EARLY_ONTIME_ROWS


def test_replay_early_then_on_time_at_one_instant(spark):
    q = ("SELECT k, SUM(v) AS total FROM VALUES ('a', 1, 0, 1), ('a', 2, 5, 2), ('b', 4, 3, 2) "
         "AS t(k, v, e, a) GROUP BY k "
         + EARLY_ONTIME.format(on="ON timestamp_seconds(e) ", pt="timestamp_seconds(a)"))
    rows = dfsql.sql(q, spark).collect()
    t0 = datetime(1970, 1, 1)
    assert [(r.k, int((r.emit_time - t0).total_seconds()), r.pane_index, r.pane_timing,
             r.is_retraction, r.total) for r in rows] == EARLY_ONTIME_ROWS


T0 = datetime(2024, 1, 1, 12, 0, 0)


def _events() -> list[tuple]:
    rng = np.random.default_rng(5)
    rows = []
    for _ in range(400):
        key = f"k{int(rng.integers(0, 6))}"
        et = T0 + timedelta(seconds=int(rng.integers(0, 900)))
        delay = int(rng.exponential(30)) + (200 if rng.random() < 0.05 else 0)
        rows.append((key, int(rng.integers(1, 10)), et, et + timedelta(seconds=delay)))
    return sorted(rows)  # the model numbers keys in first-seen order: sorted = key order


@pytest.mark.parametrize("clauses", [
    "WINDOW SESSIONS(GAP 40 SECONDS){on} WATERMARK DELAY 10 SECONDS {pt} "
    "ALLOWED LATENESS 5 MINUTES TRIGGER EVERY 30 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
    "EMIT ACCUMULATING AND RETRACTING",
    "WINDOW SLIDING(2 MINUTES, EVERY 1 MINUTE){on} WATERMARK DELAY 20 SECONDS {pt} "
    "ALLOWED LATENESS 2 MINUTES TRIGGER AT WATERMARK EARLY EVERY 3 ROWS LATE EVERY 1 ROW "
    "EMIT ACCUMULATING AND RETRACTING",
    "WINDOW FIXED(1 MINUTE){on} WATERMARK DELAY 5 SECONDS {pt} TRIGGER EVERY 2 ROWS "
    "EMIT ACCUMULATING",
])
def test_replay_order_equals_the_model_order(spark, clauses):
    """Row for row, in order: the replay on Spark and the model's run()."""
    ev = _events()
    spark.createDataFrame(ev, "key STRING, value BIGINT, event_time TIMESTAMP, "
                              "arrival_time TIMESTAMP").createOrReplaceTempView("order_events")
    model = run(ev, clauses.format(on="", pt="PROCESSING TIME x"))
    q = ("SELECT key, SUM(value) AS total FROM order_events GROUP BY key "
         + clauses.format(on=" ON event_time", pt="PROCESSING TIME arrival_time"))
    got = [(r.key, r.window_start, r.pane_index, r.pane_timing, r.emit_time, r.is_retraction,
            r.total) for r in dfsql.sql(q, spark).collect()]
    want = [(r["key"], r["window_start"], r["pane_index"], r["pane_timing"], r["emit_time"],
             r["is_retraction"], r["value"]) for r in model]
    assert len(got) > 100
    assert got == want


def test_batch_result_is_not_sorted(spark, fig14_tables):
    df = dfsql.sql("SELECT key, SUM(value) AS total FROM order_scores GROUP BY key "
                   "WINDOW FIXED(2 MINUTES) ON event_time", spark)
    plan = df._jdf.queryExecution().executedPlan().toString().lower()
    assert "rangepartitioning" not in plan and "sort [" not in plan
    # [12:00, 12:02): 5 + 9; [12:02, 12:04): 7 + 8 + 3 + 4; [12:04, 12:06): 3;
    # [12:06, 12:08): 3 + 8 + 1
    assert sorted(r.total for r in df.collect()) == [3, 12, 14, 22]
