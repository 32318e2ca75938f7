"""The pane columns every windowed result ends with: their names, order and SQL types
(docs/reference.md#output-columns), written once. They sit in the model, the bottom every
layer may import (Spark's Python workers too), so the language, the executors, EXPLAIN
and the shell derive their lists and schemas from here; the layers that have Spark build
its types from these SQL type names."""

from __future__ import annotations

#: name → SQL type, in the order a result carries them (docs/reference.md#output-columns)
PANE_TYPES = {
    "window_start": "TIMESTAMP",
    "window_end": "TIMESTAMP",
    "pane_index": "BIGINT",
    "pane_timing": "STRING",
    "is_last": "BOOLEAN",
    "emit_time": "TIMESTAMP",
    "is_retraction": "BOOLEAN",
}
#: The pane columns, in order.
PANE_COLUMNS = tuple(PANE_TYPES)
#: The instants among them: TIMESTAMPs in a result, microseconds since the epoch (BIGINT)
#: inside an executor's own rows.
PANE_TIMES = tuple(n for n, t in PANE_TYPES.items() if t == "TIMESTAMP")


def pane_types(times_as_micros: bool = False) -> list[tuple[str, str]]:
    """(name, SQL type) of each pane column in order; with ``times_as_micros``, the
    instants as BIGINT microseconds (an executor's rows before they are TIMESTAMPs)."""
    return [(n, "BIGINT" if times_as_micros and n in PANE_TIMES else t)
            for n, t in PANE_TYPES.items()]
