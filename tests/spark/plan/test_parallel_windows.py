"""Non-merging windows are independent, so a replay without GROUP BY keys (or with one
hot key) runs its windows in every task, and equals the model (issue #10, item 14)."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest
from pyspark.sql import functions as F  # noqa: N812

import dfsql
from dfsql.language.model_run import run
from dfsql.spark.plan.planner import planned_of

#: windows spread over the replay's tasks (tests/conftest.py)
pytestmark = pytest.mark.shuffle_partitions(2)

T0 = datetime(2024, 1, 1)


def _rows():
    rng = np.random.default_rng(3)
    out = []
    for _ in range(300):
        et = rng.integers(0, 1800)
        at = et + int(rng.exponential(40)) + (300 if rng.random() < 0.05 else 0)
        out.append(("hot", int(rng.integers(1, 9)),
                    None if rng.random() < 0.03 else T0 + timedelta(seconds=int(et)),
                    T0 + timedelta(seconds=int(at))))
    return out


ROWS = _rows()
CLAUSES = {
    "fixed": "WINDOW FIXED(2 MINUTES, OFFSET 30 SECONDS) ON event_time WATERMARK DELAY 20 "
             "SECONDS PROCESSING TIME arrival_time ALLOWED LATENESS 2 MINUTES "
             "TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK "
             "EMIT ACCUMULATING AND RETRACTING",
    "sliding": "WINDOW SLIDING(3 MINUTES, EVERY 1 MINUTE) ON event_time WATERMARK DELAY 20 "
               "SECONDS PROCESSING TIME arrival_time ALLOWED LATENESS 1 MINUTE "
               "TRIGGER AT WATERMARK EARLY EVERY 5 ROWS LATE EVERY 1 ROW EMIT DISCARDING",
}


@pytest.fixture(scope="module")
def hot(spark):
    spark.createDataFrame(
        ROWS, "key STRING, value BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP"
    ).createOrReplaceTempView("hot_events")


@pytest.mark.parametrize("kind", CLAUSES)
@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "one-hot-key"])
def test_windows_of_one_key_run_in_every_task(spark, hot, kind, keyed) -> None:
    text = CLAUSES[kind]
    by = "key, " if keyed else ""
    df = dfsql.sql(f"SELECT {by}SUM(value) AS total FROM hot_events "
                   f"{'GROUP BY key ' if keyed else ''}{text}", spark)
    got = sorted((r.window_start, r.window_end, r.pane_index, r.pane_timing, r.is_last,
                  r.emit_time, r.is_retraction, r.total or 0) for r in df.collect())
    want = sorted((r["window_start"], r["window_end"], r["pane_index"], r["pane_timing"],
                   r["is_last"], r["emit_time"], r["is_retraction"], r["value"])
                  for r in run(ROWS, text, aggregate=sum))
    assert got == want and len(got) > 30
    # the driver's work was spread: more than one task emitted panes
    (block,) = planned_of(df).blocks
    tasks = block.replay.emitted.select(F.spark_partition_id().alias("p")).distinct().count()
    assert tasks > 1
