"""The console's pages as HTML (:mod:`dfsql.server.console` serves them): whole pages that
read as text and tables without a script, and the fragments the page's script
(``console_static/console.js``) fetches every second to redraw them in place. Every value
shown is escaped; nothing here reads a query (:mod:`dfsql.server.console_data` does)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from dfsql.model.pane_columns import PANE_COLUMNS
from dfsql.server.console_data import Watched, Windows, figure, lag
from dfsql.server.console_svg import clock_chart, spark_line, timeline, window_href

#: the live windows listed as text under the timeline (the picture draws its own cap)
LISTED = 40


def page(title: str, user: str, body: str, api: str | None = None,
         batch: int | None = None) -> str:
    """A whole page: its own style and script (served by the console, no network), and
    ``api``, the JSON its script polls (none: a static page), ``batch`` the latest batch
    the page shows (its script asks for its windows again once a later one commits)."""
    poll = f' data-api="{escape(api)}"' if api else ""
    poll += f' data-batch="{batch}"' if batch is not None else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<title>{escape(title)} · dfsql console</title>'
            f'<link rel="icon" href="data:,"><link rel="stylesheet" href="/static/console.css">'
            f'<script src="/static/console.js" defer></script></head>'
            f'<body{poll}><header><a class="home" href="/">dfsql console</a>'
            f'<span class="who">signed in as <b>{escape(user)}</b> · read-only</span>'
            f'</header><main>{body}</main></body></html>')


def _t(v: Any) -> str:
    if v is None:
        return '<span class="none">–</span>'
    if isinstance(v, float):
        return escape(f"{v:,.1f}")
    if isinstance(v, int):
        return escape(f"{v:,}")
    return escape(str(v))


def _seconds(s: float | None) -> str:
    if s is None:
        return _t(None)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if abs(s) >= 2 * size:
            return escape(f"{s / size:,.1f} {unit}")
    return escape(f"{s:,.0f} s")


def _status(status: str) -> str:
    kind = status.split(":", 1)[0].split(" ", 1)[0].lower()
    return f'<span class="status {escape(kind)}">{escape(status)}</span>'


def _series(w: Watched, name: str) -> list[float | None]:
    out: list[float | None] = []
    for r in w.series:
        v = figure(r, name) if name not in ("input_rows", "duration_ms") else r.get(name)
        out.append(None if v is None else float(v))
    return out


def _lags(w: Watched) -> list[float | None]:
    return [lag(r.get("at"), figure(r, "watermark")) for r in w.series]


def queries_fragment(rows: Sequence[Watched]) -> str:
    """The list: one row per query the user may watch, its charts over its latest batches."""
    if not rows:
        return ('<p class="none">No continuous query of yours is running. '
                'CREATE STREAMING QUERY starts one (docs: guides/streams.md).</p>')
    head = ("<tr><th>query</th><th>status</th><th>owner</th><th>batches</th>"
            "<th>input rows/s</th><th>input rows per batch</th><th>watermark</th>"
            "<th>watermark lag</th><th>lag per batch</th><th>late rows dropped</th>"
            "<th>dropped per batch</th></tr>")
    body = []
    for w in rows:
        link = f'<a class="query" href="/query/{quote(w.name)}">{escape(w.name)}</a>'
        body.append(
            f"<tr>"
            f"<td>{link}</td><td>{_status(w.status)}</td><td>{_t(w.owner)}</td>"
            f"<td class='n'>{_t(w.totals.batches)}</td><td class='n'>{_t(w.input_rate)}</td>"
            f"<td>{spark_line(_series(w, 'input_rows'), 'input rows per batch')}</td>"
            f"<td>{_t(w.totals.watermark)}</td><td class='n'>{_seconds(w.lag_seconds)}</td>"
            f"<td>{spark_line(_lags(w), 'watermark lag (s) per batch', colour='#8a5a00', unit=' s')}</td>"
            f"<td class='n'>{_t(w.dropped)}</td>"
            f"<td>{spark_line(_series(w, 'late_dropped'), 'late rows dropped per batch', colour='#d62728')}</td>"  # noqa: E501
            f"</tr>")
    return f'<table class="queries">{head}{"".join(body)}</table>'


def list_page(user: str, rows: Sequence[Watched]) -> str:
    body = ("<h1>Running continuous queries</h1>"
            "<p class='help'>Each row is a continuous query you may watch; the small charts "
            "cover its latest micro-batches (oldest left). Click a name for its windows.</p>"
            f'<div id="queries" data-part="queries">{queries_fragment(rows)}</div>')
    return page("queries", user, body, "/api/queries")


def summary_fragment(w: Watched) -> str:
    t = w.totals
    cells = (("status", _status(w.status)), ("owner", _t(w.owner)), ("sink", _t(w.sink)),
             ("batches", _t(t.batches)), ("input rows", _t(t.input_rows)),
             ("input rows/s", _t(w.input_rate)), ("watermark", _t(t.watermark)),
             ("frontier (the query's clock)", _t(t.frontier)),
             ("watermark lag", _seconds(w.lag_seconds)),
             ("late rows dropped", _t(w.dropped)), ("elements in state", _t(t.state)))
    return ('<table class="facts">' + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>"
                                              for k, v in cells) + "</table>")


def inputs_fragment(w: Watched) -> str:
    """Each input's latest processing time, and which one holds the frontier."""
    t = w.totals
    if t.rows_latest is None:
        return ('<p class="none">No input has been read yet (the executor reports each '
                "input's latest processing time with its first batch).</p>")
    inputs = [("rows", t.rows_latest)]
    if t.marks_latest is not None or w.inputs and "marks" in w.inputs:
        inputs.append(("marks (WATERMARK FROM)", t.marks_latest or "nothing yet"))
    held = set((w.held_by or "").split(" and "))
    body = "".join(
        f"<tr><td>{escape(n)}</td><td>{_t(v)}</td><td>"
        + ("<b>holds the frontier</b>: the query waits for it" if n.split(" ")[0] in held
           else "ahead") + "</td></tr>" for n, v in inputs)
    return ('<table class="inputs"><tr><th>input</th><th>latest processing time</th>'
            f"<th>frontier {_t(t.frontier)}</th></tr>{body}</table>")


