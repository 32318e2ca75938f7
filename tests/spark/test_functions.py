"""Every Spark aggregate in a windowed query (docs/reference.md#query-shape; issue #10, item 11):
Spark's ``any``, built-ins that sqlglot does not type, and a user-defined aggregate
registered in the session (a pandas grouped-aggregate UDF), on the batch path and in a
replay. The planner asks Spark which unknown functions aggregate
(:mod:`dfsql.spark.functions`); expected values are derived by hand per test.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
import sqlglot
from pyspark.sql import SparkSession
from pyspark.sql.functions import pandas_udf
from sqlglot import exp

import dfsql
from dfsql.errors import AnalysisError, DfsqlError, NotSupportedError, WindowedQueryError
from dfsql.language import parse_statement
from dfsql.language.rewrite import SPARK_AGGREGATES, rewrite
from dfsql.spark.functions import resolve_aggregates

T0 = dt.datetime(2024, 1, 1)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def events(spark: SparkSession) -> str:
    """a: 1 at 0:10, 2 at 0:50, then 4 at 0:30 arriving late at 1:30; b: 5 at 1:20."""
    spark.sql("""CREATE OR REPLACE TEMP VIEW fn_events AS SELECT * FROM VALUES
        ('a', 1.0D, TIMESTAMP'2024-01-01 00:00:10', TIMESTAMP'2024-01-01 00:00:11'),
        ('a', 2.0D, TIMESTAMP'2024-01-01 00:00:50', TIMESTAMP'2024-01-01 00:00:52'),
        ('b', 5.0D, TIMESTAMP'2024-01-01 00:01:20', TIMESTAMP'2024-01-01 00:01:21'),
        ('a', 4.0D, TIMESTAMP'2024-01-01 00:00:30', TIMESTAMP'2024-01-01 00:01:30')
        AS t(k, v, ts, arr)""")

    @pandas_udf("double")
    def fn_mean(v: pd.Series) -> float:  # a grouped-aggregate pandas UDF: a UDAF
        return float(v.mean())

    @pandas_udf("double")
    def fn_double(v: pd.Series) -> pd.Series:  # a scalar pandas UDF
        return v * 2

    spark.udf.register("fn_mean", fn_mean)
    spark.udf.register("fn_double", fn_double)
    return "fn_events"


def rows(df, *cols: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in df.collect())


def test_udaf_batch(spark: SparkSession, events: str) -> None:
    """Batch: one pane per key and window. a's [0:00, 1:00) holds 1, 2 and 4: mean 7/3;
    b's [1:00, 2:00) holds 5."""
    df = dfsql.sql("SELECT k, fn_mean(v) AS m FROM fn_events GROUP BY k\n"
                   "WINDOW FIXED(1 MINUTE) ON ts", spark)
    got = rows(df, "k", "window_start", "m", "pane_timing", "is_last")
    assert [g[:2] for g in got] == [("a", at(0)), ("b", at(60))]
    assert got[0][2] == pytest.approx(7 / 3) and got[1][2] == pytest.approx(5.0)
    assert {g[3:] for g in got} == {("ON_TIME", True)}


def test_udaf_replay_is_refused_at_the_call(spark: SparkSession, events: str) -> None:
    """A replay computes each pane's aggregates with FILTER beside other aggregates
    (dfsql.spark.replay.panes); Spark's pandas UDAFs allow neither. Until the replay can
    aggregate such a function on its own, the query is refused where the call is written
    (line 1, col 11), with the way out in the hint — not Spark's error from inside the
    replay's SQL. (What the replay would give, by hand: at 1:21 a's ON_TIME pane
    mean(1, 2) = 1.5, at 1:30 a LATE pane mean(1, 2, 4) = 7/3, at the end b's 5.)"""
    with pytest.raises(NotSupportedError) as info:
        dfsql.sql("SELECT k, fn_mean(v) AS m FROM fn_events GROUP BY k\n"
                  "WINDOW FIXED(1 MINUTE) ON ts PROCESSING TIME arr ALLOWED LATENESS 1 HOUR",
                  spark)
    assert (info.value.line, info.value.column) == (1, 11)
    assert "fn_mean cannot be replayed yet" in info.value.message
    assert "drop PROCESSING TIME" in info.value.hint


def test_udaf_beside_a_builtin_aggregate_is_spark_s_error(spark: SparkSession,
                                                          events: str) -> None:
    """Spark cannot mix a pandas UDAF with other aggregates in one aggregation (plain
    Spark SQL refuses it too): a DfsqlError with a position, not a traceback."""
    with pytest.raises(DfsqlError) as info:
        dfsql.sql("SELECT k, fn_mean(v) AS m, COUNT(*) AS n FROM fn_events GROUP BY k\n"
                  "WINDOW FIXED(1 MINUTE) ON ts", spark).collect()
    assert info.value.line is not None and info.value.column is not None


