"""GroupAlsoByWindow: the driver that turns elements into panes, over many keys at once.

Contract (the Spark executor depends on it): :func:`group_also_by_window` takes numpy
arrays ``key`` (int64 ids; rows grouped by key, sorted by key then arrival),
``event_time`` and ``arrival_time`` (int64 µs; ``arrival_time=None`` for batch), the
:class:`Clauses` and the global :class:`Timeline`, and returns a :class:`GabwResult` of
numpy arrays only. Any aggregate is then ``elements → first_pane → cover → pane``
(:func:`aggregate`).

Order at one processing instant p: the elements arriving at p are added, then the
watermark moves to its value at p, then triggers are evaluated. An element is late when
its window's end is at or before the watermark in effect when it arrives (before p's
move). After the last arrival A, processing time advances to the end of every trigger
period in progress (the next multiple of each AtPeriod period at or after A, and A plus
each SinceEarliestElem delay: the latest instant a pending timer can fire) and past the
last watermark change; at that instant (``end_time``) the watermark becomes +inf and
triggers are evaluated once more (closing panes fire then). The end instant depends on
the input's last arrival only, not on which keys have timers pending, so an executor that
runs keys in slices gives every slice the same end (``end_floor``).
A batch input arrives at one instant, the watermark jumps straight to +inf, and
``emit_time`` is NULL (``NEG_INF``).

Two implementations give identical results (tested): a vectorised fast path for
non-merging windows with the common triggers (:mod:`dfsql.model.fastpath`), and the
general state machine below for everything else.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from dataclasses import dataclass

import numpy as np

from dfsql.language.clauses import Accumulation, Clauses, SessionWindows
from dfsql.model import triggers as tr
from dfsql.model.panes import (
    DROP_CLOSED,
    DROP_EXPIRED,
    DROP_NULL_TIME,
    PaneLog,
    WindowState,
    absorb,
)
from dfsql.model.panes import DROP_TEXT as _DROP_TEXT
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import I64, NEG_INF, NULL_EVENT_TIME, POS_INF, assign, sat_add

NULL_TIME = NEG_INF  # emit_time of a batch input


# --------------------------------------------------------------------------- result


@dataclass
class Panes:
    """One row per pane; ``pane_id`` is the row index. timing: 0 EARLY 1 ON_TIME 2 LATE."""

    pane_id: np.ndarray
    key: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    pane_index: np.ndarray
    timing: np.ndarray  # int8
    is_last: np.ndarray  # bool
    emit_time: np.ndarray


@dataclass
class Retractions:
    """Retraction rows: repeat pane ``retracted_pane_id`` with is_retraction at emit_time."""

    retracted_pane_id: np.ndarray
    emit_time: np.ndarray


@dataclass
class Cover:
    """Pairs: pane ``pane_id`` covers every element whose first pane is ``delta_id``."""

    pane_id: np.ndarray
    delta_id: np.ndarray


@dataclass
class Instances:
    """One row per element instance (an element in one window; SLIDING gives several).

    ``first_pane`` is -1 when dropped; then ``drop_reason`` (panes.DROP_*) and
    ``watermark_at_arrival`` say why. ``window_*`` is the assigned (proto-)window.
    """

    row: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    first_pane: np.ndarray
    drop_reason: np.ndarray  # int8
    watermark_at_arrival: np.ndarray


@dataclass
class GabwResult:
    """Everything the driver produced; ``end_time`` is the last instant processed."""

    panes: Panes
    retractions: Retractions
    cover: Cover
    instances: Instances
    end_time: int

    @property
    def dropped(self) -> Instances:
        """The dropped element instances (for metrics and LATE ROWS INTO)."""
        m = self.instances.first_pane < 0
        i = self.instances
        return Instances(i.row[m], i.window_start[m], i.window_end[m], i.first_pane[m],
                         i.drop_reason[m], i.watermark_at_arrival[m])


# --------------------------------------------------------------------------- general path


class _Shared:
    """Arrays and settings every key's run reads; outputs written in place."""

    def __init__(self, key: np.ndarray, inst_row: np.ndarray, inst_start: np.ndarray,
                 inst_end: np.ndarray, inst_arr: np.ndarray, clauses: Clauses,
                 timeline: Timeline) -> None:
        self.key = key
        self.inst_row = inst_row
        self.inst_start = inst_start
        self.inst_end = inst_end
        self.inst_arr = inst_arr
        self.timeline = timeline
        self.lateness = clauses.allowed_lateness.micros
        self.accumulation = clauses.accumulation
        self.merging = isinstance(clauses.window, SessionWindows)
        self.proto = tr.build(clauses.trigger)
        n = len(inst_row)
        self.first_pane = np.full(n, -1, I64)
        self.drop_reason = np.zeros(n, np.int8)
        self.drop_wm = np.full(n, NEG_INF, I64)
        self.log = PaneLog(clauses.accumulation, self.first_pane)
        self.seq = itertools.count()


