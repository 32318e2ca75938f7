"""Shared fixtures: the paper's running example and hand-built clauses per figure."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import pytest

from dfsql.model.clauses import (
    Accumulation,
    AfterEach,
    AtPeriod,
    Clauses,
    Duration,
    ElemCount,
    EndOfWindow,
    Expr,
    FixedWindows,
    GlobalWindows,
    OrFinally,
    Repeat,
    SessionWindows,
    WatermarkFrom,
)

PAPER = Path(__file__).resolve().parents[2] / "examples" / "paper"
MIN = Duration(60_000_000)


def ts(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S")


def paper_events() -> list[tuple[str, int, dt.datetime, dt.datetime]]:
    with open(PAPER / "events.csv") as f:
        return [(r["key"], int(r["value"]), ts(r["event_time"]), ts(r["arrival_time"]))
                for r in csv.DictReader(f)]


def paper_watermarks() -> list[tuple[dt.datetime, dt.datetime]]:
    with open(PAPER / "watermarks.csv") as f:
        return [(ts(r["processing_time"]), ts(r["watermark"])) for r in csv.DictReader(f)]


def figures() -> dict[str, dict]:
    return {f["name"]: f for f in json.loads((PAPER / "figures.json").read_text())["figures"]}


EARLY_ONTIME_LATE = AfterEach(subs=(OrFinally(main=Repeat(sub=AtPeriod(period=MIN)),
                                              final=EndOfWindow()),
                                    Repeat(sub=EndOfWindow())))
PT = Expr("arrival_time")
ON = Expr("event_time")
WM = WatermarkFrom(table="paper_watermarks")
LAT = Duration(10 * 60_000_000)
A, D, AR = (Accumulation.ACCUMULATING, Accumulation.DISCARDING,
            Accumulation.ACCUMULATING_AND_RETRACTING)

FIGURE_CLAUSES: dict[str, Clauses] = {
    "fig06_batch_global": Clauses(window=GlobalWindows()),
    "fig07_global_every_minute_accumulating": Clauses(
        window=GlobalWindows(), processing_time=PT, trigger=Repeat(sub=AtPeriod(period=MIN)),
        accumulation=A),
    "fig08_global_every_minute_discarding": Clauses(
        window=GlobalWindows(), processing_time=PT, trigger=Repeat(sub=AtPeriod(period=MIN)),
        accumulation=D),
    "fig09_global_every_2_rows_discarding": Clauses(
        window=GlobalWindows(), processing_time=PT, trigger=Repeat(sub=ElemCount(count=2)),
        accumulation=D),
    "fig10_fixed_batch": Clauses(window=FixedWindows(size=Duration(2 * 60_000_000)), on=ON,
                                 accumulation=A),
    "fig12_fixed_streaming": Clauses(
        window=FixedWindows(size=Duration(2 * 60_000_000)), on=ON, watermark=WM,
        processing_time=PT, allowed_lateness=LAT, accumulation=A),
    "fig13_fixed_early_ontime_late": Clauses(
        window=FixedWindows(size=Duration(2 * 60_000_000)), on=ON, watermark=WM,
        processing_time=PT, allowed_lateness=LAT, trigger=EARLY_ONTIME_LATE, accumulation=A),
    "fig14_sessions_retracting": Clauses(
        window=SessionWindows(gap=MIN), on=ON, watermark=WM, processing_time=PT,
        allowed_lateness=LAT, trigger=EARLY_ONTIME_LATE, accumulation=AR),
    "fig14_sessions_accumulating": Clauses(
        window=SessionWindows(gap=MIN), on=ON, watermark=WM, processing_time=PT,
        allowed_lateness=LAT, trigger=EARLY_ONTIME_LATE, accumulation=A),
    "fig14_sessions_discarding": Clauses(
        window=SessionWindows(gap=MIN), on=ON, watermark=WM, processing_time=PT,
        allowed_lateness=LAT, trigger=EARLY_ONTIME_LATE, accumulation=D),
}


@pytest.fixture(scope="session")
def events() -> list[tuple[str, int, dt.datetime, dt.datetime]]:
    return paper_events()


@pytest.fixture(scope="session")
def marks() -> list[tuple[dt.datetime, dt.datetime]]:
    return paper_watermarks()
