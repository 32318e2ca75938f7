r"""Plain Spark SQL through ``dfsql.sql`` behaves exactly as ``spark.sql``.

docs/reference.md#query-shape: a query without the WINDOW extension clause is plain Spark SQL and must
behave exactly as ``spark.sql`` would. The corpus leans on what could fool dfsql's front
end: Spark's own named ``WINDOW w AS (...)`` clause, ``window()`` / ``session_window()``
grouping, and string literals, comments and backquoted names spelling TRIGGER, EMIT,
WINDOW, WATERMARK, SESSIONS or PROCESSING TIME.

Each case is ``(id, query, ordered)``: results must have the same schema (names, types,
nullability) and the same multiset of rows, and the same order when ``ordered`` (the query
has a total ORDER BY). Every query was checked to run on plain ``spark.sql`` (Spark 4.3).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession

import dfsql

Case = tuple[str, str, bool]

CASES: list[Case] = [
    # ---- joins --------------------------------------------------------------------------
    ("join_inner", """
        SELECT e.name, d.dept_name FROM employees e
        JOIN departments d ON e.dept_id = d.dept_id""", False),
    ("join_left", """
        SELECT e.name, d.dept_name, d.location FROM employees e
        LEFT OUTER JOIN departments d ON e.dept_id = d.dept_id""", False),
    ("join_right", """
        SELECT e.name, d.dept_name FROM employees e
        RIGHT JOIN departments d ON e.dept_id = d.dept_id""", False),
    ("join_full", """
        SELECT o.order_id, e.name FROM orders o
        FULL OUTER JOIN employees e ON o.emp_id = e.emp_id""", False),
    ("join_left_semi", """
        SELECT * FROM employees e LEFT SEMI JOIN orders o ON e.emp_id = o.emp_id""", False),
    ("join_left_anti", """
        SELECT name FROM employees e LEFT ANTI JOIN orders o ON e.emp_id = o.emp_id""", False),
    ("join_cross", """
        SELECT d.dept_name, s.status FROM departments d
        CROSS JOIN (SELECT DISTINCT status FROM orders) s""", False),
    ("join_self_manager", """
        SELECT e.name AS employee, m.name AS manager FROM employees e
        LEFT JOIN employees m ON e.manager_id = m.emp_id""", False),
    ("join_using", """
        SELECT dept_id, name, dept_name FROM employees JOIN departments USING (dept_id)""",
     False),
    ("join_natural", """
        SELECT * FROM employees NATURAL JOIN departments""", False),
    ("join_non_equi", """
        SELECT e.name, o.order_id FROM employees e
        JOIN orders o ON o.amount > e.salary / 200 AND o.emp_id <> e.emp_id""", False),
    ("join_three_way_broadcast_hint", """
        SELECT /*+ BROADCAST(d) */ d.dept_name, COUNT(o.order_id) AS n_orders
        FROM departments d JOIN employees e ON e.dept_id = d.dept_id
        LEFT JOIN orders o ON o.emp_id = e.emp_id
        GROUP BY d.dept_name""", False),
    ("join_lateral_subquery", """
        SELECT e.name, x.total FROM employees e,
        LATERAL (SELECT SUM(o.amount) AS total FROM orders o WHERE o.emp_id = e.emp_id) x""",
     False),
    # ---- CTEs ---------------------------------------------------------------------------
    ("cte_simple", """
        WITH big AS (SELECT * FROM orders WHERE amount > 100)
        SELECT status, COUNT(*) AS n FROM big GROUP BY status""", False),
    ("cte_chained", """
        WITH per_emp AS (SELECT emp_id, SUM(amount) AS total FROM orders GROUP BY emp_id),
             ranked AS (SELECT emp_id, total, total > 300 AS big FROM per_emp)
        SELECT e.name, r.total, r.big FROM ranked r JOIN employees e USING (emp_id)""",
     False),
    ("cte_nested_in_subquery", """
        SELECT * FROM (
          WITH inner_cte AS (SELECT dept_id, AVG(salary) AS avg_sal FROM employees
                             GROUP BY dept_id)
          SELECT * FROM inner_cte WHERE avg_sal > 60000) t""", False),
    ("cte_nested_with", """
        WITH outer_cte AS (
          WITH inner_cte AS (SELECT key, value FROM scores)
          SELECT key, SUM(value) AS total FROM inner_cte GROUP BY key)
        SELECT * FROM outer_cte""", False),
    ("cte_used_twice", """
        WITH d AS (SELECT dept_id, COUNT(*) AS n FROM employees GROUP BY dept_id)
        SELECT a.dept_id, a.n, b.n AS n2 FROM d a JOIN d b ON a.dept_id = b.dept_id""",
     False),
    # ---- subqueries ---------------------------------------------------------------------
    ("subq_in", """
        SELECT name FROM employees WHERE dept_id IN (SELECT dept_id FROM departments
                                                     WHERE location = 'Berlin')""", False),
    ("subq_not_in", """
        SELECT dept_name FROM departments
        WHERE dept_id NOT IN (SELECT dept_id FROM employees WHERE dept_id IS NOT NULL)""",
     False),
    ("subq_exists_correlated", """
        SELECT name FROM employees e
        WHERE EXISTS (SELECT 1 FROM orders o WHERE o.emp_id = e.emp_id AND o.status = 'shipped')""",
     False),
    ("subq_not_exists_correlated", """
        SELECT dept_name FROM departments d
        WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.dept_id = d.dept_id)""", False),
    ("subq_scalar_correlated", """
        SELECT name, (SELECT COUNT(*) FROM orders o WHERE o.emp_id = e.emp_id) AS n_orders
        FROM employees e""", False),
    ("subq_scalar_uncorrelated", """
        SELECT name, salary FROM employees WHERE salary > (SELECT AVG(salary) FROM employees)""",
     False),
    ("subq_derived_table", """
        SELECT t.dept_id, t.mx FROM (SELECT dept_id, MAX(salary) AS mx FROM employees
                                     GROUP BY dept_id) AS t WHERE t.mx > 60000""", False),
    # ---- set operations -----------------------------------------------------------------
    ("set_union", """
        SELECT dept_id FROM employees UNION SELECT dept_id FROM departments""", False),
    ("set_union_all", """
        SELECT key AS k FROM scores UNION ALL SELECT status FROM orders""", False),
    ("set_intersect", """
        SELECT dept_id FROM employees INTERSECT SELECT dept_id FROM departments""", False),
    ("set_except", """
        SELECT dept_id FROM departments EXCEPT SELECT dept_id FROM employees""", False),
    ("set_intersect_all_except_all", """
        (SELECT value FROM scores INTERSECT ALL SELECT value FROM scores WHERE value > 3)
        EXCEPT ALL SELECT 8""", False),
    # ---- window functions, named WINDOW clause ------------------------------------------
    ("win_named_rank", """
        SELECT name, dept_id, salary, RANK() OVER w AS rnk FROM employees
        WINDOW w AS (PARTITION BY dept_id ORDER BY salary DESC)""", False),
    ("win_named_frame_ordered", """
        SELECT key, event_time, value, SUM(value) OVER w AS running FROM scores
        WINDOW w AS (PARTITION BY key ORDER BY event_time
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        ORDER BY event_time""", True),
    ("win_named_two_windows", """
        SELECT name, ROW_NUMBER() OVER w1 AS rn, AVG(salary) OVER w2 AS dept_avg
        FROM employees
        WINDOW w1 AS (ORDER BY emp_id), w2 AS (PARTITION BY dept_id)""", False),
    ("win_named_after_group_by", """
        SELECT dept_id, SUM(salary) AS total, DENSE_RANK() OVER w AS pos
        FROM employees GROUP BY dept_id
        WINDOW w AS (ORDER BY SUM(salary) DESC)""", False),
    ("win_named_after_having_order_limit", """
        SELECT status, COUNT(*) AS n, SUM(COUNT(*)) OVER w AS all_n
        FROM orders GROUP BY status HAVING COUNT(*) > 0
        WINDOW w AS ()
        ORDER BY status LIMIT 10""", True),
    ("win_named_lowercase_alias_window", """
        select key, value, lag(value) over window_ AS prev from scores
        window window_ as (partition by key order by arrival_time)""", False),
    ("win_inline_lag_lead", """
        SELECT event_time, value,
               LAG(value, 1, 0) OVER (ORDER BY event_time) AS prev,
               LEAD(value) OVER (ORDER BY event_time) AS nxt
        FROM scores""", False),
    ("win_ntile_percent_rank", """
        SELECT name, NTILE(3) OVER (ORDER BY salary) AS tile,
               PERCENT_RANK() OVER (ORDER BY salary) AS pr,
               CUME_DIST() OVER (ORDER BY salary) AS cd
        FROM employees""", False),
    ("win_range_frame_first_last", """
        SELECT event_time, value,
               FIRST_VALUE(value) OVER w AS first_v, LAST_VALUE(value) OVER w AS last_v
        FROM scores
        WINDOW w AS (ORDER BY event_time
                     RANGE BETWEEN INTERVAL 2 MINUTES PRECEDING AND CURRENT ROW)""", False),
    # ---- grouping -----------------------------------------------------------------------
    ("grp_grouping_sets", """
        SELECT dept_id, status, COUNT(*) AS n FROM orders o JOIN employees e USING (emp_id)
        GROUP BY GROUPING SETS ((dept_id, status), (dept_id), ())""", False),
    ("grp_rollup", """
        SELECT dept_id, manager_id, SUM(salary) AS s FROM employees
        GROUP BY ROLLUP (dept_id, manager_id)""", False),
    ("grp_cube_grouping_id", """
        SELECT dept_id, status, GROUPING_ID() AS gid, COUNT(*) AS n
        FROM orders JOIN employees USING (emp_id) GROUP BY CUBE (dept_id, status)""", False),
    ("grp_having", """
        SELECT dept_id, COUNT(*) AS n FROM employees GROUP BY dept_id HAVING COUNT(*) >= 2""",
     False),
    ("grp_group_by_all", """
        SELECT status, date(order_ts) AS d, SUM(amount) AS s FROM orders GROUP BY ALL""",
     False),
    ("grp_filter_clause", """
        SELECT COUNT(*) FILTER (WHERE status = 'shipped') AS shipped,
               SUM(amount) FILTER (WHERE status <> 'shipped') AS other FROM orders""", False),
    ("grp_collect_sorted", """
        SELECT dept_id, array_sort(collect_list(name)) AS names,
               percentile_approx(salary, 0.5) AS median FROM employees GROUP BY dept_id""",
     False),
    # ---- pivot / unpivot ----------------------------------------------------------------
    ("pivot", """
        SELECT * FROM (SELECT emp_id, status, amount FROM orders)
        PIVOT (SUM(amount) FOR status IN ('shipped' AS shipped, 'pending' AS pending,
                                         'cancelled' AS cancelled))""", False),
    ("unpivot", """
        SELECT * FROM (SELECT dept_id, budget, CAST(dept_id * 1000 AS DECIMAL(12,2)) AS other
                       FROM departments)
        UNPIVOT (amount FOR kind IN (budget, other))""", False),
    # ---- LATERAL VIEW -------------------------------------------------------------------
    ("lv_explode", """
        SELECT name, skill FROM employees LATERAL VIEW explode(skills) s AS skill""", False),
    ("lv_outer_explode", """
        SELECT name, skill FROM employees LATERAL VIEW OUTER explode(skills) s AS skill""",
     False),
    ("lv_posexplode", """
        SELECT order_id, pos, q FROM orders LATERAL VIEW posexplode(quantities) t AS pos, q""",
     False),
    ("lv_explode_map", """
        SELECT name, k, v FROM employees LATERAL VIEW explode(attrs) m AS k, v""", False),
    ("lv_json_tuple", """
        SELECT order_id, channel, rating FROM orders
        LATERAL VIEW json_tuple(payload, 'channel', 'rating') j AS channel, rating""", False),
    ("inline_structs", """
        SELECT * FROM VALUES (array(named_struct('a', 1, 'b', 'x'),
                                    named_struct('a', 2, 'b', 'y'))) AS t(arr)
        LATERAL VIEW inline(arr) i""", False),
    # ---- higher-order functions ---------------------------------------------------------
    ("hof_transform", """
        SELECT order_id, transform(quantities, x -> x * 10) AS q10,
               transform(quantities, (x, i) -> x + i) AS qi FROM orders""", False),
    ("hof_filter", """
        SELECT name, filter(skills, s -> s LIKE '%s%') AS s_skills FROM employees""", False),
    ("hof_aggregate", """
        SELECT order_id, aggregate(quantities, 0, (acc, x) -> acc + x) AS total,
               aggregate(quantities, 1, (acc, x) -> acc * (x + 1), acc -> acc - 1) AS f
        FROM orders""", False),
    ("hof_exists_forall", """
        SELECT name, exists(skills, s -> s = 'sql') AS knows_sql,
               forall(skills, s -> length(s) > 2) AS long_names FROM employees""", False),
    ("hof_zip_with_map_filter", """
        SELECT zip_with(array(1, 2, 3), array(10, 20, 30), (a, b) -> a + b) AS z,
               map_filter(map('a', 1, 'b', 5), (k, v) -> v > 2) AS mf,
               transform_values(map('a', 1), (k, v) -> v * 100) AS tv""", False),
    # ---- window() / session_window() grouping -------------------------------------------
    ("tw_window_tumbling", """
        SELECT window.start AS ws, window.end AS we, key, SUM(value) AS total
        FROM scores GROUP BY window(event_time, '2 minutes'), key""", False),
    ("tw_window_sliding", """
        SELECT window, SUM(value) AS total FROM scores
        GROUP BY window(event_time, '2 minutes', '1 minute')""", False),
    ("tw_window_time", """
        SELECT window.start AS ws, window_time(window) AS wt, n FROM (
          SELECT window, COUNT(*) AS n FROM scores GROUP BY window(event_time, '3 minutes'))""",
     False),
    ("tw_session_window", """
        SELECT session_window.start AS s, session_window.end AS e, key, SUM(value) AS total
        FROM scores GROUP BY session_window(event_time, '1 minute'), key""", False),
    ("tw_session_window_arrival", """
        SELECT key, session_window(arrival_time, '30 seconds') AS sessions, COUNT(*) AS n
        FROM scores GROUP BY key, sessions""", False),
    ("tw_window_with_named_window", """
        SELECT window.start AS ws, SUM(value) AS total,
               SUM(SUM(value)) OVER w AS running
        FROM scores GROUP BY window(event_time, '2 minutes')
        WINDOW w AS (ORDER BY window.start)""", False),
    # ---- our keywords in strings, comments and quoted names -----------------------------
    ("kw_string_literals", """
        SELECT 'TRIGGER EVERY 1 MINUTE' AS a, 'EMIT ACCUMULATING AND RETRACTING' AS b,
               'WINDOW FIXED(2 MINUTES)' AS c, 'WATERMARK FROM paper_watermarks' AS d,
               'WINDOW SESSIONS(GAP 1 MINUTE)' AS e, 'PROCESSING TIME arrival_time' AS f""",
     False),
    ("kw_double_quoted_strings", """
        SELECT key, "WINDOW GLOBAL" AS w, SUM(value) AS total FROM scores
        GROUP BY key HAVING SUM(value) > 0 AND "TRIGGER" <> "EMIT" """, False),
    ("kw_string_after_group_by", """
        SELECT key, SUM(value) AS total FROM scores GROUP BY key
        HAVING MAX(key) <> 'WINDOW FIXED 2 MINUTES TRIGGER AT WATERMARK'""", False),
    ("kw_line_comments", """
        SELECT key, SUM(value) AS total -- WINDOW FIXED 2 MINUTES
        FROM scores
        GROUP BY key
        -- TRIGGER AT WATERMARK EMIT ACCUMULATING
        -- WATERMARK FROM paper_watermarks PROCESSING TIME arrival_time""", False),
    ("kw_block_comments", """
        /* WINDOW SESSIONS(GAP 1 MINUTE) */ SELECT key, COUNT(*) AS n FROM scores
        GROUP BY key /* TRIGGER EVERY 2 ROWS
        EMIT DISCARDING */ /* PROCESSING TIME arrival_time WATERMARK FROM x */""", False),
    ("kw_nested_block_comment", """
        SELECT 1 AS one /* outer /* WINDOW GLOBAL */ TRIGGER EVERY 1 MINUTE */""", False),
    ("kw_escaped_quote_in_string", r"""
        SELECT 'it\'s the TRIGGER\'s WINDOW' AS s, concat('EMIT', ' ', 'SESSIONS') AS t""",
     False),
    ("kw_backquoted_aliases", """
        SELECT key AS `trigger`, SUM(value) AS `emit`, MIN(event_time) AS `window`,
               MAX(arrival_time) AS `watermark`, COUNT(*) AS `sessions`,
               MIN(arrival_time) AS `processing time`
        FROM scores GROUP BY key""", False),
    ("kw_backquoted_names_reused", """
        SELECT `window`, `trigger` FROM (SELECT 1 AS `window`, 'x' AS `trigger`)
        WHERE `window` = 1""", False),
    ("kw_backquoted_table_alias", """
        SELECT `emit`.key, `watermark`.watermark FROM scores AS `emit`
        JOIN paper_watermarks AS `watermark`
          ON `emit`.arrival_time <= `watermark`.processing_time
        WHERE `watermark`.processing_time = TIMESTAMP '2015-09-01 12:05:00'""", False),
    ("kw_unquoted_aliases", """
        SELECT 1 AS trigger, 2 AS emit, 3 AS sessions, 4 AS processing, 5 AS time,
               key AS window FROM scores""", False),
    ("kw_unquoted_names_in_subquery", """
        SELECT t.trigger, emit FROM (SELECT 1 AS trigger, 2 AS emit) t""", False),
    ("kw_unquoted_column_named_watermark", """
        SELECT processing_time, watermark FROM paper_watermarks
        WHERE watermark < processing_time ORDER BY processing_time""", True),
    ("kw_column_named_window_from_grouping", """
        SELECT t.window.start AS ws, t.n FROM (
          SELECT window, COUNT(*) AS n FROM scores GROUP BY window(event_time, '5 minutes')
        ) t""", False),
    # ---- CASE, dates and times ----------------------------------------------------------
    ("case_searched", """
        SELECT name, CASE WHEN salary >= 100000 THEN 'high' WHEN salary >= 60000 THEN 'mid'
                          ELSE 'low' END AS band FROM employees""", False),
    ("case_simple", """
        SELECT order_id, CASE status WHEN 'shipped' THEN 1 WHEN 'pending' THEN 0
                         ELSE NULL END AS flag FROM orders""", False),
    ("dt_date_functions", """
        SELECT name, date_trunc('MONTH', hire_date) AS m, date_add(hire_date, 30) AS d30,
               datediff(DATE '2024-01-01', hire_date) AS days,
               months_between(DATE '2024-01-01', hire_date) AS months,
               last_day(hire_date) AS eom, dayofweek(hire_date) AS dow FROM employees""",
     False),
    ("dt_extract_format", """
        SELECT order_id, EXTRACT(HOUR FROM order_ts) AS h, year(order_ts) AS y,
               date_format(order_ts, 'yyyy-MM-dd HH:mm') AS f, to_date(order_ts) AS d
        FROM orders""", False),
    ("dt_unix_and_parse", """
        SELECT unix_timestamp(event_time) AS u, from_unixtime(unix_timestamp(event_time)) AS f,
               to_timestamp('2015-09-01 12:00:00', 'yyyy-MM-dd HH:mm:ss') AS t,
               timestamp_seconds(1441108800) AS ts FROM scores""", False),
    ("dt_interval_arithmetic", """
        SELECT order_id, order_ts + INTERVAL 1 HOUR AS later,
               order_ts - INTERVAL '30' MINUTE AS earlier,
               timestampdiff(MINUTE, TIMESTAMP '2024-01-05 00:00:00', order_ts) AS mins,
               make_dt_interval(1, 2) AS iv FROM orders""", False),
    ("dt_arrival_minus_event", """
        SELECT event_time, arrival_time - event_time AS delay,
               CAST(arrival_time AS LONG) - CAST(event_time AS LONG) AS delay_s
        FROM scores""", False),
    # ---- JSON ---------------------------------------------------------------------------
    ("json_get_json_object", """
        SELECT order_id, get_json_object(payload, '$.channel') AS ch,
               get_json_object(payload, '$.tags[0]') AS tag0 FROM orders""", False),
    ("json_from_json", """
        SELECT order_id,
               from_json(payload, 'channel STRING, tags ARRAY<STRING>, rating INT') AS j
        FROM orders""", False),
    ("json_to_json_schema_of_json", """
        SELECT to_json(named_struct('id', emp_id, 'skills', skills, 'addr', address)) AS js,
               schema_of_json('{"a": [1, 2], "b": {"c": "x"}}') AS sch FROM employees""",
     False),
    # ---- DISTINCT, ORDER BY / LIMIT, VALUES ---------------------------------------------
    ("distinct", "SELECT DISTINCT dept_id, manager_id FROM employees", False),
    ("count_distinct", """
        SELECT COUNT(DISTINCT status) AS n_status, COUNT(DISTINCT emp_id, status) AS n_pairs
        FROM orders""", False),
    ("order_by_limit", """
        SELECT name, salary FROM employees ORDER BY salary DESC, name LIMIT 3""", True),
    ("order_by_nulls_offset", """
        SELECT order_id, amount FROM orders ORDER BY amount ASC NULLS FIRST, order_id
        LIMIT 4 OFFSET 1""", True),
    ("order_by_ordinal_desc_nulls_last", """
        SELECT dept_id, name FROM employees ORDER BY 1 DESC NULLS LAST, 2""", True),
    ("values_bare", "VALUES (1, 'a'), (2, 'b'), (3, NULL)", False),
    ("values_from_with_alias", """
        SELECT id, label FROM VALUES (1, 'WINDOW'), (2, 'TRIGGER') AS t(id, label)
        ORDER BY id""", True),
    # ---- structs, maps, arrays, strings, numbers ----------------------------------------
    ("struct_named_struct_access", """
        SELECT name, address.city AS city, named_struct('n', name, 'z', address.zip) AS s,
               struct(emp_id, dept_id).emp_id AS id FROM employees""", False),
    ("map_access", """
        SELECT name, attrs['level'] AS lvl, element_at(attrs, 'remote') AS remote,
               map_keys(attrs) AS ks, size(attrs) AS n FROM employees""", False),
    ("array_functions", """
        SELECT name, array_contains(skills, 'sql') AS has_sql, size(skills) AS n,
               sort_array(skills, false) AS srt, array_join(skills, ',') AS joined,
               array_distinct(concat(skills, array('sql'))) AS dist FROM employees""", False),
    ("string_functions", """
        SELECT upper(name) AS u, substring(name, 2, 3) AS sub, concat_ws('-', name, status) AS cw,
               regexp_replace(status, '[aeiou]', '*') AS rr, split(payload, ',')[0] AS first,
               name LIKE 'A%' AS is_a, status RLIKE '^s' AS s_
        FROM orders JOIN employees USING (emp_id)""", False),
    ("decimal_arithmetic", """
        SELECT order_id, amount * 1.1 AS up, amount / 3 AS third, round(amount, 0) AS r,
               SUM(amount) OVER () AS grand FROM orders""", False),
    ("null_handling", """
        SELECT emp_id, coalesce(dept_id, -1) AS d, nvl(manager_id, 0) AS m,
               nullif(dept_id, 10) AS nd, try_cast('x' AS INT) AS tc,
               dept_id IS NULL AS no_dept, dept_id <=> NULL AS null_safe FROM employees""",
     False),
    ("describe_view", "DESCRIBE employees", False),
]


def _canon(value: Any) -> Any:
    """A hashable, comparable form of a collected value (rows, lists and maps nest)."""
    if isinstance(value, Row):
        return tuple(_canon(v) for v in value)
    if isinstance(value, (list, tuple)):
        return tuple(_canon(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((repr(_canon(k)), _canon(v)) for k, v in value.items()),
                            key=lambda kv: kv[0]))
    return value


def _rows(df: DataFrame) -> list[str]:
    return [repr(_canon(r)) for r in df.collect()]


def assert_same_result(got: DataFrame, expected: DataFrame, ordered: bool) -> None:
    """Same schema and same rows (in the same order when ``ordered``)."""
    assert got.schema == expected.schema, (
        f"schema differs:\n dfsql: {got.schema.simpleString()}\n"
        f" spark: {expected.schema.simpleString()}")
    got_rows, exp_rows = _rows(got), _rows(expected)
    if ordered:
        assert got_rows == exp_rows
    else:
        assert Counter(got_rows) == Counter(exp_rows)


@pytest.mark.parametrize(("query", "ordered"), [(q, o) for _, q, o in CASES],
                         ids=[i for i, _, _ in CASES])
def test_plain_sql_matches_spark(spark: SparkSession, sample_tables: list[str], query: str,
                                 ordered: bool) -> None:
    assert_same_result(dfsql.sql(query, spark), spark.sql(query), ordered)


def test_corpus_ids_unique() -> None:
    ids = [i for i, _, _ in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 70


# ---- plain SQL that Spark rejects surfaces as DfsqlError ----------------------------------
REJECTED: list[tuple[str, str]] = [
    ("unknown_table", "SELECT * FROM no_such_table"),
    ("unknown_column", "SELECT no_such_column FROM employees"),
    ("misspelled_keyword", "SELEC name FROM employees"),
    ("unbalanced_paren", "SELECT (1 + 2 FROM employees"),
    ("missing_group_by", "SELECT dept_id, SUM(salary) FROM employees"),
    ("ambiguous_column", """
        SELECT dept_id FROM employees e JOIN departments d ON e.dept_id = d.dept_id"""),
    ("unknown_function", "SELECT frobnicate(name) FROM employees"),
    ("union_arity", "SELECT emp_id, name FROM employees UNION SELECT dept_id FROM departments"),
    ("unknown_type", "SELECT CAST(emp_id AS NOPE) FROM employees"),
    ("nested_aggregate", "SELECT SUM(MAX(salary)) FROM employees"),
    ("undefined_named_window", "SELECT RANK() OVER w FROM employees"),
    ("named_window_wrong_name", """
        SELECT RANK() OVER w2 FROM employees WINDOW w AS (ORDER BY salary)"""),
]


@pytest.mark.parametrize("query", [q for _, q in REJECTED], ids=[i for i, _ in REJECTED])
def test_rejected_plain_sql_raises_dfsql_error(spark: SparkSession, sample_tables: list[str],
                                               query: str) -> None:
    from pyspark.errors import PySparkException

    with pytest.raises(PySparkException):  # the query really is one Spark rejects
        spark.sql(query)
    with pytest.raises(dfsql.DfsqlError) as info:
        dfsql.sql(query, spark)
    assert not isinstance(info.value, PySparkException)
    assert "Traceback" not in str(info.value)
