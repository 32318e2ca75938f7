"""What runs a block is chosen once, as a value (issue #33): ``dfsql.spark.physical.choose``.

EXPLAIN prints the choice as one ``-- runs as:`` line, and the query itself runs on the
executor that line names (its planned block carries the same value). The expected lines
are written out from the rules in the physical module's docstring: no PROCESSING TIME over
a bounded table is Spark's batch aggregation; a replay's aggregates go to the model's
kernels when every one is decomposable over a type the kernels compute exactly (INT here),
else to Spark in two levels when every one has a one-column merge (SUM of a DECIMAL), else
to Spark per element (COLLECT_LIST, COUNT(DISTINCT)); a stream on the engine's clock with
the default trigger is Spark's own append-mode aggregation, any other stream the bucket
processor on RocksDB.

The rule every executor starts from, decomposability (one home:
``dfsql.model.aggregates.decomposable``), is held here too: each path that asks it (the
typed aggregate call, the kernels, the two levels, the stream) answers as the rule does.
"""

from __future__ import annotations

import pytest

import dfsql
from dfsql.errors import NotSupportedError
from dfsql.model.aggregates import decomposable
from dfsql.spark.plan.planner import planned_of

PT = "WINDOW FIXED(2 MINUTES) ON et PROCESSING TIME pt"
KERNELS_OFF = "dfsql.replay.aggregateKernels"


@pytest.fixture(scope="module")
def inputs(spark, tmp_path_factory):
    spark.sql(
        "CREATE OR REPLACE TEMP VIEW phys_ev AS SELECT * FROM VALUES "
        "('a', 1, CAST(1.50 AS DECIMAL(10, 2)), TIMESTAMP'2024-01-01 12:00:00', "
        "TIMESTAMP'2024-01-01 12:01:00'), "
        "('a', 2, CAST(2.25 AS DECIMAL(10, 2)), TIMESTAMP'2024-01-01 12:01:00', "
        "TIMESTAMP'2024-01-01 12:02:00'), "
        "('b', 5, CAST(0.50 AS DECIMAL(10, 2)), TIMESTAMP'2024-01-01 12:03:00', "
        "TIMESTAMP'2024-01-01 12:04:00') AS t(k, v, d, et, pt)")
    empty = tmp_path_factory.mktemp("phys_stream")
    spark.readStream.schema("k STRING, v INT, et TIMESTAMP, pt TIMESTAMP") \
        .parquet(str(empty)).createOrReplaceTempView("phys_stream")
    yield
    spark.catalog.dropTempView("phys_ev")
    spark.catalog.dropTempView("phys_stream")


def _runs_as(spark, query: str) -> str:
    text = dfsql.sql(f"EXPLAIN {query}", spark).collect()[0][0]
    (line,) = [ln for ln in text.splitlines() if ln.startswith("-- runs as:")]
    return line


BOUNDED = [
    ("SELECT k, SUM(v) AS s FROM phys_ev GROUP BY k WINDOW FIXED(2 MINUTES) ON et",
     "native batch (Spark's GROUP BY window: one ON_TIME pane per window)", None),
    (f"SELECT k, SUM(v) AS s, AVG(v) AS a FROM phys_ev GROUP BY k {PT}",
     "replay in the model's driver; aggregates (SUM, AVG) by the model's kernels", None),
    (f"SELECT k, MIN(DISTINCT v) AS lo FROM phys_ev GROUP BY k {PT}",
     "replay in the model's driver; aggregates (MIN) by the model's kernels", None),
    (f"SELECT k, SUM(d) AS s FROM phys_ev GROUP BY k {PT}",
     "replay in the model's driver; aggregates (SUM) by Spark, two levels", None),
    (f"SELECT k, SUM(v) AS s FROM phys_ev GROUP BY k {PT}",
     "replay in the model's driver; aggregates (SUM) by Spark, two levels", "false"),
    (f"SELECT k, COLLECT_LIST(v) AS l FROM phys_ev GROUP BY k {PT}",
     "replay in the model's driver; aggregates (COLLECT_LIST) by Spark, per element", None),
    (f"SELECT k, COUNT(DISTINCT v) AS n FROM phys_ev GROUP BY k {PT}",
     "replay in the model's driver; aggregates (COUNT) by Spark, per element", None),
]


