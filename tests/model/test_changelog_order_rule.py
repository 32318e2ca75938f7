"""docs/reference.md#output-columns's changelog order, one home: ``model.changelog.CHANGELOG_ORDER``.
A replayed or streamed result's rows come ordered by emit_time, then the GROUP BY keys,
then window_start and pane_index; a retraction sorts immediately before the row that
replaces it (the window's next pane, or for a window merged away the merged window's
pane); several retractions before one row come in their own window_start order.

Every path is held to it over the same hand-made rows, whose order is read off the rule
by hand: the model's sort (``changelog_order``), the changelog places the replay and the
stream sort by (``changelog_ranks``, linear and by sort), the reference run's sort, and
the ORDER BY the rewrite renders from the rule, run on Spark.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dfsql.language import parse_statement
from dfsql.language.model_run import run
from dfsql.language.rewrite import rewrite
from dfsql.model.changelog import (
    changelog_order,
    changelog_ranks,
    changelog_ranks_by_sort,
    emission_place,
    retraction_place,
)
from dfsql.model.reference import _changelog

# Panes: (key, window_start, pane_index, emit_time); retractions: (retracted pane,
# emit_time, replacing pane or -1). Rows are named +i (pane i) and -i (its retraction).

# Windows that do not merge. Key a: window 0 fires EARLY (+0) and ON_TIME (+1) at 5, its
# retraction -0 between them (+EARLY, -EARLY, +ON_TIME); window 10's first pane +2 after
# them (window_start); a LATE +4 at 8 replaces +1 (-1 before it). Key b's +3 at 3 comes
# first (emit_time). Key c: +5 at 1 is retracted at 4 with no replacing pane: -5 sorts
# where its window's next pane (window_start 0, pane_index 1) would, before +6
# (window_start 5).
PLAIN_PANES = [("a", 0, 0, 5), ("a", 0, 1, 5), ("a", 10, 0, 5), ("b", 0, 0, 3),
               ("a", 0, 2, 8), ("c", 0, 0, 1), ("c", 5, 0, 4)]
PLAIN_RETRACTIONS = [(0, 5, 1), (1, 8, 4), (5, 4, -1)]
PLAIN_ORDER = ["+5", "+3", "-5", "+6", "+0", "-0", "+1", "+2", "-1", "+4"]

# Sessions (Figure 14's shape). Key a: +0 [0, 30) and +1 [40, 70) at 2; at 7 both merge
# into +2 [0, 70): their retractions sort immediately before it, in their own
# window_start order (-0, -1) although listed the other way. Key b's +3 at 7 comes after
# key a's rows (keys).
MERGE_PANES = [("a", 0, 0, 2), ("a", 40, 0, 2), ("a", 0, 0, 7), ("b", 0, 0, 7)]
MERGE_RETRACTIONS = [(1, 7, 2), (0, 7, 2)]
MERGE_ORDER = ["+0", "+1", "-0", "-1", "+2", "+3"]

DATA = {"plain": (PLAIN_PANES, PLAIN_RETRACTIONS, PLAIN_ORDER),
        "merging": (MERGE_PANES, MERGE_RETRACTIONS, MERGE_ORDER)}
KEY_ID = {"a": 0, "b": 1, "c": 2}


def _arrays(panes, retractions):
    key, ws, pi, emit = (np.asarray(x) for x in zip(*panes, strict=True))
    rp, remit, repl = (np.asarray(x, np.int64) for x in zip(*retractions, strict=True))
    return (np.asarray([KEY_ID[k] for k in key], np.int64), emit.astype(np.int64),
            ws.astype(np.int64), pi.astype(np.int64), rp, remit, repl)


def _names(panes, retractions) -> list[str]:
    return [f"+{i}" for i in range(len(panes))] + [f"-{r}" for r, _, _ in retractions]


@pytest.mark.parametrize("data", list(DATA))
def test_model_sort(data) -> None:
    panes, retractions, want = DATA[data]
    names = _names(panes, retractions)
    assert [names[i] for i in changelog_order(*_arrays(panes, retractions))] == want


@pytest.mark.parametrize("ranks", [changelog_ranks, changelog_ranks_by_sort])
@pytest.mark.parametrize("data", list(DATA))
def test_changelog_places(data, ranks) -> None:
    """The replay and the stream sort each run's rows by (emit_time, keys, place)."""
    panes, retractions, want = DATA[data]
    key, emit, ws, pi, rp, remit, repl = _arrays(panes, retractions)
    r = SimpleNamespace(pane_key=key, pane_emit_time=emit, pane_index=pi,
                        retraction_pane=rp, retraction_emit_time=remit,
                        retraction_replacing=repl)
    packed = ranks(r, ws)
    place = np.r_[emission_place(packed), retraction_place(packed[rp])]
    o = np.lexsort((place, np.r_[key, key[rp]], np.r_[emit, remit]))
    names = _names(panes, retractions)
    assert [names[i] for i in o] == want


