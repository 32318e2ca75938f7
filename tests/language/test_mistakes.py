"""Issue #10, items 8 and 11 at parse level: zero durations where docs/reference.md#durations allows
them, and every other user mistake as a positioned DfsqlError with a hint.

Expected values come from docs/reference.md#durations / §4 / §9 and Spark SQL's own rules (written
next to each case); line and column are counted by hand in the multi-line texts.
"""

from __future__ import annotations

import pytest

import dfsql
from dfsql.errors import (
    AnalysisError,
    DfsqlError,
    DfsqlSyntaxError,
    DurationError,
    NotSupportedError,
    TriggerError,
    WindowedQueryError,
)
from dfsql.language import parse_statement
from dfsql.model.clauses import (
    Duration,
    ElemCount,
    FixedWindows,
    SlidingWindows,
    WatermarkDelay,
    WatermarkPercentile,
)

S = 1_000_000
MIN = 60 * S
H = 60 * MIN
D = 24 * H
#: Days from 0001-01-01 to 9999-12-31 inclusive: the span of Spark's TIMESTAMP range
#: (date(9999, 12, 31).toordinal() - date(1, 1, 1).toordinal() + 1).
TIMESTAMP_SPAN_DAYS = 3_652_059

HEAD = "SELECT k, COUNT(*) AS n\nFROM t\nGROUP BY k\n"
W = HEAD + "WINDOW FIXED(1 MINUTE) ON ts\n"


def clauses(text: str):
    stmt = parse_statement(text)
    return stmt.blocks[-1].clauses


def error(text: str) -> DfsqlError:
    with pytest.raises(DfsqlError) as info:
        parse_statement(text)
    with pytest.raises(type(info.value)) as again:  # the public entry point fails alike
        dfsql.explain(text)
    assert str(again.value) == str(info.value)
    assert "Traceback" not in str(info.value)
    return info.value


def where(err: DfsqlError) -> tuple[int | None, int | None]:
    return err.line, err.column


# --------------------------------------------------------------------------- item 8: zero


@pytest.mark.parametrize("text,delay", [
    ("WATERMARK DELAY 0 SECONDS", 0),
    ("WATERMARK DELAY 0 MS", 0),
    ("WATERMARK DELAY INTERVAL '0' MINUTE", 0),
    ("WATERMARK DELAY INTERVAL 0 MINUTES", 0),
    ("WATERMARK DELAY -0 SECONDS", 0),
    ("WATERMARK DELAY 0.0 HOURS", 0),
])
def test_zero_watermark_delay(text: str, delay: int) -> None:
    cl = clauses(W + text)
    assert cl.watermark == WatermarkDelay(delay=Duration(delay))
    assert cl.watermark_given


def test_zero_percentile_delay() -> None:
    cl = clauses(W + "WATERMARK PERCENTILE 99 DELAY 0 SECONDS")
    assert cl.watermark == WatermarkPercentile(percentile=99.0, delay=Duration(0))


@pytest.mark.parametrize("text", ["ALLOWED LATENESS 0 MINUTES", "ALLOWED LATENESS 0 HOURS",
                                  "ALLOWED LATENESS INTERVAL '0' SECOND"])
def test_zero_allowed_lateness(text: str) -> None:
    cl = clauses(W + text + " LATE ROWS INTO late")
    assert cl.allowed_lateness == Duration(0)
    assert cl.late_rows_into == "late"


@pytest.mark.parametrize("window,expected", [
    ("FIXED(1 MINUTE, OFFSET 0 SECONDS)", FixedWindows(size=Duration(MIN), offset=Duration(0))),
    ("FIXED(1 MINUTE, OFFSET INTERVAL '0' MINUTE)",
     FixedWindows(size=Duration(MIN), offset=Duration(0))),
    ("SLIDING(1 HOUR, EVERY 1 MINUTE, OFFSET 0 MS)",
     SlidingWindows(size=Duration(H), period=Duration(MIN), offset=Duration(0))),
])
def test_zero_offset(window: str, expected) -> None:
    assert clauses(HEAD + f"WINDOW {window} ON ts").window == expected


def test_zero_delay_of_spark_relation_watermark() -> None:
    cl = clauses("SELECT k, COUNT(*) AS n\nFROM t WATERMARK ts DELAY OF INTERVAL 0 SECONDS\n"
                 "GROUP BY k\nWINDOW FIXED(1 MINUTE)")
    assert cl.watermark == WatermarkDelay(delay=Duration(0))


