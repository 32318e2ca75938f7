"""docs/reference.md#output-columns's default order for replayed results, built without a sampled range
exchange (dfsql.spark.replay.ordering): the hash that places rows, and the order that results."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

import dfsql
from dfsql.spark.replay.ordering import in_emit_order, murmur3_long, partition_stand_ins

#: rows spread over partitions: the changelog order across them (tests/conftest.py)
pytestmark = pytest.mark.shuffle_partitions(2)

T0 = datetime(2024, 1, 1, 12, 0, 0)
ORDER = ("emit_time", "is_retraction DESC", "`key`", "window_start")


def test_murmur3_long_is_sparks_hash(spark):
    values = [0, 1, -1, 42, 7 << 40, -(1 << 63), (1 << 63) - 1, 123456789012345]
    got = spark.sql("SELECT v, hash(v) AS h FROM VALUES "
                    + ", ".join(f"(CAST({v} AS BIGINT))" for v in values) + " AS t(v)").collect()
    assert {r.v: r.h for r in got} == {v: murmur3_long(v) for v in values}


@pytest.mark.parametrize("partitions", [1, 2, 4, 7, 200])
def test_stand_ins_land_on_their_partition(spark, partitions):
    stand_ins = partition_stand_ins(partitions)
    assert len(set(stand_ins)) == partitions
    rows = spark.sql("SELECT pmod(hash(v), {n}) AS p FROM VALUES {vals} AS t(v)".format(
        n=partitions, vals=", ".join(f"(CAST({v} AS BIGINT))" for v in stand_ins))).collect()
    assert [r.p for r in rows] == list(range(partitions))


def _key(r):
    return (r.emit_time is not None, r.emit_time, not r.is_retraction, r.key, r.window_start)


def _changelog_key(r):
    """The visible part of §7's default order (a retraction's place within its key and
    instant depends on the row that replaces it: tests/spark/replay/test_changelog_order.py)."""
    return (r.emit_time is not None, r.emit_time, r.key)


@pytest.mark.parametrize("partitions", [4, 1])
def test_in_emit_order_orders_outliers_and_nulls(spark, partitions):
    rng = np.random.default_rng(3)
    rows = []
    for i in range(400):
        # a tenth of the emit times fall outside the range given, and some are NULL
        sec = int(rng.integers(-100, 1100))
        emit = None if i % 50 == 0 else T0 + timedelta(seconds=sec)
        rows.append((f"k{int(rng.integers(0, 9))}", T0 + timedelta(seconds=int(rng.integers(0, 60))),
                     emit, bool(rng.integers(0, 2))))
    df = spark.createDataFrame(rows, "key STRING, window_start TIMESTAMP, emit_time TIMESTAMP, "
                                     "is_retraction BOOLEAN").repartition(3)
    lo = int(T0.timestamp() * 1e6)
    ordered = in_emit_order(df, ORDER, lo, lo + 1000 * 1_000_000, partitions)
    got = ordered.collect()
    assert len(got) == 400 and sorted(got, key=_key) == got
    assert sum(r.emit_time is None for r in got) == 8 and got[0].emit_time is None
    # on one partition the rows are gathered without a shuffle: only the test's own
    # round-robin repartition(3) exchanges them, not a hash exchange on the slices
    plan = ordered._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001
    assert ("Exchange hashpartitioning" in plan) == (partitions > 1), plan


def _events() -> list[tuple]:
    rng = np.random.default_rng(11)
    rows = []
    for _ in range(600):
        key = f"k{int(rng.integers(0, 12))}"
        et = T0 + timedelta(seconds=int(rng.integers(0, 1800)))
        delay = int(rng.exponential(30)) + (200 if rng.random() < 0.05 else 0)
        rows.append((key, int(rng.integers(1, 10)), et, et + timedelta(seconds=delay)))
    return rows


REPLAY = ("WINDOW SESSIONS(GAP 40 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
          "PROCESSING TIME arrival_time ALLOWED LATENESS 5 MINUTES "
          "TRIGGER EVERY 30 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
          "EMIT ACCUMULATING AND RETRACTING")


@pytest.fixture(scope="module")
def ordered_events(spark):
    spark.createDataFrame(_events(), "key STRING, value BIGINT, event_time TIMESTAMP, "
                                     "arrival_time TIMESTAMP").createOrReplaceTempView("ord_events")


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString().lower()


def test_default_order_of_a_replay(spark, ordered_events):
    q = f"SELECT key, SUM(value) AS total FROM ord_events GROUP BY key {REPLAY}"
    df = dfsql.sql(q, spark)
    got = df.collect()
    assert len(got) > 200 and any(r.is_retraction for r in got)
    assert sorted(got, key=_changelog_key) == got
    # the same rows as an ORDER BY written out, which Spark sorts with a sampled range
    # exchange
    explicit = dfsql.sql(f"{q} ORDER BY emit_time, key", spark)
    assert "rangepartitioning" in _plan(explicit) and "rangepartitioning" not in _plan(df)
    assert sorted(explicit.collect()) == sorted(got)
    # rows spread over every partition: a wrong partition order would show
    sizes = df.rdd.glom().map(len).collect()
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert parts >= 2 and len(sizes) == parts and all(sizes), sizes


@pytest.mark.parametrize("tail", ["HAVING SUM(value) > 5", "ORDER BY key, emit_time",
                                  "LIMIT 7"])
def test_other_output_stages_keep_sql_order(spark, ordered_events, tail):
    """HAVING filters row by row (the default order still applies); an ORDER BY or LIMIT
    of the user's goes to Spark as written."""
    base = "SELECT key, SUM(value) AS total FROM ord_events GROUP BY key"
    if tail.startswith("HAVING"):
        q, key = f"{base} {tail} {REPLAY}", _changelog_key
    else:
        q, key = f"{base} {REPLAY} {tail}", (
            (lambda r: (r.key, r.emit_time)) if tail.startswith("ORDER") else _changelog_key)
    got = dfsql.sql(q, spark).collect()
    assert got and sorted(got, key=key) == got
    if tail.startswith("HAVING"):
        assert all(r.total > 5 for r in got)
    if tail.startswith("LIMIT"):
        assert len(got) == 7


