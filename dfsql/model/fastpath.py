"""Vectorised GroupAlsoByWindow for the common triggers (identical to the state machine).

Applies to batch input for every window and trigger (one last ON_TIME pane per window),
and to replayed input with non-merging windows (GLOBAL, FIXED, SLIDING) and a trigger
of the shape "early, on time, late":

* ``Repeat(EndOfWindow)`` (default) and ``AfterEach(EndOfWindow, Repeat(EndOfWindow))``;
* ``EndOfWindow`` (AT WATERMARK, then done);
* ``OrFinally(Repeat(AtPeriod p), EndOfWindow)`` (EVERY p UNTIL WATERMARK);
* ``AfterEach(OrFinally(Repeat(AtPeriod p), EndOfWindow), Repeat(EndOfWindow | AtPeriod q))``
  and ``AfterEach(EndOfWindow, Repeat(AtPeriod q))``;
* ``Repeat(AtPeriod p)`` (EVERY p).

``ElemCount(1)`` (EVERY 1 ROW, and the early or late firings of ``AT WATERMARK EARLY
EVERY 1 ROW LATE EVERY 1 ROW``) stands wherever ``AtPeriod`` does: a pane fires at every
instant it has a new element, which are the instants of a 1 µs period (the first multiple
at or after an arrival is the arrival itself), so it takes the same closed forms.
``ElemCount(n)`` for n > 1 (EVERY n ROWS, alone, or as the early or late firings) fires
where :mod:`dfsql.model.count_fires` finds its count reaching n (a late phase counts from
zero after the on-time pane).

Because windows do not merge and periods are epoch aligned, the instant at which each
element is first emitted is a closed form of its arrival, its window's on-time instant
(first watermark change reaching the end) and expiry instant: no per-element loop.
Instants are encoded as ordinals ``2p`` (normal round at p) and ``2E+1`` (the final
+inf round at the end instant E).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfsql.model import clauses as c
from dfsql.model.count_fires import count_fire_ordinals
from dfsql.model.lexsort import lexsort
from dfsql.model.panes import DROP_CLOSED, DROP_EXPIRED, EARLY, LATE, ON_TIME
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
from dfsql.model.triggers import ceil_to
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import I64, NEG_INF, POS_INF, concat_ranges, expiry, merge_sessions

FINAL = POS_INF  # placeholder ordinal of the final round until E is known


@dataclass(frozen=True)
class Plan:
    """The shape of a supported trigger: early period, on-time phase, late behaviour."""

    early: int | None  # AtPeriod period before the watermark (None: no early panes)
    eow: bool  # has an EndOfWindow phase (False: pure Repeat(AtPeriod))
    late: str  # "done" | "each" | "period" | "count"
    late_period: int | None = None  # the late phase's period, or its count
    batch_only: bool = False
    #: the first phase fires every ``count`` elements (``Repeat(ElemCount(count))``, count
    #: > 1) instead of at ``early``'s period boundaries
    count: int | None = None


def _is(t: c.Trigger, cls: type) -> bool:
    return isinstance(t, cls)


def _repeat_of(t: c.Trigger) -> c.Trigger | None:
    while isinstance(t, c.Repeat):
        t = t.sub
    return t


#: the period whose instants are those of ``ElemCount(1)``: every arrival (see above)
EACH_ARRIVAL = 1


def repeated_period(t: c.Trigger | None) -> int | None:
    """The period of a repeated leaf that fires at period boundaries (``AtPeriod``, or
    ``ElemCount(1)`` as :data:`EACH_ARRIVAL`), else None."""
    if isinstance(t, c.AtPeriod):
        return t.period.micros
    if isinstance(t, c.ElemCount) and t.count == 1:
        return EACH_ARRIVAL
    return None


def _repeated_count(t: c.Trigger | None) -> int | None:
    """n for a repeated ``ElemCount(n)`` with n > 1 (n = 1 is a period), else None."""
    return t.count if isinstance(t, c.ElemCount) and t.count > 1 else None


def _early(t: c.Trigger) -> tuple[bool, int | None, int | None]:
    """(ok, period, count) for the first phase: EndOfWindow, or Repeat(AtPeriod) or
    Repeat(ElemCount) .orFinally(EOW)."""
    if _is(t, c.EndOfWindow):
        return True, None, None
    if _is(t, c.OrFinally) and _is(t.final, c.EndOfWindow) and _is(t.main, c.Repeat):  # type: ignore[attr-defined]
        leaf = _repeat_of(t.main)  # type: ignore[attr-defined]
        period, count = repeated_period(leaf), _repeated_count(leaf)
        if period is not None or count is not None:
            return True, period, count
    return False, None, None


def _late(t: c.Trigger) -> tuple[str, int | None] | None:
    if not isinstance(t, c.Repeat):
        return None
    s = _repeat_of(t)
    if isinstance(s, c.EndOfWindow):
        return "each", None
    period = repeated_period(s)
    if period is not None:
        return "period", period
    count = _repeated_count(s)
    if count is not None:
        return "count", count
    return None


def plan_for(clauses: c.Clauses) -> Plan | None:
    """The fast-path plan for these clauses, or None when only the state machine applies."""
    batch = clauses.processing_time is None
    if batch:
        return Plan(None, True, "done", batch_only=True)
    if clauses.window.merging:
        return None
    t = clauses.trigger
    if isinstance(t, c.Repeat):
        s = _repeat_of(t)
        if isinstance(s, c.EndOfWindow):
            return Plan(None, True, "each")
        period = repeated_period(s)
        if period is not None:
            return Plan(period, False, "period", period)
        count = _repeated_count(s)
        if count is not None:
            return Plan(None, False, "period", count=count)
        return None
    ok, early, count = _early(t)
    if ok:
        return Plan(early, True, "done", count=count)
    if isinstance(t, c.AfterEach) and len(t.subs) == 2:
        ok, early, count = _early(t.subs[0])
        late = _late(t.subs[1])
        if ok and late is not None:
            return Plan(early, True, late[0], late[1], count=count)
    return None


def _ord_of(tl: Timeline, thresholds: np.ndarray, final: int = FINAL,
            end: int = POS_INF) -> np.ndarray:
    """Ordinal of the first instant the watermark reaches each threshold, at or before the
    end instant ``end``; ``final`` if none (then the final +inf round reaches it)."""
    p = tl.reach(thresholds)
    return np.where(p <= end, 2 * np.minimum(p, end), final)


def run(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray | None,
        clauses: c.Clauses, timeline: Timeline, plan: Plan,
        end_floor: int = NEG_INF, ordered: bool = True) -> GabwResult:
    """Vectorised driver; same contract and output as ``state_machine.general``: the
    instances grouped by window (:func:`_by_window`), each admitted or dropped and given
    the instant it is first emitted (:func:`_admit`), then the panes those instants make
    (:func:`_panes`)."""
    row, start, end, arr, ikey = instances_of(clauses, key, event_time, arrival_time)
    n = len(row)
    if plan.batch_only:
        return _batch(clauses, row, start, end, ikey, ordered)
    # The end instant: the last arrival carried over trigger periods in progress
    # (end_floor), and the watermark's last change; nothing fires after it but the
    # final +inf round.
    e_time = max(end_floor,
                 end_floor_of(clauses.trigger, int(arr.max()) if n else NEG_INF, timeline))
    if n == 0:
        return _empty(row, e_time)
    w = _by_window(start, end, arr, ikey, row, timeline, clauses.allowed_lateness.micros,
                   e_time)
    adm = _admit(plan, w, timeline)
    fin = 2 * e_time + 1  # the final +inf round's ordinal
    p = _panes(plan, w, adm, fin)
    # element instances back in input (row, window) order
    first_pane = np.full(n, -1, I64)
    first_pane[adm.accepted] = p.instance_pane
    reason = np.where(adm.expired, DROP_EXPIRED,
                      np.where(adm.closed, DROP_CLOSED, 0)).astype(np.int8)
    dwm = np.where(adm.expired | adm.closed, adm.wm_prev, NEG_INF)
    inv = np.empty(n, I64)
    inv[w.order] = np.arange(n)
    res = GabwResult(
        Panes(np.arange(len(p.window), dtype=I64), w.key[w.first][p.window],
              w.start[w.first][p.window], w.end[p.window], p.index.astype(I64),
              p.timing.astype(np.int8), p.is_last, (p.ordinal // 2).astype(I64)),
        _retractions(clauses.accumulation, p.first, p.ordinal // 2),
        _cover(clauses.accumulation, p.index, p.start_pos),
        Instances(row, start, end, first_pane[inv], reason[inv], dwm[inv]),
        e_time,
    )
    return canonical(res) if ordered else res


@dataclass(frozen=True)
class _Windows:
    """The instances in window (key, start) then arrival order, and per window its end,
    its expiry, and the ordinals at which the watermark reaches them."""

    order: np.ndarray  # instance positions in this order
    key: np.ndarray
    start: np.ndarray
    arrival: np.ndarray
    wid: np.ndarray  # each instance's window
    first: np.ndarray  # each window's first instance
    end: np.ndarray
    expiry: np.ndarray
    on_time: np.ndarray  # ordinal: the watermark reaches the end (FINAL: never before E)
    expires: np.ndarray  # ordinal: the watermark reaches the expiry


def _by_window(start: np.ndarray, end: np.ndarray, arr: np.ndarray, ikey: np.ndarray,
               row: np.ndarray, tl: Timeline, lateness: int, e_time: int) -> _Windows:
    """Group instances by (key, start): windows do not merge, so the end follows."""
    n = len(row)
    o = lexsort((row, arr, start, ikey))
    k_o, s_o = ikey[o], start[o]
    neww = np.ones(n, bool)
    neww[1:] = (k_o[1:] != k_o[:-1]) | (s_o[1:] != s_o[:-1])
    wfirst = np.nonzero(neww)[0]
    w_end = end[o][wfirst]
    w_exp = expiry(w_end, lateness)
    return _Windows(o, k_o, s_o, arr[o], np.cumsum(neww) - 1, wfirst, w_end, w_exp,
                    _ord_of(tl, w_end, end=e_time), _ord_of(tl, w_exp, end=e_time))


@dataclass(frozen=True)
class _Admitted:
    """Per instance (in window order): dropped because its window had expired or was
    closed, or accepted, and the ordinal it is first emitted at; per window its first
    accepted arrival and whether it was created after its on-time instant."""

    expired: np.ndarray
    closed: np.ndarray
    accepted: np.ndarray  # positions of the accepted instances
    wm_prev: np.ndarray  # the watermark each instance met
    fire: np.ndarray
    has: np.ndarray
    created_late: np.ndarray
    a0: np.ndarray


def _admit(plan: Plan, w: _Windows, tl: Timeline) -> _Admitted:
    """Which instances the windows take, and when each is first emitted."""
    a_o, wid = w.arrival, w.wid
    wm_prev = tl.before(a_o)
    expired = wm_prev >= w.expiry[wid]
    ok = ~expired
    # first accepted arrival per window (instances are by arrival within a window)
    big = np.iinfo(I64).max
    a0 = np.full(len(w.first), big, I64)
    np.minimum.at(a0, wid[ok], a_o[ok])
    has = a0 < big
    created_late = has & (2 * a0 > w.on_time)
    closed = np.zeros(len(a_o), bool)
    if plan.late == "done":
        close_ord = np.where(created_late, 2 * a0, w.on_time)
        closed = ok & (2 * a_o > close_ord[wid])
    on_i, late_i = w.on_time[wid], created_late[wid]
    # the phase each instance arrives in: before the on-time pane (in it at its instant),
    # or at the instant a window created late fires first, or the late phase after either
    early_phase = ~late_i & (2 * a_o <= on_i)
    at_creation = late_i & (a_o == a0[wid])
    counted = None if plan.count is None else count_fire_ordinals(wid, a_o, ok, plan.count)
    late_counted = None
    if plan.late == "count":  # counted from zero after the on-time (or creation) pane
        late_counted = count_fire_ordinals(wid, a_o, ok & ~early_phase & ~at_creation,
                                           plan.late_period)
    fire = _first_emission(plan, a_o, on_i, w.expires[wid], early_phase, at_creation,
                           counted, late_counted)
    return _Admitted(expired, closed, np.nonzero(ok & ~closed)[0], wm_prev, fire, has,
                     created_late, a0)


@dataclass(frozen=True)
class _Panes:
    """The panes, in window then ordinal order, and each accepted instance's pane."""

    window: np.ndarray
    ordinal: np.ndarray
    index: np.ndarray
    first: np.ndarray  # a window's first pane
    start_pos: np.ndarray  # position of the window's first pane
    timing: np.ndarray
    is_last: np.ndarray
    instance_pane: np.ndarray


