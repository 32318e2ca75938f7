"""EXPLAIN WATERMARK <query> TRY <watermark>, … (docs/reference.md#explaining-time) on the paper's data.

The input is the paper's running example (``scores``), by arrival:

====  ===========  ========  ==================  ==========================
 row  event time   arrival   session [t, t+1m)   FIXED(2 MINUTES) window
====  ===========  ========  ==================  ==========================
  5    12:00:30    12:04:30  ends 12:01:30       [12:00, 12:02)
  7    12:02:10    12:04:40  ends 12:03:10       [12:02, 12:04)
  3    12:03:20    12:05:20  ends 12:04:20       [12:02, 12:04)
  4    12:03:40    12:05:30  ends 12:04:40       [12:02, 12:04)
  3    12:04:00    12:05:40  ends 12:05:00       [12:04, 12:06)
  8    12:02:50    12:06:20  ends 12:03:50       [12:02, 12:04)
  9    12:01:20    12:07:20  ends 12:02:20       [12:00, 12:02)
  3    12:06:30    12:07:40  ends 12:07:30       [12:06, 12:08)
  8    12:07:10    12:08:20  ends 12:08:10       [12:06, 12:08)
  1    12:07:50    12:08:40  ends 12:08:50       [12:06, 12:08)
====  ===========  ========  ==================  ==========================

The watermark in effect when a row arrives (before that instant's move, §4):

* ``paper_watermarks`` (12:04 → 12:00, 12:05 → 12:01:40, 12:06 → 12:02, 12:07 → 12:05:10,
  12:08 → 12:06, 12:09 → 12:09): the 8 meets 12:02 < 12:03:50 (its session) and < 12:04
  (its fixed window): on time; the 9 meets 12:05:10 >= 12:02:20 and >= 12:02: **late**;
  every other row meets a watermark below its window's end. One late row.
* ``DELAY 0 SECONDS`` (the largest event time arrived so far): by 12:05:40 it is 12:04:00,
  and it stays there until the 3 at 12:06:30 arrives (12:07:40). The 8 (12:06:20) meets
  12:04 >= 12:03:50 (session) and >= 12:04 (fixed: at or before is late); the 9 (12:07:20)
  meets 12:04 >= 12:02:20: **two late rows**. The 3 at 12:07:40 meets 12:04 < 12:07:30,
  the 8 at 12:08:20 meets 12:06:30 < 12:08:10, the 1 at 12:08:40 meets 12:07:10 < 12:08:50.
* ``PERFECT`` (the smallest event time not arrived yet): nothing is late, by definition —
  from 12:04:30 to 12:07:20 it is the 9's 12:01:20, below every window end arriving then.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dfsql
from dfsql.errors import (
    DfsqlError,
    DfsqlSyntaxError,
    SourceError,
    UnknownKeywordError,
    WatermarkError,
)

ROOT = Path(__file__).resolve().parents[3]
FIGURES = {f["name"]: f for f in json.loads(
    (ROOT / "examples" / "paper" / "figures.json").read_text())["figures"]}
FIG14 = FIGURES["fig14_sessions_retracting"]["query"].rstrip().rstrip(";")
#: Figure 12 (FIXED 2 minutes, default trigger) without its ALLOWED LATENESS: a late row
#: is dropped, so the dropped counts are not all zero
FIG12_NO_LATENESS = FIGURES["fig12_fixed_streaming"]["query"].replace(
    "ALLOWED LATENESS 10 MINUTES", "").rstrip().rstrip(";")


@pytest.fixture(scope="module")
def explained(spark, paper_tables) -> tuple[list[str], dict[str, dict]]:
    """Figure 14's query explained under its own marks, PERFECT and DELAY 0 SECONDS: the
    result's columns, and its rows by watermark, in order."""
    df = dfsql.sql(f"EXPLAIN WATERMARK {FIG14}\nTRY PERFECT,\n    DELAY 0 SECONDS", spark)
    return df.columns, {r["watermark"]: r.asDict() for r in df.collect()}


@pytest.fixture(scope="module")
def fig14(explained) -> dict[str, dict]:
    return explained[1]


def test_columns_and_one_row_per_watermark_the_querys_first(explained) -> None:
    columns, rows = explained
    assert columns == [
        "watermark", "late_rows", "late_fraction", "dropped_rows", "dropped_fraction", "panes",
        "retractions", "on_time_latency_p50_s", "on_time_latency_p90_s",
        "on_time_latency_p99_s"]
    assert list(rows) == ["FROM paper_watermarks (the query's)", "PERFECT", "DELAY 0 SECONDS"]


