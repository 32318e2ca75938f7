"""Vectorised GroupAlsoByWindow for replayed SESSIONS (identical to the state machine).

Session windows merge as elements arrive, so in general their panes need the state
machine. But in the common case they do not *interleave*: within each final session
(the batch merge of every non-dropped element of a key) the live windows form one
*chain* — every arrival overlaps the single live window of that session and grows it,
or the live window has expired and the arrival starts a new chain. Then each window of
a chain is a closed form of its bounds, its creation instant, the next arrival and the
watermark timeline, and the trigger state a merge carries over is two numbers (phase
reached, first unfired arrival). Steps run over the *k-th arrival of every session at
once*, so the Python loop is as long as the longest session, not the input.

Applies to the triggers whose late phase repeats at the watermark and never finishes:
``Repeat(EndOfWindow)`` (the default) and
``AfterEach(OrFinally(Repeat(AtPeriod p), EndOfWindow), Repeat(EndOfWindow))``
(EVERY p UNTIL WATERMARK THEN REPEAT WATERMARK), in every accumulation mode, and with
``ElemCount(1)`` for ``AtPeriod p`` (EVERY 1 ROW UNTIL WATERMARK THEN REPEAT WATERMARK:
its fire instants are a 1 µs period's, :func:`dfsql.model.fastpath.repeated_period`).
Keys where two live windows of one session would merge are handed to the general state
machine; both parts share one end instant, so results equal :func:`general`'s.

What the state machine does that the closed forms rely on (see ``triggers.py``): every
merge makes a new window (pane_index from 0, not created late unless the watermark
already passed its end, ontime not yet done) whose trigger is the furthest of the
rewound inputs when its end is ahead of the watermark; ``AtPeriod`` keeps its first
unfired arrival through rewinds and phase 2; every pane of a chain retracts the chain's
previous pane; an accumulating pane covers every earlier pane of its chain.

The parts: :mod:`~dfsql.model.session_chains` (the final sessions and the closed-form
prefix of their chains), :mod:`~dfsql.model.session_steps` (the rest, step by step) and
:mod:`~dfsql.model.session_assembly` (the result). Which arrivals merge is the merge rule
of :mod:`dfsql.model.windows`.
"""

from __future__ import annotations

import numpy as np

from dfsql.model import clauses as c
from dfsql.model.fastpath import repeated_period
from dfsql.model.panes import DROP_EXPIRED
from dfsql.model.result import GabwResult, Instances, Panes, canonical, end_floor_of, instances_of
from dfsql.model.session_assembly import (
    concat,
    cover,
    fast_panes,
    pane_index_and_next,
    retractions,
)
from dfsql.model.session_chains import FINAL, final_sessions, prefix
from dfsql.model.session_steps import steps
from dfsql.model.state_machine import general
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import I64, NEG_INF, expired


def early_period(clauses: c.Clauses) -> tuple[bool, int | None]:
    """(applies, early period) for replayed sessions with a supported trigger."""
    if not isinstance(clauses.window, c.SessionWindows) or clauses.processing_time is None:
        return False, None
    t = clauses.trigger

    def repeat_eow(x: c.Trigger) -> bool:
        while isinstance(x, c.Repeat):
            x = x.sub
        return isinstance(x, c.EndOfWindow)

    if isinstance(t, c.Repeat) and repeat_eow(t):
        return True, None
    if isinstance(t, c.AfterEach) and len(t.subs) == 2 and isinstance(t.subs[1], c.Repeat) \
            and repeat_eow(t.subs[1]):
        first = t.subs[0]
        if isinstance(first, c.OrFinally) and isinstance(first.final, c.EndOfWindow) \
                and isinstance(first.main, c.Repeat):
            m = first.main
            while isinstance(m, c.Repeat):
                m = m.sub
            period = repeated_period(m)
            if period is not None:
                return True, period
    return False, None


def run(key: np.ndarray, event_time: np.ndarray, arrival_time: np.ndarray,
        clauses: c.Clauses, timeline: Timeline, period: int | None,
        end_floor: int = NEG_INF, ordered: bool = True) -> GabwResult:
    """Same contract and output as ``state_machine.general``."""
    row, start, end, arr, ikey = instances_of(clauses, key, event_time, arrival_time)
    tl = timeline
    lateness = clauses.allowed_lateness.micros
    last_arrival = int(arrival_time.max()) if len(arrival_time) else NEG_INF
    end_time = max(end_floor, end_floor_of(clauses.trigger, last_arrival, tl))

    # 1. Dropped on arrival: the element's own window already expired (window-independent).
    wm_prev = tl.before(arr).astype(I64)
    dropped = expired(end, lateness, wm_prev)
    live = np.nonzero(~dropped)[0]

    # 2. Final sessions of the live elements; each session's windows: a closed-form
    #    prefix, then steps over the k-th element of every session at once.
    s = final_sessions(live, ikey, start, end, arr, wm_prev)
    c_off, ch, prefix_pieces = prefix(s, tl, end_time, period)
    ch, complex_, step_pieces = steps(s, c_off, ch, tl, end_time, lateness, period)
    pieces = (prefix_pieces, step_pieces)

    # 3. Sessions whose windows interleave go to the state machine (sessions never interact:
    #    their elements' windows never overlap); the rest is assembled here.
    complex_el = np.repeat(complex_, s.c_len) if s.m else np.zeros(0, bool)
    chain_key = np.full(ch.next_chain, -1, I64)
    fast_chain = np.ones(ch.next_chain, bool)
    if s.m:
        chain_key[ch.elem_chain] = s.key
        fast_chain[ch.elem_chain[complex_el]] = False
    pc_, pk, plo, phi, pidx, ptim, plast, pwin = fast_panes(pieces, fast_chain)
    gen = None
    if complex_el.any():
        sub = np.sort(row[s.el[complex_el]])  # element rows, still in (key, arrival) order
        # unordered: concat joins by id, and the caller orders the whole result
        gen = general(key[sub], event_time[sub], arrival_time[sub], clauses, tl,
                      end_floor=end_time, ordered=False)
        gen.instances.row = sub[gen.instances.row]

    npanes = len(pc_)
    emit = np.where(pk >= FINAL, end_time, pk // 2).astype(I64)
    pid = np.arange(npanes, dtype=I64)
    prev_same = np.zeros(npanes, bool)
    if npanes:
        prev_same[1:] = pc_[1:] == pc_[:-1]
    pane_index, window_next_pane = pane_index_and_next(pieces, ch.n_windows, pidx, pwin)

    n = len(row)
    first_pane = np.full(n, -1, I64)
    drop_reason = np.zeros(n, np.int8)
    drop_wm = np.full(n, NEG_INF, I64)
    drop_reason[dropped] = DROP_EXPIRED
    drop_wm[dropped] = wm_prev[dropped]
    if s.m:
        first_pane[s.el] = window_next_pane[ch.elem_window]
    fast_inst = np.ones(n, bool)
    fast_inst[s.el[complex_el]] = False

    panes_key = chain_key[pc_] if npanes else np.empty(0, I64)
    res = GabwResult(
        Panes(pid, panes_key, plo, phi, pane_index, ptim, plast, emit),
        retractions(clauses.accumulation, pid, prev_same, emit),
        cover(clauses.accumulation, pid, prev_same),
        Instances(row[fast_inst], start[fast_inst], end[fast_inst], first_pane[fast_inst],
                  drop_reason[fast_inst], drop_wm[fast_inst]),
        end_time)
    if gen is not None:
        res = concat(res, gen)
    return canonical(res) if ordered else res

