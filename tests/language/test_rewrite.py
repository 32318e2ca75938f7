"""The three Spark SQL stages of a windowed block (pure: sqlglot only, no Spark)."""

from __future__ import annotations

import dfsql
from dfsql.language import parse_statement
from dfsql.language.rewrite import Stages, rewrite

PANES = "window_end, pane_index, pane_timing, is_last, emit_time, is_retraction"


def stages(text: str) -> Stages:
    stmt = parse_statement(text)
    return rewrite(stmt.blocks[-1], stmt.source)


def test_figure_query() -> None:
    st = stages("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\n"
                "WINDOW FIXED(2 MINUTES) ON event_time")
    assert st.input_sql == ("SELECT key AS __k0, event_time AS __event_time, value AS __c0 "
                            "FROM scores")
    assert st.key_columns == ("__k0",)
    assert st.aggregates == (("SUM(__c0)", "__a0"),)
    # a batch result (no PROCESSING TIME) comes in no particular order (docs/reference.md#output-columns)
    assert st.output_sql == (
        f"SELECT __k0 AS `key`, __a0 AS `total`, window_start, {PANES}\n"
        "FROM __dfsql_panes")
    assert st.output_names == ("key", "total", "window_start", "window_end", "pane_index",
                               "pane_timing", "is_last", "emit_time", "is_retraction")
    assert not st.has_processing_time and st.default_order


def test_default_order_of_a_changelog() -> None:
    """§7: emit_time, keys, then a retraction just before the row that replaces it (the
    hidden sort columns), several in their own window_start order."""
    q = ("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\n"
         "WINDOW SESSIONS(GAP 1 MINUTE) ON event_time PROCESSING TIME arrival_time\n")
    st = stages(q + "EMIT ACCUMULATING AND RETRACTING")
    assert st.default_order_by == ("emit_time", "`key`", "__sort_rank")
    assert st.output_sql.endswith("ORDER BY " + ", ".join(st.default_order_by))
    assert st.output_sql_unordered.startswith(
        f"SELECT __k0 AS `key`, __a0 AS `total`, window_start, {PANES}, "
        "__sort_rank\nFROM __dfsql_panes")
    # without merging a retraction's replacement is its window's next pane
    st = stages(q.replace("SESSIONS(GAP", "FIXED(") + "EMIT ACCUMULATING AND RETRACTING")
    assert st.default_order_by == ("emit_time", "`key`", "window_start",
                                   "pane_index + CAST(is_retraction AS INT)",
                                   "is_retraction DESC")
    st = stages(q + "EMIT ACCUMULATING")
    assert st.default_order_by == ("emit_time", "`key`", "window_start", "pane_index",
                                   "is_retraction DESC")


def test_distinct_filter_having_order_limit_expressions() -> None:
    st = stages(
        "SELECT k, COUNT(DISTINCT u) AS users, SUM(v) FILTER (WHERE v > 0) AS pos,\n"
        "       MAX(v) - MIN(v) AS spread, window_start\n"
        "FROM t WHERE v IS NOT NULL\nGROUP BY k\nHAVING COUNT(*) > 1\n"
        "WINDOW SLIDING(1 HOUR, EVERY 10 MINUTES) ON ts\nPROCESSING TIME arr\n"
        "ORDER BY spread DESC\nLIMIT 10")
    assert st.input_sql == ("SELECT k AS __k0, ts AS __event_time, arr AS __processing_time, "
                            "u AS __c0, v AS __c1 FROM t WHERE NOT v IS NULL")
    assert st.aggregates == (
        ("COUNT(DISTINCT __c0)", "__a0"),
        ("SUM(__c1) FILTER(WHERE __c1 > 0)", "__a1"),
        ("MAX(__c1)", "__a2"),
        ("MIN(__c1)", "__a3"),
        ("COUNT(*)", "__a4"),
    )
    assert st.output_sql == (
        "SELECT __k0 AS `k`, __a0 AS `users`, __a1 AS `pos`, __a2 - __a3 AS `spread`, "
        f"window_start AS `window_start`, {PANES}\n"
        "FROM __dfsql_panes\nWHERE __a4 > 1\nORDER BY spread DESC\nLIMIT 10")
    assert st.output_names[:5] == ("k", "users", "pos", "spread", "window_start")
    assert st.output_names.count("window_start") == 1
    assert st.has_processing_time and not st.default_order