def test_late_rows_are_the_hand_derived_ones(fig14) -> None:
    """The module docstring: one late row (the 9) under the paper's marks, none under
    PERFECT, two (the 8 and the 9) under DELAY 0; fractions of the 10 input rows. ALLOWED
    LATENESS 10 MINUTES keeps every late row (the 9's session is released only when the
    watermark passes 12:02:20 + 10 minutes, after the input has ended)."""
    got = {w: (r["late_rows"], r["late_fraction"], r["dropped_rows"], r["dropped_fraction"])
           for w, r in fig14.items()}
    assert got == {"FROM paper_watermarks (the query's)": (1, 0.1, 0, 0.0),
                   "PERFECT": (0, 0.0, 0, 0.0), "DELAY 0 SECONDS": (2, 0.2, 0, 0.0)}


def test_panes_retractions_and_latency_under_the_papers_marks(fig14) -> None:
    """Figure 14 itself (the paper's §2.4): panes 5 (ON_TIME at 12:05, session
    [12:00:30, 12:01:30)), 7 (EARLY 12:05), 10 (EARLY 12:06), 25 (ON_TIME 12:07, session
    [12:02:10, 12:05:00)), 39 (LATE 12:07:20), 3 (EARLY 12:08), 12 (ON_TIME 12:09, session
    [12:06:30, 12:08:50)): 7 panes; retractions -7 -10 (12:07), -5 -25 (12:07:20), -3
    (12:09): 5. ON_TIME latencies: 12:05:00 - 12:01:30 = 210 s, 12:07:00 - 12:05:00 =
    120 s, 12:09:00 - 12:08:50 = 10 s; nearest rank of 3 values: p50 the 2nd (120), p90
    and p99 the 3rd (210)."""
    r = fig14["FROM paper_watermarks (the query's)"]
    assert (r["panes"], r["retractions"]) == (7, 5)
    assert (r["on_time_latency_p50_s"], r["on_time_latency_p90_s"],
            r["on_time_latency_p99_s"]) == (120.0, 210.0, 210.0)


def test_panes_and_on_time_latency_under_perfect(fig14) -> None:
    """PERFECT is 12:01:20 from 12:04:30 (the 9 not arrived) until 12:07:20, then 12:06:30,
    12:07:10 (12:07:40), 12:07:50 (12:08:20). Panes: at 12:05 EARLY 5 (session
    [12:00:30, 12:01:30) ends after 12:01:20) and EARLY 7; at 12:06 EARLY 10
    ([12:03:20, 12:05:00)); the 8 (12:06:20) merges [12:02:10, 12:05:00): EARLY 25 at 12:07,
    retracting 7 and 10. At 12:07:20 the 9 merges [12:00:30, 12:05:00) — created while
    the watermark (12:01:20) was before its end, so not late — and the watermark moves to
    12:06:30, past its end: ON_TIME 39, retracting 5 and 25, 140 s after 12:05:00. At
    12:08 EARLY 3; the 8 and the 1 grow it to [12:06:30, 12:08:50). The replay ends at
    12:09:00 (the last arrival 12:08:40 carried to its EVERY 1 MINUTE period's end): the
    period fires EARLY 12 (watermark 12:07:50), retracting 3, then the watermark becomes
    +inf and the on-time pane fires, ON_TIME 12, retracting the EARLY 12, 10 s after
    12:08:50. 8 panes, 6 retractions; latencies 10 and 140: p50 = 10 (the 1st of 2),
    p90 = p99 = 140."""
    r = fig14["PERFECT"]
    assert (r["panes"], r["retractions"]) == (8, 6)
    assert (r["on_time_latency_p50_s"], r["on_time_latency_p90_s"],
            r["on_time_latency_p99_s"]) == (10.0, 140.0, 140.0)


def _run_alone(spark, query: str, watermark: str) -> tuple:
    """(late rows, dropped, panes, retractions, ON_TIME latency p50/p90/p99 s) of the query
    run on its own with ``watermark``, from its result: late rows are those dropped here
    (ALLOWED LATENESS 0), latencies are the ON_TIME rows' emit_time - window_end."""
    import re

    text = re.sub(r"WATERMARK FROM paper_watermarks", f"WATERMARK {watermark}", query)
    df = dfsql.sql(text, spark)
    rows = df.collect()
    panes = [r for r in rows if not r["is_retraction"]]
    lat = np.sort([(r["emit_time"] - r["window_end"]).total_seconds()
                   for r in panes if r["pane_timing"] == "ON_TIME"])
    ranks = [lat[max(1, int(np.ceil(q / 100 * len(lat)))) - 1] for q in (50, 90, 99)]
    dropped = dfsql.dropped_late(df)
    return (dropped, dropped, len(panes), len(rows) - len(panes), *ranks)


