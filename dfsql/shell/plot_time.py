"""The time axes of ``\\plot``: times as matplotlib numbers, labelled with times of day,
or with dates where the span crosses midnight."""

from __future__ import annotations

import datetime as dt
from typing import Any


def num(t: Any) -> float:
    """A time (or a plain number) as the float matplotlib plots."""
    import matplotlib.dates as mdates

    return mdates.date2num(t) if isinstance(t, dt.datetime) else float(t)


def mid(a: Any, b: Any) -> Any:
    """The instant (or number) halfway between ``a`` and ``b``."""
    if isinstance(a, dt.datetime):
        return a + (b - a) / 2
    return (a + b) / 2


def time_axis(axis, lo: Any, hi: Any) -> None:
    """Times of day on an axis within one day; dates (and hours) on one across days,
    where a time of day alone repeats and says nothing."""
    import matplotlib.dates as mdates

    if isinstance(lo, dt.datetime) and isinstance(hi, dt.datetime) and lo.date() != hi.date():
        axis.set_major_locator(mdates.AutoDateLocator(maxticks=8))
        axis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d\n%H:%M"))
    else:
        axis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