# name: (text, class, line, column, message part, hint part)
ZERO_OR_NEGATIVE = {
    # §2: zero or negative sizes, gaps and periods are errors ...
    "zero_size_interval": (HEAD + "WINDOW FIXED(INTERVAL '0' MINUTE) ON ts", DurationError, 4, 14,
                           "window size must be positive, got 0 MINUTE", "> 0"),
    "zero_size": (HEAD + "WINDOW FIXED(0 SECONDS) ON ts", DurationError, 4, 14,
                  "window size must be positive, got 0 SECONDS", "> 0"),
    "zero_gap": (HEAD + "WINDOW SESSIONS(GAP 0 MS) ON ts", DurationError, 4, 21,
                 "session gap must be positive", "> 0"),
    "zero_period": (HEAD + "WINDOW SLIDING(1 HOUR,\n  EVERY 0 MINUTES) ON ts", DurationError, 5, 9,
                    "sliding period must be positive", "> 0"),
    "zero_every": (W + "TRIGGER EVERY\n 0 SECONDS", DurationError, 6, 2,
                   "trigger period must be positive", "> 0"),
    # ... and negative delays, lateness and offsets too (zero is their default)
    "negative_delay": (W + "WATERMARK DELAY -2 MINUTES", DurationError, 5, 17,
                       "WATERMARK DELAY must not be negative, got -2 MINUTES", "0 (the default)"),
    "negative_lateness": (W + "ALLOWED LATENESS -1 HOUR", DurationError, 5, 18,
                          "ALLOWED LATENESS must not be negative", "0 (the default)"),
    "negative_offset": (HEAD + "WINDOW FIXED(1 MINUTE, OFFSET -5 SECONDS) ON ts", DurationError,
                        4, 31, "OFFSET must not be negative", "0 (the default)"),
    "negative_percentile_delay": (W + "WATERMARK PERCENTILE 90 DELAY -1 S", DurationError, 5, 31,
                                  "DELAY must not be negative", None),
    "negative_spark_relation_delay": (
        "SELECT k, COUNT(*) AS n\nFROM t WATERMARK ts DELAY OF INTERVAL -5 MINUTES\nGROUP BY k\n"
        "WINDOW FIXED(1 MINUTE)", DurationError, 2, 39, "DELAY must not be negative", None),
}


# --------------------------------------------------------------------------- item 11: too large

BOUND_HINT = f"at most {TIMESTAMP_SPAN_DAYS} DAYS"

TOO_LARGE = {
    "fixed_days": (HEAD + "WINDOW FIXED(999999999999 DAYS) ON ts", DurationError, 4, 14,
                   "999999999999 DAYS is too long", BOUND_HINT),
    "just_above_the_bound": (HEAD + f"WINDOW FIXED({TIMESTAMP_SPAN_DAYS + 1} DAYS) ON ts",
                             DurationError, 4, 14, "too long", BOUND_HINT),
    "more_digits_than_a_float": (HEAD + "WINDOW SESSIONS(GAP 1" + "0" * 400 + " MS) ON ts",
                                 DurationError, 4, 21, "too long", BOUND_HINT),
    "interval_string": (HEAD + "WINDOW FIXED(1 HOUR) ON ts\nWATERMARK DELAY INTERVAL "
                        "'99999999999999' DAY", DurationError, 5, 17, "too long", BOUND_HINT),
    "lateness": (W + "ALLOWED LATENESS 10000000 DAYS", DurationError, 5, 18, "too long",
                 BOUND_HINT),
    "offset": (HEAD + "WINDOW FIXED(1 MINUTE, OFFSET 99999999999999999 DAYS) ON ts",
               DurationError, 4, 31, "too long", BOUND_HINT),
    "trigger_period": (W + "TRIGGER EVERY 9999999999999 HOURS", DurationError, 5, 15,
                       "too long", BOUND_HINT),
    "spark_relation_delay": (
        "SELECT k, COUNT(*) AS n\nFROM t WATERMARK ts DELAY OF INTERVAL 99999999999 DAYS\n"
        "GROUP BY k\nWINDOW FIXED(1 MINUTE)", DurationError, 2, 39, "too long", BOUND_HINT),
    "interval_nan": (HEAD + "WINDOW FIXED(INTERVAL 'nan' MINUTE) ON ts", DurationError, 4, 23,
                     "bad duration 'nan'", "a number and a unit"),
    "interval_infinity": (HEAD + "WINDOW FIXED(INTERVAL 'Infinity' MINUTE) ON ts", DurationError,
                          4, 23, "bad duration 'Infinity'", "a number and a unit"),
    "row_count": (W + "TRIGGER AFTER 99999999999999999999 ROWS", TriggerError, 5, 15,
                  "row count 99999999999999999999 is too large", "at most 9223372036854775807"),
}


# --------------------------------------------------------------------------- item 11: GROUP BY n
# Spark's rule (spark.sql.groupByOrdinal, on by default): an integer literal in GROUP BY is
# a 1-based position in the SELECT list; out of range (0 included) or naming an aggregate
# is an analysis error (GROUP_BY_POS_OUT_OF_RANGE, GROUP_BY_POS_AGGREGATE).

