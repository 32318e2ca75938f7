"""The notebook magics (dfsql/notebook.py) in IPython's own shell: ``%load_ext dfsql``,
``%%dfsql`` of the paper's Figure 14 (retracting), its HTML marks, ``%dfsql --plot``, a
positioned error with no traceback, a plain ``%dfsql SELECT``.

Expected panes are the paper's (examples/paper/figures.json), not dfsql's output.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import PAPER_DATA

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def ip(spark, paper_tables, tmp_path_factory):
    """IPython's interactive shell (no history file), with ``%load_ext dfsql``."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.InteractiveShell.ipython_dir = str(tmp_path_factory.mktemp("ipython"))
    shell = InteractiveShell.instance(config=config)
    assert shell.run_cell("%load_ext dfsql").success
    yield shell
    InteractiveShell.clear_instance()


@pytest.fixture(scope="module")
def fig14() -> dict:
    figures = json.loads((PAPER_DATA / "figures.json").read_text())["figures"]
    return next(f for f in figures if f["name"] == "fig14_sessions_retracting")


@pytest.fixture(scope="module")
def fig14_cell(ip):
    """``%%dfsql`` of Figure 14's retracting query, run once for the module."""
    text = (PAPER_DATA / "fig14_sessions_retracting.sql").read_text()
    return ip.run_cell("%%dfsql\n" + text)


def _rows(frame: pd.DataFrame, keys: list[str]) -> list[dict]:
    """The frame's rows as figures.json writes them (times as text, Python values)."""
    out = []
    for rec in frame.to_dict("records"):
        out.append({k: v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, pd.Timestamp)
                    else v for k, v in rec.items() if k in keys})
    return out


def test_importing_dfsql_does_not_import_ipython() -> None:
    code = "import sys, dfsql; print('IPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_cell_magic_returns_figure_14_as_pandas_and_marks_retractions(fig14_cell,
                                                                      fig14) -> None:
    got = fig14_cell
    assert got.success, got.error_in_exec
    frame = got.result
    assert isinstance(frame, pd.DataFrame)
    expected = fig14["expected"]
    assert _rows(frame, list(expected[0])) == expected
    # the paper's retractions: 7 and 10 (early sessions merged), 5 and 25 (merged late),
    # 3 (its session grew to 12)
    retracted = [r["total"] for r in expected if r["is_retraction"]]
    assert retracted == [7, 10, 5, 25, 3]

    page = frame._repr_html_()
    assert "<th>±</th>" in page
    assert page.count('class="dfsql-retraction"') == len(retracted)
    assert page.count('class="dfsql-insertion"') == len(expected) - len(retracted)
    marks = [td.split("</b>")[0] for td in page.split('<td class="dfsql-mark"><b>')[1:]]
    assert marks == ["-" if r["is_retraction"] else "+" for r in expected]


def test_plot_draws_the_last_windowed_result_as_png(ip, fig14_cell) -> None:
    assert fig14_cell.success
    got = ip.run_cell("%dfsql --plot")
    assert got.success, got.error_in_exec
    assert got.result.data[:8] == PNG_SIGNATURE


def test_plot_of_a_cell_keeps_its_rows_as_the_cells_value(ip, fig14, capsys) -> None:
    """``%%dfsql --plot``: the picture is displayed, and ``_`` is the result's rows (the
    guide's ``panes = _``); an empty result draws nothing, says so, and keeps its rows."""
    cell = (PAPER_DATA / "fig14_sessions_retracting.sql").read_text()
    got = ip.run_cell("%%dfsql --plot\n" + cell)
    assert got.success, got.error_in_exec
    assert ip.user_ns["_"].shape[0] == len(fig14["expected"])  # the paper's changelog
    assert "FROM scores" in cell
    got = ip.run_cell("%%dfsql --plot\n" + cell.replace("FROM scores",
                                                          "FROM scores WHERE key = 'none'"))
    assert got.success, got.error_in_exec
    assert ip.user_ns["_"].shape[0] == 0
    assert "note: \\plot: the last windowed result has no rows" in capsys.readouterr().out


def test_plot_of_a_batch_query_draws_and_a_bad_path_shows_no_traceback(ip, capsys,
                                                                        tmp_path) -> None:
    """Issue #32: ``%%dfsql --plot`` of a batch FIXED query (Figure 10: no PROCESSING
    TIME, so every emit_time is NULL, NaT in pandas) failed with NaN axis limits and a
    traceback; it draws. A file \\plot cannot write is a message, not a traceback."""
    cell = (PAPER_DATA / "fig10_fixed_batch.sql").read_text()
    got = ip.run_cell("%%dfsql --plot\n" + cell)
    assert got.success, got.error_in_exec
    frame = ip.user_ns["_"].sort_values("window_start")
    assert frame["total"].tolist() == [14, 22, 3, 12]  # 5+9, 7+3+4+8, 3, 3+8+1
    shown = capsys.readouterr()
    assert "note:" not in shown.out and "Traceback" not in shown.out + shown.err
    got = ip.run_cell("%dfsql --plot")
    assert got.success, got.error_in_exec
    assert got.result.data[:8] == PNG_SIGNATURE
    got = ip.run_cell(f"import dfsql; dfsql.plot(path={str(tmp_path / 'none' / 'x.png')!r})")
    from dfsql.errors import DfsqlError

    assert isinstance(got.error_in_exec, DfsqlError)
    shown = capsys.readouterr()
    assert "Traceback" not in shown.out + shown.err
    assert "cannot write" in shown.out + shown.err


def test_a_mistake_shows_the_position_and_no_traceback(ip, capsys) -> None:
    # the mistake is on line 2 of the cell: BANANAS, at column 37 (1-based) of that line
    cell = "SELECT 1 AS x;\nSELECT * FROM scores WINDOW FIXED(2 BANANAS) ON event_time\n"
    got = ip.run_cell("%%dfsql\n" + cell)
    from dfsql.errors import DfsqlError

    assert isinstance(got.error_in_exec, DfsqlError)
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "Traceback" not in shown and 'File "' not in shown
    assert "error: line 2, col 37: unknown time unit BANANAS" in shown
    assert "hint: expected a time unit" in shown
    bad = cell.splitlines()[1]
    caret = next(ln for ln in shown.splitlines() if ln.strip() == "^")
    assert bad in shown
    assert caret.index("^") - 2 == bad.index("BANANAS")


def test_line_magic_select_gives_a_frame(ip) -> None:
    got = ip.run_cell("%dfsql SELECT 1 AS x")
    assert got.success, got.error_in_exec
    frame = got.result
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == ["x"] and frame["x"].tolist() == [1]
    assert "±" not in frame._repr_html_()


def test_drop_warnings_are_shown_under_the_result() -> None:
    from dfsql.notebook import Result

    frame = Result(pd.DataFrame({"x": [1]}))
    frame.dfsql_changelog, frame.dfsql_warnings = False, ["warning: 2 rows dropped as late"]
    assert frame._repr_html_().endswith(
        '<div class="dfsql-warning" style="color:#b8860b">warning: 2 rows dropped as late'
        "</div>")
    assert repr(frame).endswith("\nwarning: 2 rows dropped as late")
    assert isinstance(frame.head(1), pd.DataFrame) and not isinstance(frame.head(1), Result)
