"""Malformed queries: the exact DfsqlError subclass, line and column, and for some the text.

Every case is multi-line so that lines are checked, not only columns. ``dfsql.sql`` must
fail the same way before any Spark session exists.
"""

from __future__ import annotations

import pytest

import dfsql
import dfsql.api
from dfsql.errors import (
    ClauseOrderError,
    DfsqlError,
    DfsqlSyntaxError,
    DurationError,
    MissingOperandError,
    NotSupportedError,
    TriggerError,
    UnknownKeywordError,
    WatermarkError,
    WindowedQueryError,
)
from dfsql.language import parse_statement

H = "SELECT k, COUNT(*) AS n\nFROM t\nGROUP BY k\n"
W = H + "WINDOW FIXED(1 MINUTE) ON ts\n"

# name: (query, error class, line, column)
CASES: dict[str, tuple[str, type[DfsqlError], int, int]] = {
    'misspelt_SESION': (H + 'WINDOW SESION(GAP 1 MINUTE) ON ts', UnknownKeywordError, 4, 8),
    'misspelt_EVRY': (W + 'TRIGGER EVRY 1 MINUTE', UnknownKeywordError, 5, 9),
    # after a complete EMIT only ORDER BY, LIMIT or the end may follow (issue #23)
    'misspelt_ORDER_after_emit': (W + 'EMIT DISCARDING\nORDR BY k', UnknownKeywordError, 6, 1),
    'word_after_emit': (W + 'EMIT DISCARDING\nfoo', UnknownKeywordError, 6, 1),
    'word_after_watermark': (W + 'WATERMARK DELAY 1 MINUTE\nfoo', UnknownKeywordError, 6, 1),
    'misspelt_MINUTS': (H + 'WINDOW FIXED(5 MINUTS) ON ts', DurationError, 4, 16),
    # LATE ROWS INTO belongs to ALLOWED LATENESS: it is said so at LATE, wherever it
    # stands alone (issue #23: after an expression it read as PROCESSING TIME's SQL)
    'late_rows_after_processing_time': (W + 'PROCESSING TIME at\n  LATE ROWS INTO v',
                                        DfsqlSyntaxError, 6, 3),
    'late_rows_after_on': (W + 'LATE ROWS INTO v', DfsqlSyntaxError, 5, 1),
    'late_rows_after_watermark': (W + 'WATERMARK DELAY 1 MINUTE LATE ROWS INTO v',
                                  DfsqlSyntaxError, 5, 26),
    'misspelt_EMITT': (W + 'EMITT ACCUMULATING', UnknownKeywordError, 5, 1),
    'misspelt_ACUMULATING': (W + 'EMIT ACUMULATING', UnknownKeywordError, 5, 6),
    'misspelt_WATERMRK': (W + 'WATERMRK DELAY 1 MINUTE', UnknownKeywordError, 5, 1),
    'misspelt_WATERMRK_after_window': (H + 'WINDOW GLOBAL\nWATERMRK DELAY 1 MINUTE', UnknownKeywordError, 5, 1),
    'misspelt_TRIGER_after_processing_time': (W + 'PROCESSING TIME arrival TRIGER NEVER', UnknownKeywordError, 5, 25),
    'misspelt_SLIDNG': (H + 'WINDOW SLIDNG(1 MINUTE, EVERY 1 SECOND) ON ts', UnknownKeywordError, 4, 8),
    'unknown_word_in_trigger': (W + 'TRIGGER SOMETIMES', UnknownKeywordError, 5, 9),
    'unknown_unit': (H + 'WINDOW FIXED(5 FORTNIGHTS) ON ts', DurationError, 4, 16),
    'missing_number': (H + 'WINDOW FIXED(MINUTE) ON ts', DurationError, 4, 14),
    'bad_interval_string': (H + "WINDOW FIXED(INTERVAL 'x' MINUTE) ON ts", DurationError, 4, 23),
    'zero_size': (H + 'WINDOW FIXED(0 MINUTES) ON ts', DurationError, 4, 14),
    'negative_size': (H + 'WINDOW FIXED(-1 MINUTE) ON ts', DurationError, 4, 14),
    'zero_interval_size': (H + "WINDOW FIXED(INTERVAL '0' SECOND) ON ts", DurationError, 4, 14),
    'zero_gap': (H + 'WINDOW SESSIONS(GAP 0 SECONDS) ON ts', DurationError, 4, 21),
    'negative_gap': (H + 'WINDOW SESSIONS(GAP -5 MINUTES) ON ts', DurationError, 4, 21),
    'zero_sliding_period': (H + 'WINDOW SLIDING(1 HOUR, EVERY 0 MINUTES) ON ts', DurationError, 4, 30),
    'negative_delay': (W + 'WATERMARK DELAY -2 MINUTES', DurationError, 5, 17),
    # zero WATERMARK DELAY / ALLOWED LATENESS / OFFSET are valid (§2): test_mistakes.py
    'negative_lateness': (W + 'ALLOWED LATENESS -1 HOUR', DurationError, 5, 18),
    'zero_every': (W + 'TRIGGER EVERY 0 SECONDS', DurationError, 5, 15),
    'negative_after_delay': (W + 'TRIGGER AFTER -1 MINUTE', DurationError, 5, 15),
    'zero_idle_timeout': (W + 'WATERMARK FROM wm BY writer IDLE TIMEOUT 0 MS', DurationError, 5, 42),
    'offset_equal_size': (H + 'WINDOW FIXED(1 MINUTE, OFFSET 1 MINUTE) ON ts', DurationError, 4, 31),
    'offset_above_size': (H + 'WINDOW FIXED(1 MINUTE, OFFSET 2 HOURS) ON ts', DurationError, 4, 31),
    'offset_above_period': (H + 'WINDOW SLIDING(10 MINUTES, EVERY 1 MINUTE, OFFSET 90 SECONDS) ON ts', DurationError, 4, 51),
    'after_0_rows': (W + 'TRIGGER AFTER 0 ROWS', TriggerError, 5, 15),
    'every_negative_rows': (W + 'TRIGGER EVERY -3 ROWS', TriggerError, 5, 15),
    'fractional_rows': (W + 'TRIGGER AFTER 1.5 ROWS', TriggerError, 5, 15),
    'perfect_without_processing_time': (W + 'WATERMARK PERFECT', WatermarkError, 5, 11),
    'percentile_zero': (W + 'WATERMARK PERCENTILE 0', WatermarkError, 5, 22),
    'percentile_above_100': (W + 'WATERMARK PERCENTILE 100.5', WatermarkError, 5, 22),
    'unclosed_paren': (H + 'WINDOW FIXED(1 MINUTE ON ts', DfsqlSyntaxError, 4, 13),
    'extra_close_paren': ('SELECT k, COUNT(*) AS n\nFROM t)\nGROUP BY k\nWINDOW GLOBAL', DfsqlSyntaxError, 2, 7),
    'unterminated_string': ("SELECT k, COUNT(*) AS n\nFROM t\nWHERE s = 'abc\nGROUP BY k\nWINDOW GLOBAL", DfsqlSyntaxError, 3, 11),
    'unterminated_comment': (H + 'WINDOW GLOBAL /* when?\nTRIGGER NEVER', DfsqlSyntaxError, 4, 15),
    'unterminated_backtick': ('SELECT `k, COUNT(*)\nFROM t GROUP BY k WINDOW GLOBAL', DfsqlSyntaxError, 1, 8),
    'duplicate_window': (W + '  WINDOW GLOBAL', ClauseOrderError, 5, 3),
    'duplicate_trigger': (W + 'TRIGGER NEVER\nTRIGGER WATERMARK', ClauseOrderError, 6, 1),
    'duplicate_emit': (W + 'EMIT DISCARDING EMIT ACCUMULATING', ClauseOrderError, 5, 17),
    'duplicate_watermark': (W + 'WATERMARK DELAY 1 MINUTE\nWATERMARK FROM wm', ClauseOrderError, 6, 1),
    'window_before_group_by': ('SELECT k, COUNT(*) AS n\nFROM t\nWINDOW GLOBAL\nGROUP BY k', ClauseOrderError, 4, 1),
    'window_before_having': (H + 'WINDOW GLOBAL\nHAVING COUNT(*) > 1', ClauseOrderError, 5, 1),
    'trigger_after_order_by': (W + 'ORDER BY k\nTRIGGER NEVER', ClauseOrderError, 6, 1),
    'emit_after_limit': (W + 'LIMIT 5 EMIT DISCARDING', ClauseOrderError, 5, 9),
    'emit_before_trigger': (W + 'EMIT DISCARDING\nTRIGGER NEVER', ClauseOrderError, 6, 1),
    'watermark_after_trigger': (W + 'TRIGGER NEVER\nWATERMARK DELAY 1 MINUTE', ClauseOrderError, 6, 1),
    'lateness_before_processing_time': (W + 'ALLOWED LATENESS 1 HOUR\nPROCESSING TIME arr', ClauseOrderError, 6, 1),
    'trigger_without_window': (H + 'TRIGGER EVERY 1 MINUTE', ClauseOrderError, 4, 1),
    'emit_without_window': (H + 'EMIT DISCARDING', ClauseOrderError, 4, 1),
    'lateness_without_window': (H + 'ALLOWED LATENESS 1 HOUR', ClauseOrderError, 4, 1),
    'until_without_operand': (W + 'TRIGGER EVERY 1 MINUTE UNTIL', MissingOperandError, 5, 29),
    'until_before_emit': (W + 'TRIGGER EVERY 1 MINUTE UNTIL\nEMIT DISCARDING', MissingOperandError, 6, 1),
    'finally_without_operand': (W + 'TRIGGER AFTER 1 ROW FINALLY', MissingOperandError, 5, 28),
    'then_without_operand': (W + 'TRIGGER WATERMARK THEN', MissingOperandError, 5, 23),
    'then_then': (W + 'TRIGGER WATERMARK THEN THEN NEVER', MissingOperandError, 5, 24),
    'early_without_operand': (W + 'TRIGGER AT WATERMARK EARLY', MissingOperandError, 5, 27),
    'late_without_operand': (W + 'TRIGGER AT WATERMARK LATE\nEMIT DISCARDING', MissingOperandError, 6, 1),
    'repeat_without_operand': (W + 'TRIGGER REPEAT', MissingOperandError, 5, 15),
    'until_inside_any': (W + 'TRIGGER ANY(AFTER 1 ROW UNTIL)', MissingOperandError, 5, 30),
    'trigger_without_operand': (W + 'TRIGGER\nEMIT DISCARDING', MissingOperandError, 6, 1),
    'empty_any': (W + 'TRIGGER ANY()', DfsqlSyntaxError, 5, 13),
    'repeat_inside_any': (W + 'TRIGGER ANY(REPEAT AFTER 1 ROW, WATERMARK)', TriggerError, 5, 13),
    'every_inside_all': (W + 'TRIGGER ALL(WATERMARK,\n  EVERY 1 MINUTE)', TriggerError, 6, 3),
    'repeat_after_until': (W + 'TRIGGER AFTER 1 ROW UNTIL REPEAT WATERMARK', TriggerError, 5, 27),
    'every_after_until': (W + 'TRIGGER WATERMARK UNTIL EVERY 1 MINUTE', TriggerError, 5, 25),
    'repeat_after_finally': (W + 'TRIGGER AFTER 1 ROW FINALLY (REPEAT WATERMARK)', TriggerError, 5, 30),
    'sessions_empty': (H + 'WINDOW SESSIONS() ON ts', DfsqlSyntaxError, 4, 17),
    'on_without_expression': (H + 'WINDOW GLOBAL ON', DfsqlSyntaxError, 4, 17),
    'emit_accumulating_and': (W + 'EMIT ACCUMULATING AND', DfsqlSyntaxError, 5, 22),
    'late_rows_into_nothing': (W + 'ALLOWED LATENESS 1 HOUR LATE ROWS INTO', DfsqlSyntaxError, 5, 39),
    'window_without_aggregation': ('SELECT k, v\nFROM t\n  WINDOW FIXED(1 MINUTE) ON ts', WindowedQueryError, 3, 3),
    'non_grouped_column': ('SELECT k,\n       v,\n       COUNT(*)\nFROM t\nGROUP BY k\nWINDOW GLOBAL', WindowedQueryError, 2, 8),
    'non_grouped_in_having': ('SELECT k, COUNT(*)\nFROM t\nGROUP BY k\nHAVING v > 1\nWINDOW GLOBAL', WindowedQueryError, 4, 8),
    'grouping_sets': ('SELECT k, COUNT(*)\nFROM t\nGROUP BY GROUPING SETS ((k), ())\nWINDOW GLOBAL', NotSupportedError, 3, 10),
    'rollup': ('SELECT k, COUNT(*)\nFROM t\nGROUP BY ROLLUP(k)\nWINDOW GLOBAL', NotSupportedError, 3, 10),
    'union_without_parens': (H + 'WINDOW GLOBAL\nUNION ALL\n' + H + 'WINDOW GLOBAL', WindowedQueryError, 9, 1),
    'inner_block_error_in_cte': ('WITH a AS (\n  SELECT k, COUNT(*) FROM t GROUP BY k\n  WINDOW FIXED(0 S) ON ts)\nSELECT * FROM a', DurationError, 3, 16),
}