def charts_fragment(w: Watched) -> str:
    small = (("input rows per batch", _series(w, "input_rows"), "#1f5fbf"),
             ("late rows dropped per batch", _series(w, "late_dropped"), "#d62728"),
             ("panes per batch", _series(w, "panes"), "#5bb85b"),
             ("retractions per batch", _series(w, "retractions"), "#d62728"),
             ("elements in state", _series(w, "state_elements"), "#555555"),
             ("batch duration (ms)", _series(w, "duration_ms"), "#555555"))
    cells = "".join(f'<div class="chart"><div class="label">{escape(label)}</div>'
                    f"{spark_line(values, label, 200, 40, colour)}</div>"
                    for label, values, colour in small)
    return (f'<div class="clockbox">{clock_chart(w.series)}</div>'
            f'<div class="charts">{cells}</div>')


def timeline_fragment(w: Windows | None, series: list[dict], name: str) -> str:
    if w is None:
        return ('<p class="none">This query writes a directory or a database table: the '
                'console draws the windows of an INTO TABLE query, which it reads in '
                'memory. EXPLAIN FIRINGS FOR STREAMING QUERY explains any of them.</p>')
    svg, note = timeline(w, series, name)
    live = f"<p class='help'>{w.live:,} live windows. {escape(note)} Click a pane " \
           "to see that window's firings: what it emitted and what it waits for.</p>"
    return live + svg