class _Closed:
    """A key's windows whose trigger is done, kept until they expire: an element for one
    is dropped (LANGUAGE.md §5). Forgotten once the watermark passes their expiry, so a
    key costs what its kept windows cost, not what it ever had. Closed session windows
    never overlap (an element overlapping one is dropped, so no live window grows over
    it), so one bisect by start finds the only candidate; other windows match exactly."""

    def __init__(self, merging: bool) -> None:
        self.merging = merging
        self.starts: list[int] = []  # sessions, sorted
        self.bounds: dict[int, tuple[int, int]] = {}  # session start -> (end, expiry)
        self.exact: dict[tuple[int, int], int] = {}  # other windows -> expiry
        self.expiries: list[tuple[int, int, int]] = []  # heap of (expiry, start, end)

    def add(self, start: int, end: int, expiry: int) -> None:
        if self.merging:
            bisect.insort(self.starts, start)
            self.bounds[start] = (end, expiry)
        else:
            self.exact[(start, end)] = expiry
        heapq.heappush(self.expiries, (expiry, start, end))

    def forget_expired(self, watermark: int) -> None:
        while self.expiries and self.expiries[0][0] <= watermark:
            x, s, e = heapq.heappop(self.expiries)
            if self.merging:
                if self.bounds.get(s) == (e, x):
                    del self.bounds[s]
                    del self.starts[bisect.bisect_left(self.starts, s)]
            elif self.exact.get((s, e)) == x:
                del self.exact[(s, e)]

    def holds(self, start: int, end: int) -> bool:
        """Whether an element's window [start, end) falls to a closed window."""
        if not self.merging:
            return (start, end) in self.exact
        j = bisect.bisect_left(self.starts, end) - 1
        return j >= 0 and self.bounds[self.starts[j]][0] > start


