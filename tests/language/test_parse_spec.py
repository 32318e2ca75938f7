"""Every query of docs/reference.md and of the paper's figures parses to hand-written clauses.

Expected objects are built from :mod:`dfsql.model.clauses` by hand, never derived from
parser output. Dataclass equality ignores ``pos``, so positions are asserted separately.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dfsql.language import parse_clauses, parse_statement
from dfsql.model.clauses import (
    Accumulation,
    AfterAll,
    AfterEach,
    AfterFirst,
    AtPeriod,
    Clauses,
    Duration,
    ElemCount,
    EndOfWindow,
    Expr,
    FixedWindows,
    GlobalWindows,
    Never,
    OrFinally,
    Pos,
    Repeat,
    SessionWindows,
    SinceEarliestElem,
    SlidingWindows,
    Trigger,
    WatermarkDelay,
    WatermarkFrom,
    WatermarkPercentile,
    WatermarkPerfect,
)

FIGURES = Path(__file__).resolve().parents[2] / "examples" / "paper" / "figures.json"

MS = 1_000
S = 1_000_000
MIN = 60 * S
H = 60 * MIN
D = 24 * H

HEAD = "SELECT k, COUNT(*) AS n FROM t GROUP BY k\n"
ON = Expr("ts")
EOW = EndOfWindow()


def clauses_of(text: str) -> Clauses:
    """The clauses of the last (outermost) windowed block of a statement."""
    stmt = parse_statement(text)
    assert stmt.blocks, "expected a windowed block"
    return stmt.blocks[-1].clauses


def both(ext: str) -> Clauses:
    """Parse extension clauses via parse_statement and parse_clauses; they must agree."""
    a = clauses_of(HEAD + ext)
    b = parse_clauses(ext)
    assert a == b
    return a


# --------------------------------------------------------------------------- §1 example

SPEC_EXAMPLE = """SELECT user_id, SUM(score) AS total, COUNT(*) AS n
FROM scores
WHERE score > 0
GROUP BY user_id
HAVING COUNT(*) > 0
WINDOW SESSIONS(GAP 30 MINUTES) ON event_time
WATERMARK DELAY 2 MINUTES
PROCESSING TIME arrival_time
ALLOWED LATENESS 1 HOUR
TRIGGER EVERY 1 MINUTE UNTIL WATERMARK
EMIT ACCUMULATING AND RETRACTING
ORDER BY emit_time, user_id
LIMIT 100"""


def test_spec_example() -> None:
    stmt = parse_statement(SPEC_EXAMPLE)
    assert stmt.kind == "query" and len(stmt.blocks) == 1
    block = stmt.blocks[-1]
    assert stmt.top is block
    assert block.clauses == Clauses(
        window=SessionWindows(gap=Duration(30 * MIN)),
        on=Expr("event_time"),
        watermark=WatermarkDelay(delay=Duration(2 * MIN)),
        processing_time=Expr("arrival_time"),
        allowed_lateness=Duration(H),
        late_rows_into=None,
        trigger=OrFinally(main=Repeat(sub=AtPeriod(period=Duration(MIN))), final=EndOfWindow()),
        accumulation=Accumulation.ACCUMULATING_AND_RETRACTING,
    )
    assert str(block.clauses.trigger) == "OrFinally(Repeat(AtPeriod(1m)), EndOfWindow)"
    cl = block.clauses
    assert (cl.watermark_given, cl.trigger_given, cl.emit_given) == (True, True, True)
    # positions: WINDOW on line 6, ON's expression, PROCESSING TIME's, UNTIL's
    assert (cl.pos.line, cl.pos.column) == (6, 1)
    assert (cl.window.pos.line, cl.window.pos.column) == (6, 8)
    assert (cl.on.pos.line, cl.on.pos.column) == (6, 36)
    assert (cl.watermark.pos.line, cl.watermark.pos.column) == (7, 1)
    assert (cl.processing_time.pos.line, cl.processing_time.pos.column) == (8, 17)
    assert (cl.trigger.pos.line, cl.trigger.pos.column) == (10, 24)  # UNTIL
    assert isinstance(cl.trigger, OrFinally)
    assert (cl.trigger.main.pos.line, cl.trigger.main.pos.column) == (10, 9)  # EVERY
    assert (cl.trigger.final.pos.line, cl.trigger.final.pos.column) == (10, 30)
    # the extension region is blanked out; ORDER BY / LIMIT stay; offsets are kept
    assert "WINDOW" not in block.sql and "TRIGGER" not in block.sql
    assert block.sql.rstrip().endswith("ORDER BY emit_time, user_id\nLIMIT 100")
    assert len(block.sql) == len(SPEC_EXAMPLE)
    assert block.sql.count("\n") == SPEC_EXAMPLE.count("\n")


# --------------------------------------------------------------------------- §3 windows

WINDOWS = {
    "global": ("WINDOW GLOBAL", GlobalWindows(), None),
    "fixed": ("WINDOW FIXED(5 MINUTES) ON ts", FixedWindows(size=Duration(5 * MIN)), ON),
    "fixed_offset": ("WINDOW FIXED(1 HOUR, OFFSET 15 MINUTES) ON ts",
                     FixedWindows(size=Duration(H), offset=Duration(15 * MIN)), ON),
    "sliding": ("WINDOW SLIDING(10 MINUTES, EVERY 1 MINUTE) ON ts",
                SlidingWindows(size=Duration(10 * MIN), period=Duration(MIN)), ON),
    "sliding_offset": ("WINDOW SLIDING(1 HOUR, EVERY 10 MINUTES, OFFSET 30 SECONDS) ON ts",
                       SlidingWindows(size=Duration(H), period=Duration(10 * MIN),
                                      offset=Duration(30 * S)), ON),
    "sessions_gap": ("WINDOW SESSIONS(GAP 30 MINUTES) ON ts",
                     SessionWindows(gap=Duration(30 * MIN)), ON),
    "sessions_no_gap_word": ("WINDOW SESSIONS(30 MINUTES) ON ts",
                             SessionWindows(gap=Duration(30 * MIN)), ON),
    "on_expression": ("WINDOW FIXED(1 DAY) ON CAST(ts_ms / 1000 AS TIMESTAMP)",
                      FixedWindows(size=Duration(D)), Expr("CAST(ts_ms / 1000 AS TIMESTAMP)")),
    "global_on": ("WINDOW GLOBAL ON ts", GlobalWindows(), ON),
}


@pytest.mark.parametrize("ext,window,on", WINDOWS.values(), ids=WINDOWS.keys())
def test_window_forms(ext: str, window, on) -> None:
    assert both(ext) == Clauses(window=window, on=on)


def test_window_strings() -> None:
    assert str(both("WINDOW SLIDING(1 HOUR, EVERY 10 MINUTES, OFFSET 30 SECONDS) ON ts").window) \
        == "SLIDING(1h, EVERY 10m, OFFSET 30s)"
    assert str(both("WINDOW SESSIONS(GAP 90 SECONDS) ON ts").window) == "SESSIONS(GAP 90s)"
    assert SessionWindows(gap=Duration(1)).merging and not FixedWindows().merging


# --------------------------------------------------------------------------- §2 durations

UNITS = {
    "MILLISECONDS": MS, "MILLISECOND": MS, "MS": MS,
    "SECONDS": S, "SECOND": S, "SEC": S, "S": S, "SECS": S,
    "MINUTES": MIN, "MINUTE": MIN, "MIN": MIN, "MINS": MIN,
    "HOURS": H, "HOUR": H, "H": H,
    "DAYS": D, "DAY": D,
}


@pytest.mark.parametrize("unit", UNITS, ids=str)
def test_every_unit_spelling(unit: str) -> None:
    for spelled in (unit, unit.lower()):
        cl = both(f"WINDOW FIXED(3 {spelled}) ON ts")
        assert cl.window == FixedWindows(size=Duration(3 * UNITS[unit]))


@pytest.mark.parametrize("unit", ["MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY"])
def test_interval_form(unit: str) -> None:
    cl = both(f"WINDOW FIXED(INTERVAL '5' {unit}) ON ts")
    assert cl.window == FixedWindows(size=Duration(5 * UNITS[unit]))
    assert both(f"WINDOW FIXED(INTERVAL 5 {unit}S) ON ts") == cl


def test_fractional_duration() -> None:
    assert both("WINDOW FIXED(1.5 SECONDS) ON ts").window == FixedWindows(size=Duration(1_500_000))
    assert str(Duration(1_500_000)) == "1500ms"


# --------------------------------------------------------------------------- §4 time

WATERMARKS = {
    "delay": ("WATERMARK DELAY 2 MINUTES", WatermarkDelay(delay=Duration(2 * MIN))),
    "from": ("WATERMARK FROM paper_watermarks", WatermarkFrom(table="paper_watermarks")),
    "from_qualified": ("WATERMARK FROM db.wm", WatermarkFrom(table="db.wm")),
    "from_by": ("WATERMARK FROM notes BY writer", WatermarkFrom(table="notes", writer="writer")),
    "from_by_idle": ("WATERMARK FROM notes BY writer IDLE TIMEOUT 5 MINUTES",
                     WatermarkFrom(table="notes", writer="writer",
                                   idle_timeout=Duration(5 * MIN))),
    "percentile": ("WATERMARK PERCENTILE 99", WatermarkPercentile(percentile=99.0)),
    "percentile_delay": ("WATERMARK PERCENTILE 99.5 DELAY 10 SECONDS",
                         WatermarkPercentile(percentile=99.5, delay=Duration(10 * S))),
}


@pytest.mark.parametrize("ext,wm", WATERMARKS.values(), ids=WATERMARKS.keys())
def test_watermark_forms(ext: str, wm) -> None:
    cl = both(f"WINDOW FIXED(1 MINUTE) ON ts\n{ext}")
    assert cl == Clauses(window=FixedWindows(size=Duration(MIN)), on=ON, watermark=wm)
    assert cl.watermark_given


def test_watermark_perfect_with_processing_time() -> None:
    cl = both("WINDOW FIXED(1 MINUTE) ON ts WATERMARK PERFECT PROCESSING TIME arrival_time")
    assert cl == Clauses(window=FixedWindows(size=Duration(MIN)), on=ON,
                         watermark=WatermarkPerfect(), processing_time=Expr("arrival_time"))
    assert str(cl.watermark) == "PERFECT"


def test_default_watermark_is_delay_zero() -> None:
    cl = both("WINDOW FIXED(1 MINUTE) ON ts")
    assert cl.watermark == WatermarkDelay(delay=Duration(0)) and not cl.watermark_given


def test_spark_relation_watermark() -> None:
    text = ("SELECT k, COUNT(*) AS n\nFROM t WATERMARK ts DELAY OF INTERVAL 2 MINUTES\n"
            "GROUP BY k\nWINDOW FIXED(1 MINUTE)")
    block = parse_statement(text).blocks[-1]
    assert block.clauses == Clauses(window=FixedWindows(size=Duration(MIN)), on=Expr("`ts`"),
                                    watermark=WatermarkDelay(delay=Duration(2 * MIN)))
    assert block.clauses.watermark.from_relation
    assert block.spark_watermark is not None
    assert block.spark_watermark.column == "ts"
    assert block.spark_watermark.delay == Duration(2 * MIN)
    assert (block.spark_watermark.pos.line, block.spark_watermark.pos.column) == (2, 8)
    # Spark's clause is blanked from the block's SQL (Spark would not accept it in a batch)
    assert "WATERMARK" not in block.sql and "FROM t " in block.sql


def test_spark_relation_watermark_does_not_override_given_clauses() -> None:
    text = ("SELECT k, COUNT(*) FROM t WATERMARK ts DELAY OF INTERVAL 2 MINUTES GROUP BY k "
            "WINDOW FIXED(1 MINUTE) ON other WATERMARK DELAY 5 SECONDS")
    cl = parse_statement(text).blocks[-1].clauses
    assert cl.on == Expr("other")
    assert cl.watermark == WatermarkDelay(delay=Duration(5 * S))


def test_processing_time_and_lateness() -> None:
    cl = both("WINDOW FIXED(2 MINUTES) ON ts\nPROCESSING TIME arrival_time\n"
              "ALLOWED LATENESS 10 MINUTES")
    assert cl == Clauses(window=FixedWindows(size=Duration(2 * MIN)), on=ON,
                         processing_time=Expr("arrival_time"),
                         allowed_lateness=Duration(10 * MIN))


def test_late_rows_into() -> None:
    cl = both("WINDOW FIXED(2 MINUTES) ON ts ALLOWED LATENESS 1 HOUR LATE ROWS INTO too_late")
    assert cl == Clauses(window=FixedWindows(size=Duration(2 * MIN)), on=ON,
                         allowed_lateness=Duration(H), late_rows_into="too_late")


def test_processing_time_expression_stops_at_next_clause() -> None:
    cl = both("WINDOW GLOBAL PROCESSING TIME CAST(arrival AS TIMESTAMP) TRIGGER NEVER")
    assert cl.processing_time == Expr("CAST(arrival AS TIMESTAMP)")
    assert cl.trigger == Never()


# --------------------------------------------------------------------------- §5 triggers

PT1M = AtPeriod(period=Duration(MIN))
TRIGGERS: dict[str, tuple[str, Trigger, str]] = {
    "watermark": ("WATERMARK", EOW, "EndOfWindow"),
    "at_watermark": ("AT WATERMARK", EOW, "EndOfWindow"),
    "after_rows": ("AFTER 3 ROWS", ElemCount(count=3), "ElemCount(3)"),
    "after_row": ("AFTER 1 ROW", ElemCount(count=1), "ElemCount(1)"),
    "after_delay": ("AFTER 30 SECONDS", SinceEarliestElem(delay=Duration(30 * S)),
                    "SinceEarliestElem(30s)"),
    "every_period": ("EVERY 1 MINUTE", Repeat(sub=PT1M), "Repeat(AtPeriod(1m))"),
    "every_rows": ("EVERY 2 ROWS", Repeat(sub=ElemCount(count=2)), "Repeat(ElemCount(2))"),
    "never": ("NEVER", Never(), "Never"),
    "any": ("ANY(AFTER 5 ROWS, WATERMARK)", AfterFirst(subs=(ElemCount(count=5), EOW)),
            "AfterFirst(ElemCount(5), EndOfWindow)"),
    "all": ("ALL(AFTER 1 MINUTE, AFTER 2 ROWS)",
            AfterAll(subs=(SinceEarliestElem(delay=Duration(MIN)), ElemCount(count=2))),
            "AfterAll(SinceEarliestElem(1m), ElemCount(2))"),
    "repeat": ("REPEAT AFTER 2 ROWS", Repeat(sub=ElemCount(count=2)), "Repeat(ElemCount(2))"),
    "repeat_repeat": ("REPEAT REPEAT WATERMARK", Repeat(sub=EOW), "Repeat(EndOfWindow)"),
    "repeat_every": ("REPEAT EVERY 1 MINUTE", Repeat(sub=PT1M), "Repeat(AtPeriod(1m))"),
    "parens": ("(WATERMARK)", EOW, "EndOfWindow"),
    "repeat_any": ("REPEAT ANY(AFTER 1 ROW, AFTER 1 SECOND)",
                   Repeat(sub=AfterFirst(subs=(ElemCount(count=1),
                                               SinceEarliestElem(delay=Duration(S))))),
                   "Repeat(AfterFirst(ElemCount(1), SinceEarliestElem(1s)))"),
    "early": ("AT WATERMARK EARLY EVERY 1 MINUTE",
              OrFinally(main=Repeat(sub=PT1M), final=EOW),
              "OrFinally(Repeat(AtPeriod(1m)), EndOfWindow)"),
    "late": ("AT WATERMARK LATE AFTER 1 ROW",
             AfterEach(subs=(EOW, Repeat(sub=ElemCount(count=1)))),
             "AfterEach(EndOfWindow, Repeat(ElemCount(1)))"),
    "early_late": ("AT WATERMARK EARLY AFTER 1 MINUTE LATE AFTER 1 ROW",
                   AfterEach(subs=(OrFinally(main=Repeat(sub=SinceEarliestElem(
                       delay=Duration(MIN))), final=EOW), Repeat(sub=ElemCount(count=1)))),
                   "AfterEach(OrFinally(Repeat(SinceEarliestElem(1m)), EndOfWindow), "
                   "Repeat(ElemCount(1)))"),
    "until": ("EVERY 1 MINUTE UNTIL WATERMARK", OrFinally(main=Repeat(sub=PT1M), final=EOW),
              "OrFinally(Repeat(AtPeriod(1m)), EndOfWindow)"),
    "until_wraps_repeat": ("AFTER 2 ROWS UNTIL WATERMARK",
                           OrFinally(main=Repeat(sub=ElemCount(count=2)), final=EOW),
                           "OrFinally(Repeat(ElemCount(2)), EndOfWindow)"),
    "finally": ("AFTER 2 ROWS FINALLY WATERMARK", OrFinally(main=ElemCount(count=2), final=EOW),
                "OrFinally(ElemCount(2), EndOfWindow)"),
    "then": ("AFTER 2 ROWS THEN WATERMARK", AfterEach(subs=(ElemCount(count=2), EOW)),
             "AfterEach(ElemCount(2), EndOfWindow)"),
    "then_chain": ("AFTER 1 ROW THEN AFTER 2 ROWS THEN NEVER",
                   AfterEach(subs=(ElemCount(count=1), ElemCount(count=2), Never())),
                   "AfterEach(ElemCount(1), ElemCount(2), Never)"),
    "figure13": ("EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK",
                 AfterEach(subs=(OrFinally(main=Repeat(sub=PT1M), final=EOW), Repeat(sub=EOW))),
                 "AfterEach(OrFinally(Repeat(AtPeriod(1m)), EndOfWindow), Repeat(EndOfWindow))"),
    # precedence: UNTIL binds tighter than FINALLY, which binds tighter than THEN
    "until_then_finally": ("EVERY 1 MINUTE UNTIL WATERMARK FINALLY AFTER 9 ROWS THEN NEVER",
                           AfterEach(subs=(OrFinally(main=OrFinally(main=Repeat(sub=PT1M),
                                                                     final=EOW),
                                                     final=ElemCount(count=9)), Never())),
                           "AfterEach(OrFinally(OrFinally(Repeat(AtPeriod(1m)), EndOfWindow), "
                           "ElemCount(9)), Never)"),
    "then_finally": ("WATERMARK THEN AFTER 1 ROW FINALLY AFTER 1 HOUR",
                     AfterEach(subs=(EOW, OrFinally(main=ElemCount(count=1),
                                                    final=SinceEarliestElem(delay=Duration(H))))),
                     "AfterEach(EndOfWindow, OrFinally(ElemCount(1), SinceEarliestElem(1h)))"),
    "parens_override": ("(AFTER 1 ROW THEN AFTER 2 ROWS) FINALLY WATERMARK",
                        OrFinally(main=AfterEach(subs=(ElemCount(count=1), ElemCount(count=2))),
                                  final=EOW),
                        "OrFinally(AfterEach(ElemCount(1), ElemCount(2)), EndOfWindow)"),
    "nested_in_any": ("ANY(AFTER 1 ROW THEN AFTER 2 ROWS, WATERMARK)",
                      AfterFirst(subs=(AfterEach(subs=(ElemCount(count=1), ElemCount(count=2))),
                                       EOW)),
                      "AfterFirst(AfterEach(ElemCount(1), ElemCount(2)), EndOfWindow)"),
}


@pytest.mark.parametrize("trig,tree,text", TRIGGERS.values(), ids=TRIGGERS.keys())
def test_trigger_forms(trig: str, tree: Trigger, text: str) -> None:
    cl = both(f"WINDOW FIXED(1 MINUTE) ON ts\nTRIGGER {trig}")
    assert cl == Clauses(window=FixedWindows(size=Duration(MIN)), on=ON, trigger=tree)
    assert str(cl.trigger) == text
    assert cl.trigger_given


def test_desugaring_rules() -> None:
    t, u = "AFTER 3 ROWS", "AFTER 10 SECONDS"
    tt, uu = ElemCount(count=3), SinceEarliestElem(delay=Duration(10 * S))

    def trig(x: str) -> Trigger:
        return both(f"WINDOW GLOBAL TRIGGER {x}").trigger

    assert trig(f"AT WATERMARK EARLY {t} LATE {u}") == AfterEach(
        subs=(OrFinally(main=Repeat(sub=tt), final=EOW), Repeat(sub=uu)))
    assert trig(f"{t} UNTIL {u}") == OrFinally(main=Repeat(sub=tt), final=uu)
    assert trig(f"{t} UNTIL {u}") == trig(f"(REPEAT {t}) FINALLY {u}")
    assert trig(f"REPEAT REPEAT {t}") == Repeat(sub=tt) == trig(f"REPEAT {t}")
    assert trig("EVERY 4 ROWS") == Repeat(sub=ElemCount(count=4)) == trig("REPEAT AFTER 4 ROWS")
    assert trig("AT WATERMARK") == trig("WATERMARK") == EOW


def test_trigger_positions() -> None:
    text = ("SELECT k, COUNT(*) FROM t GROUP BY k\nWINDOW FIXED(1 MINUTE) ON ts\n"
            "TRIGGER AFTER 2 ROWS\n   THEN ANY(WATERMARK, NEVER)")
    tr = clauses_of(text).trigger
    assert isinstance(tr, AfterEach)
    first, second = tr.subs
    assert (first.pos.line, first.pos.column) == (3, 9)
    assert isinstance(second, AfterFirst)
    assert (second.pos.line, second.pos.column) == (4, 9)
    assert [(s.pos.line, s.pos.column) for s in second.subs] == [(4, 13), (4, 24)]
    assert second.subs[0].pos == Pos(4, 13, second.subs[0].pos.offset)


def test_defaults() -> None:
    cl = both("WINDOW FIXED(1 MINUTE) ON ts")
    assert cl.trigger == Repeat(sub=EndOfWindow())
    assert str(cl.trigger) == "Repeat(EndOfWindow)"
    assert cl.accumulation is Accumulation.ACCUMULATING
    assert cl.allowed_lateness == Duration(0) and cl.late_rows_into is None
    assert cl.processing_time is None
    assert not (cl.trigger_given or cl.emit_given or cl.watermark_given)


# --------------------------------------------------------------------------- §6 emit

EMITS = {
    "discarding": ("EMIT DISCARDING", Accumulation.DISCARDING),
    "accumulating": ("EMIT ACCUMULATING", Accumulation.ACCUMULATING),
    "retracting": ("EMIT ACCUMULATING AND RETRACTING", Accumulation.ACCUMULATING_AND_RETRACTING),
}


@pytest.mark.parametrize("ext,mode", EMITS.values(), ids=EMITS.keys())
def test_emit_forms(ext: str, mode: Accumulation) -> None:
    cl = both(f"WINDOW GLOBAL\n{ext}")
    assert cl == Clauses(window=GlobalWindows(), accumulation=mode)
    assert cl.emit_given


def test_case_insensitive_keywords() -> None:
    lower = both("window sliding(10 minutes, every 1 min, offset 5 s) on ts "
                 "watermark percentile 90 delay 1 sec processing time arr "
                 "allowed lateness 1 h late rows into lr "
                 "trigger at watermark early every 1 minute late after 1 row "
                 "emit accumulating and retracting")
    mixed = both("Window Sliding(10 Minutes, Every 1 Min, Offset 5 S) On ts "
                 "WaterMark Percentile 90 Delay 1 Sec Processing Time arr "
                 "Allowed Lateness 1 H Late Rows Into lr "
                 "Trigger At Watermark Early Every 1 Minute Late After 1 Row "
                 "Emit Accumulating And Retracting")
    expected = Clauses(
        window=SlidingWindows(size=Duration(10 * MIN), period=Duration(MIN), offset=Duration(5 * S)),
        on=ON,
        watermark=WatermarkPercentile(percentile=90.0, delay=Duration(S)),
        processing_time=Expr("arr"),
        allowed_lateness=Duration(H),
        late_rows_into="lr",
        trigger=AfterEach(subs=(OrFinally(main=Repeat(sub=PT1M), final=EOW),
                                Repeat(sub=ElemCount(count=1)))),
        accumulation=Accumulation.ACCUMULATING_AND_RETRACTING,
    )
    assert lower == expected and mixed == expected


def test_clauses_str() -> None:
    cl = both("WINDOW FIXED(2 MINUTES) ON ts WATERMARK FROM wm PROCESSING TIME arr "
              "ALLOWED LATENESS 10 MINUTES TRIGGER EVERY 1 MINUTE UNTIL WATERMARK "
              "THEN REPEAT WATERMARK")
    assert str(cl) == (
        "WINDOW FIXED(2m) ON ts\nWATERMARK FROM wm\nPROCESSING TIME arr\n"
        "ALLOWED LATENESS 10m\n"
        "TRIGGER AfterEach(OrFinally(Repeat(AtPeriod(1m)), EndOfWindow), Repeat(EndOfWindow))\n"
        "EMIT ACCUMULATING")


def test_parse_clauses_allows_comments() -> None:
    cl = parse_clauses("WINDOW GLOBAL -- everything\n/* when */ TRIGGER NEVER")
    assert cl == Clauses(window=GlobalWindows(), trigger=Never())


# --------------------------------------------------------------------------- the paper's figures

FIG_PT = Expr("arrival_time")
FIG_WM = WatermarkFrom(table="paper_watermarks")
FIG_TRIGGER = AfterEach(subs=(OrFinally(main=Repeat(sub=PT1M), final=EOW), Repeat(sub=EOW)))
FIGURE_CLAUSES: dict[str, Clauses] = {
    "fig06_batch_global": Clauses(window=GlobalWindows()),
    "fig07_global_every_minute_accumulating": Clauses(
        window=GlobalWindows(), processing_time=FIG_PT, trigger=Repeat(sub=PT1M),
        accumulation=Accumulation.ACCUMULATING),
    "fig08_global_every_minute_discarding": Clauses(
        window=GlobalWindows(), processing_time=FIG_PT, trigger=Repeat(sub=PT1M),
        accumulation=Accumulation.DISCARDING),
    "fig09_global_every_2_rows_discarding": Clauses(
        window=GlobalWindows(), processing_time=FIG_PT, trigger=Repeat(sub=ElemCount(count=2)),
        accumulation=Accumulation.DISCARDING),
    "fig10_fixed_batch": Clauses(window=FixedWindows(size=Duration(2 * MIN)),
                                 on=Expr("event_time")),
    "fig12_fixed_streaming": Clauses(
        window=FixedWindows(size=Duration(2 * MIN)), on=Expr("event_time"), watermark=FIG_WM,
        processing_time=FIG_PT, allowed_lateness=Duration(10 * MIN)),
    "fig13_fixed_early_ontime_late": Clauses(
        window=FixedWindows(size=Duration(2 * MIN)), on=Expr("event_time"), watermark=FIG_WM,
        processing_time=FIG_PT, allowed_lateness=Duration(10 * MIN), trigger=FIG_TRIGGER),
    "fig14_sessions_retracting": Clauses(
        window=SessionWindows(gap=Duration(MIN)), on=Expr("event_time"), watermark=FIG_WM,
        processing_time=FIG_PT, allowed_lateness=Duration(10 * MIN), trigger=FIG_TRIGGER,
        accumulation=Accumulation.ACCUMULATING_AND_RETRACTING),
    "fig14_sessions_accumulating": Clauses(
        window=SessionWindows(gap=Duration(MIN)), on=Expr("event_time"), watermark=FIG_WM,
        processing_time=FIG_PT, allowed_lateness=Duration(10 * MIN), trigger=FIG_TRIGGER),
    "fig14_sessions_discarding": Clauses(
        window=SessionWindows(gap=Duration(MIN)), on=Expr("event_time"), watermark=FIG_WM,
        processing_time=FIG_PT, allowed_lateness=Duration(10 * MIN), trigger=FIG_TRIGGER,
        accumulation=Accumulation.DISCARDING),
}


def _figures() -> dict[str, str]:
    data = json.loads(FIGURES.read_text())
    return {f["name"]: f["query"] for f in data["figures"]}


def test_all_ten_figures_covered() -> None:
    assert set(_figures()) == set(FIGURE_CLAUSES) and len(FIGURE_CLAUSES) == 10


@pytest.mark.parametrize("name", FIGURE_CLAUSES)
def test_figure(name: str) -> None:
    text = _figures()[name]
    stmt = parse_statement(text)
    assert len(stmt.blocks) == 1 and stmt.top is stmt.blocks[-1]
    assert stmt.blocks[-1].clauses == FIGURE_CLAUSES[name]
    ext = text[text.index("WINDOW"):]
    assert parse_clauses(ext) == FIGURE_CLAUSES[name]
    cl = stmt.blocks[-1].clauses
    assert (cl.pos.line, cl.pos.column) == (4, 1)
    assert stmt.blocks[-1].sql.split("\n")[:3] == text.split("\n")[:3]


def test_figure13_trigger_prints_spec_notation() -> None:
    tr = parse_statement(_figures()["fig13_fixed_early_ontime_late"]).blocks[-1].clauses.trigger
    assert str(tr) == ("AfterEach(OrFinally(Repeat(AtPeriod(1m)), EndOfWindow), "
                       "Repeat(EndOfWindow))")
    # an operator node sits at its operator: THEN's first step is the UNTIL at col 24
    assert (tr.pos.line, tr.pos.column) == (8, 24)
    assert isinstance(tr, AfterEach)
    assert [(s.pos.line, s.pos.column) for s in tr.subs] == [(8, 24), (8, 45)]


# --------------------------------------------------------------------------- nesting

INNER = ("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(1 MINUTE) ON ts "
         "EMIT ACCUMULATING AND RETRACTING")
INNER_CLAUSES = Clauses(window=FixedWindows(size=Duration(MIN)), on=ON,
                        accumulation=Accumulation.ACCUMULATING_AND_RETRACTING)


def test_windowed_cte() -> None:
    text = f"WITH a AS ({INNER})\nSELECT * FROM a WHERE n > 1"
    stmt = parse_statement(text)
    assert len(stmt.blocks) == 1
    b = stmt.blocks[0]
    assert b.clauses == INNER_CLAUSES and b.view_name == "__dfsql_w0"
    assert stmt.top is None
    assert text[b.span[0]:b.span[1]] == INNER
    assert b.sql.rstrip() == "SELECT k, COUNT(*) AS n FROM t GROUP BY k"


def test_windowed_over_windowed_cte() -> None:
    text = (f"WITH a AS (\n  {INNER}\n)\nSELECT k, SUM(n) AS total FROM a GROUP BY k\n"
            "WINDOW GLOBAL ON window_end\nEMIT DISCARDING")
    stmt = parse_statement(text)
    inner, outer = stmt.blocks
    assert (inner.index, outer.index) == (0, 1)
    assert inner.clauses == INNER_CLAUSES
    assert outer.clauses == Clauses(window=GlobalWindows(), on=Expr("window_end"),
                                    accumulation=Accumulation.DISCARDING)
    assert outer.inner == (0,) and inner.inner == ()
    assert stmt.top is outer
    assert "__dfsql_w0" in outer.sql and INNER not in outer.sql
    assert outer.sql.startswith("WITH a AS (SELECT * FROM __dfsql_w0 ")
    # offsets in a block's sql are the statement's offsets
    assert len(outer.sql) == outer.span[1] - outer.span[0]
    assert outer.sql.index("SELECT k, SUM(n)") == text.index("SELECT k, SUM(n)")
    assert "WINDOW" not in outer.sql
    assert (outer.clauses.pos.line, outer.clauses.pos.column) == (5, 1)
    assert (inner.clauses.pos.line, inner.clauses.pos.column) == (2, 45)


def test_windowed_subquery() -> None:
    text = f"SELECT x.k FROM ({INNER}) x\nWHERE x.n > 2"
    stmt = parse_statement(text)
    assert [b.clauses for b in stmt.blocks] == [INNER_CLAUSES]
    assert stmt.top is None and stmt.kind == "query"


def test_three_levels_innermost_first() -> None:
    text = (f"SELECT k, MAX(c) AS m FROM (SELECT k, COUNT(*) AS c FROM ({INNER}) i GROUP BY k "
            "WINDOW GLOBAL ON window_end) j GROUP BY k WINDOW GLOBAL ON window_end")
    blocks = parse_statement(text).blocks
    assert [b.index for b in blocks] == [0, 1, 2]
    assert blocks[0].clauses == INNER_CLAUSES
    assert blocks[1].inner == (0,) and blocks[2].inner == (1,)
    assert "__dfsql_w0" in blocks[1].sql and "__dfsql_w1" in blocks[2].sql
    assert "__dfsql_w0" not in blocks[2].sql


def test_create_temp_view() -> None:
    stmt = parse_statement(f"CREATE TEMP VIEW v AS {INNER}")
    assert stmt.kind == "create_view" and stmt.view_name == "v" and stmt.view_temporary
    assert [b.clauses for b in stmt.blocks] == [INNER_CLAUSES]
    assert stmt.top is stmt.blocks[0]
    assert stmt.body_start == len("CREATE TEMP VIEW v AS ")


def test_explain() -> None:
    stmt = parse_statement(f"EXPLAIN {INNER}")
    assert stmt.kind == "explain" and stmt.body_start == len("EXPLAIN ")
    assert [b.clauses for b in stmt.blocks] == [INNER_CLAUSES]
    assert stmt.top is stmt.blocks[0]


def test_parenthesized_union_of_windowed_selects() -> None:
    text = f"({INNER})\nUNION ALL\n({INNER.replace('FROM t', 'FROM u')})"
    stmt = parse_statement(text)
    assert len(stmt.blocks) == 2 and all(b.clauses == INNER_CLAUSES for b in stmt.blocks)


# --------------------------------------------------------------------------- not windowed

NOT_WINDOWED = {
    "named_window": "SELECT k, SUM(v) OVER w FROM t WINDOW w AS (PARTITION BY k ORDER BY ts)",
    "named_window_lower": "select k, rank() over w from t window w as (order by ts)",
    "window_fn": "SELECT window(ts, '1 minute') AS w, COUNT(*) FROM t "
                 "GROUP BY window(ts, '1 minute')",
    "window_fn_grouped_first": "SELECT COUNT(*) FROM t GROUP BY window(ts, '5 minutes'), k",
    "session_window_fn": "SELECT session_window(ts, '1 minute'), COUNT(*) FROM t "
                         "GROUP BY session_window(ts, '1 minute')",
    "window_struct_field": "SELECT window.start, COUNT(*) FROM t GROUP BY window",
    "string": "SELECT 'WINDOW FIXED(1 MINUTE) TRIGGER NEVER EMIT DISCARDING' AS s FROM t",
    "double_quoted_string": 'SELECT "TRIGGER EVERY 1 MINUTE" FROM t',
    "line_comment": "SELECT k FROM t -- WINDOW GLOBAL TRIGGER NEVER\nWHERE k > 1",
    "block_comment": "SELECT k FROM t /* WINDOW GLOBAL\nEMIT DISCARDING */ WHERE k > 1",
    "backticked": "SELECT `WINDOW GLOBAL` FROM t",
    "plain_aggregate": "SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k",
    "not_a_query": "SHOW TABLES",
}


@pytest.mark.parametrize("text", NOT_WINDOWED.values(), ids=NOT_WINDOWED.keys())
def test_no_windowed_block(text: str) -> None:
    stmt = parse_statement(text)
    assert stmt.blocks == () and not stmt.windowed and stmt.top is None
    assert stmt.text == text


def test_comment_inside_extension_clauses() -> None:
    text = HEAD + "WINDOW GLOBAL -- TRIGGER NEVER\n/* EMIT DISCARDING */ TRIGGER EVERY 2 ROWS"
    cl = clauses_of(text)
    assert cl == Clauses(window=GlobalWindows(), trigger=Repeat(sub=ElemCount(count=2)))


def test_kind_other() -> None:
    assert parse_statement("SHOW TABLES").kind == "other"
    assert parse_statement("VALUES (1)").kind == "query"
