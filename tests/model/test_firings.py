"""EXPLAIN FIRINGS in the model: the recorder's events on the paper's data, a window
fired by the end of input, and on random workloads the FIRE / RETRACT rows are
exactly the run's panes and retractions (docs/reference.md#explaining-time)."""

from __future__ import annotations

import datetime as dt

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfsql.model import clauses as c
from dfsql.model import firings as f
from dfsql.model import group_also_by_window, timeline_for
from dfsql.model.result import canonical, end_floor_of
from dfsql.model.windows import POS_INF
from tests.model.conftest import FIGURE_CLAUSES, paper_events, paper_watermarks
from tests.model.strategies import (
    FAST_TRIGGERS,
    OTHER_TRIGGERS,
    WINDOWS,
    _clauses,
    _wm,
    inputs,
)

MIN = c.Duration(60_000_000)


def _us(t: dt.datetime) -> int:
    return int(t.replace(tzinfo=dt.timezone.utc).timestamp() * 1_000_000)


def _at(hms: str) -> int:
    return _us(dt.datetime.strptime("2015-09-01 " + hms, "%Y-%m-%d %H:%M:%S"))


def _run(cl: c.Clauses, k, e, a, marks=None):
    tl = timeline_for(cl.watermark, e, a, marks)
    end = end_floor_of(cl.trigger, int(a.max()), tl)
    rec = f.Recorder(cl, dt.timezone.utc, f.final_watermark(cl, tl, end), "held by marks")
    res = group_also_by_window(k, e, a, cl, tl, recorder=rec)
    return res, f.events(res, rec, k, e, a, tl)


def _paper_fig14():
    ev = paper_events()
    k = np.zeros(len(ev), np.int64)
    e = np.array([_us(x[2]) for x in ev])
    a = np.array([_us(x[3]) for x in ev])
    o = np.lexsort((a, k))
    marks = [(_us(p), _us(w)) for p, w in paper_watermarks()]
    return _run(FIGURE_CLAUSES["fig14_sessions_retracting"], k[o], e[o], a[o], marks)


def _rows(ev: f.Events, code: int) -> list[tuple[int, int, int, str]]:
    m = ev.code == code
    return list(zip(ev.at[m].tolist(), ev.window_start[m].tolist(), ev.window_end[m].tolist(),
                    ev.detail[m].tolist(), strict=True))


def test_paper_fig14_merges_late_element_and_leaves() -> None:
    """Figure 14 (sessions, GAP 1 MINUTE, EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT
    WATERMARK), derived by hand from examples/paper/events.csv and watermarks.csv:

    * the 8 (event 12:02:50) arrives at 12:06:20 and bridges [12:02:10,12:03:10) (the 7)
      and [12:03:20,12:05:00) (3, 4, 3) into [12:02:10,12:05:00); the 9 (event 12:01:20)
      arrives at 12:07:20 and bridges [12:00:30,12:01:30) (the 5) and that session into
      [12:00:30,12:05:00). Two more merges only extend a session by its new element: the
      4 at 12:05:30, the 3 at 12:05:40, the 8 at 12:08:20, the 1 at 12:08:40.
    * the 9 is the one late element: its window [12:01:20,12:02:20) ends before the
      watermark 12:05:10 in force since 12:07:00.
    * the early 7 fires at 12:05:00 by EVERY 1 MINUTE, before UNTIL; the on-time 25 at
      12:07:00 by WATERMARK (12:05:10 >= 12:05:00), after UNTIL, in THEN branch 1; the
      late 39 at 12:07:20 by REPEAT WATERMARK's leaf, branch 2.
    * nothing waits at the end (the marks reach 12:09:00 past every session's end
      12:08:50); the two sessions alive at 12:09:00 are released then, when the end of
      input takes the watermark to +inf (end + 10 minutes of lateness not reached)."""
    res, ev = _paper_fig14()
    merges = _rows(ev, f.MERGE)
    assert [(m[0], m[1], m[2]) for m in merges] == [
        (_at("12:05:30"), _at("12:03:20"), _at("12:04:40")),
        (_at("12:05:40"), _at("12:03:20"), _at("12:05:00")),
        (_at("12:06:20"), _at("12:02:10"), _at("12:05:00")),
        (_at("12:07:20"), _at("12:00:30"), _at("12:05:00")),
        (_at("12:08:20"), _at("12:06:30"), _at("12:08:10")),
        (_at("12:08:40"), _at("12:06:30"), _at("12:08:50")),
    ]
    assert merges[2][3].startswith("[12:02:10,12:03:10) + [12:03:20,12:05:00) + element "
                                   "[12:02:50,12:03:50) → [12:02:10,12:05:00)")
    late = ev.code == f.LATE_ELEMENT
    assert ev.at[late].tolist() == [_at("12:07:20")]
    assert ev.event_time[late].tolist() == [_at("12:01:20")]
    fires = {(r[0], r[1]): r[3] for r in _rows(ev, f.FIRE)}
    early7 = fires[(_at("12:05:00"), _at("12:02:10"))]
    assert early7 == "EVERY 1 MINUTE in EVERY 1 MINUTE UNTIL WATERMARK, before UNTIL, " \
                     "THEN branch 1"
    ontime25 = fires[(_at("12:07:00"), _at("12:02:10"))]
    assert "WATERMARK in EVERY 1 MINUTE UNTIL WATERMARK, after UNTIL, THEN branch 1" in ontime25
    assert fires[(_at("12:07:20"), _at("12:00:30"))] == "WATERMARK in REPEAT WATERMARK, " \
                                                       "THEN branch 2"
    expire = _rows(ev, f.EXPIRE)
    assert [(x[0], x[1], x[2]) for x in expire] == [
        (_at("12:09:00"), _at("12:00:30"), _at("12:05:00")),
        (_at("12:09:00"), _at("12:06:30"), _at("12:08:50"))]
    assert ev.watermark[ev.code == f.EXPIRE].tolist() == [POS_INF, POS_INF]
    assert not (ev.code == f.WAITING).any()
    assert (np.diff(ev.at) >= 0).all()