def _panes(plan: Plan, w: _Windows, adm: _Admitted, fin: int) -> _Panes:
    """(window, ordinal) of the accepted instances' first emissions, plus the on-time
    panes of windows whose elements all came before; their index, timing and last."""
    fire = np.where(adm.fire == FINAL, fin, adm.fire)
    ord_on = np.where(w.on_time == FINAL, fin, w.on_time)
    ord_exp = np.where(w.expires == FINAL, fin, w.expires)
    created_late = adm.created_late
    ontime_w = np.nonzero(adm.has & ~created_late)[0] if plan.eow else np.empty(0, I64)
    acc_idx = adm.accepted
    cw = np.r_[w.wid[acc_idx], ontime_w].astype(I64)
    cf = np.r_[fire[acc_idx], ord_on[ontime_w]].astype(I64)
    co = lexsort((cf, cw))
    cw_s, cf_s = cw[co], cf[co]
    newp = np.ones(len(co), bool)
    if len(co):
        newp[1:] = (cw_s[1:] != cw_s[:-1]) | (cf_s[1:] != cf_s[:-1])
    cand_pid = np.empty(len(co), I64)
    cand_pid[co] = np.cumsum(newp) - 1
    p_w, p_ord = cw_s[newp], cf_s[newp]
    np_ = len(p_w)
    p_first = np.ones(np_, bool)
    if np_:
        p_first[1:] = p_w[1:] != p_w[:-1]
    p_start_pos = np.maximum.accumulate(np.where(p_first, np.arange(np_), 0))
    p_late_w = created_late[p_w]
    after = p_ord >= ord_on[p_w]
    first_after = after & ~np.r_[False, after[:-1] & (p_w[1:] == p_w[:-1])] if np_ else after
    timing = np.where(~after, EARLY, np.where(first_after & ~p_late_w, ON_TIME, LATE))
    is_last = p_ord >= ord_exp[p_w]
    if plan.late == "done":
        is_last |= p_ord == np.where(p_late_w, 2 * adm.a0[p_w], ord_on[p_w])
    return _Panes(p_w, p_ord, np.arange(np_) - p_start_pos, p_first, p_start_pos, timing,
                  is_last, cand_pid[: len(acc_idx)])


