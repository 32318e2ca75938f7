"""Feeds the Spark tests share: the paper's rows, random workloads with merging sessions
and late rows, parts written in arrival order, a stream's sentinel, and continuous queries
started and run up to their input. One home, so no test module imports another's."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

import dfsql
from tests.conftest import modified_in_order
from tests.paper import FIGURES, PAPER

FIG14 = FIGURES["fig14_sessions_retracting"]["query"]
#: Figure 14 with sessions of a 5-minute gap: the paper's rows make one session of 22
GAP5 = FIG14.replace("GAP 1 MINUTE", "GAP 5 MINUTES")
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
HOUR = pd.Timedelta(hours=1)
#: a windowed query over the random workloads, ``{{t}}`` the table, the rest to format
STREAM_QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n, MIN(value) AS lo, "
                "MAX(value) AS hi, AVG(value) AS mean FROM {{t}} GROUP BY key "
                "WINDOW {window} ON event_time WATERMARK DELAY 20 SECONDS "
                "PROCESSING TIME arrival_time ALLOWED LATENESS 60 SECONDS "
                "TRIGGER {trigger} EMIT {emit}")

#: Figure 14's windows still live after its last pane, with their last row (from the
#: paper's panes: every other window was retracted or merged away)
FIG14_TABLE = [
    ("k", 39, datetime(2015, 9, 1, 12, 0, 30), datetime(2015, 9, 1, 12, 5), 0, "LATE", False,
     datetime(2015, 9, 1, 12, 7, 20)),
    ("k", 12, datetime(2015, 9, 1, 12, 6, 30), datetime(2015, 9, 1, 12, 8, 50), 0, "ON_TIME",
     False, datetime(2015, 9, 1, 12, 9)),
]


def paper_events() -> pd.DataFrame:
    frame = pd.read_csv(PAPER / "events.csv", parse_dates=["event_time", "arrival_time"])
    for col in ("event_time", "arrival_time"):
        frame[col] = frame[col].dt.tz_localize("UTC")
    return frame


def write_parts(frame: pd.DataFrame, cuts: list[int], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)  # one schema for every part
    bounds = [0, *cuts, len(frame)]
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        part = path / f"part-{i:04d}.parquet"
        pq.write_table(table.slice(a, b - a), part, coerce_timestamps="us")
        modified_in_order(part, i)


def with_sentinel(frame: pd.DataFrame, after: pd.Timedelta = HOUR) -> pd.DataFrame:
    """``frame`` and one more row ``after`` its last arrival (an hour), with a NULL event
    time (it belongs to no window and moves no watermark): the stream's last frontier."""
    sentinel = frame.iloc[-1:].copy()
    sentinel["arrival_time"] = frame["arrival_time"].max() + after
    sentinel["event_time"] = pd.NaT
    return pd.concat([frame, sentinel], ignore_index=True)


def workload(seed: int, n: int = 300) -> pd.DataFrame:
    """Three keys with bursts of events (sessions that merge), arrivals up to 90 s late
    in arrival order, some stragglers beyond the allowed lateness."""
    rng = np.random.default_rng(seed)
    et = np.sort(rng.integers(0, 900, n))
    delay = rng.integers(0, 40, n)
    delay[rng.random(n) < 0.05] += 150
    return in_arrival_order(rng, et, et + delay, ["a", "b", "c"], timedelta(seconds=1))


def in_arrival_order(rng, et: np.ndarray, at: np.ndarray, keys: list[str],
                      unit: timedelta) -> pd.DataFrame:
    """Rows with event and arrival times (in ``unit`` after T0), random keys and values,
    in arrival order."""
    n = len(et)
    o = np.argsort(at, kind="stable")
    return pd.DataFrame({
        "key": rng.choice(keys, n)[o],
        "value": rng.integers(1, 10, n)[o].astype(np.int64),
        "event_time": [T0 + unit * int(s) for s in et[o]],
        "arrival_time": [T0 + unit * int(s) for s in at[o]],
    })


def start(spark, name: str, query: str, head: str = "") -> None:
    from dfsql.continuous_queries import QUERIES

    dfsql.sql(f"CREATE STREAMING QUERY {name}{head} AS {query}", spark)
    QUERIES.running[name].query.processAllAvailable()


def t(hms: str) -> datetime:
    return datetime.strptime("2015-09-01 " + hms, "%Y-%m-%d %H:%M:%S")


def stream_and_replay(spark, frame: pd.DataFrame, query: str, cuts: list[int], tmp: Path,
                       arrival: str = "arrival_time"):
    """(the stream's rows, batch by batch in order; the replay's rows before the stream's
    frontier, the sentinel's arrival). ``query`` reads the table ``{t}``."""
    sentinel = frame.iloc[-1:].copy()
    for col in frame.columns:
        if col == arrival:
            sentinel[col] = frame[arrival].max() + pd.Timedelta(hours=1)
        elif col == "event_time":
            sentinel[col] = pd.NaT
    frame = pd.concat([frame, sentinel], ignore_index=True)
    src = tmp / "in"
    write_parts(frame, [*cuts, len(frame) - 1], src)
    schema = spark.read.parquet(str(src)).schema
    spark.read.parquet(str(src)).createOrReplaceTempView("bounded_src")
    (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
     .createOrReplaceTempView("live_src"))
    batches: list[list] = []
    q = dfsql.start(query.format(t="live_src"), sink=lambda b, i: batches.append(b.collect()),
                    checkpoint=str(tmp / "ck"), trigger={"availableNow": True}, spark=spark)
    q.awaitTermination()
    frontier = frame[arrival].max().to_pydatetime().replace(tzinfo=None)
    replay = [r for r in dfsql.sql(query.format(t="bounded_src"), spark).collect()
              if r.emit_time < frontier]
    return [r for b in batches for r in b], replay, len(batches)


def split_history(spark, frame: pd.DataFrame, cut: int, path: Path, stream: str, history: str,
           parts: int = 3, trickle: bool = True) -> None:
    """Rows ``[0, cut)`` as the bounded view ``history``; the rest, and a sentinel an
    hour after the last arrival (NULL event time: no window, no watermark; the stream's
    frontier), as ``parts`` files read by the stream ``stream`` (``trickle``: one per
    micro-batch); all of them as the bounded view ``<stream>_all``."""
    sentinel = frame.iloc[-1:].copy()
    sentinel["arrival_time"] = frame["arrival_time"].max() + pd.Timedelta(hours=1)
    sentinel["event_time"] = pd.Series([pd.NaT], sentinel.index, frame["event_time"].dtype)
    whole = pd.concat([frame, sentinel], ignore_index=True)
    live = whole.iloc[cut:].reset_index(drop=True)
    bounds = sorted({int(b) for b in np.linspace(0, len(live) - 1, parts + 1)[1:-1]} - {0})
    write_parts(live, [*bounds, len(live) - 1], path)
    schema = spark.read.parquet(str(path)).schema
    spark.createDataFrame(whole.iloc[:cut], schema=schema).createOrReplaceTempView(history)
    reader = spark.readStream.schema(schema)
    if trickle:
        reader = reader.option("maxFilesPerTrigger", 1)
    reader.parquet(str(path)).createOrReplaceTempView(stream)
    spark.createDataFrame(whole, schema=schema).createOrReplaceTempView(f"{stream}_all")