def test_no_waiting_when_the_end_of_input_fires_the_final_pane() -> None:
    """FIXED(1 MINUTE), marks up to 12:02:00 only (watermark 12:02:00 from then on);
    elements at 12:00:30 (arriving 12:01:00) and 12:03:30 (arriving 12:04:00). The input
    ends at 12:04:00: the watermark 12:02:00 has passed [12:00,12:01) (on-time pane at
    12:02:00) but not [12:03,12:04), whose pane fires there only because the end of input
    takes the watermark to +inf. Its final pane fired: no WAITING row (WAITING is for a
    window whose final pane never fired, docs/reference.md); the FIRE row says why."""
    cl = c.Clauses(window=c.FixedWindows(size=MIN), watermark=c.WatermarkFrom(table="m"),
                   trigger=c.Repeat(sub=c.EndOfWindow()),
                   accumulation=c.Accumulation.ACCUMULATING,
                   allowed_lateness=c.Duration(0), processing_time=c.Expr("p"))
    k = np.zeros(2, np.int64)
    e = np.array([_at("12:00:30"), _at("12:03:30")])
    a = np.array([_at("12:01:00"), _at("12:04:00")])
    marks = [(_at("12:01:30"), _at("12:00:00")), (_at("12:02:00"), _at("12:02:00"))]
    _, ev = _run(cl, k, e, a, marks)
    assert _rows(ev, f.WAITING) == []
    fires = _rows(ev, f.FIRE)
    assert [(x[0], x[1]) for x in fires] == [(_at("12:02:00"), _at("12:00:00")),
                                             (_at("12:04:00"), _at("12:03:00"))]
    assert fires[1][3].endswith("end of input: watermark → +inf")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=inputs(), window=WINDOWS, trigger=st.sampled_from(FAST_TRIGGERS + OTHER_TRIGGERS),
       acc=st.sampled_from(list(c.Accumulation)), lateness=st.sampled_from([0, 60]),
       wmd=st.data())
def test_fire_rows_are_the_panes(data, window, trigger, acc, lateness, wmd) -> None:
    """Any window (sessions merge), trigger and accumulation: recording changes nothing
    (the recorded run, canonically numbered, equals the ordinary run, fast path or not),
    the FIRE rows are its panes one for one, the RETRACT rows its retractions, and every
    element instance has exactly one ELEMENT, LATE_ELEMENT or DROPPED row."""
    k, e, a, _ = data
    if a is None or not len(k):
        return
    wm, marks = _wm(wmd.draw)
    cl = _clauses(window, trigger, acc, lateness, wm, False)
    tl = timeline_for(cl.watermark, e, a, marks)
    plain = group_also_by_window(k, e, a, cl, tl)
    rec = f.Recorder(cl, dt.timezone.utc, f.final_watermark(cl, tl, int(a.max())))
    res = group_also_by_window(k, e, a, cl, tl, recorder=rec)
    same = canonical(res)
    for x, y in ((same.panes, plain.panes), (same.retractions, plain.retractions)):
        for name in vars(x):
            assert np.array_equal(getattr(x, name), getattr(y, name)), name
    ev = f.events(res, rec, k, e, a, tl)
    fire = ev.code == f.FIRE
    p = res.panes
    got = sorted(zip(ev.pane[fire].tolist(), ev.at[fire].tolist(), ev.key[fire].tolist(),
                     ev.window_start[fire].tolist(), ev.pane_index[fire].tolist(), strict=True))
    assert got == sorted(zip(p.pane_id.tolist(), p.emit_time.tolist(), p.key.tolist(),
                             p.window_start.tolist(), p.pane_index.tolist(), strict=True))
    assert all(isinstance(d, str) and d for d in ev.detail[fire])
    ret = ev.code == f.RETRACT
    r = res.retractions
    assert sorted(zip(ev.pane[ret].tolist(), ev.at[ret].tolist(), strict=True)) == \
        sorted(zip(r.retracted_pane_id.tolist(), r.emit_time.tolist(), strict=True))
    elements = np.isin(ev.code, [f.ELEMENT, f.LATE_ELEMENT, f.DROPPED])
    assert elements.sum() == len(res.instances.row)
    assert ((ev.code == f.DROPPED).sum()) == (res.instances.first_pane < 0).sum()
    assert (np.diff(ev.at) >= 0).all()


