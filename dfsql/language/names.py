"""Column and table names that the rewrite, the planner and the replay executor share.

Kept apart from ``rewrite`` (which needs sqlglot) because ``dfsql.spark.replay.panes`` runs in
every Spark Python worker and needs only these strings.
"""

from __future__ import annotations

#: The pane columns every windowed result ends with (docs/reference.md#output-columns),
#: from their one home.
from dfsql.model.pane_columns import PANE_COLUMNS

#: The temp view of the panes the replay (or the batch path) produces.
PANES_TABLE = "__dfsql_panes"
#: The input stage's event-time and processing-time columns.
EVENT_TIME = "__event_time"
PROCESSING_TIME = "__processing_time"
#: The input stage's flag of the rows its WHERE keeps, where time runs (docs/reference.md#processing-time):
#: every row of the FROM drives the watermark, the clock and the replay's end; only the
#: rows with this flag true enter windows (:attr:`dfsql.language.stages.Stages.timed_input`).
IN_QUERY = "__in_query"
#: Hidden column of a replay's panes table where windows merge and panes are retracted:
#: the row's place in §7's order among its key's rows at its emit_time (a retraction
#: right before the pane of the merged window that replaces it). Read by the default
#: ORDER BY, never selected. Without merging, a retraction's replacement is its window's
#: next pane and (window_start, pane_index, is_retraction DESC) already says it.
SORT_COLUMNS = ("__sort_rank",)
#: a stream's dropped element riding with its panes to the LATE ROWS INTO side sink
LATE_ROW = "__late_row"
#: The columns of an EXPLAIN FIRINGS result after its group keys (docs/reference.md#explaining-time).
FIRINGS_COLUMNS = (*PANE_COLUMNS[:2], "at", "event", "watermark", *PANE_COLUMNS[2:4],
                   "detail")