class _KeyRun:
    """The general state machine for one key: windows, timers and watermark holds."""

    def __init__(self, sh: _Shared, key: int, lo: int, hi: int) -> None:
        self.sh = sh
        self.k = key
        self.lo, self.hi = lo, hi  # this key's instances [lo, hi), ordered by arrival
        self.windows: dict[tuple[int, int], WindowState] = {}
        self.starts: list[int] = []  # sessions: live windows sorted by start
        self.by_start: dict[int, WindowState] = {}
        self.closed = _Closed(sh.merging)
        self.timers: list[tuple[int, int, WindowState]] = []
        self.holds: list[tuple[int, int, WindowState]] = []  # watermark thresholds

    # ---- windows
    def _live(self) -> list[WindowState]:
        ws = self.by_start.values() if self.sh.merging else self.windows.values()
        return sorted((w for w in ws if w.alive), key=lambda w: (w.start, w.end))

    def _new_window(self, start: int, end: int, trig: tr.Node, wm_prev: int) -> WindowState:
        w = WindowState(start, end, int(sat_add(end, self.sh.lateness)), trig, wm_prev >= end)
        for thr in (w.end, w.expiry):
            heapq.heappush(self.holds, (thr, next(self.sh.seq), w))
        return w

    def _remove(self, w: WindowState) -> None:
        w.alive = False
        if self.sh.merging:
            del self.by_start[w.start]
            del self.starts[bisect.bisect_left(self.starts, w.start)]
        else:
            del self.windows[(w.start, w.end)]

    def _add(self, i: int, p: int, wm_prev: int, touched: dict[int, WindowState]) -> None:
        sh = self.sh
        s, e = int(sh.inst_start[i]), int(sh.inst_end[i])
        if wm_prev >= sat_add(e, sh.lateness):
            sh.drop_reason[i], sh.drop_wm[i] = DROP_EXPIRED, wm_prev
            return
        self.closed.forget_expired(wm_prev)
        if self.closed.holds(s, e):
            sh.drop_reason[i], sh.drop_wm[i] = DROP_CLOSED, wm_prev
            return
        if sh.merging:
            j = max(bisect.bisect_right(self.starts, s) - 1, 0)
            over = []
            while j < len(self.starts) and self.starts[j] < e:
                w = self.by_start[self.starts[j]]
                if w.end > s:
                    over.append(w)
                j += 1
            if len(over) == 1 and over[0].start <= s and e <= over[0].end:
                # Merge identity: the element's window lies inside a live session, so
                # the merge creates no window; it keeps its trigger, panes and timing.
                w = over[0]
            else:
                if not over:
                    w = self._new_window(s, e, sh.proto, wm_prev)
                else:
                    ms = min([s] + [o.start for o in over])
                    me = max([e] + [o.end for o in over])
                    # the element's proto-window (fresh trigger) is one of those merged
                    merged = tr.merge_triggers([o.trig for o in over] + [sh.proto],
                                               [o.end for o in over] + [e], wm_prev)
                    for o in over:
                        self._remove(o)
                        touched.pop(id(o), None)
                    w = self._new_window(ms, me, merged, wm_prev)
                    w.pending, w.history, w.retract = absorb(over, sh.accumulation)
                self.by_start[w.start] = w
                bisect.insort(self.starts, w.start)
        else:
            w = self.windows.get((s, e))
            if w is None:
                w = self.windows[(s, e)] = self._new_window(s, e, sh.proto, wm_prev)
        # As in Beam, the element reaches the trigger of the window it ends up in (after
        # any merge), so a rewind of that merge cannot lose it.
        w.trig = w.trig.on_element(p)
        w.pending.append(i)
        touched[id(w)] = w

    # ---- firing
    def _evaluate(self, w: WindowState, p: int, emit_time: int, wm: int) -> bool:
        """Evaluate w's trigger at instant p; fire, close or expire it. True if it fired."""
        if not w.alive:
            return False
        ctx = tr.Ctx(p, wm, w.end)
        expired = wm >= w.expiry
        ontime = wm >= w.end and not w.created_late and not w.ontime_done
        fired = False
        if (w.pending or ontime) and w.trig.ready(ctx):
            w.trig = w.trig.next(ctx)
            done = w.trig.is_done()
            self.sh.log.emit(w, self.k, p, emit_time, wm, done or expired)
            fired = True
            if done:
                self._remove(w)
                if not expired:
                    self.closed.add(w.start, w.end, w.expiry)
                return True
        if expired:
            if w.pending:  # the closing pane
                self.sh.log.emit(w, self.k, p, emit_time, wm, True)
                fired = True
            self._remove(w)
            return fired
        t = w.trig.next_timer(p)
        if t is not None:
            heapq.heappush(self.timers, (t, next(self.sh.seq), w))
        return fired

    def run(self, end_time: int) -> None:
        """Process every instant of this key up to the end instant (inclusive)."""
        sh, tl = self.sh, self.sh.timeline
        ptr = self.lo
        while True:
            while self.timers and not self.timers[0][2].alive:
                heapq.heappop(self.timers)
            while self.holds and not self.holds[0][2].alive:
                heapq.heappop(self.holds)
            t_arr = int(sh.inst_arr[ptr]) if ptr < self.hi else POS_INF
            t_tim = self.timers[0][0] if self.timers else POS_INF
            t_wm = int(tl.reach(self.holds[0][0])) if self.holds else POS_INF
            p = min(t_arr, t_tim, t_wm)
            if p > end_time:  # a rising watermark reaches ends after the replay's end too
                return
            wm_prev = int(tl.before(p))
            touched: dict[int, WindowState] = {}
            while ptr < self.hi and sh.inst_arr[ptr] == p:
                self._add(ptr, p, wm_prev, touched)
                ptr += 1
            wm = int(tl.at(p))
            while self.timers and self.timers[0][0] <= p:
                w = heapq.heappop(self.timers)[2]
                touched[id(w)] = w
            while self.holds and self.holds[0][0] <= wm:
                w = heapq.heappop(self.holds)[2]
                touched[id(w)] = w
            for w in sorted(touched.values(), key=lambda w: (w.start, w.end)):
                self._evaluate(w, p, p, wm)

    def add_batch(self) -> None:
        """Batch input: every element arrives at one instant, watermark still -inf."""
        touched: dict[int, WindowState] = {}
        for i in range(self.lo, self.hi):
            self._add(i, NULL_TIME, NEG_INF, touched)

    def finish(self, end_time: int, emit_time: int) -> None:
        """At the last instant the watermark becomes +inf: evaluate every live window."""
        for w in self._live():
            self._evaluate(w, end_time, emit_time, POS_INF)


