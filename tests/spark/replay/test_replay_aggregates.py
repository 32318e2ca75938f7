"""The replay's aggregates computed by the model's kernels in its driver equal Spark's.

The same query runs twice, with the kernels (``dfsql.replay.aggregateKernels`` unset) and
with Spark aggregating the exploded pane membership (the general path, conf "false"); the
rows — and the result's types — must be identical, over random keys (NULL among them),
event and arrival times, NULL values, several aggregates with FILTER and DISTINCT, in
every accumulation mode, for sessions and fixed and sliding windows.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dfsql
from dfsql.spark.replay.kernels import KERNELS_CONF

#: the kernels and Spark's aggregates over keys spread across partitions (tests/conftest.py)
pytestmark = pytest.mark.shuffle_partitions(2)

T0 = datetime(2024, 1, 1, 12, 0, 0)
SCHEMA = ("key STRING, v BIGINT, i INT, d DOUBLE, f FLOAT, b BOOLEAN, "
          "event_time TIMESTAMP, arrival_time TIMESTAMP")

AGGREGATES = (
    "COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, MIN(v) AS lo, MAX(v) AS hi, AVG(v) AS av, "
    "SUM(d) AS sd, MIN(d) AS lod, MAX(d) AS hid, AVG(d) AS ad, SUM(i) AS si, AVG(i) AS ai, "
    "MIN(f) AS lof, MAX(f) AS hif, SUM(f) AS sf, MIN(b) AS lob, MAX(b) AS hib, "
    "SUM(v) FILTER (WHERE i > 0) AS sv_pos, COUNT(*) FILTER (WHERE d IS NULL) AS n_nod, "
    "MAX(DISTINCT i) AS hi_i, MIN(event_time) AS first_t, MAX(v * 2 + i) AS expr, "
    "COUNT(key) AS nk"
)

WINDOWS = [
    "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time",
    "WINDOW FIXED(1 MINUTE) ON event_time",
    "WINDOW SLIDING(1 MINUTE, EVERY 30 SECONDS) ON event_time",
]
TRIGGERS = [
    "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
    "",
    "TRIGGER REPEAT ANY(AFTER 2 ROWS, AT WATERMARK)",
]
MODES = ["EMIT DISCARDING", "EMIT ACCUMULATING", "EMIT ACCUMULATING AND RETRACTING"]

# exact in binary, so any order of addition gives the same double
DOUBLES = st.one_of(st.none(), st.integers(-40, 40).map(lambda x: x / 4),
                    st.sampled_from([float("nan"), float("inf")]))


@st.composite
def rows(draw):
    n = draw(st.integers(1, 40))
    out = []
    for _ in range(n):
        et = draw(st.integers(0, 240))
        delay = draw(st.integers(0, 100))
        out.append((
            draw(st.sampled_from(["a", "b", "c", None])),
            draw(st.one_of(st.none(), st.integers(-50, 50))),
            draw(st.one_of(st.none(), st.integers(-5, 5))),
            draw(DOUBLES),
            draw(st.one_of(st.none(), st.integers(-8, 8).map(lambda x: x / 2))),
            draw(st.one_of(st.none(), st.booleans())),
            T0 + timedelta(seconds=et),
            T0 + timedelta(seconds=et + delay),
        ))
    return out


@contextmanager
def spark_path(spark):
    """Spark aggregates, not the kernels (the general path)."""
    spark.conf.set(KERNELS_CONF, "false")
    try:
        yield
    finally:
        spark.conf.unset(KERNELS_CONF)


def _query(clauses: str) -> str:
    return (f"SELECT key, {AGGREGATES} FROM agg_events GROUP BY key {clauses}")


def _rows(df) -> list[str]:
    """The rows as text (NaN equals NaN), sorted: the comparison ignores order, which
    the output stage decides alike on both paths."""
    return sorted(repr(tuple(r)) for r in df.collect())


def _both(spark, clauses: str):
    q = _query(clauses)
    kernels = dfsql.sql(q, spark)
    got = (kernels.schema, _rows(kernels))
    with spark_path(spark):
        general = dfsql.sql(q, spark)
        want = (general.schema, _rows(general))
    return got, want, kernels, general


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=rows(), window=st.sampled_from(WINDOWS), trigger=st.sampled_from(TRIGGERS),
       mode=st.sampled_from(MODES), lateness=st.sampled_from([0, 60]))
def test_kernels_equal_spark_aggregates(spark, data, window, trigger, mode, lateness):
    spark.createDataFrame(data, SCHEMA).createOrReplaceTempView("agg_events")
    clauses = (f"{window} WATERMARK DELAY 10 SECONDS PROCESSING TIME arrival_time "
               f"ALLOWED LATENESS {lateness} SECONDS {trigger} {mode}")
    got, want, _, _ = _both(spark, clauses)
    assert got[0] == want[0]
    assert got[1] == want[1]


def _aggregates_in_plan(df) -> bool:
    plan = df._jdf.queryExecution().optimizedPlan().toString()  # noqa: SLF001
    return "Aggregate" in plan


def test_kernels_replace_the_spark_aggregation(spark):
    """With kernels Spark aggregates nothing after the driver; the types are Spark's."""
    data = [("a", 1, 2, 0.5, 1.5, True, T0, T0), ("a", None, None, None, None, None,
                                                 T0 + timedelta(seconds=5),
                                                 T0 + timedelta(seconds=50))]
    spark.createDataFrame(data, SCHEMA).createOrReplaceTempView("agg_events")
    got, want, kernels, general = _both(
        spark, "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time PROCESSING TIME arrival_time "
               "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
               "EMIT ACCUMULATING AND RETRACTING")
    assert got == want
    assert not _aggregates_in_plan(kernels)
    assert _aggregates_in_plan(general)
    types = {f.name: f.dataType.simpleString() for f in kernels.schema.fields}
    assert (types["sv"], types["sd"], types["si"], types["av"], types["ai"], types["lo"],
            types["lof"], types["lob"], types["first_t"], types["n"]) == (
        "bigint", "double", "bigint", "double", "double", "bigint", "float", "boolean",
        "timestamp", "bigint")


@pytest.mark.parametrize("agg", ["COUNT(DISTINCT v)", "SUM(DISTINCT v)",
                                 "CAST(SUM(CAST(v AS DECIMAL(10, 2))) AS DOUBLE)",
                                 "MAX(key)", "collect_list(v)", "first(v)"])
def test_other_aggregates_keep_the_spark_path(spark, agg):
    data = [("a", 1, 2, 0.5, 1.5, True, T0, T0), ("a", 3, None, None, None, None,
                                                 T0 + timedelta(seconds=5),
                                                 T0 + timedelta(seconds=50))]
    spark.createDataFrame(data, SCHEMA).createOrReplaceTempView("agg_events")
    df = dfsql.sql(f"SELECT key, {agg} AS x, SUM(v) AS s FROM agg_events GROUP BY key "
                   "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time "
                   "PROCESSING TIME arrival_time EMIT ACCUMULATING", spark)
    assert _aggregates_in_plan(df)
