"""``\\plot`` (dfsql/shell/plot.py) on what issue #32 item 7 reported: a batch result as
the notebook hands it over (pandas: NaT emit times), results it cannot draw, time ticks
at round instants, every key's panel with its own input and the watermark, and value
labels that never overlap.

Expected values are derived by hand from the paper's data (examples/paper/*.csv), not
read from the plot's own output."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pytest

from dfsql.errors import DfsqlError
from dfsql.shell.plot import plot_result

COLS = ["key", "total", "window_start", "window_end", "pane_index", "pane_timing",
        "is_last", "emit_time", "is_retraction"]


def _t(hms: str) -> datetime:
    """An instant of the paper's day, 2015-09-01."""
    return datetime.fromisoformat(f"2015-09-01 {hms}")


def _hms(x: float) -> str:
    """A matplotlib date number as the time of day it plots, to the second."""
    return (datetime(1970, 1, 1) + timedelta(seconds=round(x * 86400))).strftime("%H:%M:%S")


def _fig10_as_pandas_gives_it() -> list[list]:
    """Figure 10 (fixed 2-minute windows, batch: no PROCESSING TIME) as rows of
    ``toPandas().to_dict("records")``: times as pandas Timestamps, the NULL emit_time as
    NaT. The sums by hand from events.csv: [12:00,12:02) 5+9, [12:02,12:04) 7+3+4+8,
    [12:04,12:06) 3, [12:06,12:08) 3+8+1."""
    sums = {"12:00:00": 14, "12:02:00": 22, "12:04:00": 3, "12:06:00": 12}
    return [["k", total, pd.Timestamp(_t(start)), pd.Timestamp(_t(start)) + pd.Timedelta(
        minutes=2), 0, "ON_TIME", True, pd.NaT, False] for start, total in sums.items()]


def test_a_batch_result_from_pandas_draws_bars_over_its_windows(tmp_path) -> None:
    """Issue #32: a batch FIXED query's plot in a notebook failed with NaN axis limits
    (NaT is a datetime to matplotlib). Each pane is a bar over exactly its window, all
    at one height (no processing time to spread them), the y axis without ticks."""
    import matplotlib.dates as mdates

    path = tmp_path / "batch.png"
    summary = plot_result(COLS, _fig10_as_pandas_gives_it(), str(path), "Figure 10")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [(p[1], p[2], p[3], p[4]) for p in summary.panes] == [
        (_t("12:00:00"), _t("12:02:00"), "14", "ON_TIME"),
        (_t("12:02:00"), _t("12:04:00"), "22", "ON_TIME"),
        (_t("12:04:00"), _t("12:06:00"), "3", "ON_TIME"),
        (_t("12:06:00"), _t("12:08:00"), "12", "ON_TIME")]
    ax = summary.figure.axes[0]
    bars = [(p.get_x(), p.get_x() + p.get_width(), p.get_y(), p.get_height())
            for p in ax.patches]
    starts = ["12:00:00", "12:02:00", "12:04:00", "12:06:00"]
    ends = ["12:02:00", "12:04:00", "12:06:00", "12:08:00"]
    assert [x for x0, x1, _, _ in bars for x in (x0, x1)] == pytest.approx(
        [mdates.date2num(_t(t)) for s, e in zip(starts, ends, strict=True) for t in (s, e)])
    assert len({(y, h) for _, _, y, h in bars}) == 1  # one instant: the same bar height
    assert list(ax.get_yticks()) == [] and "no processing time" in ax.get_ylabel()


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r[:2] + ["12:00", "12:02"] + r[4:], "window_start holds str, not times"),
    (lambda r: r[:7] + [_t("12:09:00")] + r[8:], "some panes have an emit_time and some"),
])
def test_a_result_it_cannot_draw_is_refused_with_a_message(tmp_path, change,
                                                           message) -> None:
    """A result \\plot cannot draw says what is wrong (a DfsqlError, shown without a
    traceback), not matplotlib's exception: window bounds that are not times, emit times
    on some panes only (here the first of Figure 10's four)."""
    rows = _fig10_as_pandas_gives_it()
    rows[0] = change(rows[0])
    with pytest.raises(DfsqlError, match=message):
        plot_result(COLS, rows, str(tmp_path / "x.png"))


