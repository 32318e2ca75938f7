"""The shell's pieces without a terminal: statement boundaries, the caret under an
error, highlighting, completion against a real session's catalog, and \\plot of
Figure 14 (its panes and retractions are the paper's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from in_process import shell_on
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from dfsql.errors import DfsqlError
from dfsql.shell.display import caret_lines, make_console, print_error, print_result
from dfsql.shell.script import Piece, is_complete, split
from tests.paper import FIGURES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "complete"), [
    ("SELECT 1;", True),
    ("SELECT 1", False),
    ("SELECT 1\nFROM t\nWINDOW GLOBAL", False),
    ("SELECT ';", False),                       # the ; is inside an open string
    ("SELECT 'a;b'", False),
    ("SELECT 1; -- done", True),                 # a comment after the ; is fine
    ("SELECT 1 /* ; */", False),
    ("SELECT 1; SELECT", False),                 # the second statement is not finished
    ("\\d", True),                               # a command ends at its line
    ("", True),
])
def test_enter_runs_only_a_finished_statement(text: str, complete: bool) -> None:
    assert is_complete(text) is complete


def test_scripts_split_at_semicolons_and_command_lines() -> None:
    text = ("-- a comment; with a semicolon\nSELECT 'a;b' AS x;\n"
            "/* block; comment */ SELECT 2;\n"
            "\\load t /data/t.csv EVENT TIME ts\n"
            "-- only a comment\n\\d\n"
            "SELECT 3\n  FROM t\n-- trailing comment only\n")
    assert split(text) == [
        Piece("-- a comment; with a semicolon\nSELECT 'a;b' AS x", 1),
        Piece("/* block; comment */ SELECT 2", 3),
        Piece("\\load t /data/t.csv EVENT TIME ts", 4),
        Piece("\\d", 6),
        Piece("SELECT 3\n  FROM t\n-- trailing comment only", 7),
    ]


def test_caret_under_the_error_column() -> None:
    err = DfsqlError("unknown keyword GAPP", 2, 20, "did you mean GAP?")
    text = "SELECT k, COUNT(*) FROM t GROUP BY k\nWINDOW SESSIONS(  GAPP 1 MINUTE) ON ts"
    assert caret_lines(err, text) == ["WINDOW SESSIONS(  GAPP 1 MINUTE) ON ts",
                                      " " * 19 + "^"]
    assert caret_lines(DfsqlError("no position"), text) == []
    assert caret_lines(DfsqlError("beyond", 9, 1), text) == []


def test_error_names_the_script_line(capsys) -> None:
    console = make_console(terminal=False)
    err = DfsqlError("expected a duration", 2, 8, "e.g. 30 SECONDS")
    print_error(console, err, "SELECT 1\nWINDOW FIXED() ON ts", "q.sql: ", line_offset=10)
    out = capsys.readouterr().out.splitlines()
    assert out == ["error: q.sql: line 12, col 8: expected a duration",
                   "  WINDOW FIXED() ON ts", "         ^", "  hint: e.g. 30 SECONDS"]


def test_changelog_table_marks_retractions(capsys) -> None:
    console = make_console(terminal=False)
    cols = ["key", "total", "is_retraction"]
    print_result(console, cols, [("k", 7, False), ("k", 7, True), ("k", 25, None)], False, 0.5,
                 changelog=True)
    lines = capsys.readouterr().out.splitlines()
    body = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines
            if ln.startswith("|") and "key" not in ln and "---" not in ln]
    assert body == [["+", "k", "7", "false"], ["-", "k", "7", "true"],
                    ["+", "k", "25", "NULL"]]
    assert lines[-1] == "3 rows (0.50 s)"


def test_warnings_follow_the_row_count(capsys) -> None:
    """The dropped-rows lines come under the result (and after OK for a statement)."""
    console = make_console(terminal=False)
    print_result(console, ["n"], [(1,)], False, None, warnings=["warning: 2 rows dropped"])
    assert capsys.readouterr().out.splitlines()[-2:] == ["1 row", "warning: 2 rows dropped"]
    print_result(console, [], [], False, None, warnings=["warning: 3 rows dropped"])
    assert capsys.readouterr().out.splitlines() == ["OK", "warning: 3 rows dropped"]
    print_result(console, ["n"], [(1,)], False, None)
    assert "warning" not in capsys.readouterr().out


def _table_body(out: str) -> list[list[str]]:
    lines = [ln for ln in out.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if "---" not in ln]


def test_only_a_retracting_windowed_result_gets_marks(spark, paper_tables, capsys) -> None:
    """Issue #23: any table with an is_retraction column got +/- marks, even a plain
    GROUP BY over a stored changelog. Marks belong to a query that EMITs retractions:
    Figure 14's 12 rows, 5 of them retractions (the paper's -7 -10 -5 -25 -3)."""
    shell = shell_on(spark)
    shell.statement("SELECT key, is_retraction, COUNT(*) AS n FROM VALUES ('k', true), "
                    "('k', false), ('k', false) AS t(key, is_retraction) "
                    "GROUP BY key, is_retraction ORDER BY is_retraction")
    body = _table_body(capsys.readouterr().out)
    assert body == [["key", "is_retraction", "n"], ["k", "false", "2"], ["k", "true", "1"]]

    shell.statement(FIGURES["fig14_sessions_retracting"]["query"])
    body = _table_body(capsys.readouterr().out)
    assert body[0][:2] == ["+/-", "key"]
    marks = [(r[0], r[-1]) for r in body[1:]]
    assert len(marks) == 12 and marks.count(("-", "true")) == 5
    assert all(m == ("+", "false") for m in marks if m[0] == "+")

    accumulating = FIGURES["fig14_sessions_retracting"]["query"].replace(
        "AND RETRACTING", "")
    shell.statement(accumulating)
    body = _table_body(capsys.readouterr().out)
    assert body[0][0] == "key" and "+/-" not in body[0]  # no retractions: no marks
    assert {r[-1] for r in body[1:]} == {"false"}


def test_a_trigger_on_a_batch_input_is_said_to_have_no_effect(spark, paper_tables,
                                                               capsys) -> None:
    """Issue #23: TRIGGER EVERY on a bounded table without PROCESSING TIME is accepted
    (docs/reference.md#trigger) and changes nothing; the shell says so under the result, whose
    windows each have one ON_TIME pane (the paper's events in 2-minute windows: pandas)."""
    import pandas as pd

    events = pd.read_csv(ROOT / "examples" / "paper" / "events.csv", parse_dates=["event_time"])
    windows = events.event_time.dt.floor("2min").nunique()
    shell = shell_on(spark)
    base = ("SELECT key, SUM(value) AS total FROM scores GROUP BY key "
            "WINDOW FIXED(2 MINUTES) ON event_time ")
    shell.statement(base + "TRIGGER EVERY 1 MINUTE")
    out = capsys.readouterr()
    body = _table_body(out.out)
    timing = body[0].index("pane_timing")
    assert [r[timing] for r in body[1:]] == ["ON_TIME"] * windows
    assert "note: the TRIGGER has no effect on a batch input" in out.err
    assert "add PROCESSING TIME <arrival column>" in out.err
    for quiet in (base, base + "PROCESSING TIME arrival_time TRIGGER EVERY 1 MINUTE"):
        shell.statement(quiet)  # the default trigger; a replay, where the trigger acts
        assert "note:" not in capsys.readouterr().err


def test_highlighting_knows_dfsql_clause_words() -> None:
    from pygments import lex
    from pygments.token import Keyword, Name

    from dfsql.shell.lexer import DfsqlLexer

    toks = {v: t for t, v in lex("\\d\nSELECT k FROM t WINDOW SESSIONS(GAP 30 MINUTES) ON "
                                  "ts TRIGGER EVERY 1 MINUTE UNTIL WATERMARK EMIT "
                                  "ACCUMULATING AND RETRACTING;", DfsqlLexer())}
    for word in ("SESSIONS", "GAP", "TRIGGER", "UNTIL", "WATERMARK", "EMIT", "RETRACTING",
                 "MINUTES"):
        assert toks[word] in Keyword, word
    assert toks["\\d"] in Name.Builtin
    assert toks["ts"] not in Keyword


def _completions(completer, text: str) -> list[str]:
    """Completions with the cursor at ``|`` (or at the end)."""
    at = text.find("|")
    doc = Document(text.replace("|", ""), at if at >= 0 else len(text))
    return [c.text for c in completer.get_completions(doc, CompleteEvent())]


def test_completion_from_the_session_catalog(spark, paper_tables) -> None:
    from dfsql.shell.lexer import Catalog, ShellCompleter

    catalog = Catalog(lambda: spark)
    completer = ShellCompleter(catalog)
    assert "scores" in _completions(completer, "SELECT * FROM sc")
    assert _completions(completer, "SELECT * FROM sc") == ["scores"]  # tables only there
    got = _completions(completer, "SELECT arr| FROM scores")  # columns of the named table
    assert "arrival_time" in got
    assert "SESSIONS" in _completions(completer, "SELECT 1 FROM t WINDOW SESS")
    assert "sessions" in _completions(completer, "select 1 from t window sess")
    assert "RETRACTING" in _completions(completer, "EMIT ACCUMULATING AND RETR")
    assert "window_start" in _completions(completer, "SELECT window_st")
    assert "session_window" in _completions(completer, "SELECT session_w")  # a function
    assert _completions(completer, "\\wa") == ["\\watch"]
    spark.sql("CREATE OR REPLACE TEMP VIEW shell_new_view AS SELECT 1 AS x")
    assert "shell_new_view" not in _completions(completer, "SELECT * FROM shell_n")
    catalog.invalidate()  # the shell does this after every statement
    assert _completions(completer, "SELECT * FROM shell_n") == ["shell_new_view"]


def test_completion_after_a_clause_word_offers_only_its_grammar() -> None:
    """Issue #23: Tab after WINDOW offered Spark's SESSION, which the grammar refuses."""
    from dfsql.shell.lexer import Catalog, ShellCompleter

    completer = ShellCompleter(Catalog(lambda: None))
    assert _completions(completer, "SELECT 1 FROM t WINDOW SE") == ["SESSIONS"]
    assert _completions(completer, "select 1 from t window s") == ["sessions", "sliding"]
    assert _completions(completer, "SELECT 1 FROM t WINDOW F") == ["FIXED"]
    assert _completions(completer, "... EMIT D") == ["DISCARDING"]
    assert _completions(completer, "... PROCESSING T") == ["TIME"]
    assert "SESSION" in _completions(completer, "SET SES")  # elsewhere Spark's words stay


def test_plot_of_figure_14_draws_the_papers_panes(spark, paper_tables, tmp_path) -> None:
    """The panes and retractions drawn are the paper's (Figure 14, §2.4): 5, 7, 10, then
    -7 -10 +25, -5 -25 +39, 3, -3 +12; the ten input elements and the watermark too."""
    import dfsql
    from dfsql.api import planned_of
    from dfsql.shell.plot import plot_result

    fig = FIGURES["fig14_sessions_retracting"]
    df = dfsql.sql(fig["query"], spark)
    rows = [tuple(r) for r in df.collect()]
    path = tmp_path / "fig14.png"
    summary = plot_result(df.columns, rows, str(path), "Figure 14",
                          plan=planned_of(df).blocks[-1].plan)
    assert [(p[3], p[4]) for p in summary.panes] == [
        ("5", "ON_TIME"), ("7", "EARLY"), ("10", "EARLY"), ("25", "ON_TIME"),
        ("39", "LATE"), ("3", "EARLY"), ("12", "ON_TIME")]
    assert [r[2] for r in summary.retractions] == ["7", "10", "5", "25", "3"]
    assert summary.value_column == "total" and summary.panels == ["key=k"]
    assert summary.elements == 10 and summary.watermark_points > 10
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    import struct

    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1100, 462)  # 10 x 4.2 inches at 110 dpi
    assert len(data) > 30_000  # rectangles, labels, dots and a line, not a blank canvas


def test_plot_needs_a_windowed_result(tmp_path) -> None:
    from dfsql.shell.plot import plot_result

    with pytest.raises(DfsqlError, match="has no window_start"):
        plot_result(["a"], [(1,)], str(tmp_path / "x.png"))


def test_plot_draws_every_aggregate_with_its_input_and_watermark(spark, paper_tables,
                                                                 tmp_path) -> None:
    """Issue #23: with two aggregates \\plot drew only the first, without the input dots
    and the watermark line, under a cut title. Figure 14 with COUNT(*) beside SUM: one
    panel each, both with the ten elements and the watermark; the counts of its sessions
    by hand: {5}, {7}, {3,4,3}, then {7,3,4,3,8}, {5,9,7,3,4,3,8}, {3}, {3,8,1}."""
    import dfsql
    from dfsql.api import planned_of
    from dfsql.shell.plot import plot_result

    query = FIGURES["fig14_sessions_retracting"]["query"].replace(
        "SUM(value) AS total", "SUM(value) AS total, COUNT(*) AS n")
    df = dfsql.sql(query, spark)
    summary = plot_result(df.columns, [tuple(r) for r in df.collect()],
                          str(tmp_path / "two.png"), query, plan=planned_of(df).blocks[-1].plan)
    assert summary.panels == ["key=k: total", "key=k: n"]
    by_panel = {p: [label for q, _, _, label, _ in summary.panes if q == p]
                for p in summary.panels}
    assert by_panel["key=k: total"] == ["5", "7", "10", "25", "39", "3", "12"]
    assert by_panel["key=k: n"] == ["1", "1", "3", "5", "7", "1", "3"]
    fig = summary.figure
    assert [ax.get_title() for ax in fig.axes] == summary.panels
    for ax in fig.axes:
        assert [len(c.get_offsets()) for c in ax.collections] == [10]  # the input dots
        assert any(line.get_color() == "#1f5fbf" for line in ax.get_lines())  # watermark
    title = fig._suptitle.get_text()
    assert " ".join(title.split()) == " ".join(query.split())  # whole, wrapped, not cut
    assert (tmp_path / "two.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_shows_dates_on_an_axis_across_days(tmp_path) -> None:
    """Issue #23: a multi-day axis showed times of day only; within a day it still does."""
    from datetime import datetime, timedelta

    from dfsql.shell.plot import plot_result

    cols = ["carrier", "flights", "window_start", "window_end", "pane_index", "pane_timing",
            "is_last", "emit_time", "is_retraction"]
    start = datetime(2013, 1, 1)

    def rows(step: timedelta) -> list[tuple]:
        return [("AA", 10 + i, start + i * step, start + (i + 1) * step, 0, "ON_TIME", True,
                 None, False) for i in range(6)]

    days = plot_result(cols, rows(timedelta(hours=12)), str(tmp_path / "days.png"), "x")
    labels = [t.get_text() for t in days.figure.axes[0].get_xticklabels() if t.get_text()]
    assert labels and all(t.startswith("2013-01-0") for t in labels), labels
    assert {t[:10] for t in labels} >= {"2013-01-01", "2013-01-02", "2013-01-03"}
    hours = plot_result(cols, rows(timedelta(minutes=10)), str(tmp_path / "hours.png"), "x")
    labels = [t.get_text() for t in hours.figure.axes[0].get_xticklabels() if t.get_text()]
    assert labels and all(len(t) == 8 and t[2] == ":" for t in labels), labels
