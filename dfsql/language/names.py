"""Column and table names that the rewrite, the planner and the replay executor share.

Kept apart from ``rewrite`` (which needs sqlglot) because ``dfsql.spark.replay`` runs in
every Spark Python worker and needs only these strings.
"""

from __future__ import annotations

#: The temp view of the panes the replay (or the batch path) produces.
PANES_TABLE = "__dfsql_panes"
#: The input stage's event-time and processing-time columns.
EVENT_TIME = "__event_time"
PROCESSING_TIME = "__processing_time"
#: The pane columns every windowed result ends with (LANGUAGE.md §7).
PANE_COLUMNS = ("window_start", "window_end", "pane_index", "pane_timing", "is_last",
                "emit_time", "is_retraction")
#: Hidden columns of a retracting replay's panes table that place each row in §7's order:
#: the window_start and pane_index of the row a retraction sorts with (the pane that
#: replaces it); an insertion's own. Read by the default ORDER BY, never selected.
SORT_COLUMNS = ("__sort_window_start", "__sort_pane_index")
