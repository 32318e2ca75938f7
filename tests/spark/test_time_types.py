"""Event and processing times in every type Spark holds (issue #23; docs/reference.md#window, #processing-time).

ON and PROCESSING TIME may be TIMESTAMP, TIMESTAMP_NTZ or DATE, with or without NULLs.
Each is read as a TIMESTAMP in the session time zone (a TIMESTAMP_NTZ at its wall-clock
time there, a DATE at its midnight) once, in the input stage, so Spark's native window()
(batch), the replay's Arrow driver and a live stream see one type and give the same
windows; window_start, window_end and emit_time are TIMESTAMPs on every path. A NULL event
time is dropped and counted; a NULL processing time is a positioned DataError on a bounded
replay (the row would never arrive); any other type is a positioned AnalysisError.

Expected windows come from pandas (time-zone localisation, floor to the window size, the
sessions' merge by hand), never from dfsql. Parquet that pandas wrote with nanosecond
timestamps is read by ``dfsql.read_parquet`` and the shell's ``\\load``.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dfsql
from dfsql.errors import AnalysisError, DataError
from dfsql.shell.repl import Shell
from tests.conftest import modified_in_order

TYPES = ["TIMESTAMP", "TIMESTAMP_NTZ", "DATE"]
DAY_US = 86_400_000_000
#: 2024-01-01 00:00 as a count of µs (UTC) and of days: January has no DST change
BASE_US = 1_704_067_200_000_000
BASE_DAY = BASE_US // DAY_US
WINDOWS = {"FIXED(6 HOURS)": ("fixed", 6 * 3_600_000_000),
           "FIXED(1 DAY)": ("fixed", DAY_US),
           "SESSIONS(GAP 10 HOURS)": ("sessions", 10 * 3_600_000_000)}


def _sql_time(kind: str, value: int | None) -> str:
    """A time of ``kind`` as Spark SQL: TIMESTAMP from an instant (µs), TIMESTAMP_NTZ
    from a wall-clock time (µs), DATE from a day number."""
    if value is None:
        return f"CAST(NULL AS {kind})"
    if kind == "TIMESTAMP":
        return f"timestamp_micros({value})"
    if kind == "TIMESTAMP_NTZ":
        return f"timestampadd(MICROSECOND, {value}, TIMESTAMP_NTZ'1970-01-01 00:00:00')"
    return f"date_from_unix_date({value})"


def _instant(kind: str, value: int, tz: str) -> int:
    """The instant (µs since the epoch, UTC) that Spark's CAST to TIMESTAMP gives, by
    pandas' own time-zone rules."""
    if kind == "TIMESTAMP":
        return value
    wall = pd.Timestamp(value, unit="us") if kind == "TIMESTAMP_NTZ" else \
        pd.Timestamp(value, unit="D")
    return wall.tz_localize(tz).value // 1000


def _expected(rows, et_kind: str, tz: str, window: str) -> list[tuple]:
    """(key, window_start µs, window_end µs, SUM, COUNT) by pandas and by hand."""
    how, size = WINDOWS[window]
    frame = pd.DataFrame([(k, v, _instant(et_kind, e, tz)) for k, v, e, _ in rows
                          if e is not None], columns=["k", "v", "t"])
    out = []
    if how == "fixed":
        frame["ws"] = frame["t"] - frame["t"] % size  # epoch-aligned, as Spark's window()
        for (k, ws), g in frame.groupby(["k", "ws"]):
            out.append((k, int(ws), int(ws) + size, int(g["v"].sum()), len(g)))
        return sorted(out)
    for k, g in frame.sort_values("t").groupby("k"):  # sessions: [t, t + gap), merged
        start = end = None
        total = n = 0
        for t, v in zip(g["t"], g["v"], strict=True):
            if start is not None and t < end:
                end, total, n = max(end, t + size), total + v, n + 1
                continue
            if start is not None:
                out.append((k, start, end, total, n))
            start, end, total, n = int(t), int(t) + size, int(v), 1
        out.append((k, start, end, total, n))
    return sorted(out)


