"""Every figure of shared/data/paper_example/figures.json through dfsql.model.run."""

from __future__ import annotations

import pytest

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