def _first_emission(plan: Plan, a_o: np.ndarray, on_i: np.ndarray, exp_i: np.ndarray,
                    early_phase: np.ndarray, at_creation: np.ndarray,
                    counted: np.ndarray | None,
                    late_counted: np.ndarray | None) -> np.ndarray:
    """Ordinal at which each instance is first emitted (FINAL: the final round), from its
    arrival, its window's on-time and expiry ordinals and the phase it arrives in
    (``counted``, ``late_counted``: the first and the late phase's count firings,
    :func:`~dfsql.model.count_fires.count_fire_ordinals`)."""
    a2 = 2 * a_o
    f = counted  # the first phase's own firing (None: EndOfWindow alone)
    if f is None and plan.early is not None:
        f = 2 * ceil_to(a_o, plan.early)
    if not plan.eow:  # pure Repeat(AtPeriod p) or Repeat(ElemCount n)
        return np.minimum(f, exp_i)
    if f is not None:
        ef = np.where(f < on_i, f, on_i)
    else:
        ef = on_i
    if plan.late == "period":
        lf = np.minimum(2 * ceil_to(a_o, plan.late_period), exp_i)  # type: ignore[arg-type]
    elif late_counted is not None:
        lf = np.minimum(late_counted, exp_i)
    else:
        lf = a2
    fire = np.where(early_phase, ef, lf)
    return np.where(at_creation, a2, fire)