@contextlib.contextmanager
def _time_zone(spark, tz: str):
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", tz)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def _view(spark, name: str, rows, et_kind: str, pt_kind: str) -> None:
    values = ", ".join(f"('{k}', {v}, {_sql_time(et_kind, e)}, {_sql_time(pt_kind, p)})"
                       for k, v, e, p in rows)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT k, CAST(v AS BIGINT) AS v, et, pt "
              f"FROM VALUES {values} AS t(k, v, et, pt)")


def _windows(df) -> list[tuple]:
    got = df.selectExpr("k", "unix_micros(window_start)", "unix_micros(window_end)",
                        "total", "n").collect()
    return sorted(tuple(r) for r in got)


def _pane_types(df) -> list[str]:
    return [df.schema[c].dataType.simpleString()
            for c in ("window_start", "window_end", "emit_time")]


@st.composite
def typed_rows(draw):
    et_kind, pt_kind = draw(st.sampled_from(TYPES)), draw(st.sampled_from(TYPES))
    n = draw(st.integers(1, 10))
    rows = []
    for _ in range(n):
        k = draw(st.sampled_from(["a", "b"]))
        v = draw(st.integers(1, 9))
        if et_kind == "DATE":
            e = BASE_DAY + draw(st.integers(0, 3))
        else:  # minutes over three days (wall clock for NTZ, an instant for TIMESTAMP)
            e = BASE_US + draw(st.integers(0, 3 * 24 * 60)) * 60_000_000
        p = (BASE_DAY + draw(st.integers(0, 4)) if pt_kind == "DATE"
             else BASE_US + draw(st.integers(0, 4 * 24 * 60)) * 60_000_000)
        rows.append((k, v, draw(st.one_of(st.none(), st.just(e))),
                     draw(st.one_of(st.just(p), st.just(p), st.just(p), st.none()))))
    return et_kind, pt_kind, rows


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=typed_rows(), window=st.sampled_from(sorted(WINDOWS)),
       tz=st.sampled_from(["UTC", "America/New_York"]))
def test_every_time_type_gives_the_same_windows_on_batch_and_replay(spark, data, window, tz):
    """Batch (Spark's window() / session_window()) and the replay (PROCESSING TIME,
    the perfect watermark: nothing late, one pane per window) give pandas' windows for
    every pair of ON / PROCESSING TIME types, in UTC and in New York; NULL event times are
    dropped and counted; NULL processing times are a positioned error naming how many."""
    et_kind, pt_kind, rows = data
    _view(spark, "typed", rows, et_kind, pt_kind)
    expected = _expected(rows, et_kind, tz, window)
    null_et = sum(e is None for _, _, e, _ in rows)
    head = "SELECT k, SUM(v) AS total, COUNT(*) AS n FROM typed "
    tail = f"GROUP BY k WINDOW {window} ON et"
    with _time_zone(spark, tz):
        batch = dfsql.sql(head + tail, spark)
        assert _windows(batch) == expected
        assert _pane_types(batch) == ["timestamp"] * 3
        assert dfsql.dropped_late(batch) == null_et

        replayed = head + "{where}" + tail + " WATERMARK PERFECT PROCESSING TIME pt"
        null_pt = sum(p is None for _, _, _, p in rows)
        if null_pt:
            q = replayed.format(where="")
            with pytest.raises(DataError) as err:
                dfsql.sql(q, spark).collect()
            e = err.value
            assert (e.line, e.column) == (1, q.index("pt", q.index("PROCESSING TIME")) + 1)
            assert f"NULL in {null_pt} row" in e.message and "WHERE pt IS NOT NULL" in e.hint
        kept = [r for r in rows if r[3] is not None]
        replay = dfsql.sql(replayed.format(where="WHERE pt IS NOT NULL "), spark)
        assert _windows(replay) == _expected(kept, et_kind, tz, window)
        assert _pane_types(replay) == ["timestamp"] * 3
        assert dfsql.dropped_late(replay) == sum(e is None for _, _, e, _ in kept)


