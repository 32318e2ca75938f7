"""Notebooks: ``%load_ext dfsql`` gives the ``%dfsql`` (line) and ``%%dfsql`` (cell) magics.

A statement runs with :func:`dfsql.api.sql` on the notebook's session
(:func:`dfsql.session.session`: the active one, or one dfsql starts) and its rows come
back as a pandas DataFrame (``toPandas``, through Arrow on the sessions dfsql makes), so
the next cell can compute with them. The frame is a :class:`Result`: a windowed result
renders its pane timing coloured and, for a retracting EMIT, a leading ``+``/``-`` column
with the retractions in red, exactly the rows the shell marks
(:attr:`dfsql.spark.planned.Planned.is_changelog`); the rows the query dropped are listed under
it (:func:`dfsql.result_warnings.dropped_warnings`, never silent). ``%dfsql --plot`` and
:func:`plot` draw the panes as the shell's ``\\plot`` does, inline.

A user's mistake shows dfsql's positioned message (line, column, caret, hint) and no
Python traceback, yet still fails the cell, so "Run all" stops there: the raised
:class:`~dfsql.errors.DfsqlError` carries ``_render_traceback_``, which IPython shows in
place of a traceback.

IPython is imported only inside the functions (``load_ipython_extension`` and
:func:`plot`'s image): ``import dfsql`` never needs it (the ``notebook`` extra).
"""

from __future__ import annotations

import html
import io
import os
import tempfile
from typing import Any

import pandas as pd

