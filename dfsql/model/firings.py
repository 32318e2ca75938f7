"""EXPLAIN FIRINGS in the model: the life of every window, as the driver lives it.

docs/reference.md#explaining-time. The general state machine (:mod:`dfsql.model.state_machine`) takes an
optional :class:`Recorder` and reports to it what only it knows as it runs — which
trigger leaves fired each pane, the windows each merge joined and where the merged
trigger's state came from, when a window's state was released, and what a window still
waited for when the input ended. Everything else is read afterwards, vectorised, from
the same run's :class:`~dfsql.model.result.GabwResult` (:func:`events`): element,
late-element and dropped rows from its instances, FIRE and RETRACT rows from its panes
and retractions — so the FIRE rows are exactly the run's panes. Without a recorder the
state machine does no extra work (one ``is None`` test per element and per firing).

Times in the details are printed in a time zone the caller names (the Spark session's),
as the time of day; when one of a detail's times is on another day than the event's own
instant, every time in that detail carries its date (:func:`one_form`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, fields
from zoneinfo import ZoneInfo

import numpy as np

from dfsql.model import clauses as c
from dfsql.model import triggers as tr
from dfsql.model.lexsort import lexsort
from dfsql.model.panes import DROP_NONE
from dfsql.model.result import GabwResult, late_instances
from dfsql.model.trigger_notation import duration_text, leaf_text
from dfsql.model.trigger_waits import waits_for
from dfsql.model.watermarks import Timeline
from dfsql.model.windows import I64, NEG_INF, NULL_EVENT_TIME, POS_INF

ELEMENT, LATE_ELEMENT, DROPPED, FIRE, RETRACT, MERGE, EXPIRE, WAITING = range(8)
EVENT_NAMES = ("ELEMENT", "LATE_ELEMENT", "DROPPED", "FIRE", "RETRACT", "MERGE", "EXPIRE",
               "WAITING")
#: where an event sorts among its key's events at one instant and window start (§7:
#: arrivals first, then merges, a retraction right before the pane that replaces it,
#: then what the window still waits for where the run stopped (after what fired then),
#: and the state's release last)
_RANK = np.array([0, 0, 0, 4, 3, 1, 6, 5], I64)
#: a time of day in a detail, and an instant with its date
_TIME_OF_DAY = re.compile(r"(?<!\d{4}-\d{2}-\d{2} )\b(\d{2}:\d{2}:\d{2}(?:\.\d+)?)\b")
_DATED = re.compile(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _local(us: int, tz: dt.tzinfo) -> dt.datetime:
    return (_EPOCH + dt.timedelta(microseconds=int(us))).astimezone(tz)


def time_text(us: int, tz: dt.tzinfo, ref: int | None = None) -> str:
    """An instant as the time of day in ``tz`` (with the date when it is not ``ref``'s)."""
    if us >= POS_INF:
        return "+inf"
    if us <= NEG_INF:
        return "-inf"
    t = _local(us, tz)
    s = f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    if t.microsecond:
        s += f".{t.microsecond:06d}".rstrip("0")
    if ref is not None and NEG_INF < ref < POS_INF and _local(ref, tz).date() == t.date():
        return s
    return f"{t.date().isoformat()} {s}"


def one_form(detail: str, ref: int, tz: dt.tzinfo) -> str:
    """A detail whose times were printed against ``ref`` (:func:`time_text`), all in one
    form: when one of them carries its date (another day than ``ref``'s), the times of
    day (``ref``'s day) get theirs too, so no time stands without its date beside one
    with it."""
    if not _DATED.search(detail) or not (NEG_INF < ref < POS_INF):
        return detail
    day = _local(ref, tz).date().isoformat()
    return _TIME_OF_DAY.sub(lambda m: f"{day} {m.group(1)}", detail)


def zone(name: str | None) -> dt.tzinfo:
    """The named time zone (UTC when None or unknown to this Python)."""
    try:
        return ZoneInfo(name) if name else dt.timezone.utc
    except (KeyError, ValueError):
        return dt.timezone.utc


# --------------------------------------------------------------------------- the holder


def final_watermark(clauses: c.Clauses, timeline: Timeline, end_time: int) -> int:
    """The watermark the input itself gives at its end, before the end of a bounded
    input raises it to +inf: PERFECT knows nothing more comes (+inf); any other form
    stands where its input left it."""
    if isinstance(clauses.watermark, c.WatermarkPerfect):
        return POS_INF
    return int(timeline.at(end_time))


def holder_text(clauses: c.Clauses, timeline: Timeline, end_time: int, tz: dt.tzinfo,
                writer: str | None = None) -> str:
    """What holds the watermark at the end of the input (WAITING's explanation):
    ``writer`` is the writer whose latest note is the minimum (FROM … BY)."""
    wm = clauses.watermark
    w = final_watermark(clauses, timeline, end_time)
    if isinstance(wm, c.WatermarkFrom):
        if wm.writer is not None:
            return f"held by writer {writer}" if writer is not None else \
                f"no writer of {wm.table} noted a later time"
        return f"held by {wm.table}: its last mark is {time_text(w, tz, end_time)}"
    if isinstance(wm, c.WatermarkDelay):
        return (f"held by the latest event time, {time_text(w + wm.delay.micros, tz, end_time)}"
                f", minus DELAY {duration_text(wm.delay)}") if w > NEG_INF else \
            "no event time seen"
    if isinstance(wm, c.WatermarkPercentile):
        lag = end_time - w
        return (f"held by the {wm.percentile:g}th percentile of the delays: "
                f"{lag / 1e6:g} s behind processing time")
    return "held by the watermark's input"


# --------------------------------------------------------------------------- recorder


class Recorder:
    """What the state machine reports as it runs (see the module docstring).

    ``final_wm`` and ``holder``: the watermark at the end of the input and what holds it
    (:func:`final_watermark`, :func:`holder_text`), for the WAITING rows; ``clock``: a
    running stream's frontier and the input that holds it, which end them."""

    def __init__(self, clauses: c.Clauses, tz: dt.tzinfo = dt.timezone.utc, final_wm: int = POS_INF,
                 holder: str = "", clock: str = "") -> None:
        self.trigger = clauses.trigger
        self.lateness = clauses.allowed_lateness
        self.tz = tz
        self.final_wm = final_wm
        self.holder = holder
        self.clock = clock  # a running stream's: where its clock stands, and why
        self.rows: list[tuple[int, int, int, int, int, int, str]] = []  # key s e at code wm d
        self.fires: dict[int, tuple[int, str]] = {}  # pane id -> (watermark, detail)
        #: the windows live where the run stopped: (key, its last pane's id, -1: none)
        self.live: list[tuple[int, int]] = []
        self.joined_start = np.empty(0, I64)
        self.joined_end = np.empty(0, I64)
        self._leaf_texts: dict[tuple[int, ...], str] = {}

    def begin(self, n_instances: int) -> None:
        self.joined_start = np.full(n_instances, NULL_EVENT_TIME, I64)
        self.joined_end = np.full(n_instances, NULL_EVENT_TIME, I64)

    def _w(self, s: int, e: int, ref: int) -> str:
        if s <= NEG_INF and e >= POS_INF:
            return "the global window"
        return f"[{time_text(s, self.tz, ref)},{time_text(e, self.tz, ref)})"

    def joined(self, i: int, start: int, end: int) -> None:
        """Element instance ``i`` went into the window [start, end) when it arrived."""
        self.joined_start[i], self.joined_end[i] = start, end

    def merge(self, key: int, p: int, wm: int, merged: list[tuple[int, int]],
              element: tuple[int, int], window: tuple[int, int], triggers: list[tr.Node],
              ends: list[int], result: tr.Node) -> None:
        """Session windows ``merged`` and the element's own ``element`` window became
        ``window`` at p; ``result`` is the merged trigger (tr.merge_triggers)."""
        rewound = tr.merge_rewinds(ends, wm)
        states = [t.rewind() for t in triggers] if rewound else triggers
        names = [self._w(s, e, p) for s, e in merged] + \
            [f"element {self._w(*element, p)}"]
        goal = _progress(result)
        source = [n for n, t in zip(names, states, strict=True) if _progress(t) == goal]
        how = ("rewind (some but not all past their end), then further" if rewound
               else "further")
        origin = (f"; trigger state: {how}, as {source[0]}" if source
                  else f"; trigger state: {how}, merged")
        text = " + ".join(names) + f" → {self._w(*window, p)}" + origin
        self.rows.append((key, window[0], window[1], p, MERGE, wm, one_form(text, p, self.tz)))

    def fire(self, pid: int, key: int, w, p: int, wm: int, node: tr.Node | None,
             ctx: tr.Ctx | None, new: bool, closed: bool) -> None:
        """Pane ``pid`` of window ``w`` fired at p: by the leaves of ``node`` that fire at
        ``ctx``, or (node None) as the closing pane."""
        if node is None:
            why = "closing pane (watermark passed window end + allowed lateness)"
        else:
            paths = node.fired(ctx)
            why = " and ".join(self._leaf(q) for q in paths) if paths else "trigger done"
            if not new:
                why += "; on-time pane (watermark passed window end)"
        if wm >= POS_INF:
            why += "; end of input: watermark → +inf"
        if closed:
            why += "; trigger done: window closed"
        self.fires[pid] = (wm, why)

    def _leaf(self, path: tuple[int, ...]) -> str:
        t = self._leaf_texts.get(path)
        if t is None:
            t = self._leaf_texts[path] = leaf_text(self.trigger, path)
        return t

    def expire(self, key: int, w, p: int, wm: int, closed: bool) -> None:
        """Window w's state was released at p: it expired, or its trigger is done."""
        if closed:
            d = ("state released: trigger done; elements for the window are dropped until "
                 f"the watermark passes {time_text(w.expiry, self.tz, p)}")
        elif wm >= POS_INF:
            d = (f"state released at the end of input (watermark → +inf passed window end "
                 f"+ lateness {time_text(w.expiry, self.tz, p)})")
        else:
            d = (f"state released: watermark {time_text(wm, self.tz, p)} passed window end + "
                 f"lateness {time_text(w.expiry, self.tz, p)}")
        self.rows.append((key, w.start, w.end, p, EXPIRE, wm, one_form(d, p, self.tz)))

    def waiting(self, key: int, w, end_time: int) -> None:
        """Where the run stops (the end of the input, before the watermark becomes +inf,
        or a running stream's frontier): what w waits for — the watermark, what holds
        it, and its trigger's next condition (:func:`~dfsql.model.trigger_waits.waits_for`)."""
        self.live.append((key, w.last_pane))
        f = self.final_wm
        tz = self.tz
        if f < w.end:
            d = (f"watermark {time_text(f, tz, end_time)} < window end "
                 f"{time_text(w.end, tz, end_time)}")
        elif f < w.expiry and w.pending:
            d = (f"{len(w.pending)} element(s) not yet emitted: watermark "
                 f"{time_text(f, tz, end_time)} < window end + lateness "
                 f"{time_text(w.expiry, tz, end_time)}")
        else:
            return
        if self.holder:
            d += f" ({self.holder})"
        d += "; the trigger waits for " + waits_for(self.trigger, w.trig,
                                                    lambda t: time_text(t, tz, end_time))
        if self.clock:
            d += f"; {self.clock}"
        self.rows.append((key, w.start, w.end, end_time, WAITING, f,
                          one_form(d, end_time, tz)))


def _final_waits(rows: list[tuple], key: np.ndarray, start: np.ndarray, end: np.ndarray,
                 fire_wm: np.ndarray) -> list[tuple]:
    """The recorder's rows less the WAITING of each window whose final pane the end of
    input fired (the watermark → +inf): WAITING is for a window whose final pane never
    fired (docs/reference.md, "Explaining time"); the FIRE row says the end of input
    fired it."""
    at_end = fire_wm >= POS_INF
    if not at_end.any():
        return rows
    fired = set(zip(key[at_end].tolist(), start[at_end].tolist(), end[at_end].tolist(),
                    strict=True))
    return [r for r in rows if r[4] != WAITING or (r[0], r[1], r[2]) not in fired]


def _progress(t: tr.Node) -> tuple[bool, ...]:
    """How far a trigger has come: which of its leaves are done (their element counts
    and first arrivals aside, which a merge adds up); that decides every node's isDone."""
    out, stack = [], [t]
    while stack:
        n = stack.pop()
        if isinstance(n, tr.Composite):
            stack.extend(reversed(n.subs))
        elif isinstance(n, tr.Repeat):
            stack.append(n.sub)
        elif isinstance(n, tr.OrFinally):
            stack += [n.final, n.main]
        else:
            out.append(isinstance(n, tr.Done))
    return tuple(out)


# --------------------------------------------------------------------------- the rows


@dataclass
class Events:
    """One row per event (numpy arrays). Windows, times and watermarks use the model's
    sentinels (NEG_INF / POS_INF / NULL_EVENT_TIME); pane_index and timing are -1 where
    they do not apply. Element rows carry no ``detail`` (None): ``event_time`` and
    ``reason`` (panes.DROP_*) say it, and the caller prints them (the replay, in Spark SQL:
    dfsql.spark.explain.firings).
    ``pane`` is the pane's id for FIRE and the retracted pane's for RETRACT; ``seq``
    orders the events of one key at one instant and window start."""

    key: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    at: np.ndarray
    code: np.ndarray
    watermark: np.ndarray
    pane_index: np.ndarray
    timing: np.ndarray
    detail: np.ndarray
    event_time: np.ndarray
    reason: np.ndarray
    pane: np.ndarray
    seq: np.ndarray


def events(res: GabwResult, rec: Recorder, key: np.ndarray, event_time: np.ndarray,
           arrival_time: np.ndarray, timeline: Timeline) -> Events:
    """Every event of the run ``res`` that ``rec`` recorded (unordered pane ids), in §7's
    order (by instant, key, window start, then ``seq``)."""
    inst, p, r = res.instances, res.panes, res.retractions
    n = len(inst.row)
    arr = np.asarray(arrival_time, I64)[inst.row]
    wm_in = np.asarray(timeline.before(arr), I64)
    dropped = inst.first_pane < 0
    late = ~dropped & late_instances(inst, wm_in)
    code_e = np.where(dropped, DROPPED, np.where(late, LATE_ELEMENT, ELEMENT)).astype(np.int8)
    js, je = inst.window_start.copy(), inst.window_end.copy()
    k = min(n, len(rec.joined_start))
    known = np.zeros(n, bool)
    known[:k] = rec.joined_start[:k] != NULL_EVENT_TIME
    js[known], je[known] = rec.joined_start[:k][known[:k]], rec.joined_end[:k][known[:k]]
    wm_drop = np.where(dropped, inst.watermark_at_arrival, wm_in)

    fire_wm = np.array([rec.fires.get(i, (NEG_INF, ""))[0] for i in range(len(p.pane_id))], I64)
    fire_detail = np.array([rec.fires.get(i, (0, ""))[1] for i in range(len(p.pane_id))],
                           dtype=object)
    rp = r.retracted_pane_id
    ret_detail = np.array(
        [one_form(f"retracted by pane {i} of {rec._w(ws, we, t)}", t, rec.tz) for i, ws, we, t in zip(
            p.pane_index[r.replacing_pane_id].tolist(), p.window_start[r.replacing_pane_id].tolist(),
            p.window_end[r.replacing_pane_id].tolist(), r.emit_time.tolist(), strict=True)],
        dtype=object)

    rows = _final_waits(rec.rows, p.key, p.window_start, p.window_end, fire_wm)
    m = len(rows)
    rk, rs, re_, rat, rcode, rwm, rdet = (list(x) for x in zip(*rows, strict=True)) if m \
        else ([],) * 7
    none = np.full(n, None, dtype=object)

    def cat(*parts) -> np.ndarray:
        return np.concatenate([np.asarray(x) for x in parts])

    ev = Events(
        key=cat(np.asarray(key, I64)[inst.row], p.key, p.key[rp], np.asarray(rk, I64)),
        window_start=cat(js, p.window_start, p.window_start[rp], np.asarray(rs, I64)),
        window_end=cat(je, p.window_end, p.window_end[rp], np.asarray(re_, I64)),
        at=cat(arr, p.emit_time, r.emit_time, np.asarray(rat, I64)),
        code=cat(code_e, np.full(len(p.pane_id), FIRE, np.int8),
                 np.full(len(rp), RETRACT, np.int8), np.asarray(rcode, np.int8)),
        watermark=cat(wm_drop, fire_wm, fire_wm[r.replacing_pane_id], np.asarray(rwm, I64)),
        pane_index=cat(np.full(n, -1, I64), p.pane_index, p.pane_index[rp], np.full(m, -1, I64)),
        timing=cat(np.full(n, -1, np.int8), p.timing, p.timing[rp], np.full(m, -1, np.int8)),
        detail=cat(none, fire_detail, ret_detail, np.asarray(rdet, dtype=object)),
        event_time=cat(np.asarray(event_time, I64)[inst.row],
                       np.full(len(p.pane_id) + len(rp) + m, NULL_EVENT_TIME, I64)),
        reason=cat(inst.drop_reason.astype(np.int8),
                   np.full(len(p.pane_id) + len(rp) + m, DROP_NONE, np.int8)),
        pane=cat(np.full(n, -1, I64), p.pane_id, rp, np.full(m, -1, I64)),
        seq=np.empty(0, I64),
    )
    sub = cat(np.arange(n), p.pane_index, p.pane_index[rp], np.arange(m))
    o = lexsort((sub, _RANK[ev.code], ev.window_start, ev.key, ev.at))
    for f in fields(ev):
        if f.name != "seq":
            setattr(ev, f.name, getattr(ev, f.name)[o])
    ev.seq = np.arange(len(o), dtype=I64)
    return ev
