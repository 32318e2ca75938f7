"""Every figure of examples/paper/figures.json through dfsql.model.run."""

from __future__ import annotations

import pytest

from dfsql.language.model_run import run as run_text
from dfsql.model import run
from tests.model.conftest import FIGURE_CLAUSES, figures, ts

FIGS = figures()


def _expected(fig: dict) -> list[dict]:
    out = []
    for r in fig["expected"]:
        out.append({
            "key": r["key"],
            "window_start": r["window_start"] and ts(r["window_start"]),
            "window_end": r["window_end"] and ts(r["window_end"]),
            "pane_index": r["pane_index"],
            "pane_timing": r["pane_timing"],
            "is_last": r["is_last"],
            "emit_time": r["emit_time"] and ts(r["emit_time"]),
            "is_retraction": r["is_retraction"],
            "value": r["total"],
        })
    return out


def test_every_figure_has_clauses() -> None:
    assert set(FIGS) == set(FIGURE_CLAUSES)


@pytest.mark.parametrize("fast", [False, None])
@pytest.mark.parametrize("name", sorted(FIGURE_CLAUSES))
def test_figure(name: str, fast: bool | None, events, marks) -> None:
    got = run(events, FIGURE_CLAUSES[name], sum, marks, fast=fast)
    assert got == _expected(FIGS[name])


def test_sessions_retracting_signed_values(events, marks) -> None:
    got = run(events, FIGURE_CLAUSES["fig14_sessions_retracting"], sum, marks)
    signed = [(-1 if r["is_retraction"] else 1) * r["value"] for r in got]
    assert signed == [5, 7, 10, -7, -10, 25, -5, -25, 39, 3, -3, 12]


@pytest.mark.parametrize("name", sorted(FIGURE_CLAUSES))
def test_figure_from_query_text(name: str, events, marks) -> None:
    """The language-side run() takes the text from WINDOW to EMIT (the model's takes
    typed clauses)."""
    q = FIGS[name]["query"]
    assert run_text(events, q[q.index("WINDOW"):], sum, marks) == _expected(FIGS[name])


def test_other_aggregates(events, marks) -> None:
    got = run(events, FIGURE_CLAUSES["fig12_fixed_streaming"], len, marks)
    assert [r["value"] for r in got] == [1, 4, 2, 1, 3]
    got = run(events, FIGURE_CLAUSES["fig12_fixed_streaming"], lambda xs: sorted(xs), marks)
    assert got[2]["value"] == [5, 9]
    got = run(events, FIGURE_CLAUSES["fig10_fixed_batch"], max)
    assert [r["value"] for r in got] == [9, 8, 3, 8]


def test_epoch_seconds_input() -> None:
    from tests.model.conftest import FIGURE_CLAUSES as F

    els = [("a", 1, 0.0, 5.0), ("a", 2, 30.0, 6.0), ("b", 4, 150.0, 7.0)]
    got = run(els, F["fig10_fixed_batch"])
    assert [(r["key"], r["window_start"], r["window_end"], r["value"]) for r in got] == [
        ("a", 0.0, 120.0, 3), ("b", 120.0, 240.0, 4)]
    assert all(r["emit_time"] is None and r["is_last"] for r in got)