def test_a_result_feeding_a_window_is_not_ordered(spark, ordered_events):
    """Order is lost in the downstream aggregation, so the upstream block skips it; the
    downstream still subtracts every retraction."""
    inner = f"SELECT key, SUM(value) AS total FROM ord_events GROUP BY key {REPLAY}"
    df = dfsql.sql(f"WITH s AS ({inner}) SELECT COUNT(*) AS n, SUM(total) AS grand FROM s "
                   "WINDOW GLOBAL", spark)
    plan = _plan(df)
    assert "hashpartitioning(element_at" not in plan
    # the live windows and their values: insertions minus retractions (§6)
    rows = dfsql.sql(inner, spark).collect()
    sign = [(-1 if r.is_retraction else 1) for r in rows]
    live = sum(sign)
    grand = sum(s * r.total for s, r in zip(sign, rows, strict=True))
    row = df.collect()[0]
    assert live > 20 and (row.n, row.grand) == (live, grand)
    # the same block at the top is ordered by the emit-time slices
    assert "hashpartitioning(element_at" in _plan(dfsql.sql(inner, spark))


def test_a_select_column_named_emit_time_keeps_sql_order(spark, ordered_events):
    """A SELECT item named emit_time replaces the pane column (§7), and the default order
    then sorts by it, as Spark's ORDER BY would."""
    df = dfsql.sql("SELECT key, COUNT(*) AS emit_time FROM ord_events GROUP BY key "
                   f"{REPLAY}", spark)
    got = df.collect()
    assert dict(df.dtypes)["emit_time"] == "bigint" and len(got) > 100
    assert [r.emit_time for r in got] == sorted(r.emit_time for r in got)