def windows_fragment(w: Windows | None, name: str) -> str:
    """The latest live windows as text (what the picture shows, for a page without
    script or a reader who wants the numbers)."""
    if w is None or w.current is None or not len(w.current):
        return ""
    cur = w.current.sort_values("emit_time", ascending=False).head(LISTED)
    cols = [*w.keys, *PANE_COLUMNS[:4], "emit_time", *([w.value] if w.value else [])]
    head = "".join(f"<th>{escape(c)}</th>" for c in cols) + "<th></th>"
    body = []
    for row in cur[cols].astype(str).itertuples(index=False, name=None):
        at = dict(zip(cols, row, strict=True))
        href = window_href(name, at["window_start"], at["window_end"],
                           {k: at[k] for k in w.keys})
        body.append("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row)
                    + f'<td><a href="{escape(href)}">firings</a></td></tr>')
    return (f"<details><summary>The {len(cur)} live windows that fired last, as text"
            f"</summary><table class='windows'><tr>{head}</tr>{''.join(body)}</table>"
            "</details>")


def now_parts(w: Watched) -> dict[str, str]:
    """The query page's parts that change without a batch (its status, its rate), by the
    id of the element each fills: cheap, sent with every poll."""
    return {"summary": summary_fragment(w), "inputs": inputs_fragment(w),
            "charts": charts_fragment(w)}


def drawn_parts(w: Watched, windows: Windows | None) -> dict[str, str]:
    """The parts drawn from its windows: they change only when a batch commits."""
    return {"timeline": timeline_fragment(windows, w.series, w.name),
            "windows": windows_fragment(windows, w.name)}


def query_page(user: str, w: Watched, drawn: dict[str, str]) -> str:
    parts = {**now_parts(w), **drawn}
    body = (f"<h1>Continuous query <code>{escape(w.name)}</code></h1>"
            "<section class='top'><div><h2>Now</h2>"
            f"<div id='summary' data-part='summary'>{parts['summary']}</div></div>"
            "<div><h2>Inputs: who holds the clock</h2>"
            f"<div id='inputs' data-part='inputs'>{parts['inputs']}</div>"
            "<h2>Watermark and frontier over time</h2>"
            f"<div id='charts' data-part='charts'>{parts['charts']}</div></div></section>"
            "<h2>Pane timeline of the live windows</h2>"
            f"<div id='timeline' data-part='timeline'>{parts['timeline']}</div>"
            "<h2>Window firings</h2><div id='firings'><p class='none'>Click a pane in the "
            "timeline: its window's EXPLAIN FIRINGS rows appear here.</p></div>"
            f"<div id='windows' data-part='windows'>{parts['windows']}</div>")
    return page(w.name, user, body, f"/api/query/{quote(w.name)}", w.last_batch)


def firings_fragment(name: str, start: str, end: str, key: dict[str, str],
                     columns: list[str], rows: list[tuple]) -> str:
    """One window's EXPLAIN FIRINGS FOR STREAMING QUERY rows."""
    what = ", ".join(f"{k}={v}" for k, v in key.items())
    title = (f"<h3>{escape(what + ' ' if what else '')}window [{escape(start)}, "
             f"{escape(end)})</h3>")
    if not rows:
        return title + ('<p class="none">This window is no longer live (its state was let '
                        'go, or a session merged it into another): the timeline shows the '
                        'live ones.</p>')
    shown = [c for c in columns if c not in key and c not in ("window_start", "window_end")]
    at = [columns.index(c) for c in shown]
    head = "".join(f"<th>{escape(c)}</th>" for c in shown)
    body = "".join("<tr class='ev-" + escape(str(r[columns.index("event")]).lower()) + "'>"
                   + "".join(f"<td>{_t(r[i])}</td>" for i in at) + "</tr>" for r in rows)
    return (title + f"<p class='help'>EXPLAIN FIRINGS FOR STREAMING QUERY {escape(name)}: "
            "the last pane it emitted (FIRE) and, if it is still to fire, what it waits for "
            f"(WAITING).</p><table class='firings'><tr>{head}</tr>{body}</table>")


def message_page(user: str, title: str, text: str) -> str:
    return page(title, user, f"<h1>{escape(title)}</h1><p>{escape(text)}</p>"
                '<p><a href="/">the running queries</a></p>')
