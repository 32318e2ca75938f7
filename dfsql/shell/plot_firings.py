"""An EXPLAIN FIRINGS result as the pane rows :func:`dfsql.shell.plot.plot_result` draws.

One key's FIRE and RETRACT events become its panes and retractions (the value each
emitted, read from its detail); beside them, notes to draw: each pane's firing leaf and
each MERGE where it happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dfsql.language.names import FIRINGS_COLUMNS, PANE_COLUMNS

_EMITS = "; emits "


def is_firings(columns: Sequence[str]) -> bool:
    """Whether a result is EXPLAIN FIRINGS' (its last columns are FIRINGS_COLUMNS)."""
    return tuple(columns[-len(FIRINGS_COLUMNS):]) == FIRINGS_COLUMNS


def firings_as_panes(columns: Sequence[str], rows: Sequence[Sequence[Any]],
                     label=str) -> tuple[list[str], list[tuple], list[tuple], str]:
    """One key's FIRE and RETRACT events as pane rows (the first key that fired), the
    notes to draw beside them as (window_start, window_end, at, text), and the key drawn
    (``label`` writes its values)."""
    cols = list(columns)
    at = {c: i for i, c in enumerate(cols)}
    keys = cols[: -len(FIRINGS_COLUMNS)]

    def key_of(r: Sequence[Any]) -> tuple:
        return tuple(r[at[k]] for k in keys)

    fired = [key_of(r) for r in rows if r[at["event"]] == "FIRE"]
    first = fired[0] if fired else (key_of(rows[0]) if rows else ())
    out, notes, name = [], [], "value"
    for r in rows:
        if key_of(r) != first:
            continue
        event, detail = r[at["event"]], r[at["detail"]] or ""
        ws, we, t = r[at["window_start"]], r[at["window_end"]], r[at["at"]]
        if event in ("FIRE", "RETRACT"):
            text = (detail.rsplit(_EMITS, 1)[-1] if event == "FIRE"
                    else detail.split("; ", 1)[0].removeprefix("retracts "))
            name, value = _named_value(text)
            out.append((value, ws, we, r[at["pane_index"]], r[at["pane_timing"]], t,
                        event == "RETRACT"))
            if event == "FIRE":
                leaves = detail.split(_EMITS)[0].split("; ")[0].split(" and ")
                notes.append((ws, we, t, " + ".join(x.split(" in ")[0] for x in leaves)))
        elif event == "MERGE":
            merged = detail.split("→", 1)[-1].split(";")[0].strip()
            notes.append((ws, we, t, f"MERGE → {merged}"))
    columns = [name, *(c for c in PANE_COLUMNS if c != "is_last")]
    return columns, out, notes, ", ".join(f"{k}={label(v)}" for k, v in zip(keys, first,
                                                                            strict=True))


def _named_value(text: str) -> tuple[str, Any]:
    """``total=7`` → ("total", 7.0); several aggregates keep their text as the label."""
    name, eq, v = text.partition("=")
    if eq and "," not in v:
        try:
            return name, float(v)
        except ValueError:
            return name, v
    return "value", text