def _key_bounds(key: np.ndarray) -> np.ndarray:
    """Start offsets of each run of equal keys, plus len(key)."""
    if len(key) == 0:
        return np.zeros(1, I64)
    return np.r_[0, np.nonzero(key[1:] != key[:-1])[0] + 1, len(key)].astype(I64)


def instances_of(clauses: Clauses, key: np.ndarray, event_time: np.ndarray,
                 arrival_time: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Element instances ordered by (key, arrival, row, window start)."""
    row, start, end = assign(clauses.window, event_time)
    arr = np.full(len(row), NULL_TIME, I64) if arrival_time is None else arrival_time[row]
    return row, start, end, arr, key[row]


def general(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray | None,
            clauses: Clauses, timeline: Timeline, *, end_floor: int = NEG_INF,
            ordered: bool = True) -> GabwResult:
    """The general trigger state machine, one key at a time (any trigger, any window).

    ``end_floor``: the end instant is at least this (when other keys ran elsewhere and
    must share this run's final round)."""
    row, start, end, arr, ikey = instances_of(clauses, key, event_time, arrival_time)
    sh = _Shared(ikey, row, start, end, arr, clauses, timeline)
    bounds = _key_bounds(ikey)
    runs = [_KeyRun(sh, int(ikey[lo]), int(lo), int(hi))
            for lo, hi in itertools.pairwise(bounds.tolist())]
    if arrival_time is None:
        for r in runs:
            r.add_batch()
        end_time = NULL_TIME
    else:
        last = int(arrival_time.max()) if len(arrival_time) else NEG_INF
        end_time = max(end_floor, end_floor_of(clauses.trigger, last, timeline))
        for r in runs:
            r.run(end_time)
    for r in runs:
        r.finish(end_time, end_time)
    lg = sh.log
    drop_wm = np.where(sh.first_pane < 0, sh.drop_wm, NEG_INF)
    res = GabwResult(
        Panes(np.arange(len(lg.key), dtype=I64), np.asarray(lg.key, I64),
              np.asarray(lg.start, I64), np.asarray(lg.end, I64), np.asarray(lg.index, I64),
              np.asarray(lg.timing, np.int8), np.asarray(lg.is_last, bool),
              np.asarray(lg.emit_time, I64)),
        Retractions(np.asarray(lg.retracted, I64), np.asarray(lg.retract_time, I64)),
        Cover(np.asarray(lg.cover_pane, I64), np.asarray(lg.cover_delta, I64)),
        Instances(row, start, end, sh.first_pane, sh.drop_reason, drop_wm),
        end_time,
    )
    return canonical(res) if ordered else res


# --------------------------------------------------------------------------- canonical form


def canonical(res: GabwResult) -> GabwResult:
    """Number panes by (emit_time, key, window_start, window_end, pane_index) and sort
    everything else, so that equal results are equal array by array."""
    p = res.panes
    order = np.lexsort((p.pane_index, p.window_end, p.window_start, p.key, p.emit_time))
    new_id = np.empty(len(order), I64)
    new_id[order] = np.arange(len(order), dtype=I64)
    panes = Panes(np.arange(len(order), dtype=I64), p.key[order], p.window_start[order],
                  p.window_end[order], p.pane_index[order], p.timing[order],
                  p.is_last[order], p.emit_time[order])
    r = res.retractions
    rid = new_id[r.retracted_pane_id]
    ro = np.lexsort((rid, r.emit_time))
    c = res.cover
    cp, cd = new_id[c.pane_id], new_id[c.delta_id]
    co = np.lexsort((cd, cp))
    i = res.instances
    lookup = np.r_[new_id, -1]  # index -1 (dropped) maps to -1
    fp = lookup[i.first_pane]
    io = np.lexsort((i.window_start, i.row))
    return GabwResult(
        panes,
        Retractions(rid[ro], r.emit_time[ro]),
        Cover(cp[co], cd[co]),
        Instances(i.row[io], i.window_start[io], i.window_end[io], fp[io], i.drop_reason[io],
                  i.watermark_at_arrival[io]),
        res.end_time,
    )


# --------------------------------------------------------------------------- entry point


def end_floor_of(trigger, last_arrival: int, timeline: Timeline | None = None) -> int:
    """The end instant of a replay (LANGUAGE.md §4): the latest instant of its input —
    the last arrival and the last row of a WATERMARK FROM series — carried forward to
    the end of any trigger period or processing-time delay then in progress (data
    independent: every slice of keys gets the same end), and at least the watermark's
    last change."""
    from dfsql.language import clauses as c

    latest = last_arrival if timeline is None else max(last_arrival, timeline.end)
    last_change = NEG_INF if timeline is None else timeline.last_change
    if latest == NEG_INF:
        return last_change
    out = latest
    stack = [trigger]
    while stack:
        t = stack.pop()
        if isinstance(t, c.AtPeriod):
            out = max(out, tr.ceil_to(latest, t.period.micros))
        elif isinstance(t, c.SinceEarliestElem) and last_arrival > NEG_INF:
            out = max(out, last_arrival + t.delay.micros)
        for attr in ("subs", "sub", "main", "final"):
            v = getattr(t, attr, None)
            if isinstance(v, tuple):
                stack.extend(v)
            elif v is not None:
                stack.append(v)
    return max(out, last_change)


def group_also_by_window(key: np.ndarray, event_time: np.ndarray,
                         arrival_time: np.ndarray | None, clauses: Clauses,
                         timeline: Timeline, *, fast: bool | None = None,
                         end_floor: int = NEG_INF, ordered: bool = True) -> GabwResult:
    """Run the windowing driver; ``fast=None`` picks the fast path when it applies,
    ``True`` requires it (ValueError otherwise), ``False`` forces the state machine.

    ``ordered=False`` skips the canonical numbering (:func:`canonical`): pane ids are
    then positions in the arrays in no particular order — the same panes, cheaper, for
    a caller that only joins by id.

    ``end_floor``: an executor running keys in slices passes
    ``end_floor_of(trigger, last arrival of the whole input)``."""
    key = np.asarray(key, I64)
    event_time = np.asarray(event_time, I64)
    if arrival_time is not None:
        arrival_time = np.asarray(arrival_time, I64)
        last = int(arrival_time.max()) if len(arrival_time) else NEG_INF
        end_floor = max(end_floor, end_floor_of(clauses.trigger, last, timeline))
    null = event_time == NULL_EVENT_TIME
    if null.any():
        return _without_null_times(null, key, event_time, arrival_time, clauses, timeline,
                                   fast=fast, end_floor=end_floor, ordered=ordered)
    if fast is not False:
        from dfsql.model import fastpath

        plan = fastpath.plan_for(clauses)
        if plan is not None:
            return fastpath.run(key, event_time, arrival_time, clauses, timeline, plan,
                                end_floor, ordered)
        if arrival_time is not None:
            from dfsql.model import sessions_fast

            ok, period = sessions_fast.early_period(clauses)
            if ok:
                return sessions_fast.run(key, event_time, arrival_time, clauses, timeline,
                                         period, end_floor, ordered)
        if fast:
            raise ValueError(f"no fast path for {clauses.window} / {clauses.trigger}")
    return general(key, event_time, arrival_time, clauses, timeline, end_floor=end_floor,
                   ordered=ordered)


def _without_null_times(null: np.ndarray, key: np.ndarray, event_time: np.ndarray,
                        arrival_time: np.ndarray | None, clauses: Clauses, timeline: Timeline,
                        **kw) -> GabwResult:
    """Elements whose event time is NULL belong to no window (LANGUAGE.md §3): run the
    driver without them, then add them as dropped instances (reason: null event time,
    with the watermark in effect when they arrived). One rule for every path."""
    ok = np.nonzero(~null)[0]
    res = group_also_by_window(key[ok], event_time[ok],
                               None if arrival_time is None else arrival_time[ok],
                               clauses, timeline, **kw)
    i = res.instances
    nulls = np.nonzero(null)[0]
    k = len(nulls)
    wm = (np.full(k, NEG_INF, I64) if arrival_time is None
          else np.asarray(timeline.before(arrival_time[nulls]), I64))
    none = np.full(k, NULL_EVENT_TIME, I64)
    rows = np.concatenate([ok[i.row], nulls])
    inst = Instances(rows, np.concatenate([i.window_start, none]),
                     np.concatenate([i.window_end, none]),
                     np.concatenate([i.first_pane, np.full(k, -1, I64)]),
                     np.concatenate([i.drop_reason, np.full(k, DROP_NULL_TIME, np.int8)]),
                     np.concatenate([i.watermark_at_arrival, wm]))
    if kw.get("ordered", True):  # canonical instance order: by row, then window start
        o = np.lexsort((inst.window_start, inst.row))
        inst = Instances(*(a[o] for a in (inst.row, inst.window_start, inst.window_end,
                                          inst.first_pane, inst.drop_reason,
                                          inst.watermark_at_arrival)))
    return GabwResult(res.panes, res.retractions, res.cover, inst, res.end_time)


# --------------------------------------------------------------------------- aggregation


_AGGS = ("sum", "count", "min", "max")


def aggregate(res: GabwResult, values: np.ndarray, how: str = "sum") -> np.ndarray:
    """Per pane (by pane_id) the aggregate of its elements via first_pane → cover.

    ``how`` is sum, count, min or max; deltas combine by sum/sum/min/max. Integer
    input stays integer; an empty pane gives 0 for sum/count and NaN for min/max.
    """
    if how not in _AGGS:
        raise ValueError(f"aggregate {how!r} not in {_AGGS}")
    inst = res.instances
    ok = inst.first_pane >= 0
    fp = inst.first_pane[ok]
    n = len(res.panes.pane_id)
    v = np.asarray(values)[inst.row[ok]]
    if how == "count":
        delta = np.bincount(fp, minlength=n).astype(I64)
        return np.bincount(res.cover.pane_id, weights=delta[res.cover.delta_id],
                           minlength=n).astype(I64)
    if how == "sum":
        dtype = I64 if np.issubdtype(v.dtype, np.integer) else np.float64
        delta = np.zeros(n, dtype)
        np.add.at(delta, fp, v.astype(dtype))
        out = np.zeros(n, dtype)
        np.add.at(out, res.cover.pane_id, delta[res.cover.delta_id])
        return out
    ufunc = np.minimum if how == "min" else np.maximum
    fill = np.inf if how == "min" else -np.inf
    delta = np.full(n, fill)
    ufunc.at(delta, fp, v.astype(np.float64))
    out = np.full(n, fill)
    ufunc.at(out, res.cover.pane_id, delta[res.cover.delta_id])
    out[np.isinf(out)] = np.nan
    return out


def pane_members(res: GabwResult) -> list[np.ndarray]:
    """Per pane, the input rows it aggregates (the same route, for any Python callable)."""
    inst = res.instances
    ok = np.nonzero(inst.first_pane >= 0)[0]
    fp = inst.first_pane[ok]
    o = np.argsort(fp, kind="stable")
    rows_by_delta = inst.row[ok][o]
    n = len(res.panes.pane_id)
    bounds = np.searchsorted(fp[o], np.arange(n + 1))
    out: list[list[np.ndarray]] = [[] for _ in range(n)]
    for pane, delta in zip(res.cover.pane_id.tolist(), res.cover.delta_id.tolist(), strict=True):
        out[pane].append(rows_by_delta[bounds[delta]:bounds[delta + 1]])
    return [np.concatenate(x) if x else np.empty(0, I64) for x in out]


def is_accumulating(clauses: Clauses) -> bool:
    """True unless EMIT DISCARDING."""
    return clauses.accumulation is not Accumulation.DISCARDING


# --------------------------------------------------------------------------- flat view


DROP_TEXT = np.array(_DROP_TEXT, dtype=object)


@dataclass
class FlatResult:
    """The same result as flat arrays (the names the Spark executor reads)."""

    pane_key: np.ndarray
    pane_window_start: np.ndarray
    pane_window_end: np.ndarray
    pane_index: np.ndarray
    pane_timing: np.ndarray
    pane_is_last: np.ndarray
    pane_emit_time: np.ndarray
    retraction_pane: np.ndarray
    retraction_emit_time: np.ndarray
    cover_pane: np.ndarray
    cover_delta: np.ndarray
    element_row: np.ndarray
    element_window_start: np.ndarray
    element_window_end: np.ndarray
    element_first_pane: np.ndarray
    dropped_row: np.ndarray
    dropped_reason: np.ndarray
    dropped_reason_text: np.ndarray
    dropped_watermark: np.ndarray
    end_time: int


def flatten(res: GabwResult) -> FlatResult:
    """Flat arrays of a :class:`GabwResult`; dropped_reason_text is expired/closed."""
    p, i, d = res.panes, res.instances, res.dropped
    return FlatResult(
        p.key, p.window_start, p.window_end, p.pane_index, p.timing, p.is_last, p.emit_time,
        res.retractions.retracted_pane_id, res.retractions.emit_time,
        res.cover.pane_id, res.cover.delta_id,
        i.row, i.window_start, i.window_end, i.first_pane,
        d.row, d.drop_reason, DROP_TEXT[d.drop_reason.astype(np.int64)],
        d.watermark_at_arrival, res.end_time)


def drive(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray | None,
          clauses: Clauses, timeline: Timeline, *, fast: bool | None = None,
          end_floor: int = NEG_INF, ordered: bool = True) -> FlatResult:
    """:func:`group_also_by_window`, flattened (see :class:`FlatResult`)."""
    return flatten(group_also_by_window(key, event_time, arrival_time, clauses, timeline,
                                        fast=fast, end_floor=end_floor, ordered=ordered))