@pytest.mark.parametrize("column, sql_type", [("s", "STRING"), ("num", "BIGINT"),
                                              ("b", "BOOLEAN"), ("d", "DECIMAL(10,2)")])
@pytest.mark.parametrize("clause", ["ON", "PROCESSING TIME"])
def test_a_time_of_another_type_is_a_positioned_error(spark, column, sql_type, clause):
    spark.sql("CREATE OR REPLACE TEMP VIEW badly_typed AS SELECT 'a' AS k, "
              "'2024-01-01 00:00:00' AS s, CAST(1704067200 AS BIGINT) AS num, true AS b, "
              "CAST(1.5 AS DECIMAL(10,2)) AS d, TIMESTAMP'2024-01-01 00:00:00' AS ts")
    on, pt = (column, "ts") if clause == "ON" else ("ts", column)
    q = (f"SELECT k, COUNT(*) AS n FROM badly_typed GROUP BY k\n"
         f"WINDOW FIXED(1 HOUR) ON {on} PROCESSING TIME {pt}")
    with pytest.raises(AnalysisError) as err:
        dfsql.sql(q, spark).collect()
    e = err.value
    line2 = q.split("\n")[1]
    at = line2.index(f"ON {on}") + 3 if clause == "ON" else \
        line2.index(f"PROCESSING TIME {pt}") + len("PROCESSING TIME ")
    assert (e.line, e.column) == (2, at + 1)
    assert sql_type.split("(")[0].lower() in e.message.lower()
    assert "TIMESTAMP_NTZ or DATE" in e.message and "CAST(" in e.hint


@pytest.mark.parametrize("kind", ["TIMESTAMP_NTZ", "DATE"])
def test_a_watermark_table_of_any_time_type_is_read_as_timestamps(spark, kind):
    """WATERMARK FROM a table whose times are TIMESTAMP_NTZ or DATE gives what the same
    marks as TIMESTAMPs give (in New York, where an NTZ or DATE read as UTC would be off
    by five hours): the marks are read in the session time zone, as the rows are."""
    day = BASE_DAY if kind == "DATE" else BASE_US
    step = 1 if kind == "DATE" else DAY_US
    rows = [("a", 1, day, day + step), ("a", 2, day + step, day + 2 * step),
            ("a", 4, day, day + 3 * step)]  # late unless the watermark waits for it
    marks = [(day + step, day + step), (day + 2 * step, day + step),
             (day + 3 * step, day + 3 * step)]
    for name, mark_kind in (("wm_typed", kind), ("wm_plain", "TIMESTAMP")):
        def instant(v: int, mk: str = mark_kind) -> str:
            return _sql_time("TIMESTAMP", _instant(kind, v, "America/New_York")) \
                if mk == "TIMESTAMP" else _sql_time(kind, v)
        values = ", ".join(f"({instant(p)}, {instant(w)})" for p, w in marks)
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM VALUES {values} "
                  "AS t(processing_time, watermark)")
    _view(spark, "wm_rows", rows, kind, kind)
    q = ("SELECT k, SUM(v) AS total, COUNT(*) AS n FROM wm_rows GROUP BY k "
         "WINDOW FIXED(1 DAY) ON et WATERMARK FROM {m} PROCESSING TIME pt")
    with _time_zone(spark, "America/New_York"):
        typed = dfsql.sql(q.format(m="wm_typed"), spark)
        plain = dfsql.sql(q.format(m="wm_plain"), spark)
        cols = ["k", "total", "window_start", "pane_index", "pane_timing", "emit_time"]
        got = sorted(tuple(r[c] for c in cols) for r in typed.collect())
        assert got == sorted(tuple(r[c] for c in cols) for r in plain.collect())
        assert dfsql.dropped_late(typed) == dfsql.dropped_late(plain)
        assert len(got) >= 2  # the windows fired


# ---------------------------------------------------------------------------- Parquet

