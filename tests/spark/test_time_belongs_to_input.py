"""Time belongs to the input (issue #32, docs/reference.md#processing-time): the watermark, the clock and the
end of a replay come from every row the FROM reads (after its joins, before WHERE);
WHERE only decides which rows enter windows. A row WHERE removes moves time but is never
late, dropped or counted. To drive time from a filtered input, filter in a subquery.

Expected values come from a hand derivation (the readings below) and, on random inputs,
from independent computations: the watermark over all rows written out as a WATERMARK
FROM table, and late / dropped counts computed with numpy.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dfsql
from dfsql.language.model_run import run
from tests.spark.engine_clock import P0, _batches, _instant
from tests.spark.engine_clock import _run as _run_engine_clock
from tests.spark.feeds import stream_and_replay as _stream_and_replay
from tests.spark.feeds import workload as _workload

T = datetime(2024, 1, 1, 12)


def _m(minutes: float) -> datetime:
    return T + timedelta(minutes=minutes)


# (band, event minute, arrival minute): the in-range readings arrive between the others
READINGS = [("low", 0, 1), ("in_range", 10, 11), ("in_range", 20, 21), ("low", 5, 22),
            ("high", 25, 26), ("in_range", 40, 41)]
FILTERED = ("SELECT band, COUNT(*) AS n FROM band_readings WHERE band <> 'in_range' GROUP BY band "
            "WINDOW FIXED(10 MINUTES) ON et WATERMARK DELAY 2 MINUTES PROCESSING TIME at")


@pytest.fixture(scope="module")
def band_readings(spark):
    spark.createDataFrame([(b, 1.0, _m(e), _m(a)) for b, e, a in READINGS],
                          "band STRING, v DOUBLE, et TIMESTAMP, at TIMESTAMP") \
        .createOrReplaceTempView("band_readings")


def test_filtered_rows_move_the_watermark_by_hand(spark, band_readings):
    """By hand, the watermark over every row (max event time - 2 min): 11:58 at 12:01,
    12:08 at 12:11, 12:18 at 12:21, still 12:18 at 12:22, 12:23 at 12:26, 12:38 at 12:41.
    low [12:00, 12:10) fires ON_TIME at 12:21 (12:18 >= 12:10) and expires; low's row at
    12:22 (event 12:05) finds the watermark 12:18: its window is gone, it is dropped.
    high [12:20, 12:30) fires at 12:41 (12:38 >= 12:30). Over the low and high rows alone
    the watermark would be 12:03 at 12:22: nothing late, low firing at 12:26 with 2 rows."""
    df = dfsql.sql(FILTERED + " ALLOWED LATENESS 0 SECONDS LATE ROWS INTO readings_late",
                   spark)
    got = [(r.band, r.n, r.window_start, r.pane_timing, r.is_last, r.emit_time)
           for r in df.collect()]
    assert got == [("low", 1, _m(0), "ON_TIME", True, _m(21)),
                   ("high", 1, _m(20), "ON_TIME", True, _m(41))]
    assert dfsql.dropped_late(df) == 1
    late = spark.table("readings_late").collect()
    assert [(r.band, r.event_time, r.arrival_time, r.watermark_at_arrival) for r in late] \
        == [("low", _m(5), _m(22), _m(18))]


def test_a_subquery_that_filters_first_is_another_input(spark, band_readings):
    """The same rows filtered in a subquery: only they drive time (the old behaviour,
    asked for): low's rows both count, and both windows fire at the last of them."""
    df = dfsql.sql(FILTERED.replace(
        "FROM band_readings WHERE band <> 'in_range'",
        "FROM (SELECT * FROM band_readings WHERE band <> 'in_range') AS r"), spark)
    got = [(r.band, r.n, r.pane_timing, r.emit_time) for r in df.collect()]
    assert got == [("high", 1, "ON_TIME", _m(26)), ("low", 2, "ON_TIME", _m(26))]
    assert dfsql.dropped_late(df) == 0


def test_explain_watermark_try_counts_with_the_watermark_over_every_row(spark, band_readings):
    """Three rows are in the query. DELAY 2 and DELAY 10 MINUTES make low's 12:05 row late
    and dropped (watermark 12:18 / 12:10 at 12:22, window end 12:10); DELAY 20 does not
    (12:00). Latencies (emit - window end): the query's low 11 min, high 11 min; DELAY 20
    fires low at 12:41 (12:20 >= 12:10): 31 min, high at the input's end 12:41: 11 min."""
    rows = dfsql.sql(f"EXPLAIN WATERMARK {FILTERED} TRY DELAY 10 MINUTES, DELAY 20 MINUTES",
                     spark).collect()
    got = [(r.watermark, r.late_rows, r.dropped_rows, r.panes, r.on_time_latency_p50_s,
            r.on_time_latency_p90_s) for r in rows]
    assert got == [("DELAY 2 MINUTES (the query's)", 1, 1, 2, 660.0, 660.0),
                   ("DELAY 10 MINUTES", 1, 1, 2, 660.0, 660.0),
                   ("DELAY 20 MINUTES", 0, 0, 2, 660.0, 1860.0)]
    assert rows[0].late_fraction == pytest.approx(1 / 3)


