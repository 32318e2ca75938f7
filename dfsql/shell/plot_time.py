"""The time axes of ``\\plot``: times as matplotlib numbers, and axes ticked at round
instants (whole seconds, minutes, hours or days as the span needs), labelled with
times of day, or with dates where the span crosses midnight."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

#: the steps time ticks may take, per unit: each divides a minute, an hour or a day (or
#: starts a week or a fortnight on the 1st), so every tick is a round instant
#: (AutoDateLocator's own lists also allow 4 hours and 3 or 21 days)
ROUND_STEPS = {"SECONDLY": [1, 2, 5, 10, 15, 30], "MINUTELY": [1, 2, 5, 10, 15, 30],
               "HOURLY": [1, 2, 3, 6, 12], "DAILY": [1, 2, 7, 14]}


def num(t: Any) -> float:
    """A time (or a plain number) as the float matplotlib plots."""
    import matplotlib.dates as mdates

    return mdates.date2num(t) if isinstance(t, dt.datetime) else float(t)


def nums(ts: Sequence[dt.datetime]) -> list[float]:
    """Many times as matplotlib's floats, at once (date2num is slow one by one)."""
    import matplotlib.dates as mdates

    return [float(x) for x in mdates.date2num(list(ts))] if len(ts) else []


def time_axis(axis, lo: Any, hi: Any) -> None:
    """Ticks at round instants, 3 to 9 of them; times of day on an axis within one day,
    dates (and hours) on one across days, where a time of day alone repeats and says
    nothing. (Matplotlib's default locator cuts a span into decimal fractions of a day:
    ticks at 02:24, 04:48.)"""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=3, maxticks=9)
    for unit, steps in ROUND_STEPS.items():
        locator.intervald[getattr(mdates, unit)] = steps
    axis.set_major_locator(locator)
    if isinstance(lo, dt.datetime) and isinstance(hi, dt.datetime) and lo.date() != hi.date():
        axis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d\n%H:%M"))
    else:
        axis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
