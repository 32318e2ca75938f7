"""What a stream bucket keeps between calls (:mod:`dfsql.spark.stream.buckets`): the
elements a later run still needs (by the model's merge and expiry rules,
:mod:`dfsql.model.windows`), and the watermark's history and writers' notes from the
oldest retained arrival on.
"""

from __future__ import annotations

import numpy as np

from dfsql.model import clauses as c
from dfsql.model.windows import NULL_EVENT_TIME, expired, sessions
from dfsql.spark.stream.packing import AT, NEG, WRITER


def retained(clauses: c.Clauses, r, key_ids: np.ndarray, et: np.ndarray, at: np.ndarray,
             timeline, hi: int) -> np.ndarray:
    """Elements a later run still needs: not dropped before ``hi``, and in a window
    the watermark has not passed by more than the allowed lateness."""
    n = len(at)
    keep = np.ones(n, bool)
    done = at < hi
    dropped = np.zeros(n, bool)
    dropped[r.dropped_row] = True
    keep &= ~(dropped & done)
    wm = int(timeline.at(hi - 1)) if len(timeline.times) else NEG
    if wm == NEG:
        return keep
    lateness = clauses.allowed_lateness.micros if clauses.allowed_lateness else 0
    w = clauses.window
    if isinstance(w, c.GlobalWindows):
        return keep
    live_end = np.full(n, NEG, np.int64)
    if isinstance(w, c.SessionWindows):
        # the session each element's proto-window merges into (the model's merge
        # rule): at least as late as any window it will be part of
        ok = (et != NULL_EVENT_TIME) & ~dropped
        idx = np.flatnonzero(ok)
        if len(idx) == 0:
            return keep
        _, _, merged_end = sessions(w, key_ids[idx], et[idx])
        live_end[idx] = merged_end
    else:
        np.maximum.at(live_end, r.element_row, r.element_window_end)
    # an element in no window (a gap between SLIDING sampling windows: live_end
    # stays NEG) is never needed again once its instant is done
    gone = expired(live_end, lateness, wm) & done
    return keep & ~gone


def fold_start(t: np.ndarray, oldest: int) -> int:
    """Where change points fold before the oldest retained arrival: at the last of them
    (the value then in force); a later run needs no earlier instant."""
    return max(int(np.searchsorted(t, oldest, side="left")) - 1, 0)


def fold_notes(notes, oldest: int):
    """Writers' notes a later run needs: those at or after the oldest retained arrival,
    and each writer's last note before it (its latest noted time then, and the start of
    its idle timeout)."""
    import pyarrow as pa

    at = notes.column(AT).to_numpy()
    before = at < oldest
    if before.sum() <= 1:
        return notes
    import pandas as pd

    frame = pd.DataFrame({"w": notes.column(WRITER).to_pandas(), "t": at})
    last_before = frame[before].sort_values("t", kind="stable").groupby(
        "w", dropna=False).tail(1).index.to_numpy()
    keep = ~before
    keep[last_before] = True
    return notes.filter(pa.array(keep))
