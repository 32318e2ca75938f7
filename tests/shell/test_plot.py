"""``\\plot`` (dfsql/shell/plot.py) on what issue #32 item 7 reported: a batch result as
the notebook hands it over (pandas: NaT emit times), results it cannot draw, time ticks
at round instants, every key's panel with its own input and the watermark, and value
labels that never overlap.

Expected values are derived by hand from the paper's data (examples/paper/*.csv), not
read from the plot's own output."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest

from dfsql.errors import DfsqlError
from dfsql.shell.plot import plot_result

COLS = ["key", "total", "window_start", "window_end", "pane_index", "pane_timing",
        "is_last", "emit_time", "is_retraction"]


def _t(hms: str) -> datetime:
    """An instant of the paper's day, 2015-09-01."""
    return datetime.fromisoformat(f"2015-09-01 {hms}")


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
    from datetime import timedelta

    width, start = timedelta(minutes=window_minutes), _t("12:00:00")
    last_end = start + 5 * width
    rows = [("k", i, start + i * width, start + (i + 1) * width, 0, "ON_TIME", True,
             last_end + timedelta(seconds=emit_after + i * emit_apart), False)
            for i in range(5)]
    ax = plot_result(COLS, rows, str(tmp_path / "ticks.png")).figure.axes[0]
    _assert_round_ticks(ax.xaxis, ax.get_xlim())
    _assert_round_ticks(ax.yaxis, ax.get_ylim())
