"""EXPLAIN WATERMARK's statistics (docs/reference.md#explaining-time): what one watermark did to a replay.

The trade-off a watermark makes is between completeness (how many elements arrive
after it has passed their window: *late*, and of those how many the query *dropped*)
and latency (how long after a window's end its ON_TIME pane is emitted). The executor
replays a block once per watermark over the same arrays (:func:`run_trials`) and
reduces each :class:`~dfsql.model.result.GabwResult` to a :class:`TrialStats`; stats
of different partitions merge (:meth:`TrialStats.merge`), so only these small values
leave the tasks. The rules are here, once, in numpy; the Spark layer only ships them.

* **late**: an input row whose window (an element's proto-window before any merge, as
  the trigger sees it; for SLIDING, any of its windows) ends at or before the
  watermark in effect when it arrives (docs/reference.md#allowed-lateness: the watermark *before* that
  instant's move). A row without an event time is in no window and not late.
* **dropped**: an input row the model dropped from at least one window (its reasons:
  expired, closed, null event time), so the counts of a SLIDING query are of rows, not
  of (row, window) instances.
* **panes** and **retractions**: what the windows fire, before the query's HAVING.
* **ON_TIME latency**: ``emit_time - window_end`` of every ON_TIME pane of a bounded
  window. Percentiles are nearest-rank. Latencies are kept exactly (distinct values and
  counts) up to :data:`MAX_EXACT` distinct values; beyond that every value is rounded up
  to three significant digits (:func:`~dfsql.model.watermarks.round_delay`), so a
  reported percentile P' of the exact P obeys ``P <= P' < P + |P|/100``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dfsql.model.clauses import Clauses
from dfsql.model.group_also_by_window import group_also_by_window
from dfsql.model.panes import ON_TIME
from dfsql.model.result import GabwResult, late_instances
from dfsql.model.watermarks import Timeline, round_delay
from dfsql.model.windows import I64, NEG_INF, POS_INF

#: distinct latencies a summary keeps exactly; more are rounded (see the module doc)
MAX_EXACT = 1 << 16


@dataclass(frozen=True)
class Latencies:
    """ON_TIME latencies (µs) as sorted distinct ``values`` and their ``counts``:
    mergeable across partitions; ``exact`` is False once they were rounded."""

    values: np.ndarray
    counts: np.ndarray
    exact: bool = True

    @staticmethod
    def of(latencies: np.ndarray) -> Latencies:
        values, counts = np.unique(np.asarray(latencies, I64), return_counts=True)
        return Latencies(values, counts.astype(I64))._bounded()

    @staticmethod
    def empty() -> Latencies:
        return Latencies(np.empty(0, I64), np.empty(0, I64))

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def merge(self, other: Latencies) -> Latencies:
        exact = self.exact and other.exact
        a, b = (self, other) if exact else (self._rounded(), other._rounded())
        values, inverse = np.unique(np.r_[a.values, b.values], return_inverse=True)
        counts = np.zeros(len(values), I64)
        np.add.at(counts, inverse, np.r_[a.counts, b.counts])
        return Latencies(values, counts, exact)._bounded()

    def _rounded(self) -> Latencies:
        """Every value rounded up to three significant digits (idempotent)."""
        if not self.exact:
            return self
        values, inverse = np.unique(round_delay(self.values), return_inverse=True)
        counts = np.zeros(len(values), I64)
        np.add.at(counts, inverse, self.counts)
        return Latencies(values, counts, False)

    def _bounded(self) -> Latencies:
        return self._rounded() if len(self.values) > MAX_EXACT else self

    def percentile(self, q: float) -> int | None:
        """The nearest-rank q-th percentile (None without any latency)."""
        n = self.n
        if not n:
            return None
        k = max(1, int(np.ceil(q / 100.0 * n)))
        return int(self.values[np.searchsorted(np.cumsum(self.counts), k)])


@dataclass(frozen=True)
class TrialStats:
    """One watermark's statistics over some input rows (see the module doc)."""

    rows: int = 0
    late_rows: int = 0
    dropped_rows: int = 0
    panes: int = 0
    retractions: int = 0
    latencies: Latencies = Latencies.empty()

    def merge(self, other: TrialStats) -> TrialStats:
        """Statistics of disjoint inputs (other keys, other partitions) added up."""
        return TrialStats(self.rows + other.rows, self.late_rows + other.late_rows,
                          self.dropped_rows + other.dropped_rows, self.panes + other.panes,
                          self.retractions + other.retractions,
                          self.latencies.merge(other.latencies))


def late_rows(res: GabwResult, arrival_time: np.ndarray, timeline: Timeline) -> np.ndarray:
    """The input rows that arrived late (sorted, distinct): some window of theirs ended
    at or before the watermark in effect at their arrival (docs/reference.md#allowed-lateness)."""
    inst = res.instances
    if not len(inst.row):
        return np.empty(0, I64)
    wm = np.asarray(timeline.before(np.asarray(arrival_time, I64)[inst.row]), I64)
    return np.unique(inst.row[late_instances(inst, wm)])


def on_time_latencies(res: GabwResult) -> np.ndarray:
    """``emit_time - window_end`` of every ON_TIME pane of a bounded window (µs)."""
    p = res.panes
    on = (p.timing == ON_TIME) & (p.window_end < POS_INF) & (p.emit_time != NEG_INF)
    return (p.emit_time[on] - p.window_end[on]).astype(I64)


def trial_stats(res: GabwResult, arrival_time: np.ndarray, timeline: Timeline,
                rows: int) -> TrialStats:
    """The statistics of one replay ``res`` of ``rows`` input rows under ``timeline``."""
    return TrialStats(rows, len(late_rows(res, arrival_time, timeline)),
                      len(np.unique(res.dropped.row)), len(res.panes.pane_id),
                      len(res.retractions.retracted_pane_id),
                      Latencies.of(on_time_latencies(res)))


def run_trials(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray,
               clauses: Clauses, trials: Sequence[tuple[Timeline, int]]) -> list[TrialStats]:
    """Replay the same rows (grouped by key, sorted by key then arrival, as
    :func:`group_also_by_window` takes them) once per (timeline, end floor) and return
    each replay's statistics, in ``trials``' order. The end floor is the whole input's
    (:func:`~dfsql.model.result.end_floor_of` of that timeline), so that rows replayed
    in slices end where the whole input ends."""
    out = []
    for timeline, end_floor in trials:
        res = group_also_by_window(key, event_time, arrival_time, clauses, timeline,
                                   end_floor=end_floor, ordered=False)
        out.append(trial_stats(res, arrival_time, timeline, len(key)))
    return out