ORDINALS = {
    "group_by_3_of_2": ("SELECT k, COUNT(*) AS n\nFROM t\nGROUP BY k,\n  3\nWINDOW GLOBAL",
                        AnalysisError, 4, 3, "GROUP BY position 3 is not in the select list",
                        "from 1 to 2"),
    "group_by_0": ("SELECT k, COUNT(*) AS n\nFROM t\nGROUP BY 0\nWINDOW GLOBAL", AnalysisError,
                   3, 10, "GROUP BY position 0 is not in the select list", "from 1 to 2"),
    "group_by_aggregate": ("SELECT k, COUNT(*) AS n\nFROM t\nGROUP BY 1, 2\nWINDOW GLOBAL",
                           AnalysisError, 3, 13, "GROUP BY position 2 is the aggregate COUNT(*)",
                           "GROUP BY 1"),
}


def test_group_by_ordinal_in_range_names_the_item() -> None:
    """GROUP BY 2 groups by the second SELECT item, here ``k`` (not the last item)."""
    stmt = parse_statement("SELECT COUNT(*) AS n, k, SUM(v) AS s FROM t GROUP BY 2 "
                           "WINDOW FIXED(1 MINUTE) ON ts")
    from dfsql.language.rewrite import rewrite

    st = rewrite(stmt.blocks[0], stmt.source)
    assert st.key_columns == ("__k0",)
    assert "k AS __k0" in st.input_sql


# --------------------------------------------------------------------------- item 11: LATE ROWS INTO
# A temp view's name is one part (Spark: TEMP_VIEW_NAME_TOO_MANY_NAME_PARTS).

LATE_ROWS = {
    "late_rows_into_three_parts": (W + "ALLOWED LATENESS 1 HOUR\n  LATE ROWS INTO a.b.c",
                                   AnalysisError, 6, 18, "LATE ROWS INTO a.b.c",
                                   "LATE ROWS INTO c"),
    "late_rows_into_its_own_source": (
        "SELECT k, COUNT(*) AS n\nFROM events\nGROUP BY k\nWINDOW FIXED(1 MINUTE) ON ts\n"
        "PROCESSING TIME arr ALLOWED LATENESS 1 HOUR\nLATE ROWS INTO events", AnalysisError,
        6, 16, "LATE ROWS INTO events would replace a table this query reads",
        "LATE ROWS INTO events_late"),
    "late_rows_into_two_parts": (W + "ALLOWED LATENESS 0 SECONDS LATE ROWS INTO db.late",
                                 AnalysisError, 5, 43, "cannot be qualified",
                                 "LATE ROWS INTO late"),
}


def test_late_rows_into_backticked_name_is_one_part() -> None:
    assert clauses(W + "ALLOWED LATENESS 1 HOUR LATE ROWS INTO `late rows`").late_rows_into == \
        "`late rows`"


# --------------------------------------------------------------------------- item 11: CREATE VIEW
# A temp view's name is one part, and a windowed view names its columns in its SELECT. (A
# persistent windowed view is kept in the catalog: tests/spark/catalog/test_writes_views.py.)

WINDOWED = "SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(1 MINUTE) ON ts"

CREATE_VIEW = {
    "create_view_qualified": ("CREATE TEMP VIEW db.v AS\n" + WINDOWED, AnalysisError, 1, 18,
                              "db.v", "CREATE TEMP VIEW v AS"),
    "create_view_backticked_qualified": ("CREATE TEMPORARY VIEW `db`.`v` AS " + WINDOWED,
                                         AnalysisError, 1, 23, "cannot be qualified",
                                         "TEMPORARY VIEW `v` AS"),
    "alter_view_windowed": ("ALTER VIEW v AS\n" + WINDOWED, NotSupportedError, 1, 1,
                            "ALTER VIEW … AS cannot take a windowed query",
                            "CREATE OR REPLACE VIEW v AS"),
    "create_view_without_name": ("CREATE TEMP VIEW AS\n" + WINDOWED, DfsqlSyntaxError, 1, 17,
                                 "expected the view's name after VIEW", "CREATE TEMP VIEW v AS"),
    "create_view_without_as": ("CREATE TEMP VIEW v\n" + WINDOWED, DfsqlSyntaxError, 1, 19,
                               "expected AS and the view's query", "CREATE TEMP VIEW v AS"),
    "create_view_column_list": ("CREATE TEMP VIEW v\n  (key, cnt) AS " + WINDOWED,
                                NotSupportedError, 2, 3, "column list",
                                "SELECT k AS key"),
}