def test_a_file_it_cannot_write_is_refused_with_a_message(tmp_path) -> None:
    path = tmp_path / "no such directory" / "x.png"
    with pytest.raises(DfsqlError, match=r"cannot write .*no such directory.*: No such file"):
        plot_result(COLS, _fig10_as_pandas_gives_it(), str(path))


#: round steps for time ticks, in seconds: whole seconds, minutes, hours dividing a day
ROUND_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
               21600, 43200]


def _assert_round_ticks(axis, limits: tuple[float, float]) -> None:
    """Every tick inside the axis is a round instant for the span: 3 to 9 ticks, evenly
    a round step apart (a day or more: each at midnight), each a multiple of that step
    since midnight."""
    import matplotlib.dates as mdates

    lo, hi = limits
    ticks = [mdates.num2date(x).replace(tzinfo=None) for x in axis.get_ticklocs()
             if lo <= x <= hi]
    assert 3 <= len(ticks) <= 9, ticks
    steps = {(b - a).total_seconds() for a, b in zip(ticks, ticks[1:], strict=False)}
    for t in ticks:
        since_midnight = t.hour * 3600 + t.minute * 60 + t.second
        assert t.microsecond == 0, ticks
        if min(steps) >= 86400:
            assert since_midnight == 0, ticks
        else:
            assert len(steps) == 1 and min(steps) in ROUND_STEPS, ticks
            assert since_midnight % min(steps) == 0, ticks


@pytest.mark.parametrize(("window_minutes", "emit_after", "emit_apart"), [
    (2, 0, 8),       # the paper's 12:00-12:10 (ticks were 12:01:26 ...), emits 32 s apart
    (24, 180, 1440),  # 12:00-14:24 (ticks were 12:28:48 ...), emits 3 min after each end
    (720, 0, 600),    # 12-hour windows: three days across, emits 10 minutes apart
])
def test_time_ticks_are_round_instants(tmp_path, window_minutes, emit_after,
                                       emit_apart) -> None:
    """Issue #32: ticks landed on decimal fractions of a day (02:24, 04:48). Both axes
    of five windows from 12:00 of ``window_minutes`` each, emitted ``emit_after`` seconds
    after the last window's end and ``emit_apart`` seconds apart."""
    width, start = timedelta(minutes=window_minutes), _t("12:00:00")
    last_end = start + 5 * width
    rows = [("k", i, start + i * width, start + (i + 1) * width, 0, "ON_TIME", True,
             last_end + timedelta(seconds=emit_after + i * emit_apart), False)
            for i in range(5)]
    ax = plot_result(COLS, rows, str(tmp_path / "ticks.png")).figure.axes[0]
    _assert_round_ticks(ax.xaxis, ax.get_xlim())
    _assert_round_ticks(ax.yaxis, ax.get_ylim())


#: a second key beside the paper's k: (value, event time, arrival time)
J_ELEMENTS = [(2, "12:01:00", "12:05:00"), (6, "12:05:10", "12:06:10"),
              (4, "12:06:40", "12:08:30")]
#: the paper's ten elements of k (events.csv)
K_ELEMENTS = [(5, "12:00:30", "12:04:30"), (7, "12:02:10", "12:04:40"),
              (3, "12:03:20", "12:05:20"), (4, "12:03:40", "12:05:30"),
              (3, "12:04:00", "12:05:40"), (8, "12:02:50", "12:06:20"),
              (9, "12:01:20", "12:07:20"), (3, "12:06:30", "12:07:40"),
              (8, "12:07:10", "12:08:20"), (1, "12:07:50", "12:08:40")]