def test_expression_key_and_unnamed_aggregate() -> None:
    st = stages("SELECT upper(k) AS uk, COUNT(*) FROM t GROUP BY upper(k) WINDOW GLOBAL "
                "PROCESSING TIME arr")
    assert st.input_sql == "SELECT UPPER(k) AS __k0, arr AS __processing_time FROM t"
    assert st.aggregates == (("COUNT(*)", "__a0"),)
    assert st.output_sql.startswith("SELECT __k0 AS `uk`, __a0 AS `COUNT(*)`, window_start,")
    assert st.output_sql.endswith(
        "ORDER BY emit_time, `uk`, window_start, pane_index, is_retraction DESC")


def test_group_by_ordinal_and_alias() -> None:
    by_ordinal = stages("SELECT k AS key, AVG(v) AS a FROM t GROUP BY 1 WINDOW GLOBAL")
    by_alias = stages("SELECT k AS key, AVG(v) AS a FROM t GROUP BY key WINDOW GLOBAL")
    for st in (by_ordinal, by_alias):
        assert st.input_sql == "SELECT k AS __k0, v AS __c0 FROM t"
        assert st.aggregates == (("AVG(__c0)", "__a0"),)


def test_global_aggregate_without_keys() -> None:
    st = stages("SELECT COUNT(*) AS n FROM t WINDOW FIXED(1 MINUTE) ON ts")
    assert st.key_columns == ()
    assert st.input_sql == "SELECT ts AS __event_time FROM t"
    assert "ORDER BY" not in st.output_sql  # a batch result: no order
    st = stages("SELECT COUNT(*) AS n FROM t WINDOW FIXED(1 MINUTE) ON ts PROCESSING TIME a")
    assert st.output_sql.endswith(
        "ORDER BY emit_time, window_start, pane_index, is_retraction DESC")


def test_outer_block_reads_placeholder() -> None:
    st = stages("WITH a AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(1 MINUTE) "
                "ON ts EMIT ACCUMULATING AND RETRACTING)\n"
                "SELECT k, SUM(n) AS total FROM a GROUP BY k WINDOW GLOBAL ON window_end")
    assert st.input_sql == ("WITH a AS (SELECT * FROM __dfsql_w0) SELECT k AS __k0, "
                            "window_end AS __event_time, n AS __c0 FROM a")


def test_explain_shows_trigger_tree_and_stages() -> None:
    text = ("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\n"
            "WINDOW FIXED(2 MINUTES) ON event_time\n"
            "TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK")
    out = dfsql.explain(text)
    assert "== windowed block 0 (the statement) ==" in out
    assert ("TRIGGER AfterEach(OrFinally(Repeat(AtPeriod(1m)), EndOfWindow), "
            "Repeat(EndOfWindow))") in out
    assert "WINDOW FIXED(2m) ON event_time" in out
    for part in ("-- input stage", "-- aggregates", "-- output stage",
                 "SELECT key AS __k0, event_time AS __event_time, value AS __c0 FROM scores",
                 "SUM(__c0) AS __a0", "FROM __dfsql_panes"):
        assert part in out
    assert out.index("-- input stage") < out.index("-- aggregates") < out.index("-- output")


def test_explain_nested_blocks() -> None:
    out = dfsql.explain("WITH a AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k "
                        "WINDOW FIXED(1 MINUTE) ON ts)\n"
                        "SELECT k, SUM(n) FROM a GROUP BY k WINDOW GLOBAL ON window_end")
    assert "== windowed block 0 (registered as __dfsql_w0) ==" in out
    assert "== windowed block 1 (the statement) ==" in out


