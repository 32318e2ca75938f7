"""What ``\\plot`` draws beside the panes of a replay (a query with PROCESSING TIME): the
input elements, each with the key it belongs to, and the watermark line.

The elements are read from the block's input stage, only for the keys the plot shows
(the result's key columns matched to the query's GROUP BY keys by name), at most
:data:`MAX_ELEMENTS` per key, the first to arrive. The watermark is one function of
processing time for every key (docs/reference.md#watermark), so one line serves every panel.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dfsql.language.names import EVENT_TIME, PROCESSING_TIME
from dfsql.model.windows import NEG_INF, POS_INF
from dfsql.spark.values import in_query

MAX_ELEMENTS = 2000  # per key shown
_SCALARS = (str, int, float, bool, decimal.Decimal, dt.date, type(None))


@dataclass
class Input:
    """The replayed input of the keys shown, and the watermark line."""

    #: the result's key columns the elements carry (those that are GROUP BY keys)
    key_columns: list[str] = field(default_factory=list)
    #: per element: event time, arrival time, the first value an aggregate reads, and
    #: its key (its values in ``key_columns``)
    elements: list[tuple[Any, Any, Any, tuple]] = field(default_factory=list)
    #: the watermark as (event times, processing times), or None
    watermark: tuple[list, list] | None = None
    #: the result's key columns that name no GROUP BY key, so that which panel an
    #: element belongs to is unknown (no elements are read then)
    unmatched: list[str] = field(default_factory=list)

    def of(self, key: tuple) -> list[tuple[Any, Any, Any, tuple]]:
        """The elements of one key (its values in :attr:`key_columns`)."""
        return [el for el in self.elements if el[3] == key]


def read_input(plan, key_columns: Sequence[str], shown: Sequence[tuple]) -> Input | None:
    """The input elements of the ``shown`` keys (their values in the result's
    ``key_columns``) and the watermark line of ``plan``'s replay; None if its input has
    no event and processing time."""
    # time belongs to the input: the watermark line comes from every row the FROM reads,
    # the dots are the rows WHERE keeps (the query's elements)
    timed = plan.timed_input_df()
    inp = in_query(timed)
    if PROCESSING_TIME not in inp.columns or EVENT_TIME not in inp.columns:
        return None
    by_name = {g.output_name: g.column for g in plan.stages.group_keys if g.output_name}
    at = [i for i, k in enumerate(key_columns) if by_name.get(k) in inp.columns]
    out = Input([key_columns[i] for i in at])
    unmatched = [k for k in key_columns if by_name.get(k) not in inp.columns]
    if unmatched and len(shown) > 1:  # which panel an element belongs to is unknown
        out.unmatched, out.watermark = unmatched, _watermark(plan, timed)
        return out
    cols = [by_name[k] for k in out.key_columns]
    keys = list(dict.fromkeys(tuple(s[i] for i in at) for s in shown))
    payload = [c for c in inp.columns if c.startswith("__c")]
    got = _elements(inp, cols, keys, payload[:1]).collect()
    out.elements = [(r[0], r[1], r[2 + len(cols)] if payload else None,
                     tuple(r[2:2 + len(cols)])) for r in got
                    if r[0] is not None and r[1] is not None]
    out.watermark = _watermark(plan, timed)
    return out


def _elements(inp, cols: list[str], keys: list[tuple], payload: list[str]):
    """The input rows of the ``keys`` (values of ``cols``), the first MAX_ELEMENTS of
    each to arrive: event time, arrival, key columns, the payload column."""
    from functools import reduce

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = inp.select(EVENT_TIME, PROCESSING_TIME, *cols, *payload)
    if not cols:
        return rows.limit(MAX_ELEMENTS)
    if all(isinstance(v, _SCALARS) for k in keys for v in k):
        wanted = [reduce(lambda a, b: a & b, [F.col(c).eqNullSafe(F.lit(v))
                                             for c, v in zip(cols, k, strict=True)])
                  for k in keys]
        rows = rows.where(reduce(lambda a, b: a | b, wanted))
    first = Window.partitionBy(*cols).orderBy(PROCESSING_TIME, EVENT_TIME)
    return (rows.withColumn("__n", F.row_number().over(first))
            .where(F.col("__n") <= MAX_ELEMENTS).drop("__n"))


def _watermark(plan, inp) -> tuple[list, list] | None:
    """The watermark line as (event time, processing time) points: the timeline sampled
    at its change points and on a fine grid, so steps and rising segments both show."""
    import numpy as np

    # here, not at the top: the timeline loads Spark's planner (sqlglot, pyspark), which
    # the shell's prompt need not wait for
    from dfsql.spark.timelines import watermark_timeline

    timeline, first, last = watermark_timeline(plan, inp)
    if first is None:
        return None
    end = max(last, timeline.end)
    inside = timeline.times[(timeline.times >= first) & (timeline.times <= end)]
    grid = np.unique(np.r_[np.linspace(first, end, 400).astype(np.int64), inside, inside - 1])
    wm = timeline.at(grid)
    ok = (wm > NEG_INF) & (wm < POS_INF)
    wx = [dt.datetime.fromtimestamp(int(v) / 1e6) for v in wm[ok]]
    wy = [dt.datetime.fromtimestamp(int(v) / 1e6) for v in grid[ok]]
    return wx, wy