@pytest.fixture(scope="module")
def two_keys(spark, paper_tables):
    """Figure 12's query (fixed 2-minute windows, the paper's watermark) over the paper's
    scores and three elements of a second key j; the result's rows and its plan."""
    import dfsql
    from dfsql.api import planned_of
    from tests.paper import FIGURES

    values = ", ".join(f"('j', {v}, TIMESTAMP '2015-09-01 {e}', TIMESTAMP '2015-09-01 {a}')"
                       for v, e, a in J_ELEMENTS)
    spark.sql("CREATE OR REPLACE TEMP VIEW plot_two_keys AS SELECT * FROM scores UNION ALL "
              f"SELECT * FROM VALUES {values} AS t(key, value, event_time, arrival_time)")
    query = FIGURES["fig12_fixed_streaming"]["query"].replace("FROM scores",
                                                               "FROM plot_two_keys")
    df = dfsql.sql(query, spark)
    return df.columns, [tuple(r) for r in df.collect()], planned_of(df).top_block, query


def test_every_keys_panel_has_its_input_and_the_watermark(two_keys, tmp_path) -> None:
    """Issue #32: with several keys no panel had input dots or the watermark line. Each
    key's panel has its own elements (dots at (event, arrival), labelled with the
    value), and the same watermark line. j's panes by hand under the paper's watermark
    (12:06 → 12:02, 12:08 → 12:06, 12:09 → 12:09): [12:00,12:02) fires 2 ON_TIME at
    12:06, [12:04,12:06) 6 at 12:08, [12:06,12:08) 4 at 12:09, each rising from its
    element's arrival; k's are the paper's Figure 12."""
    columns, rows, plan, query = two_keys
    summary = plot_result(columns, rows, str(tmp_path / "keys.png"), query, plan=plan)
    assert summary.panels == ["key=j", "key=k"]
    assert summary.elements == 13
    by_panel = {p: [(label, timing) for q, _, _, label, timing in summary.panes if q == p]
                for p in summary.panels}
    assert by_panel["key=j"] == [("2", "ON_TIME"), ("6", "ON_TIME"), ("4", "ON_TIME")]
    assert by_panel["key=k"] == [("5", "ON_TIME"), ("22", "ON_TIME"), ("14", "LATE"),
                                 ("3", "ON_TIME"), ("12", "ON_TIME")]
    ax_j, ax_k = summary.figure.axes
    assert [ax.get_title() for ax in (ax_j, ax_k)] == ["key=j", "key=k"]
    for ax, elements in ((ax_j, J_ELEMENTS), (ax_k, K_ELEMENTS)):
        (dots,) = ax.collections
        assert sorted((_hms(x), _hms(y)) for x, y in dots.get_offsets()) == sorted(
            (e, a) for _, e, a in elements)
        labels = sorted(t.get_text() for t in ax.texts if t.get_fontsize() == 7)
        assert labels == sorted(str(v) for v, _, _ in elements)
    # j's panes: from the first element's arrival up to the emit time
    assert [(_hms(p.get_x()), _hms(p.get_y()), _hms(p.get_x() + p.get_width()),
             _hms(p.get_y() + p.get_height())) for p in ax_j.patches] == [
        ("12:00:00", "12:05:00", "12:02:00", "12:06:00"),
        ("12:04:00", "12:06:10", "12:06:00", "12:08:00"),
        ("12:06:00", "12:08:30", "12:08:00", "12:09:00")]
    (wm_j,), (wm_k,) = ([ln for ln in ax.get_lines() if ln.get_color() == "#1f5fbf"]
                        for ax in (ax_j, ax_k))
    assert list(wm_j.get_xdata()) == list(wm_k.get_xdata()) and len(wm_j.get_xdata()) > 10
    assert list(wm_j.get_ydata()) == list(wm_k.get_ydata())
    # watermarks.csv: from processing time 12:07:00 to 12:08:00 the watermark is 12:05:10
    held = {_hms(x) for x, y in zip(wm_j.get_xdata(), wm_j.get_ydata(), strict=True)
            if "12:07:05" <= _hms(y) <= "12:07:55"}
    assert held == {"12:05:10"}