def test_explain_plain_sql() -> None:
    assert dfsql.explain("SELECT k, COUNT(*) FROM t GROUP BY k") == \
        "plain Spark SQL: passed to Spark unchanged"
    assert "windowed" not in dfsql.explain("SELECT 1 WINDOW_x FROM t")


def test_rewrite_is_cached_and_stable() -> None:
    stmt = parse_statement("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW GLOBAL")
    assert rewrite(stmt.blocks[0], stmt.source) is rewrite(stmt.blocks[0], stmt.source)


def test_filtered_aggregate_beside_the_same_plain_aggregate() -> None:
    """SUM(x) FILTER (...) is its own aggregate even when SUM(x) is also selected."""
    st = stages("SELECT k, SUM(x) AS total, SUM(x) FILTER (WHERE x > 3) AS big FROM t "
                "GROUP BY k HAVING SUM(x) > 1 WINDOW SESSIONS(GAP 1 MINUTE) ON et")
    assert st.aggregates == (("SUM(__c0)", "__a0"),
                             ("SUM(__c0) FILTER(WHERE __c0 > 3)", "__a1"))
    assert st.output_sql.startswith(
        f"SELECT __k0 AS `k`, __a0 AS `total`, __a1 AS `big`, window_start, {PANES}\n"
        "FROM __dfsql_panes\nWHERE __a0 > 1")


def test_keys_and_aggregates_are_typed() -> None:
    """Streams and sinks read each aggregate's function, arguments, DISTINCT and FILTER
    from the stages, without parsing the stage SQL again (issue #22, item 2)."""
    from dfsql.language.stages import AggregateCall, GroupKey

    st = stages("SELECT k AS key, COUNT(*) AS n, SUM(v) FILTER (WHERE v > 1) AS s, "
                "COUNT(DISTINCT v) AS d, approx_percentile(v + 1, 0.5) AS p, AVG(w) AS a "
                "FROM t GROUP BY k, w + 1 WINDOW FIXED(1 MINUTE) ON ts")
    assert st.group_keys == (GroupKey("__k0", "k", "key"), GroupKey("__k1", "w + 1", None))
    # a key that is one column of the FROM says which, from the tree (not its text)
    assert [k.input_name for k in st.group_keys] == ["k", None]
    assert [(a.argument_columns, a.filter_column) for a in st.aggregate_calls] == [
        ((None,), None), (("__c0",), None), (("__c0",), None), ((None, None), None),
        (("__c1",), None)]
    assert st.aggregate_calls == (
        AggregateCall("COUNT(*)", "__a0", "count", ("*",), False, None, False),
        AggregateCall("SUM(__c0) FILTER(WHERE __c0 > 1)", "__a1", "sum", ("__c0",), False,
                      "__c0 > 1", False),
        AggregateCall("COUNT(DISTINCT __c0)", "__a2", "count", ("__c0",), True, None, False),
        AggregateCall("PERCENTILE_APPROX(__c0 + 1, 0.5)", "__a3", "percentile_approx",
                      ("__c0 + 1", "0.5"), False, None, False),
        AggregateCall("AVG(__c1)", "__a4", "avg", ("__c1",), False, None, False),
    )
    assert [(a.sql, a.alias) for a in st.aggregate_calls] == list(st.aggregates)
    assert [k.column for k in st.group_keys] == list(st.key_columns)
    # the output column that selects each aggregate (EXPLAIN FIRINGS names values by it)
    assert [a.output_name for a in st.aggregate_calls] == ["n", "s", "d", "p", "a"]
    count, total, distinct, pct, avg = st.aggregate_calls
    assert count.star and count.column is None and count.decomposable
    assert total.column == "__c0" and total.decomposable  # FILTER applies to the elements
    assert not distinct.decomposable and not pct.decomposable and pct.column is None
    assert avg.column == "__c1" and avg.decomposable


def test_an_aggregate_inside_another_is_marked_nested() -> None:
    st = stages("SELECT k, SUM(v + COUNT(*)) AS s FROM t GROUP BY k "
                "WINDOW FIXED(1 MINUTE) ON ts")
    (call,) = st.aggregate_calls
    assert call.function == "sum" and call.nested and not call.decomposable