def _pandas_frame() -> pd.DataFrame:
    """Naive and time-zone-aware nanosecond times with NULLs, and times that only a
    floor (not a truncation) to the microsecond keeps in their window: a nanosecond before
    a boundary, and one before 1970."""
    naive = pd.to_datetime(["2024-01-01 12:00:10", None, "2024-01-01 12:59:59.999999999",
                            "2024-01-01 13:00:00", "1969-12-31 23:59:59.999999999"],
                           format="ISO8601")
    return pd.DataFrame({
        "k": ["a", "a", "b", "b", "c"], "v": [1, 2, 4, 8, 16],
        "naive": naive,
        "aware": naive.tz_localize("Europe/Berlin"),
        "arrival": pd.to_datetime(["2024-01-01 12:00:20", "2024-01-01 12:00:30", None,
                                   "2024-01-01 13:00:05", "2024-01-01 13:00:06"],
                                  format="ISO8601")})


def _floor_us(series: pd.Series) -> list:
    """pandas' own values floored to the microsecond, as naive UTC datetimes (aware) or
    wall-clock datetimes (naive); NULL as None."""
    if series.dt.tz is not None:
        series = series.dt.tz_convert("UTC").dt.tz_localize(None)
    return [None if pd.isna(t) else t.floor("us").to_pydatetime() for t in series]