def test_explain_firings_shows_the_filtered_rows_watermark(spark, band_readings):
    rows = dfsql.sql(f"EXPLAIN FIRINGS {FILTERED}", spark).collect()
    dropped = [(r.band, r.at, r.watermark) for r in rows if r.event == "DROPPED"]
    assert dropped == [("low", _m(22), _m(18))]
    fires = [(r.band, r.at, r.watermark) for r in rows if r.event == "FIRE"]
    assert fires == [("low", _m(21), _m(18)), ("high", _m(41), _m(38))]
    # a row WHERE removes is no event of any window
    assert not [r for r in rows if r.band == "in_range"]


def test_explain_says_every_row_drives_time(spark):
    text = dfsql.explain(FILTERED)
    assert "__in_query" in text and "every row above drives time" in text
    assert "WHERE" not in text.split("-- input stage")[1].split("-- aggregates")[0]


def test_a_removed_row_without_processing_time_never_arrives(spark):
    """The error's own hint (WHERE at IS NOT NULL) works: a row WHERE removes and that
    has no arrival time is not in the input's time either."""
    spark.createDataFrame([("a", _m(0), _m(1)), ("a", _m(3), None), ("a", _m(12), _m(13))],
                          "k STRING, et TIMESTAMP, at TIMESTAMP") \
        .createOrReplaceTempView("no_arrival")
    df = dfsql.sql("SELECT k, COUNT(*) AS n FROM no_arrival WHERE at IS NOT NULL GROUP BY k "
                   "WINDOW FIXED(10 MINUTES) ON et PROCESSING TIME at", spark)
    assert [(r.n, r.window_start, r.emit_time) for r in df.collect()] == [
        (1, _m(0), _m(13)), (1, _m(10), _m(13))]


# --------------------------------------------------------------------------- random inputs


def _late_and_dropped(frame: pd.DataFrame, keep: np.ndarray, size_s: int, delay_s: int,
                      lateness_s: int) -> tuple[int, int]:
    """Independently: FIXED windows, the default trigger. A kept row is late when its
    window's end is at or before the watermark in force at its arrival (the largest event
    time of the rows, kept or not, that arrived before it, less the delay), and dropped
    when that watermark has also passed window end + lateness."""
    et = frame["et_s"].to_numpy()
    at = frame["at_s"].to_numpy()
    late = dropped = 0
    for i in np.flatnonzero(keep):
        before = et[at < at[i]]
        if not len(before):
            continue
        wm = before.max() - delay_s
        end = et[i] - et[i] % size_s + size_s
        late += end <= wm
        dropped += end + lateness_s <= wm
    return int(late), int(dropped)