def test_elements_of_a_key_that_is_no_group_by_key_are_left_out_and_said(
        two_keys, spark, tmp_path) -> None:
    """``SELECT UPPER(key) AS k ... GROUP BY key``: which panel an element belongs to is
    unknown, so no panel shows dots (they would be every key's), the summary says why,
    and both panels still have the watermark."""
    import dfsql
    from dfsql.api import planned_of

    query = two_keys[3].replace("SELECT key,", "SELECT UPPER(key) AS k,")
    df = dfsql.sql(query, spark)
    summary = plot_result(df.columns, [tuple(r) for r in df.collect()],
                          str(tmp_path / "upper.png"), query, plan=planned_of(df).top_block)
    assert summary.panels == ["k=J", "k=K"] and summary.elements == 0
    assert summary.notes == ["input elements not drawn: the key column k is not itself a "
                             "GROUP BY key, so which panel each element belongs to is unknown"]
    for ax in summary.figure.axes:
        assert len(ax.collections) == 0  # no dots
        assert [ln.get_color() for ln in ax.get_lines()] == ["#1f5fbf"]  # the watermark


def _drawn_labels(ax, renderer) -> list[tuple[str, object]]:
    """Every text label drawn in a panel, with its box in display pixels."""
    return [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts
            if t.get_visible()]


def _assert_no_two_labels_overlap(fig) -> None:
    """Drawn as saved: no two labels' boxes overlap, and each lies inside its panel."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # the figure was closed (saved, not shown): a canvas to draw on
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = _drawn_labels(ax, renderer)
        frame = ax.get_window_extent(renderer)
        for i, (text, box) in enumerate(labels):
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1, text
            assert frame.y0 <= box.y0 and box.y1 <= frame.y1, text
            clash = [other for other, b in labels[i + 1:] if box.overlaps(b)]
            assert not clash, f"{text!r} overlaps {clash}"


def test_stacked_pane_labels_never_overlap(tmp_path) -> None:
    """Issue #32: value labels overlapped on dense panels. Twelve one-minute windows,
    each with six EARLY panes 10 s apart while it fills (its 1000 + 100w + i) and an
    ON_TIME pane 30 s after its end (1000 + 100w + 9): 84 labels, the EARLY ones about
    2 px apart up the panel. None overlaps; each window's ON_TIME value is shown (72 px
    apart, wider than the label); the rest that found no room are counted."""
    from datetime import timedelta

    start, rows = _t("12:00:00"), []
    for w in range(12):
        ws, we = start + timedelta(minutes=w), start + timedelta(minutes=w + 1)
        rows += [("k", 1000 + 100 * w + i, ws, we, i, "EARLY", False,
                  ws + timedelta(seconds=10 * i), False) for i in range(6)]
        rows.append(("k", 1000 + 100 * w + 9, ws, we, 6, "ON_TIME", True,
                     we + timedelta(seconds=30), False))
    summary = plot_result(COLS, rows, str(tmp_path / "dense.png"), "dense")
    _assert_no_two_labels_overlap(summary.figure)
    shown = [t.get_text() for t in summary.figure.axes[0].texts]
    assert {str(1000 + 100 * w + 9) for w in range(12)} <= set(shown)
    assert summary.labels_left_out > 0
    assert len(shown) + summary.labels_left_out == 84


def test_dense_input_labels_never_overlap(spark, tmp_path) -> None:
    """240 elements in ten minutes (one every 2.5 s, values id % 10, arriving 30-45 s
    late), one-minute windows, WATERMARK DELAY 20 SECONDS: nothing is late (an element
    arrives at most 45 s after its event time, when the watermark is at most 15 s past
    its event time minus the delay), so each window fires once, ON_TIME, with the sum
    of its 24 values. No two labels overlap; every window's sum is shown."""
    import dfsql
    from dfsql.api import planned_of

    spark.sql("CREATE OR REPLACE TEMP VIEW plot_dense AS SELECT 'd' AS key, "
              "CAST(id % 10 AS INT) AS value, "
              "TIMESTAMP '2015-09-01 12:00:00' + make_interval(0, 0, 0, 0, 0, 0, id * 2.5) "
              "AS event_time, TIMESTAMP '2015-09-01 12:00:30' + make_interval(0, 0, 0, 0, 0, "
              "0, id * 2.5 + (id % 4) * 5) AS arrival_time FROM range(240)")
    query = ("SELECT key, SUM(value) AS total FROM plot_dense GROUP BY key "
             "WINDOW FIXED(1 MINUTE) ON event_time WATERMARK DELAY 20 SECONDS "
             "PROCESSING TIME arrival_time")
    df = dfsql.sql(query, spark)
    summary = plot_result(df.columns, [tuple(r) for r in df.collect()],
                          str(tmp_path / "input.png"), query, plan=planned_of(df).top_block)
    sums = [str(sum((24 * w + j) % 10 for j in range(24))) for w in range(10)]
    assert [(label, timing) for _, _, _, label, timing in summary.panes] == [
        (s, "ON_TIME") for s in sums]
    _assert_no_two_labels_overlap(summary.figure)
    assert summary.elements == 240 and summary.labels_left_out > 0
    (ax,) = summary.figure.axes
    bold = [t.get_text() for t in ax.texts if t.get_fontweight() == "bold"]
    assert sorted(bold) == sorted(sums)


