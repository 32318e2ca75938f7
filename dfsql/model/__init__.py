"""The Dataflow model in numpy: windows, triggers, watermarks, panes and the driver.

No Spark here: the Spark executor calls :func:`group_also_by_window` per partition and
aggregates through its ``first_pane`` / ``cover`` arrays; :func:`run` is the same model
end to end on Python tuples.
"""

from dfsql.model.group_also_by_window import (
    Cover,
    GabwResult,
    Instances,
    Panes,
    Retractions,
    aggregate,
    group_also_by_window,
    pane_members,
)
from dfsql.model.reference import run
from dfsql.model.watermarks import Timeline, timeline_for
from dfsql.model.windows import NEG_INF, POS_INF

__all__ = [
    "Cover",
    "GabwResult",
    "Instances",
    "NEG_INF",
    "POS_INF",
    "Panes",
    "Retractions",
    "Timeline",
    "aggregate",
    "group_also_by_window",
    "pane_members",
    "run",
    "timeline_for",
]