def _random_readings(seed: int, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    et = rng.integers(0, 3600, n)
    at = et + rng.integers(0, 120, n)
    stragglers = rng.random(n) < 0.1
    at[stragglers] += rng.integers(200, 900, stragglers.sum())
    # few rows out of range: alone, they would hold the watermark back
    return pd.DataFrame({"band": rng.choice(["low", "in_range", "high"], n, p=[.04, .92, .04]),
                         "v": rng.integers(1, 10, n), "et_s": et, "at_s": at})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_late_and_dropped_counts_equal_an_independent_count(spark, seed):
    """A replay's dropped count and EXPLAIN WATERMARK's late and dropped counts under two
    watermarks equal numpy's count with the watermark over every row."""
    frame = _random_readings(seed)
    spark.createDataFrame(frame.assign(
        et=[T + timedelta(seconds=int(s)) for s in frame.et_s],
        at=[T + timedelta(seconds=int(s)) for s in frame.at_s])) \
        .createOrReplaceTempView("random_readings")
    keep = (frame.band != "in_range").to_numpy()
    q = ("SELECT band, SUM(v) AS total FROM random_readings WHERE band <> 'in_range' "
         "GROUP BY band WINDOW FIXED(5 MINUTES) ON et WATERMARK DELAY 30 SECONDS "
         "PROCESSING TIME at ALLOWED LATENESS 2 MINUTES")
    late, dropped = _late_and_dropped(frame, keep, 300, 30, 120)
    late_60, dropped_60 = _late_and_dropped(frame, keep, 300, 60, 120)
    assert dropped > 0 and late > dropped  # the case is not trivial
    # with the watermark over the kept rows only the counts would differ
    assert _late_and_dropped(frame[keep], np.ones(keep.sum(), bool), 300, 30, 120) \
        != (late, dropped)
    assert dfsql.dropped_late(dfsql.sql(q, spark)) == dropped
    rows = dfsql.sql(f"EXPLAIN WATERMARK {q} TRY DELAY 60 SECONDS", spark).collect()
    assert [(r.late_rows, r.dropped_rows) for r in rows] == [(late, dropped),
                                                              (late_60, dropped_60)]
    assert rows[0].late_fraction == pytest.approx(late / keep.sum())


@st.composite
def _filtered_rows(draw):
    n = draw(st.integers(1, 16))
    out, keep = [], []
    for _ in range(n):
        et = draw(st.one_of(st.none(), st.integers(0, 24)))
        arrival = (et if et is not None else draw(st.integers(0, 24))) + draw(st.integers(0, 12))
        out.append((draw(st.sampled_from(["a", "b"])), draw(st.integers(1, 9)),
                    None if et is None else T + timedelta(seconds=10 * et),
                    T + timedelta(seconds=10 * arrival)))
        keep.append(draw(st.booleans()))
    return out, keep


_CLAUSES = st.sampled_from([
    "WINDOW FIXED(60 SECONDS) ON event_time WATERMARK DELAY 20 SECONDS "
    "PROCESSING TIME arrival_time",
    "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
    "PROCESSING TIME arrival_time ALLOWED LATENESS 30 SECONDS "
    "TRIGGER EVERY 30 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
    "EMIT ACCUMULATING AND RETRACTING",
    "WINDOW SLIDING(60 SECONDS, EVERY 20 SECONDS) ON event_time WATERMARK PERFECT "
    "PROCESSING TIME arrival_time TRIGGER AT WATERMARK EARLY EVERY 2 ROWS EMIT DISCARDING",
    "WINDOW SESSIONS(GAP 45 SECONDS) ON event_time WATERMARK PERCENTILE 50 "
    "PROCESSING TIME arrival_time ALLOWED LATENESS 600 SECONDS",
    "WINDOW GLOBAL ON event_time WATERMARK DELAY 0 SECONDS PROCESSING TIME arrival_time "
    "TRIGGER REPEAT AFTER 25 SECONDS",
])


def _rows(result) -> list[tuple]:
    return sorted((r["key"], r["window_start"], r["window_end"], r["pane_index"],
                   r["pane_timing"], r["is_last"], r["emit_time"], r["is_retraction"],
                   r["value"]) for r in result)


def _model_rows(data, keep, text: str) -> list[tuple]:
    return _rows(run(data, text, aggregate=sum, in_query=keep))


def _as_from_series(data, keep, text: str) -> list[tuple]:
    """The kept rows alone under WATERMARK FROM the series the whole input's DELAY or
    PERFECT watermark makes, the series' last point at the whole input's last arrival
    (where a replay ends, docs/reference.md#watermark): what time from every row means, written out."""
    delay = int(text.split("WATERMARK DELAY ")[1].split()[0]) if "DELAY" in text else None
    arrivals = sorted({a for *_, a in data})
    series = []
    for p in arrivals:
        if delay is not None:
            seen = [e for _, _, e, a in data if a <= p and e is not None]
            wm = max(seen) - timedelta(seconds=delay) if seen else None
        else:  # PERFECT: the smallest event time among the rows not yet arrived
            ahead = [e for _, _, e, a in data if a > p and e is not None]
            wm = min(ahead) if ahead else None
        if wm is not None:
            series.append((p, wm))
    if not series or series[-1][0] != arrivals[-1]:
        series.append((arrivals[-1], series[-1][1] if series else T - timedelta(days=1)))
    kept = [r for r, k in zip(data, keep, strict=True) if k]
    wm_clause = text.split(" WATERMARK ")[1].split(" PROCESSING")[0]
    return _rows(run(kept, text.replace(wm_clause, "FROM marks"), aggregate=sum,
                     watermarks=series))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_filtered_rows(), _CLAUSES.filter(lambda t: "PERCENTILE" not in t and "GLOBAL" not in t))
def test_model_with_where_equals_the_watermark_of_every_row_written_out(case, text) -> None:
    data, keep = case
    assert _model_rows(data, keep, text) == _as_from_series(data, keep, text)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(_filtered_rows(), _CLAUSES)