def test_the_shell_says_what_the_picture_leaves_out(two_keys, spark, capsys,
                                                    tmp_path) -> None:
    """``\\plot`` in the shell: its summary line, then each note (here the elements of a
    key column that is no GROUP BY key) on its own line."""
    from in_process import shell_on

    from dfsql.shell.display import make_console

    shell = shell_on(spark)
    shell.err = make_console(terminal=False)
    shell.statement(two_keys[3].replace("SELECT key,", "SELECT UPPER(key) AS k,"))
    capsys.readouterr()
    shell.command(f"\\plot {tmp_path / 'upper.png'}")
    out = capsys.readouterr().out
    assert "upper.png: 8 panes, 0 retractions, the watermark\n" in out  # j's 3, k's 5
    assert "note: input elements not drawn: the key column k is not itself a GROUP BY " \
        "key" in " ".join(out.split())


def test_the_watermark_line_comes_from_every_row_the_dots_from_those_where_keeps(
        spark, paper_tables, tmp_path) -> None:
    """Time belongs to the input (issue #32): over the scores of 5 or more, the dots are
    those five, and the watermark (DELAY 0: the largest event time arrived) is 12:04:00
    between 12:05:40 and 12:06:20, the 3 of 12:04:00 that WHERE leaves out; over the
    five alone it would be 12:02:10 there."""
    import dfsql
    from dfsql.api import planned_of

    query = ("SELECT key, SUM(value) AS total FROM scores WHERE value >= 5 GROUP BY key "
             "WINDOW FIXED(2 MINUTES) ON event_time PROCESSING TIME arrival_time")
    df = dfsql.sql(query, spark)
    summary = plot_result(df.columns, [tuple(r) for r in df.collect()],
                          str(tmp_path / "where.png"), query, plan=planned_of(df).top_block)
    (ax,) = summary.figure.axes
    (dots,) = ax.collections
    assert sorted((_hms(x), _hms(y)) for x, y in dots.get_offsets()) == [
        ("12:00:30", "12:04:30"), ("12:01:20", "12:07:20"), ("12:02:10", "12:04:40"),
        ("12:02:50", "12:06:20"), ("12:07:10", "12:08:20")]
    (wm,) = [ln for ln in ax.get_lines() if ln.get_color() == "#1f5fbf"]
    held = {_hms(x) for x, y in zip(wm.get_xdata(), wm.get_ydata(), strict=True)
            if "12:05:45" <= _hms(y) <= "12:06:15"}
    assert held == {"12:04:00"}
