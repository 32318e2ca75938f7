"""The lines under a planned result, read from its :class:`~dfsql.spark.planned.Planned`
value: the warnings about the rows its windowed blocks dropped (never silent,
docs/reference.md#allowed-lateness) and the notes of blocks that ran as a batch with a
TRIGGER that cannot act there. The shell, the notebook and the endpoint print or return
them; :func:`dfsql.api.dropped_warnings` reads them for a result of ``dfsql.sql``.
"""

from __future__ import annotations

from dfsql.language.registered import CLAUSE_OF_FIELD, registered_defaults
from dfsql.model.clauses import SlidingWindows
from dfsql.model.triggers import batch_trigger_note
from dfsql.registrations import REGISTRATIONS
from dfsql.spark.planned import Planned, PlannedBlock
from dfsql.spark.timelines import ahead_note


def dropped_warnings(planned: Planned) -> list[str]:
    """docs/reference.md#allowed-lateness, dropped rows are never silent: for each windowed
    block of ``planned`` that dropped rows, the line the shell prints under the result and
    the endpoint returns as a warning with it — how many, the clauses in force that
    dropped them (registered defaults marked) and how to keep them. The counts are
    :func:`dfsql.dropped_late`'s, from the replay itself. [] for a plain statement or a
    stream (its drops are in the query's progress)."""
    if not planned.blocks or planned.result.isStreaming:
        return []
    lines = []
    for b in planned.blocks:
        n = b.dropped_count()
        if n:
            where = "" if len(planned.blocks) == 1 else f" (windowed block {b.plan.block.index})"
            lines.append(f"warning{where}: {_dropped_text(b, n)}")
    return lines


def batch_notes(planned: Planned) -> list[str]:
    """The notes of the windowed blocks of ``planned`` that ran as a batch (no replay, no
    stream) with a TRIGGER that cannot act there (:func:`batch_trigger_note`): the shell
    prints them under the result, the endpoint returns them with its warnings."""
    notes = [batch_trigger_note(b.plan.clauses) for b in planned.blocks
             if b.replay is None and b.stream is None]
    return [n for n in notes if n]


def _dropped_text(block: PlannedBlock, n: int) -> str:
    """The words of one planned block's warning (see :func:`dropped_warnings`) on the
    ``n`` rows it dropped: with SLIDING windows, from how many (row, window) pairs; when
    its watermark ran ahead of processing time, when and why
    (:func:`dfsql.spark.timelines.ahead_note`)."""
    plan = block.plan
    cl = plan.clauses
    marks = registered_defaults(plan.stmt.blocks[plan.block.index],
                                REGISTRATIONS.of(plan.spark)).registered

    def said(field: str, value: object) -> str:
        if field not in marks:
            return f"{CLAUSE_OF_FIELD[field]} {value}"
        table, text = marks[field]
        return f"{CLAUSE_OF_FIELD[field]} {text} (registered with {table})"

    # a batch block drops only rows without an event time; a replay also drops late ones
    nulls = n if cl.processing_time is None else plan.null_time_count()
    late = n - nulls
    listed = (f"LATE ROWS INTO {cl.late_rows_into} lists them" if cl.late_rows_into
              else "LATE ROWS INTO <view> lists them")
    parts = []
    if late:
        finished = " or after their window's trigger had finished" if cl.trigger_given else ""
        pairs = (block.dropped_count(windows=True) - nulls
                 if isinstance(cl.window, SlidingWindows) else late)
        from_windows = f" (from {pairs:,} (row, window) pairs)" if pairs != late else ""
        ahead = ahead_note(plan, block.replay.timeline) if block.replay else None
        parts.append(
            f"{late:,} row{'s' if late != 1 else ''} dropped as late{from_windows}: they "
            f"arrived ({said('processing_time', cl.processing_time)}) after the watermark "
            f"({said('watermark', cl.watermark)}) had passed "
            f"their window's end + ALLOWED LATENESS {cl.allowed_lateness}{finished}. "
            f"ALLOWED LATENESS <duration> keeps them (LATE panes); {listed}"
            + (f". {ahead}" if ahead else ""))
    if nulls:
        parts.append(f"{nulls:,} row{'s' if nulls != 1 else ''} dropped without an event "
                     f"time ({said('on', cl.on)} is NULL): they belong to no "
                     f"window; {listed}")
    return "; ".join(parts)