@pytest.fixture(scope="module")
def nanos_parquet(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("nanos") / "times.parquet"
    frame = _pandas_frame()
    frame.to_parquet(path, index=False)  # pandas' default: nanoseconds
    import pyarrow.parquet as pq

    assert {str(f.type) for f in pq.read_schema(path) if "timestamp" in str(f.type)} == {
        "timestamp[ns]", "timestamp[ns, tz=Europe/Berlin]"}
    return path


def test_spark_refuses_nanoseconds_and_dfsql_says_how_to_read_them(spark, nanos_parquet):
    with pytest.raises(AnalysisError) as err:
        dfsql.sql(f"SELECT * FROM parquet.`{nanos_parquet}`", spark).collect()
    assert "TIMESTAMP(NANOS" in err.value.message
    assert "dfsql.read_parquet" in err.value.hint and "coerce_timestamps='us'" in err.value.hint


def test_read_parquet_gives_timestamps_floored_to_the_microsecond(spark, nanos_parquet):
    df = dfsql.read_parquet(nanos_parquet, spark)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {"k": "string", "v": "bigint", "naive": "timestamp_ntz",
                     "aware": "timestamp", "arrival": "timestamp_ntz"}
    frame = _pandas_frame()
    got = df.selectExpr("k", "naive", "CAST(aware AS TIMESTAMP_NTZ) AS aware",
                        "arrival").orderBy("k", "v").collect()  # session time zone: UTC
    assert [r.naive for r in got] == _floor_us(frame["naive"])
    assert [r.aware for r in got] == _floor_us(frame["aware"])
    assert [r.arrival for r in got] == _floor_us(frame["arrival"])


def test_load_reads_pandas_parquet_and_windows_it(spark, nanos_parquet, capsys):
    """The shell's \\load, driven by a script: both files load as timestamps, and the
    windows are pandas' (the nanosecond before 13:00 stays in [12:00, 13:00))."""
    shell = Shell()
    shell.timing = False
    rc = shell.run_script(
        f"\\load nanos_naive {nanos_parquet} EVENT TIME naive\n"
        f"\\load nanos_aware '{nanos_parquet}' EVENT TIME aware\n"
        "SELECT k, SUM(v) AS total FROM nanos_naive WHERE k <> 'c' GROUP BY k "
        "WINDOW FIXED(1 HOUR);\n")
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "nanos_naive: view of" in out.out and "naive timestamp_ntz" in out.out
    assert "aware timestamp," in out.out
    frame = _pandas_frame().dropna(subset=["naive"])
    frame = frame[frame["k"] != "c"]
    frame["ws"] = frame["naive"].dt.floor("h")
    expected = sorted((k, ws.to_pydatetime(), int(v)) for (k, ws), v in
                      frame.groupby(["k", "ws"])["v"].sum().items())
    for table, col in (("nanos_naive", "naive"), ("nanos_aware", "aware")):
        df = dfsql.sql(f"SELECT k, SUM(v) AS total FROM {table} WHERE k <> 'c' GROUP BY k "
                       "WINDOW FIXED(1 HOUR)", spark)
        got = sorted((r.k, r.window_start, r.total) for r in df.collect())
        if col == "aware":  # Berlin is an hour ahead of UTC in January
            got = [(k, ws + pd.Timedelta(hours=1), t) for k, ws, t in got]
        assert got == expected
        assert dfsql.dropped_late(df) == 1  # the NULL event time
    assert "| a " in out.out and "| b " in out.out


def test_load_with_null_arrivals_prints_the_positioned_error(spark, nanos_parquet, capsys):
    """Issue #23 in the shell: a naive processing time (TIMESTAMP_NTZ) with a NULL printed
    only "An exception was thrown from the Python worker"; now the positioned error. (A
    plain windowed count over the registered view is a batch, which needs no arrival
    time: it runs; asking for lateness makes it a replay in arrival order.)"""
    shell = Shell()
    rc = shell.run_script(
        f"\\load nanos_arrivals {nanos_parquet} EVENT TIME naive PROCESSING TIME arrival\n"
        "SELECT k, COUNT(*) AS n FROM nanos_arrivals GROUP BY k WINDOW GLOBAL;\n"
        "SELECT k, SUM(v) AS total FROM nanos_arrivals GROUP BY k WINDOW FIXED(1 HOUR)\n"
        "ALLOWED LATENESS 1 HOUR;\n")
    out = capsys.readouterr()
    assert rc == 1
    frame = _pandas_frame()  # the batch: every row with an event time, per key (pandas)
    counts = frame[frame["naive"].notna()].groupby("k").size()
    for k, n in counts.items():
        assert re.search(rf"\|\s*{k}\s*\|\s*{n}\s*\|", out.out), (k, n)
    assert "arrival timestamp_ntz" in out.out
    assert "PROCESSING TIME `nanos_arrivals`.`arrival` is NULL in 1 row" in out.err
    assert "^" in out.err and "Python worker" not in out.err + out.out


def test_the_issues_naive_parquet_with_null_arrivals_is_a_positioned_error(spark, tmp_path):
    """Issue #23's case: naive pandas times in Parquet (read as TIMESTAMP_NTZ) with a
    NULL in the processing-time column: the same positioned error as with TIMESTAMPs,
    not the replay's ArrowInvalid; without the NULL rows the windows are pandas'."""
    frame = _pandas_frame()
    frame.to_parquet(tmp_path / "us.parquet", index=False, coerce_timestamps="us",
                     allow_truncated_timestamps=True)
    spark.read.parquet(str(tmp_path / "us.parquet")).createOrReplaceTempView("ntz_times")
    assert spark.table("ntz_times").schema["arrival"].dataType.simpleString() == \
        "timestamp_ntz"
    q = ("SELECT k, SUM(v) AS total FROM ntz_times {w}GROUP BY k WINDOW FIXED(1 HOUR) "
         "ON naive {wm}PROCESSING TIME arrival")
    for watermark in ("", "WATERMARK PERFECT ", "WATERMARK PERCENTILE 50 "):
        text = q.format(w="", wm=watermark)
        with pytest.raises(DataError) as err:
            dfsql.sql(text, spark).collect()
        assert (err.value.line, err.value.column) == (1, text.index("arrival") + 1)
        assert "NULL in 1 row" in err.value.message
    # (the perfect watermark: c's row from 1969 arrives last and is not late)
    df = dfsql.sql(q.format(w="WHERE arrival IS NOT NULL ", wm="WATERMARK PERFECT "), spark)
    # pandas' windows of what pyarrow wrote (its cast to µs truncates c's -1 ns to 0)
    back = pd.read_parquet(tmp_path / "us.parquet").dropna(subset=["naive", "arrival"])
    back = back.assign(ws=back["naive"].dt.floor("h"))
    assert sorted((r.k, r.window_start, r.total) for r in df.collect()) == sorted(
        (k, ws.to_pydatetime(), int(v)) for (k, ws), v in back.groupby(["k", "ws"])["v"].sum()
        .items())
    assert dfsql.dropped_late(df) == 1  # a's NULL event time


# ---------------------------------------------------------------------------- streams

def _write_parts(frame: pd.DataFrame, path: Path, cuts: list[int]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    bounds = [0, *cuts, len(frame)]
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        part = path / f"part-{i:04d}.parquet"
        pq.write_table(table.slice(a, b - a), part)  # nanoseconds, as pandas writes them
        modified_in_order(part, i)


def test_a_stream_of_naive_nanosecond_times_equals_the_replay_and_pandas(spark, tmp_path):
    """A live stream over pandas-written Parquet (naive nanosecond times: TIMESTAMP_NTZ
    event and processing times, a NULL event time) gives the replay's panes, which are
    pandas' windows; the directory is read with dfsql.read_parquet(stream=True)."""
    rng = np.random.default_rng(23)
    n = 40
    at = pd.Timestamp("2024-01-01 12:00") + pd.to_timedelta(np.sort(rng.integers(0, 3600, n)),
                                                            unit="s")
    et = at - pd.to_timedelta(rng.integers(0, 300, n), unit="s")
    frame = pd.DataFrame({"k": rng.choice(["a", "b", "c"], n), "v": rng.integers(1, 9, n),
                          "et": et, "at": at})
    frame.loc[5, "et"] = pd.NaT
    # the stream's last frontier: a row an hour later that belongs to no window
    frame = pd.concat([frame, pd.DataFrame({
        "k": ["a"], "v": [0], "et": pd.Series([pd.NaT], dtype="datetime64[ns]"),
        "at": [at.max() + pd.Timedelta(hours=1)]})], ignore_index=True)
    src = tmp_path / "in"
    _write_parts(frame, src, [10, 25, n])
    dfsql.read_parquet(src, spark).createOrReplaceTempView("ntz_bounded")
    live = dfsql.read_parquet(src, spark, stream=True)
    assert live.isStreaming and live.schema["et"].dataType.simpleString() == "timestamp_ntz"
    live.createOrReplaceTempView("ntz_live")
    # Spark's own streaming aggregation (the engine's clock) over a DATE event time: its
    # windows are TIMESTAMPs too
    native = dfsql.sql("SELECT k, COUNT(*) AS n FROM ntz_live GROUP BY k "
                       "WINDOW FIXED(1 DAY) ON CAST(et AS DATE)", spark)
    assert native.isStreaming and _pane_types(native) == ["timestamp"] * 3
    q = ("SELECT k, SUM(v) AS total FROM {t} GROUP BY k WINDOW FIXED(10 MINUTES) ON et "
         "WATERMARK DELAY 5 MINUTES PROCESSING TIME at")
    batches: list = []
    query = dfsql.start(q.format(t="ntz_live"), sink=lambda b, i: batches.append(b.collect()),
                        checkpoint=str(tmp_path / "ck"), trigger={"availableNow": True},
                        spark=spark)
    query.awaitTermination()
    cols = ("k", "total", "window_start", "window_end", "pane_index", "pane_timing",
            "emit_time", "is_retraction")
    streamed = [tuple(r[c] for c in cols) for b in batches for r in b]
    frontier = frame["at"].max().to_pydatetime()
    replay = dfsql.sql(q.format(t="ntz_bounded"), spark)
    assert _pane_types(replay) == ["timestamp"] * 3
    everything = [tuple(r[c] for c in cols) for r in replay.collect()]
    replayed = [r for r in everything if r[6] < frontier]
    assert sorted(streamed) == sorted(replayed) and replayed
    assert dfsql.dropped_late(replay) == 2  # the NULL event time and the sentinel
    # every row arrives less than 5 minutes after its event time: nothing is late, so
    # the replay's panes (one per window) are pandas' windows
    kept = frame.dropna(subset=["et"])
    kept = kept.assign(ws=kept["et"].dt.floor("10min"))
    expected = sorted((k, ws.to_pydatetime(), int(v)) for (k, ws), v in
                      kept.groupby(["k", "ws"])["v"].sum().items())
    assert sorted((r[0], r[2], r[1]) for r in everything) == expected