from dfsql.api import plan, planned_of
from dfsql.errors import DfsqlError
from dfsql.language.scan import Source
from dfsql.result_warnings import dropped_warnings
from dfsql.session import session
from dfsql.shell.display import TIMING_STYLE, cell, print_error
from dfsql.shell.plot import plot_result
from dfsql.shell.script import split
from dfsql.spark.errors import spark_errors

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: the colours of the HTML table (rich's names in the shell: yellow, green, magenta, red)
HTML_COLOURS = {"EARLY": "#b8860b", "ON_TIME": "#2e8b2e", "LATE": "#8e44ad"}
RETRACTION_COLOUR = "#c0392b"
USAGE = ("%dfsql [--plot] [STATEMENT], or %%dfsql [--plot] over the cell's statements; "
         "--plot alone draws the last windowed result")

_last: Result | None = None  # the last result a magic returned, for ``%dfsql --plot``


class Result(pd.DataFrame):
    """A statement's rows as pandas, and what the notebook shows with them: whether they
    are a changelog (+/- marks), the drop warnings, the statement and its Spark
    DataFrame (so :func:`plot` finds its plan: input elements and watermark).

    Anything computed from it (``head``, a filter, arithmetic) is a plain DataFrame:
    its marks describe these rows only."""

    _metadata = ["dfsql_text", "dfsql_changelog", "dfsql_warnings", "dfsql_planned"]

    @property
    def _constructor(self):  # derived frames lose the marks (see the class docstring)
        return pd.DataFrame

    @property
    def is_windowed(self) -> bool:
        return "emit_time" in self.columns and "window_start" in self.columns

    def __repr__(self) -> str:
        return "\n".join([super().__repr__(), *getattr(self, "dfsql_warnings", [])])

    def _repr_html_(self) -> str | None:
        warnings = "".join(f'<div class="dfsql-warning" style="color:#b8860b">'
                           f"{html.escape(w)}</div>" for w in self.dfsql_warnings)
        if not self.is_windowed:
            return (super()._repr_html_() or "") + warnings
        return result_html(self, self.dfsql_changelog) + warnings


def result_html(frame: pd.DataFrame, changelog: bool) -> str:
    """A windowed result as an HTML table: pane timing coloured; for a changelog a leading
    ``±`` column (``+`` insertion, ``-`` retraction) and retraction rows in red. Longer
    results show their first ``display.max_rows`` rows, as pandas does."""
    cols = list(frame.columns)
    changelog = changelog and "is_retraction" in cols
    limit = pd.get_option("display.max_rows") or len(frame)
    head = ("<th>±</th>" if changelog else "") + "".join(
        f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = []
    for row in frame.head(limit).itertuples(index=False, name=None):
        rec = dict(zip(cols, row, strict=True))
        retraction = changelog and bool(rec["is_retraction"])
        cells = []
        if changelog:
            cells.append(f'<td class="dfsql-mark"><b>{"-" if retraction else "+"}</b></td>')
        for c, v in rec.items():
            colour = HTML_COLOURS.get(v) if c == "pane_timing" and v in TIMING_STYLE else None
            style = f' style="color:{colour}"' if colour and not retraction else ""
            cells.append(f"<td{style}>{html.escape(_cell(v))}</td>")
        attrs = (f' class="dfsql-retraction" style="color:{RETRACTION_COLOUR}"' if retraction
                 else ' class="dfsql-insertion"' if changelog else "")
        body.append(f"<tr{attrs}>{''.join(cells)}</tr>")
    n = len(frame)
    footer = f"{n} row{'s' if n != 1 else ''}" + (f", first {limit} shown" if n > limit else "")
    return (f'<table class="dataframe dfsql-result"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table><div><small>{footer}</small></div>")


def _cell(v: Any) -> str:
    """A value as the shell prints it (:func:`dfsql.shell.display.cell`); pandas' own
    missing values (NaN, NaT, NA) are NULL too."""
    if v is not None and not isinstance(v, list | dict) and pd.isna(v):
        return "NULL"
    return cell(v)


def run(text: str, spark=None) -> Result | None:
    """Each statement of ``text`` in order (stopping at the first error); the last one's
    rows, or None if it returns none (DDL)."""
    result = None
    for piece in split(text):
        if piece.is_command:
            raise DfsqlError("the notebook runs SQL statements; backslash commands are the "
                             "shell's", piece.line, 1, "%dfsql --plot draws the last result")
        try:
            result = _statement(piece.text.rstrip().rstrip(";").rstrip(), spark)
        except DfsqlError as err:
            raise _positioned(err, piece.text, piece.line - 1) from None
    return result


def _statement(text: str, spark) -> Result | None:
    planned = plan(text, spark or session())
    df = planned.result
    if df.isStreaming:
        raise DfsqlError("this query reads a stream: it has no end to wait for", 1, 1,
                         "start it with CREATE STREAMING QUERY name AS ... and read its sink")
    with spark_errors(Source(text), text=text):
        if not df.columns:
            return None  # a statement with no rows (DDL): spark.sql has run it
        frame = df.toPandas()
        warnings = dropped_warnings(planned)  # after the rows: counted while computed
    result = Result(frame)
    result.dfsql_text, result.dfsql_planned = text, planned
    result.dfsql_changelog, result.dfsql_warnings = planned.is_changelog, warnings
    return result


def _positioned(err: DfsqlError, text: str, line_offset: int) -> DfsqlError:
    """``err`` shown as the shell shows it (position, caret, hint) in place of IPython's
    traceback; the lines are numbered within the cell."""
    out = io.StringIO()
    from rich.console import Console

    print_error(Console(file=out, force_terminal=False, force_jupyter=False, no_color=True,
                        width=100_000, soft_wrap=True), err, text, line_offset=line_offset)
    lines = out.getvalue().rstrip("\n").splitlines()
    err._render_traceback_ = lambda: lines  # type: ignore[attr-defined]
    return err


def plot(df: Any = None, path: str | None = None):
    """The panes of a windowed result drawn as the paper draws its figures (the shell's
    ``\\plot``), as an inline IPython Image. ``df``: a :class:`Result` (the last one a
    magic returned, by default) or a Spark DataFrame from :func:`dfsql.sql`; ``path``
    also keeps the PNG there."""
    try:
        data = _png(_last if df is None else df, path)
    except DfsqlError as err:
        raise _positioned(err, "", 0) from None
    from IPython.display import Image

    return Image(data=data, format="png")


def _png(df: Any, path: str | None) -> bytes:
    """:func:`plot`'s picture, as PNG bytes."""
    if df is None:
        raise DfsqlError("nothing to plot yet", hint="run a windowed query with %%dfsql "
                         "first, or pass dfsql.plot(df)")
    if isinstance(df, Result):
        planned, text = df.dfsql_planned, df.dfsql_text
        columns, rows = list(df.columns), [list(r.values()) for r in df.to_dict("records")]
    elif isinstance(df, pd.DataFrame):
        raise DfsqlError("dfsql.plot draws a result of %%dfsql or a DataFrame of dfsql.sql, "
                         "not any pandas frame", hint="it needs the query's plan")
    else:
        planned, text = planned_of(df), ""
        columns, rows = list(df.columns), [tuple(r) for r in df.collect()]
    fd, out = tempfile.mkstemp(suffix=".png", prefix="dfsql-plot-") if path is None \
        else (None, path)
    try:
        top = planned.top_block if planned is not None else None
        summary = plot_result(columns, rows, out, text, plan=top)
        for note in getattr(summary, "notes", ()):  # what the picture leaves out
            print(f"note: {note}")
        with open(out, "rb") as f:
            return f.read()
    finally:
        if fd is not None:
            os.close(fd)
            os.unlink(out)


def magic(line: str, cell: str | None = None):
    """``%dfsql`` / ``%%dfsql``: run the statement(s), return the last one's rows;
    ``--plot`` also (or, with no statement, only) draws the windowed result."""
    global _last
    words = line.strip()
    option = words.split()[0] if words.startswith("--") and words[2:3].isalpha() else ""
    plot_it = option == "--plot"
    if option and not plot_it:  # "-- a comment" is SQL, "--name" an option
        raise _positioned(DfsqlError(f"unknown option {option}", hint=USAGE), "", 0)
    if plot_it:
        words = words[len("--plot"):].strip()
    text = cell if cell is not None else words
    if not text.strip():
        if not plot_it:
            raise _positioned(DfsqlError("no statement to run", hint=USAGE), "", 0)
        return plot()
    result = run(text)
    if result is not None:
        _last = result
    if plot_it and result is not None:  # the picture is shown; the rows stay the
        from IPython.display import display  # cell's value (``_`` in the next cell)

        try:
            display(plot(result))
        except DfsqlError as err:  # nothing to draw (no rows): say so, keep the rows
            print(f"note: {err.message}")
    return result


def load(ipython) -> None:
    """Register the magics (``load_ipython_extension``)."""
    ipython.register_magic_function(magic, magic_kind="line_cell", magic_name="dfsql")


__all__ = ["Result", "load", "magic", "plot", "run"]
