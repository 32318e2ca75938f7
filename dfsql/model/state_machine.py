"""The general trigger state machine: any window, any trigger, one key at a time.

Each key's elements are processed instant by instant in processing-time order: the
elements arriving at p are added (windows assigned and merged), then the watermark moves
to its value at p, then every window touched at p (by an element, a processing-time timer
or a watermark hold) has its trigger evaluated (docs/reference.md#watermark, #trigger). The vectorised fast
paths must give exactly these results (property tests hold them to it).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from typing import TYPE_CHECKING

import numpy as np

from dfsql.model import triggers as tr
from dfsql.model.clauses import Clauses, SessionWindows
from dfsql.model.panes import (
    DROP_CLOSED,
    DROP_EXPIRED,
    PaneLog,
    WindowState,
    absorb,
)
from dfsql.model.result import (
    NULL_TIME,
    Cover,
    GabwResult,
    Instances,
    Panes,
    Retractions,
    canonical,
    end_floor_of,
    instances_of,
)
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import I64, NEG_INF, POS_INF, expired, expiry, overlaps, within

if TYPE_CHECKING:
    from dfsql.model.firings import Recorder


class _Shared:
    """Arrays and settings every key's run reads; outputs written in place."""

    def __init__(self, key: np.ndarray, inst_row: np.ndarray, inst_start: np.ndarray,
                 inst_end: np.ndarray, inst_arr: np.ndarray, clauses: Clauses,
                 timeline: Timeline, recorder: Recorder | None = None) -> None:
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
        #: EXPLAIN FIRINGS (dfsql.model.firings); None: nothing is recorded
        self.rec = recorder
        if recorder is not None:
            recorder.begin(n)


class _Closed:
    """A key's windows whose trigger is done, kept until they expire: an element for one
    is dropped (docs/reference.md#trigger). Forgotten once the watermark passes their expiry, so a
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
        j = bisect.bisect_left(self.starts, end) - 1  # the last session starting before end
        return j >= 0 and overlaps(self.starts[j], self.bounds[self.starts[j]][0], start, end)


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
        w = WindowState(start, end, int(expiry(end, self.sh.lateness)), trig, wm_prev >= end)
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
        if expired(e, sh.lateness, wm_prev):
            sh.drop_reason[i], sh.drop_wm[i] = DROP_EXPIRED, wm_prev
            return
        self.closed.forget_expired(wm_prev)
        if self.closed.holds(s, e):
            sh.drop_reason[i], sh.drop_wm[i] = DROP_CLOSED, wm_prev
            return
        if sh.merging:
            # live sessions never overlap: those the element's window merges with start
            # from the last one starting at or before it, up to its end
            j = max(bisect.bisect_right(self.starts, s) - 1, 0)
            over = []
            while j < len(self.starts) and self.starts[j] < e:
                w = self.by_start[self.starts[j]]
                if overlaps(w.start, w.end, s, e):
                    over.append(w)
                j += 1
            if len(over) == 1 and within(s, e, over[0].start, over[0].end):
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
                    if sh.rec is not None:
                        sh.rec.merge(self.k, p, wm_prev, [(o.start, o.end) for o in over],
                                     (s, e), (ms, me), [o.trig for o in over] + [sh.proto],
                                     [o.end for o in over] + [e], merged)
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
        if sh.rec is not None:
            sh.rec.joined(i, w.start, w.end)

    # ---- firing
    def _evaluate(self, w: WindowState, p: int, emit_time: int, wm: int) -> bool:
        """Evaluate w's trigger at instant p; fire, close or expire it. True if it fired."""
        if not w.alive:
            return False
        ctx = tr.Ctx(p, wm, w.end)
        expired = wm >= w.expiry
        ontime = wm >= w.end and not w.created_late and not w.ontime_done
        fired = False
        rec = self.sh.rec
        if (w.pending or ontime) and w.trig.ready(ctx):
            before, new = w.trig, bool(w.pending)
            w.trig = w.trig.next(ctx)
            done = w.trig.is_done()
            pid = self.sh.log.emit(w, self.k, p, emit_time, wm, done or expired)
            fired = True
            if rec is not None:
                rec.fire(pid, self.k, w, p, wm, before, ctx, new, done)
            if done:
                self._remove(w)
                if not expired:
                    self.closed.add(w.start, w.end, w.expiry)
                if rec is not None:
                    rec.expire(self.k, w, p, wm, closed=not expired)
                return True
        if expired:
            if w.pending:  # the closing pane
                pid = self.sh.log.emit(w, self.k, p, emit_time, wm, True)
                fired = True
                if rec is not None:
                    rec.fire(pid, self.k, w, p, wm, None, None, True, False)
            self._remove(w)
            if rec is not None:
                rec.expire(self.k, w, p, wm, closed=False)
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
        live = self.pause(end_time)
        for w in live:
            self._evaluate(w, end_time, emit_time, POS_INF)

    def pause(self, now: int) -> list[WindowState]:
        """The live windows at ``now``, every instant up to it run: the recorder hears what
        each waits for (a running stream's state, or the end of a bounded input)."""
        live = self._live()
        if self.sh.rec is not None:
            for w in live:
                self.sh.rec.waiting(self.k, w, now)
        return live