@pytest.mark.parametrize("query,runs_as,kernels_conf", BOUNDED)
def test_explain_says_what_runs_and_the_query_runs_on_it(spark, inputs, query, runs_as,
                                                         kernels_conf) -> None:
    if kernels_conf is not None:
        spark.conf.set(KERNELS_OFF, kernels_conf)
    try:
        assert _runs_as(spark, query) == f"-- runs as: {runs_as}"
        df = dfsql.sql(query, spark)
        (block,) = planned_of(df).blocks
        assert block.physical.line() == f"-- runs as: {runs_as}"
        df.collect()  # and it runs
    finally:
        spark.conf.unset(KERNELS_OFF)


def test_the_chosen_aggregates_give_the_same_rows(spark, inputs) -> None:
    """SUM(v) per key and window, by hand: a [12:00, 12:02) = 1 + 2, b [12:02, 12:04) = 5;
    the kernels and the two levels agree on it."""
    query = f"SELECT k, SUM(v) AS s FROM phys_ev GROUP BY k {PT}"
    want = [("a", 3), ("b", 5)]
    got_kernels = [(r.k, r.s) for r in dfsql.sql(query, spark).collect()]
    spark.conf.set(KERNELS_OFF, "false")
    try:
        got_two_level = [(r.k, r.s) for r in dfsql.sql(query, spark).collect()]
    finally:
        spark.conf.unset(KERNELS_OFF)
    assert got_kernels == want and got_two_level == want


STREAMS = [
    ("SELECT k, SUM(v) AS s FROM phys_stream GROUP BY k WINDOW FIXED(2 MINUTES) ON et",
     "native stream (Spark's append-mode aggregation, the session's state store)", None),
    ("SELECT k, SUM(v) AS s FROM phys_stream GROUP BY k WINDOW FIXED(2 MINUTES) ON et",
     "stream in the bucket processor; aggregates (SUM) by the model's kernels; state store "
     "RocksDBStateStoreProvider", "false"),
    ("SELECT k, COUNT(*) AS n FROM phys_stream GROUP BY k WINDOW FIXED(2 MINUTES) ON et "
     "TRIGGER AFTER 1 ROW",
     "stream in the bucket processor; aggregates (COUNT) by the model's kernels; state store "
     "RocksDBStateStoreProvider", None),
    (f"SELECT k, MAX(DISTINCT v) AS hi FROM phys_stream GROUP BY k {PT}",
     "stream in the bucket processor; aggregates (MAX) by the model's kernels; state store "
     "RocksDBStateStoreProvider", None),
]


@pytest.mark.parametrize("query,runs_as,native_conf", STREAMS)
def test_a_stream_says_its_executor_and_state_store(spark, inputs, query, runs_as,
                                                   native_conf) -> None:
    if native_conf is not None:
        spark.conf.set("dfsql.stream.native", native_conf)
    try:
        assert _runs_as(spark, query) == f"-- runs as: {runs_as}"
        df = dfsql.sql(query, spark)  # a streaming DataFrame: planned, not started
        assert df.isStreaming
        (block,) = planned_of(df).blocks
        assert block.physical.line() == f"-- runs as: {runs_as}"
        assert block.stream.state_store == block.physical.state_store
    finally:
        spark.conf.unset("dfsql.stream.native")


def _runs_as_lines(spark, query: str) -> list[str]:
    text = dfsql.sql(f"EXPLAIN {query}", spark).collect()[0][0]
    return [ln for ln in text.splitlines() if ln.startswith("-- runs as:")]


def test_a_block_reading_another_says_both(spark, inputs) -> None:
    inner = f"SELECT k, SUM(v) AS s FROM phys_ev GROUP BY k {PT}"
    outer = ("SELECT k, COLLECT_LIST(s) AS l FROM ({}) GROUP BY k "
             "WINDOW FIXED(10 MINUTES) ON window_end PROCESSING TIME emit_time")
    assert _runs_as_lines(spark, outer.format(inner)) == [
        "-- runs as: replay in the model's driver; aggregates (SUM) by the model's kernels",
        "-- runs as: replay in the model's driver; aggregates (COLLECT_LIST) by Spark, "
        "per element"]
    # over a retracting input COLLECT_LIST cannot subtract: the outer block says why
    lines = _runs_as_lines(spark, outer.format(inner + " EMIT ACCUMULATING AND RETRACTING"))
    assert lines[0].endswith("by the model's kernels")
    assert lines[1].startswith("-- runs as: not known: line 1, col ")
    assert "cannot subtract the retractions" in lines[1]
    assert not [v for v in spark.sql("SHOW TABLES").collect() if v.tableName.startswith("__dfsql")]