# name: (substring of the message, substring of the hint or None)
TEXTS: dict[str, tuple[str, str | None]] = {
    "misspelt_SESION": ("unknown keyword SESION after WINDOW", "did you mean SESSIONS?"),
    "late_rows_after_processing_time": ("LATE ROWS INTO belongs to ALLOWED LATENESS",
                                        "ALLOWED LATENESS 0 SECONDS LATE ROWS INTO late_rows"),
    "late_rows_after_watermark": ("LATE ROWS INTO belongs to ALLOWED LATENESS",
                                  "write ALLOWED LATENESS <duration> LATE ROWS INTO <view>"),
    "misspelt_EVRY": ("unknown keyword EVRY after TRIGGER", "did you mean EVERY?"),
    "misspelt_MINUTS": ("unknown time unit MINUTS", "did you mean MINUTES?"),
    "misspelt_EMITT": ("unknown keyword EMITT", "did you mean EMIT?"),
    "misspelt_ACUMULATING": ("unknown keyword ACUMULATING", "did you mean ACCUMULATING?"),
    "misspelt_WATERMRK": ("unknown keyword WATERMRK", "did you mean WATERMARK?"),
    "misspelt_WATERMRK_after_window": ("unknown keyword WATERMRK", "did you mean WATERMARK?"),
    "misspelt_TRIGER_after_processing_time": ("unknown keyword TRIGER", "did you mean TRIGGER?"),
    "misspelt_SLIDNG": ("unknown keyword SLIDNG", "did you mean SLIDING?"),
    "misspelt_ORDER_after_emit": ("unknown keyword ORDR after DISCARDING",
                                  "did you mean ORDER BY?"),
    "word_after_emit": ("expected LIMIT, ORDER BY or the end of the query after DISCARDING, "
                        "got foo", None),
    "word_after_watermark": ("expected ALLOWED, EMIT, LIMIT, ORDER BY, PROCESSING, TRIGGER or "
                             "the end of the query after MINUTE, got foo", None),
    "unknown_unit": ("unknown time unit FORTNIGHTS", "MINUTES"),
    "zero_size": ("window size must be positive, got 0 MINUTES", "> 0"),
    "negative_gap": ("session gap must be positive, got -5 MINUTES", None),
    "offset_equal_size": ("OFFSET must be smaller than the window size", "below 1m"),
    "offset_above_period": ("OFFSET must be smaller than the sliding period", "below 1m"),
    "after_0_rows": ("a row count must be a positive whole number, got 0", None),
    "perfect_without_processing_time": ("WATERMARK PERFECT needs PROCESSING TIME",
                                        "PROCESSING TIME"),
    "percentile_above_100": ("PERCENTILE must be in (0, 100], got 100.5", None),
    "unclosed_paren": ("'(' is never closed", "add the matching ')'"),
    "extra_close_paren": ("')' without '('", None),
    "unterminated_string": ("unterminated string literal", None),
    "unterminated_comment": ("unterminated comment", "*/"),
    "duplicate_trigger": ("duplicate TRIGGER clause", "already given at line 5, col 1"),
    "window_before_group_by": ("GROUP BY must come before WINDOW", None),
    "trigger_after_order_by": ("TRIGGER must come before ORDER BY / LIMIT", None),
    "emit_before_trigger": ("TRIGGER must come before EMIT", "WINDOW, WATERMARK"),
    "trigger_without_window": ("TRIGGER needs a WINDOW clause before it", None),
    "until_without_operand": ("UNTIL needs a trigger after it", "UNTIL WATERMARK"),
    "late_without_operand": ("LATE needs a trigger after it", None),
    "repeat_inside_any": ("ANY(...) takes triggers that fire once", "REPEAT ANY(...)"),
    "every_after_until": ("after UNTIL must fire once", None),
    "sessions_empty": ("expected GAP or a duration after SESSIONS(", None),
    "window_without_aggregation": ("a windowed query must aggregate", "GROUP BY"),
    "non_grouped_column": ("v is neither grouped nor aggregated", "add v to GROUP BY"),
    "grouping_sets": ("GROUPING SETS, ROLLUP and CUBE cannot be windowed", None),
    "union_without_parens": ("needs its own parentheses", "UNION ALL"),
}


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any attempt of dfsql.sql to get a Spark session fail the test."""

    def refuse(spark=None):  # noqa: ANN001, ANN202 - stands in for dfsql.api._spark
        raise AssertionError("dfsql.sql created a Spark session before the error")

    monkeypatch.setattr(dfsql.api, "_spark", refuse)


def test_enough_cases() -> None:
    assert len(CASES) >= 45
    assert set(TEXTS) <= set(CASES)


@pytest.mark.parametrize("text,cls,line,col", CASES.values(), ids=CASES.keys())
def test_error(text: str, cls: type[DfsqlError], line: int, col: int) -> None:
    with pytest.raises(DfsqlError) as info:
        parse_statement(text)
    err = info.value
    assert type(err) is cls, f"{type(err).__name__}: {err}"
    assert (err.line, err.column) == (line, col), str(err)
    assert str(err).startswith(f"line {line}, col {col}: ")
    assert err.message and "Traceback" not in str(err)


@pytest.mark.parametrize("name", TEXTS)
def test_error_text(name: str) -> None:
    message, hint = TEXTS[name]
    with pytest.raises(DfsqlError) as info:
        parse_statement(CASES[name][0])
    assert message in info.value.message
    if hint is not None:
        assert info.value.hint is not None and hint in info.value.hint
        assert f"\n  hint: {info.value.hint}" in str(info.value)


@pytest.mark.usefixtures("no_spark")
@pytest.mark.parametrize("text,cls,line,col", CASES.values(), ids=CASES.keys())
def test_sql_fails_before_spark(text: str, cls: type[DfsqlError], line: int, col: int) -> None:
    with pytest.raises(cls) as info:
        dfsql.sql(text)
    assert type(info.value) is cls
    assert str(info.value).startswith(f"line {line}, col {col}: ")


@pytest.mark.parametrize("text,cls,line,col", CASES.values(), ids=CASES.keys())
def test_explain_fails_the_same(text: str, cls: type[DfsqlError], line: int, col: int) -> None:
    with pytest.raises(cls) as info:
        dfsql.explain(text)
    assert (info.value.line, info.value.column) == (line, col)


def test_class_hierarchy() -> None:
    for cls in (UnknownKeywordError, ClauseOrderError, MissingOperandError):
        assert issubclass(cls, DfsqlSyntaxError)
    for cls in (DurationError, TriggerError, WatermarkError, WindowedQueryError,
                NotSupportedError, DfsqlSyntaxError):
        assert issubclass(cls, DfsqlError)


def test_error_pickles() -> None:
    import pickle

    err = UnknownKeywordError("unknown keyword X", 3, 4, "did you mean Y?")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is UnknownKeywordError and str(back) == str(err)