def _key_bounds(key: np.ndarray) -> np.ndarray:
    """Start offsets of each run of equal keys, plus len(key)."""
    if len(key) == 0:
        return np.zeros(1, I64)
    return np.r_[0, np.nonzero(key[1:] != key[:-1])[0] + 1, len(key)].astype(I64)


def general(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray | None,
            clauses: Clauses, timeline: Timeline, *, end_floor: int = NEG_INF,
            ordered: bool = True, recorder: Recorder | None = None,
            until: int | None = None) -> GabwResult:
    """The general trigger state machine, one key at a time (any trigger, any window).

    ``end_floor``: the end instant is at least this (when other keys ran elsewhere and
    must share this run's final round). ``recorder``: EXPLAIN FIRINGS' events are
    reported to it as the run goes (its pane ids are the unordered result's).
    ``until``: a running stream's frontier: every instant before it runs, then the run
    stops, the input not ended (no +inf watermark); WAITING is recorded at ``until``."""
    row, start, end, arr, ikey = instances_of(clauses, key, event_time, arrival_time)
    sh = _Shared(ikey, row, start, end, arr, clauses, timeline, recorder)
    bounds = _key_bounds(ikey)
    runs = [_KeyRun(sh, int(ikey[lo]), int(lo), int(hi))
            for lo, hi in itertools.pairwise(bounds.tolist())]
    if arrival_time is None:
        for r in runs:
            r.add_batch()
        end_time = NULL_TIME
    else:
        last = int(arrival_time.max()) if len(arrival_time) else NEG_INF
        end_time = max(end_floor, end_floor_of(clauses.trigger, last, timeline)) \
            if until is None else until - 1
        for r in runs:
            r.run(end_time)
    for r in runs:
        if until is None or arrival_time is None:
            r.finish(end_time, end_time)
        else:
            r.pause(until)
    lg = sh.log
    drop_wm = np.where(sh.first_pane < 0, sh.drop_wm, NEG_INF)
    res = GabwResult(
        Panes(np.arange(len(lg.key), dtype=I64), np.asarray(lg.key, I64),
              np.asarray(lg.start, I64), np.asarray(lg.end, I64), np.asarray(lg.index, I64),
              np.asarray(lg.timing, np.int8), np.asarray(lg.is_last, bool),
              np.asarray(lg.emit_time, I64)),
        Retractions(np.asarray(lg.retracted, I64), np.asarray(lg.retract_time, I64),
                    np.asarray(lg.replacing, I64)),
        Cover(np.asarray(lg.cover_pane, I64), np.asarray(lg.cover_delta, I64)),
        Instances(row, start, end, sh.first_pane, sh.drop_reason, drop_wm),
        end_time,
    )
    return canonical(res) if ordered and recorder is None else res