def test_a_running_stream_stops_at_its_frontier() -> None:
    """Figure 14's query on the rows that arrived before 12:05:45 (the 5, 7, 3, 4, 3),
    stopped at that frontier, not ended. By hand: [12:00:30,12:01:30) fired ON_TIME
    (total 5) at 12:05:00 when the mark 12:01:40 passed its end, and waits for nothing
    (no WAITING row; it is kept for late data); [12:02:10,12:03:10) fired EARLY (7) at
    12:05:00 and waits for the watermark, its period restarting with its next element;
    [12:03:20,12:05:00) (3, 4, 3: first arrival 12:05:20) has fired nothing and waits
    for 12:06:00's period or the watermark. Nothing fires at +inf."""
    ev = paper_events()[:5]
    k = np.zeros(len(ev), np.int64)
    e = np.array([_us(x[2]) for x in ev])
    a = np.array([_us(x[3]) for x in ev])
    cl = FIGURE_CLAUSES["fig14_sessions_retracting"]
    tl = timeline_for(cl.watermark, e, a, [(_us(p), _us(w)) for p, w in paper_watermarks()])
    now = _at("12:05:45")
    rec = f.Recorder(cl, dt.timezone.utc, int(tl.at(now - 1)), "held by marks")
    res = group_also_by_window(k, e, a, cl, tl, recorder=rec, until=now)
    out = f.events(res, rec, k, e, a, tl)
    fires = _rows(out, f.FIRE)
    assert [(x[0], x[1], x[2]) for x in fires] == [
        (_at("12:05:00"), _at("12:00:30"), _at("12:01:30")),
        (_at("12:05:00"), _at("12:02:10"), _at("12:03:10"))]
    assert _rows(out, f.WAITING) == [
        (now, _at("12:02:10"), _at("12:03:10"), "watermark 12:01:40 < window end 12:03:10 "
         "(held by marks); the trigger waits for EVERY 1 MINUTE (from the next element on) "
         "or WATERMARK"),
        (now, _at("12:03:20"), _at("12:05:00"), "watermark 12:01:40 < window end 12:05:00 "
         "(held by marks); the trigger waits for EVERY 1 MINUTE at 12:06:00 or WATERMARK")]
    assert not (out.code == f.EXPIRE).any()
    # every live window, with its last pane (-1: none yet)
    assert [(p >= 0) for _, p in rec.live] == [True, True, False]
    assert set(out.pane[out.code == f.FIRE].tolist()) == {p for _, p in rec.live if p >= 0}


def test_what_a_trigger_waits_for() -> None:
    """The next condition of a trigger's state, leaf by leaf in the spec's notation."""
    from dfsql.model import triggers as tr
    from dfsql.model.trigger_waits import waits_for

    def text(t: int) -> str:
        return f.time_text(t, dt.timezone.utc, _at("12:00:00"))

    every = c.Repeat(sub=c.AtPeriod(period=MIN))
    count = c.ElemCount(count=3)
    t = c.AfterEach(subs=(c.OrFinally(main=every, final=c.EndOfWindow()),
                          c.Repeat(sub=c.EndOfWindow())))
    node = tr.build(t).on_element(_at("12:00:10"))
    assert waits_for(t, node, text) == "EVERY 1 MINUTE at 12:01:00 or WATERMARK"
    both = c.AfterAll(subs=(count, c.SinceEarliestElem(delay=c.Duration(30_000_000))))
    node = tr.build(both).on_element(_at("12:00:10")).on_element(_at("12:00:20"))
    assert waits_for(both, node, text) == "(AFTER 3 ROWS (2 of 3 so far) and " \
                                          "AFTER 30 SECONDS at 12:00:40)"
    assert waits_for(c.Never(), tr.build(c.Never()), text) == \
        "NEVER (only the closing pane fires)"
    assert waits_for(count, tr.Done(tr.build(count)), text) == "nothing (the trigger is done)"
