"""The trigger's printed notation (docs/reference.md#trigger), one home:
``model.trigger_notation`` (``notation``, ``leaf_text``, ``duration_text``). A trigger is
printed in the language's own words — ``WATERMARK``, ``AFTER 2 ROWS``, ``EVERY 1 MINUTE``,
``x UNTIL y``, ``x FINALLY y``, ``a THEN b``, ``ANY(...)``, ``ALL(...)``, ``REPEAT x``,
``NEVER`` — with parentheses where an operand binds looser than its operator, so the
parser reads every form of the grammar back to the same tree. EXPLAIN FIRINGS' details
(which the shell's plots read) name the firing leaves through it."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from dfsql.language.parse import parse_clauses
from dfsql.model import clauses as c
from dfsql.model import firings, group_also_by_window, timeline_for, trigger_notation
from dfsql.model.result import end_floor_of
from dfsql.model.trigger_notation import duration_text, leaf_text, notation

MIN = c.Duration(60_000_000)

#: every form of dfsql.lark's trigger rule, and combinations of them
FORMS = [
    "WATERMARK", "AT WATERMARK", "AT WATERMARK EARLY EVERY 1 MINUTE",
    "AT WATERMARK LATE AFTER 1 ROW", "AT WATERMARK EARLY EVERY 1 MINUTE LATE EVERY 2 ROWS",
    "AFTER 1 ROW", "AFTER 3 ROWS", "AFTER 90 SECONDS", "AFTER 1500 MILLISECONDS",
    "AFTER INTERVAL '2' HOUR", "EVERY 1 ROW", "EVERY 2 ROWS", "EVERY 1 MINUTE",
    "EVERY 1 DAY", "EVERY 250 MS", "NEVER", "ANY(AFTER 5 ROWS, WATERMARK)",
    "ALL(AFTER 5 ROWS, AFTER 1 MINUTE)", "ANY(ALL(AFTER 1 ROW, WATERMARK), NEVER)",
    "REPEAT AFTER 2 ROWS", "REPEAT WATERMARK", "REPEAT EVERY 1 MINUTE",
    "REPEAT (AFTER 1 ROW THEN AFTER 2 ROWS)", "REPEAT ANY(AFTER 1 MINUTE, AFTER 1 ROW)",
    "(WATERMARK)", "EVERY 1 MINUTE UNTIL WATERMARK", "AFTER 2 ROWS UNTIL WATERMARK",
    "EVERY 2 ROWS FINALLY WATERMARK", "AFTER 1 MINUTE FINALLY WATERMARK",
    "AFTER 1 ROW THEN WATERMARK", "EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK",
    "(AFTER 2 ROWS UNTIL WATERMARK) THEN REPEAT ANY(AFTER 1 MINUTE, AFTER 1 ROW)",
    "AFTER 1 ROW THEN (AFTER 2 ROWS THEN WATERMARK)",
    "(AFTER 1 ROW THEN AFTER 2 ROWS) THEN WATERMARK",
    "(AFTER 1 ROW FINALLY WATERMARK) FINALLY NEVER",
    "ANY(AFTER 1 ROW FINALLY WATERMARK, AFTER 1 ROW THEN WATERMARK)",
    "REPEAT (EVERY 1 MINUTE UNTIL WATERMARK)",
]


def _trigger(text: str) -> c.Trigger:
    return parse_clauses(f"WINDOW FIXED(1 HOUR) ON et TRIGGER {text}").trigger


@pytest.mark.parametrize("text", FORMS)
def test_parse_of_notation_round_trips(text) -> None:
    t = _trigger(text)  # every form is the grammar's: a parse error fails the test
    assert _trigger(notation(t)) == t, notation(t)


def test_notation_by_hand() -> None:
    """The language's words, written back from parsed triggers (docs/reference.md#trigger)."""
    t = c.AfterEach(subs=(c.OrFinally(main=c.Repeat(sub=c.ElemCount(count=2)),
                                      final=c.EndOfWindow()),
                          c.Repeat(sub=c.AfterFirst(subs=(c.SinceEarliestElem(delay=MIN),
                                                          c.ElemCount(count=1))))))
    assert notation(t) == "(AFTER 2 ROWS UNTIL WATERMARK) THEN REPEAT ANY(AFTER 1 " \
                          "MINUTE, AFTER 1 ROW)"
    assert leaf_text(t, (0, 0, 0)) == "EVERY 2 ROWS in AFTER 2 ROWS UNTIL WATERMARK, " \
                                      "before UNTIL, THEN branch 1"
    assert leaf_text(t, (1, 0, 0)) == "AFTER 1 MINUTE in ANY(AFTER 1 MINUTE, AFTER 1 ROW), " \
                                      "THEN branch 2"
    assert notation(c.DEFAULT_TRIGGER) == "REPEAT WATERMARK"
    # an UNTIL, FINALLY or THEN operand of THEN is parenthesised (not needed, but clear)
    assert notation(_trigger("AT WATERMARK EARLY EVERY 1 MINUTE LATE EVERY 2 ROWS")) == \
        "(EVERY 1 MINUTE UNTIL WATERMARK) THEN EVERY 2 ROWS"
    assert [duration_text(c.Duration(d)) for d in (60_000_000, 90_000_000, 1_500_000)] == \
        ["1 MINUTE", "90 SECONDS", "1500 MILLISECONDS"]


def test_explain_firings_names_leaves_through_the_notation() -> None:
    """EXPLAIN FIRINGS' FIRE details (the shell's plots read the leaf from them) print the
    firing leaf with :func:`leaf_text`: AFTER 2 ROWS fires the pane of rows 1 and 2."""
    assert firings.leaf_text is trigger_notation.leaf_text
    assert firings.duration_text is trigger_notation.duration_text
    cl = parse_clauses("WINDOW GLOBAL ON et WATERMARK DELAY 0 SECONDS PROCESSING TIME at "
                       "TRIGGER AFTER 2 ROWS THEN WATERMARK")
    k, e, a = np.zeros(3, np.int64), np.array([1, 2, 3], np.int64), np.array([1, 2, 3], np.int64)
    tl = timeline_for(cl.watermark, e, a)
    end = end_floor_of(cl.trigger, 3, tl)
    rec = firings.Recorder(cl, dt.timezone.utc, firings.final_watermark(cl, tl, end), "")
    res = group_also_by_window(k, e, a, cl, tl, recorder=rec)
    ev = firings.events(res, rec, k, e, a, tl)
    fire = [d for code, d in zip(ev.code.tolist(), ev.detail.tolist(), strict=True)
            if code == firings.FIRE]
    assert fire[0].startswith(leaf_text(cl.trigger, (0,))), fire
    assert leaf_text(cl.trigger, (0,)) == "AFTER 2 ROWS, THEN branch 1"