def test_model_with_every_row_kept_is_the_unfiltered_model(case, text) -> None:
    data, _ = case
    assert _model_rows(data, [True] * len(data), text) == _rows(run(data, text, aggregate=sum))


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(_filtered_rows(), _CLAUSES)
def test_replay_with_where_equals_the_model(spark, case, text) -> None:
    data, keep = case
    spark.createDataFrame(
        [(*r, k) for r, k in zip(data, keep, strict=True)],
        "key STRING, value BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP, keep BOOLEAN"
    ).createOrReplaceTempView("filtered_events")
    df = dfsql.sql("SELECT key, SUM(value) AS total FROM filtered_events WHERE keep "
                   f"GROUP BY key {text}", spark)
    got = sorted((r.key, r.window_start, r.window_end, r.pane_index, r.pane_timing,
                  r.is_last, r.emit_time, r.is_retraction, r.total or 0) for r in df.collect())
    assert got == _model_rows(data, keep, text)


# --------------------------------------------------------------------------- streams


def test_stream_with_where_equals_the_replay(spark, tmp_path):
    """A stream on the column's clock, cut at random points, with a WHERE that removes
    a third of the rows: the replay's rows before the frontier, row for row."""
    frame = _workload(21)
    query = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} WHERE value % 3 <> 0 "
             "GROUP BY key WINDOW SESSIONS(GAP 30 SECONDS) ON event_time "
             "WATERMARK DELAY 20 SECONDS PROCESSING TIME arrival_time "
             "ALLOWED LATENESS 60 SECONDS "
             "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
             "EMIT ACCUMULATING AND RETRACTING")
    rng = np.random.default_rng(21)
    cuts = sorted(rng.choice(np.arange(1, len(frame)), 6, replace=False).tolist())
    stream, replay, batches = _stream_and_replay(spark, frame, query, cuts, tmp_path)
    assert batches > 3
    assert len(replay) > 20
    assert [tuple(r) for r in stream] == [tuple(r) for r in replay]
    # and the replay is not what the kept rows alone would give
    alone = dfsql.sql(query.format(t="(SELECT * FROM bounded_src WHERE value % 3 <> 0) AS s")
                      .replace(" WHERE value % 3 <> 0 GROUP", " GROUP"), spark).collect()
    assert [tuple(r) for r in alone] != [tuple(r) for r in dfsql.sql(
        query.format(t="bounded_src"), spark).collect()]


@pytest.mark.parametrize("native", [True, False])
def test_engine_clock_stream_watermark_comes_from_every_row(spark, tmp_path, native):
    """On the engine's clock the watermark at batch N is the largest event time of every
    row of the batches before N (kept or not) less the delay: the kept rows' replay under
    that series, on Spark's own operator and on dfsql's executor."""
    batches = _batches(31, 240, 5)
    q = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {src} WHERE key <> 'c' "
         "GROUP BY key WINDOW FIXED(1 MINUTE) ON event_time WATERMARK DELAY 5 SECONDS")
    if not native:
        spark.conf.set("dfsql.stream.native", "false")
    try:
        got, _, _ = _run_engine_clock(spark, tmp_path, f"ec_where_{native}", batches, q)
    finally:
        spark.conf.unset("dfsql.stream.native")
    k = len(batches)
    frame = pd.concat(batches, ignore_index=True)
    arrivals = np.concatenate([[i] * len(b) for i, b in enumerate(batches)])
    bounded = frame.assign(arrival_time=[_instant(int(i)) for i in arrivals])
    spark.createDataFrame(bounded).createOrReplaceTempView("ec_where_bounded")
    seen = pd.Series([b["event_time"].max() for b in batches]).cummax()  # every row
    marks = [(_instant(n), (seen[n - 1] - timedelta(seconds=5)).to_pydatetime()
              .replace(tzinfo=None)) for n in range(1, k + 1)]
    marks.append((_instant(k + 1), marks[-1][1]))
    spark.createDataFrame(marks, "processing_time TIMESTAMP, watermark TIMESTAMP") \
        .createOrReplaceTempView("ec_where_marks")
    replay = dfsql.sql(q.format(src="ec_where_bounded").replace(
        "WATERMARK DELAY 5 SECONDS", "WATERMARK FROM ec_where_marks "
        "PROCESSING TIME arrival_time"), spark).collect()
    want = [((r.emit_time - P0).seconds, *r[:-2], r.is_retraction) for r in replay
            if r.emit_time < _instant(k + 1)]
    assert len(want) > 10
    assert [(*g[:-2], g[-1]) for g in got] == want
    assert "c" not in {w[1] for w in want}