def test_a_block_reading_a_changelog_says_both_and_runs_on_them(spark, inputs) -> None:
    """The inner block's stand-in in EXPLAIN is ordered as §7 orders a changelog, by the
    replay's own pane rank: EXPLAIN read a stand-in without that rank and said "not
    known" for every block over an ACCUMULATING AND RETRACTING one."""
    # sessions: their changelog's order needs the rank (FIXED windows' does not)
    inner = ("SELECT k, SUM(v) AS s FROM phys_ev GROUP BY k WINDOW SESSIONS(GAP 2 MINUTES) "
             "ON et PROCESSING TIME pt EMIT ACCUMULATING AND RETRACTING")
    outer = (f"SELECT k, MIN(s) AS lo, MAX(s) AS hi FROM ({inner}) GROUP BY k "
             "WINDOW FIXED(10 MINUTES) ON window_end PROCESSING TIME emit_time")
    want = ["-- runs as: replay in the model's driver; aggregates (SUM) by the model's kernels",
            # MIN and MAX over retractions: over what is left of each value's count
            "-- runs as: replay in the model's driver; aggregates (COLLECT_LIST) by Spark, "
            "per element"]
    assert _runs_as_lines(spark, outer) == want
    df = dfsql.sql(outer, spark)
    assert [b.physical.line() for b in planned_of(df).blocks] == want
    df.collect()  # and it runs
    assert not [v for v in spark.sql("SHOW TABLES").collect() if v.tableName.startswith("__dfsql")]


def test_explain_without_a_session_says_so() -> None:
    from dfsql.api import explain_statement
    from dfsql.language import parse_statement

    text = explain_statement(parse_statement(
        "SELECT k, SUM(v) AS s FROM t GROUP BY k WINDOW FIXED(2 MINUTES) ON et"), None)
    assert "-- runs as: chosen on Spark from the input (no Spark session here)" in text


def test_a_block_spark_cannot_plan_says_why(spark, inputs) -> None:
    line = _runs_as(spark, f"SELECT k, SUM(nope) AS s FROM phys_ev GROUP BY k {PT}")
    assert line.startswith("-- runs as: not known: line 1, col ") and "`nope`" in line


# ------------------------------------------------------------ the decomposability rule

RULE = [  # (function, distinct, nested) -> decomposable, from docs/reference.md#emit's deltas
    (("count", False, False), True), (("sum", False, False), True),
    (("min", False, False), True), (("max", False, False), True),
    (("avg", False, False), True),
    (("min", True, False), True), (("max", True, False), True),  # DISTINCT changes nothing
    (("count", True, False), False), (("sum", True, False), False),
    (("avg", True, False), False),
    (("sum", False, True), False),  # an aggregate inside
    (("collect_list", False, False), False), (("percentile_approx", False, False), False),
]


@pytest.mark.parametrize("call,want", RULE)
def test_the_decomposability_rule(call, want) -> None:
    assert decomposable(*call) is want


@pytest.mark.parametrize("agg,want", [("MIN(DISTINCT v)", True), ("COUNT(DISTINCT v)", False),
                                      ("SUM(v)", True), ("COLLECT_LIST(v)", False)])
def test_every_path_asks_the_rule(spark, inputs, agg, want) -> None:
    """The typed call, the replay's choice and the stream each answer as the rule does."""
    from dfsql.language.rewrite import rewrite
    from dfsql.language.statement import parse_statement

    query = f"SELECT k, {agg} AS x FROM phys_ev GROUP BY k {PT}"
    stmt = parse_statement(query)
    (call,) = rewrite(stmt.top, stmt.source).aggregate_calls
    assert call.decomposable is want
    line = _runs_as(spark, query)
    assert line.endswith("by the model's kernels") is want
    stream = f"SELECT k, {agg} AS x FROM phys_stream GROUP BY k {PT}"
    if want:
        assert dfsql.sql(stream, spark).isStreaming
    else:
        with pytest.raises(NotSupportedError, match="on a stream"):
            dfsql.sql(stream, spark)