def test_each_row_equals_the_query_run_alone_with_that_watermark(spark, paper_tables) -> None:
    """Figure 12 without lateness: a late row is dropped (its window expires when the
    watermark passes its end), so late = dropped, and each EXPLAIN row must be what the
    query gives run alone under that watermark. By hand (module docstring): the marks drop
    the 9; DELAY 0 drops the 8 and the 9."""
    df = dfsql.sql(f"EXPLAIN WATERMARK {FIG12_NO_LATENESS} TRY DELAY 0 SECONDS", spark)
    got = {r["watermark"]: (r["late_rows"], r["dropped_rows"], r["panes"], r["retractions"],
                            r["on_time_latency_p50_s"], r["on_time_latency_p90_s"],
                            r["on_time_latency_p99_s"]) for r in df.collect()}
    marks = _run_alone(spark, FIG12_NO_LATENESS, "FROM paper_watermarks")
    delay0 = _run_alone(spark, FIG12_NO_LATENESS, "DELAY 0 SECONDS")
    assert (marks[0], delay0[0]) == (1, 2)
    assert got == {"FROM paper_watermarks (the query's)": marks, "DELAY 0 SECONDS": delay0}


@pytest.mark.parametrize("tail, error, at", [
    ("TRY", DfsqlSyntaxError, "TRY"),  # TRY without a watermark
    ("TRY DELAY 1 SECOND,", DfsqlSyntaxError, ","),
    ("TRY LATER", UnknownKeywordError, "LATER"),  # not a watermark form
    ("TRY DELAY 5 FORTNIGHTS", DfsqlError, "FORTNIGHTS"),
    ("TRY PERCENTILE 120", WatermarkError, "120"),
    ("TRY DELAY 1 SECOND EMIT DISCARDING", WatermarkError, "EMIT"),
    ("", DfsqlSyntaxError, None),  # no TRY at all
])
def test_a_bad_try_list_is_a_positioned_error(tail: str, error: type, at: str | None) -> None:
    text = f"EXPLAIN WATERMARK {FIG14}\n{tail}"
    with pytest.raises(error) as info:
        dfsql.sql(text)
    e = info.value
    lines = text.split("\n")
    assert e.line == (len(lines) if tail else len(lines) - 1)  # TRY's line, or the query's end
    if at is not None:
        where = lines[-1].index(at) + (len(at) if at in ("TRY", ",") else 0)
        assert e.column == where + 1, (e.column, e.message)
    assert e.hint or "expected" in e.message


def test_without_processing_time_it_says_what_to_add(spark, paper_tables) -> None:
    query = FIG14.replace("PROCESSING TIME arrival_time", "")
    with pytest.raises(WatermarkError, match="needs PROCESSING TIME") as info:
        dfsql.sql(f"EXPLAIN WATERMARK {query} TRY DELAY 0 SECONDS", spark)
    assert info.value.line is not None and "PROCESSING TIME <arrival column>" in info.value.hint


def test_perfect_on_a_stream_is_refused_at_perfect(spark) -> None:
    spark.readStream.format("rate").load().createOrReplaceTempView("explain_rate")
    text = ("EXPLAIN WATERMARK SELECT COUNT(*) AS n FROM explain_rate\n"
            "WINDOW FIXED(1 MINUTE) ON timestamp PROCESSING TIME timestamp\n"
            "TRY DELAY 1 SECOND, PERFECT")
    with pytest.raises(SourceError, match="PERFECT looks ahead") as info:
        dfsql.sql(text, spark)
    assert (info.value.line, info.value.column) == (3, len("TRY DELAY 1 SECOND, ") + 1)


def test_plot_draws_one_labelled_point_per_watermark(spark, paper_tables, fig14,
                                                     tmp_path) -> None:
    """The shell keeps an EXPLAIN WATERMARK result for \\plot, which draws the late fraction
    against ON_TIME latency: each watermark's text is a label in the figure."""
    from in_process import shell_on

    from dfsql.shell.plot import plot_result

    shell = shell_on(spark)
    shell.statement(f"EXPLAIN WATERMARK {FIG14} TRY PERFECT, DELAY 0 SECONDS")
    assert shell.last is not None and shell.last.columns[0] == "watermark"
    path = tmp_path / "tradeoff.png"
    shell._plot(str(path), 0)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # what that picture holds, drawn again from the rows the shell kept
    summary = plot_result(shell.last.columns, shell.last.rows, str(path))
    texts = {t.get_text() for ax in summary.figure.axes for t in ax.texts}
    assert set(fig14) <= texts
    assert {(p[0], p[1], p[2], p[3]) for p in summary.points} == {
        (w, r["late_fraction"], r["on_time_latency_p50_s"], r["on_time_latency_p90_s"])
        for w, r in fig14.items()}