@pytest.mark.parametrize("data", list(DATA))
def test_reference_run_sort(data) -> None:
    panes, retractions, want = DATA[data]
    key, emit, ws, pi, rp, remit, repl = _arrays(panes, retractions)
    n = len(panes)
    res = SimpleNamespace(
        panes=SimpleNamespace(key=key, window_start=ws, window_end=ws + 30, pane_index=pi,
                              timing=np.zeros(n, np.int8), is_last=np.zeros(n, bool),
                              emit_time=emit),
        retractions=SimpleNamespace(retracted_pane_id=rp, emit_time=remit,
                                    replacing_pane_id=repl))
    rows = _changelog(res, list(range(n)), {v: k for k, v in KEY_ID.items()}, False, False)
    got = [("-" if r["is_retraction"] else "+") + str(r["value"]) for r in rows]
    assert got == want


def test_reference_run_early_then_on_time_at_one_instant() -> None:
    """§7's example end to end. a's 1 arrives at 1 s (EARLY pane 0); a's 2 arrives at 2 s,
    the end of the input: an EARLY pane 1 fires, then the watermark goes to +inf and the
    ON_TIME pane 2 fires at the same instant: +EARLY, -EARLY, +ON_TIME, each retraction
    immediately before its window's next pane."""
    rows = run([("a", 1, 0, 1), ("a", 2, 5, 2)],
               "WINDOW FIXED(10 SECONDS) WATERMARK DELAY 60 SECONDS PROCESSING TIME x "
               "TRIGGER AT WATERMARK EARLY EVERY 1 ROW EMIT ACCUMULATING AND RETRACTING")
    assert [(r["emit_time"], r["pane_index"], r["pane_timing"], r["is_retraction"])
            for r in rows] == [(1, 0, "EARLY", False), (2, 0, "EARLY", True),
                               (2, 1, "EARLY", False), (2, 1, "EARLY", True),
                               (2, 2, "ON_TIME", False)]


QUERY = ("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW {window} ON et "
         "PROCESSING TIME pt EMIT ACCUMULATING AND RETRACTING")
WINDOWS = {"plain": "FIXED(10 SECONDS)", "merging": "SESSIONS(GAP 30 SECONDS)"}


@pytest.mark.parametrize("data", list(DATA))
def test_sql_order_by_on_spark(spark, data) -> None:
    """The rewrite's default ORDER BY over the hand-made rows, scrambled, on Spark. Where
    windows merge it reads the hidden place the model gives each row."""
    panes, retractions, want = DATA[data]
    stmt = parse_statement(QUERY.format(window=WINDOWS[data]))
    order_by = rewrite(stmt.blocks[-1], stmt.source).default_order_by
    assert order_by is not None
    key, emit, ws, pi, rp, remit, repl = _arrays(panes, retractions)
    r = SimpleNamespace(pane_key=key, pane_emit_time=emit, pane_index=pi,
                        retraction_pane=rp, retraction_emit_time=remit,
                        retraction_replacing=repl)
    packed = changelog_ranks(r, ws)
    place = np.r_[emission_place(packed), retraction_place(packed[rp])]
    names = _names(panes, retractions)
    ids = np.r_[np.arange(len(panes)), rp]
    keys = [panes[i][0] for i in ids.tolist()]
    rows = [(names[j], keys[j], int(ws[ids[j]]), int(pi[ids[j]]), j >= len(panes),
             int(np.r_[emit, remit][j]), int(place[j])) for j in range(len(names))]
    rows = rows[::-1]  # scrambled: not in the wanted order
    df = spark.createDataFrame(rows, "name STRING, k STRING, window_start BIGINT, "
                                     "pane_index BIGINT, is_retraction BOOLEAN, "
                                     "emit_time BIGINT, __sort_rank BIGINT")
    df.createOrReplaceTempView("changelog_rule_rows")
    got = spark.sql(f"SELECT name FROM changelog_rule_rows ORDER BY {', '.join(order_by)}")
    assert [x.name for x in got.collect()] == want