def test_scalar_udf_over_an_aggregate(spark: SparkSession, events: str) -> None:
    """fn_double(SUM(v)) is a scalar of an aggregate: a = 2 * 7 = 14, b = 2 * 5 = 10."""
    df = dfsql.sql("SELECT k, fn_double(SUM(v)) AS d FROM fn_events GROUP BY k\n"
                   "WINDOW FIXED(1 MINUTE) ON ts", spark)
    assert rows(df, "k", "d") == [("a", 14.0), ("b", 10.0)]


def test_scalar_udf_of_a_non_grouped_column_is_an_error(spark: SparkSession,
                                                        events: str) -> None:
    """Spark says fn_double is not an aggregate: v is then neither grouped nor aggregated,
    reported at v (line 2, col 14) once the planner knows."""
    with pytest.raises(WindowedQueryError) as info:
        dfsql.sql("SELECT k,\n    fn_double(v) AS d\nFROM fn_events GROUP BY k\n"
                  "WINDOW FIXED(1 MINUTE) ON ts", spark)
    assert (info.value.line, info.value.column) == (2, 15)
    assert "v is neither grouped nor aggregated" in info.value.message


def test_unknown_function_is_named_at_its_call(spark: SparkSession, events: str) -> None:
    """A function the session does not know: Spark's unresolved-routine error, at the call
    (line 2, col 5) — not "v is neither grouped nor aggregated"."""
    with pytest.raises(AnalysisError) as info:
        dfsql.sql("SELECT k,\n    fn_nosuch(v) AS m\nFROM fn_events GROUP BY k\n"
                  "WINDOW FIXED(1 MINUTE) ON ts", spark)
    assert (info.value.line, info.value.column) == (2, 5)
    assert info.value.message == "unknown function fn_nosuch"
    assert "spark.udf.register" in info.value.hint


def test_any_is_spark_s_bool_or(spark: SparkSession, events: str) -> None:
    """any(v > 4): a's values 1, 2, 4 → false; b's 5 → true (Spark's any = bool_or)."""
    df = dfsql.sql("SELECT k, any(v > 4) AS big, some(v > 1) AS some_big FROM fn_events "
                   "GROUP BY k WINDOW FIXED(1 MINUTE) ON ts", spark)
    assert rows(df, "k", "big", "some_big") == [("a", False, True), ("b", True, True)]


def test_resolve_asks_spark_only_about_unknown_functions(spark: SparkSession,
                                                         events: str) -> None:
    def block(text: str):
        stmt = parse_statement(text)
        return stmt.blocks[0], stmt.source

    b, src = block("SELECT k, SUM(v) AS s FROM fn_events GROUP BY k WINDOW GLOBAL")
    assert resolve_aggregates(b, src, spark) is b  # nothing unknown: nothing asked
    # fn_mean: a UDAF (asked by analysis); fn_double of an aggregate: scalar (no question);
    # date_format: a built-in, not an aggregate (one catalog lookup)
    b, src = block("SELECT k, fn_mean(v) AS m, fn_double(fn_mean(v)) AS d, "
                   "date_format(window_start, 'HH') AS h FROM fn_events GROUP BY k "
                   "WINDOW FIXED(1 MINUTE) ON ts")
    assert resolve_aggregates(b, src, spark).aggregates == frozenset({"fn_mean"})
    st = rewrite(resolve_aggregates(b, src, spark), src)
    assert st.aggregates == (("FN_MEAN(__c0)", "__a0"),)


def test_every_builtin_aggregate_is_known(spark: SparkSession) -> None:
    """Every aggregate function of the session's built-in registry is an exp.AggFunc to
    sqlglot or in SPARK_AGGREGATES, so a built-in needs no question to Spark. The
    registry says it by class: an AggregateFunction (not a window-only function such as
    rank), or an expression builder of the aggregate package (max_by, mode, try_sum...)."""
    jvm = spark._jvm
    cls = jvm.java.lang.Class
    aggregate = cls.forName("org.apache.spark.sql.catalyst.expressions.aggregate."
                            "AggregateFunction")
    window_only = cls.forName("org.apache.spark.sql.catalyst.expressions.WindowFunction")
    missing = []
    for (name,) in spark.sql("SHOW SYSTEM FUNCTIONS").collect():
        if not name.isidentifier():
            continue
        class_name = spark.catalog.getFunction(name).className or ""
        try:
            c = cls.forName(class_name)
        except Exception:  # noqa: BLE001 - not a class (CASE, a builder of another kind)
            continue
        is_aggregate = (aggregate.isAssignableFrom(c) and not window_only.isAssignableFrom(c)) \
            or (".aggregate." in class_name and class_name.endswith("Builder"))
        if not is_aggregate:
            continue
        typed = False
        for args in ("x", "x, y"):
            try:
                node = sqlglot.parse_one(f"SELECT {name}({args}) FROM t", read="spark")
            except sqlglot.errors.ParseError:
                continue
            typed = isinstance(node.expressions[0], exp.AggFunc | exp.Any)
            break
        if not typed and name not in SPARK_AGGREGATES:
            missing.append(name)
    assert missing == []
