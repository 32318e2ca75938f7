"""EXPLAIN FIRINGS inside the replay: the driver's run with the model's recorder on.

The replay (:mod:`dfsql.spark.replay.panes`) runs as for the query itself; with a recorder the
driver also emits one row per event (kind :data:`KIND_EVENT`) beside its pane markers, so
the events and the panes come out of the same run of the same tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dfsql.language.names import EVENT_TIME
from dfsql.model import clauses as c
from dfsql.model import firings as fr
from dfsql.model.group_also_by_window import flatten, group_also_by_window
from dfsql.model.panes import TIMING_NAMES
from dfsql.model.windows import NULL_EVENT_TIME
from dfsql.spark.timelines import holding_writer
from dfsql.spark.timelines import us as _us

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.spark.values import FiringsRequest, ReplayPlan

KIND_EVENT = 5
#: an event row's columns beside the keys and window_start / window_end
#: (dfsql.model.firings.Events; element rows' details are printed in SQL from __etime,
#: __reason and __wm)
EVENT_FIELDS = ["`at` TIMESTAMP", "event STRING", "__wm TIMESTAMP", "__ev_index BIGINT",
                "__ev_timing STRING", "detail STRING", "__etime TIMESTAMP", "__reason TINYINT",
                "__seq BIGINT"]


def event_types() -> dict:
    """The Arrow types of EVENT_FIELDS (pyarrow is imported in the tasks only)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return {"at": ts, "event": pa.string(), "__wm": ts, "__ev_index": pa.int64(),
            "__ev_timing": pa.string(), "detail": pa.string(), "__etime": ts,
            "__reason": pa.int8(), "__seq": pa.int64()}


_TIMINGS = np.array([*TIMING_NAMES, None], dtype=object)  # index -1: no pane
_NAMES = np.array(fr.EVENT_NAMES, dtype=object)


def for_firings(plan: ReplayPlan, inp: DataFrame, timeline, end_time: int,
                firings: FiringsRequest):
    """The input narrowed to the keys asked for (the watermark was computed from all of
    it), and what the driver's recorder needs: the time zone, the watermark the input
    leaves at its end and what holds it there."""
    cl = plan.clauses
    if firings.where:
        inp = inp.where(firings.where)
    tz = fr.zone(firings.time_zone)
    writer = None
    if isinstance(cl.watermark, c.WatermarkFrom) and cl.watermark.writer is not None:
        writer = holding_writer(plan, cl.watermark, end_time)
    holder = fr.holder_text(cl, timeline, end_time, tz, writer)
    return inp, (firings.time_zone, fr.final_watermark(cl, timeline, end_time), holder)


def recorded(record, clauses: c.Clauses, timeline, end_floor: int, table, keys: list[str],
             key_ids: np.ndarray, et: np.ndarray, pt: np.ndarray):
    """The driver's run with the recorder on: its flat result, and the events as columns
    of the driver's output (None when there are none)."""
    import pyarrow as pa

    tz, final_wm, holder = record
    rec = fr.Recorder(clauses, fr.zone(tz), final_wm, holder)
    res = group_also_by_window(key_ids, et, pt, clauses, timeline, end_floor=end_floor,
                               recorder=rec)
    # the element's own event time (the driver reads a SLIDING window's start instead)
    real = _us(table.column(EVENT_TIME), null=NULL_EVENT_TIME)
    ev = fr.events(res, rec, key_ids, real, pt, timeline)
    n = len(ev.at)
    if not n:
        return flatten(res), None
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max

    def ts(v: np.ndarray) -> pa.Array:
        return pa.array(v, type=pa.int64(), mask=(v == lo) | (v == hi)).cast(
            pa.timestamp("us", tz="UTC"))

    cols = {"__kind": pa.array(np.full(n, KIND_EVENT, np.int8)),
            "window_start": ts(ev.window_start), "window_end": ts(ev.window_end),
            "at": ts(ev.at), "event": pa.array(_NAMES[ev.code], type=pa.string()),
            "__wm": ts(ev.watermark),
            "__ev_index": pa.array(ev.pane_index, mask=ev.pane_index < 0),
            "__ev_timing": pa.array(_TIMINGS[ev.timing], type=pa.string()),
            "detail": pa.array(ev.detail, type=pa.string()),
            "__etime": ts(ev.event_time), "__reason": pa.array(ev.reason),
            "__seq": pa.array(ev.seq)}
    if keys:
        rows = np.searchsorted(key_ids, ev.key, side="left").astype(np.int64)
        taken = table.select(keys).take(pa.array(rows))
        for k in keys:
            cols[k] = taken.column(k)
    return flatten(res), cols