def _retractions(accumulation: c.Accumulation, p_first: np.ndarray,
                 emit: np.ndarray) -> Retractions:
    """Every pane but a window's first retracts the window's previous pane (when
    retracting)."""
    if accumulation is not c.Accumulation.ACCUMULATING_AND_RETRACTING:
        return Retractions(np.empty(0, I64), np.empty(0, I64), np.empty(0, I64))
    prev = np.arange(len(p_first)) - 1
    has_prev = ~p_first
    return Retractions(prev[has_prev].astype(I64), emit[has_prev].astype(I64),
                       np.nonzero(has_prev)[0].astype(I64))


def _cover(accumulation: c.Accumulation, p_index: np.ndarray,
           p_start_pos: np.ndarray) -> Cover:
    """Discarding panes cover themselves; accumulating ones their window's panes so far."""
    np_ = len(p_index)
    if accumulation is c.Accumulation.DISCARDING:
        return Cover(np.arange(np_, dtype=I64), np.arange(np_, dtype=I64))
    cnt = p_index + 1
    cp = np.repeat(np.arange(np_, dtype=I64), cnt)
    return Cover(cp, concat_ranges(p_start_pos, cnt))


def _batch(clauses: c.Clauses, row: np.ndarray, start: np.ndarray, end: np.ndarray,
           ikey: np.ndarray, ordered: bool = True) -> GabwResult:
    """Batch: one last, ON_TIME pane per (merged) window; emit_time NULL."""
    n = len(row)
    ms, me = merge_sessions(ikey, start, end)[1:] if clauses.window.merging else (start, end)
    o = lexsort((ms, ikey))
    k_o, s_o = ikey[o], ms[o]
    newp = np.ones(n, bool)
    if n:
        newp[1:] = (k_o[1:] != k_o[:-1]) | (s_o[1:] != s_o[:-1])
    pid = np.empty(n, I64)
    pid[o] = np.cumsum(newp) - 1
    np_ = int(newp.sum())
    ar = np.arange(np_, dtype=I64)
    res = GabwResult(
        Panes(ar, k_o[newp], s_o[newp], me[o][newp], np.zeros(np_, I64),
              np.full(np_, ON_TIME, np.int8), np.ones(np_, bool), np.full(np_, NULL_TIME, I64)),
        Retractions(np.empty(0, I64), np.empty(0, I64), np.empty(0, I64)),
        Cover(ar, ar.copy()),
        Instances(row, start, end, pid, np.zeros(n, np.int8), np.full(n, NEG_INF, I64)),
        NULL_TIME,
    )
    return canonical(res) if ordered else res


def _empty(row: np.ndarray, end_time: int) -> GabwResult:
    """The result of no input."""
    z = np.empty(0, I64)
    return GabwResult(Panes(z, z, z, z, z, z.astype(np.int8), z.astype(bool), z),
                      Retractions(z, z, z), Cover(z, z),
                      Instances(z, z, z, z, z.astype(np.int8), z), end_time)