@pytest.mark.parametrize("text,replace,if_not_exists,is_global", [
    ("CREATE TEMP VIEW v AS " + WINDOWED, False, False, False),
    ("CREATE OR REPLACE TEMPORARY VIEW v AS " + WINDOWED, True, False, False),
    ("create temp view if not exists v as " + WINDOWED, False, True, False),
    ("CREATE GLOBAL TEMP VIEW `v` AS " + WINDOWED, False, False, True),
])
def test_create_temp_view_flags(text: str, replace: bool, if_not_exists: bool,
                                is_global: bool) -> None:
    stmt = parse_statement(text)
    assert stmt.kind == "create_view" and stmt.view_name == "v" and stmt.view_temporary
    assert (stmt.view_replace, stmt.view_if_not_exists, stmt.view_global) == \
        (replace, if_not_exists, is_global)
    assert text[stmt.body_start:].startswith(("SELECT", "select"))
    assert stmt.top is stmt.blocks[0]


def test_plain_create_view_is_left_to_spark() -> None:
    """Without a windowed block the statement is Spark's: even a persistent view."""
    stmt = parse_statement("CREATE VIEW db.v (a) AS SELECT k FROM t")
    assert stmt.kind == "create_view" and not stmt.windowed


CASES = {**ZERO_OR_NEGATIVE, **TOO_LARGE, **ORDINALS, **LATE_ROWS, **CREATE_VIEW}


@pytest.mark.parametrize("text,cls,line,col,message,hint", CASES.values(), ids=CASES.keys())
def test_positioned_error(text: str, cls: type[DfsqlError], line: int, col: int, message: str,
                          hint: str | None) -> None:
    err = error(text)
    assert type(err) is cls, f"{type(err).__name__}: {err}"
    assert where(err) == (line, col), str(err)
    assert message in err.message, err.message
    if hint is not None:
        assert err.hint is not None and hint in err.hint, err.hint


def test_longest_duration_is_accepted() -> None:
    """The bound itself is a valid duration: the whole TIMESTAMP range."""
    cl = clauses(HEAD + f"WINDOW FIXED({TIMESTAMP_SPAN_DAYS} DAYS) ON ts\n"
                 f"ALLOWED LATENESS {TIMESTAMP_SPAN_DAYS} DAYS")
    assert cl.window == FixedWindows(size=Duration(TIMESTAMP_SPAN_DAYS * D))
    assert cl.allowed_lateness == Duration(TIMESTAMP_SPAN_DAYS * D)


def test_largest_row_count_is_accepted() -> None:
    cl = clauses(W + "TRIGGER AFTER 9223372036854775807 ROWS")
    assert cl.trigger == ElemCount(count=2**63 - 1)


# --------------------------------------------------------------------------- item 11: aggregates


def stages(text: str):
    from dfsql.language.rewrite import rewrite

    stmt = parse_statement(text)
    return rewrite(stmt.blocks[-1], stmt.source)


@pytest.mark.parametrize("call,spark_sql", [
    ("any(v > 4)", "ANY(__c0 > 4)"),  # Spark's any = bool_or; sqlglot reads it as ANY
    ("ANY(b)", "ANY(__c0)"),
    ("mean(v)", "MEAN(__c0)"),  # Spark's alias of avg, anonymous to sqlglot
    ("vector_sum(arr)", "VECTOR_SUM(__c0)"),
])
def test_spark_aggregates_sqlglot_does_not_type(call: str, spark_sql: str) -> None:
    st = stages(f"SELECT k, {call} AS x FROM t GROUP BY k WINDOW GLOBAL")
    assert st.aggregates == ((spark_sql, "__a0"),)


def test_any_of_a_subquery_is_not_an_aggregate() -> None:
    st = stages("SELECT k, COUNT(*) AS n FROM t WHERE k = ANY (SELECT 1) GROUP BY k "
                "WINDOW GLOBAL")
    assert st.aggregates == (("COUNT(*)", "__a0"),)


def test_unknown_function_defers_the_grouping_check() -> None:
    """my_udaf may be an aggregate registered in the Spark session: parsing cannot tell,
    so the statement parses and the planner asks Spark (test_functions.py)."""
    for text in ("SELECT k, my_udaf(v) AS m FROM t GROUP BY k WINDOW GLOBAL",
                 "SELECT my_udaf(v) AS m FROM t WINDOW FIXED(1 MINUTE) ON ts"):
        assert parse_statement(text).blocks[0].aggregates is None


def test_unknown_function_does_not_hide_other_mistakes() -> None:
    err = error("SELECT k,\n  v,\n  my_udaf(w) AS m\nFROM t GROUP BY k WINDOW GLOBAL")
    assert type(err) is WindowedQueryError and where(err) == (2, 3)
    assert "v is neither grouped nor aggregated" in err.message
