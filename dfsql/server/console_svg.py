"""The console's pictures, drawn by the server as SVG (no script and no network needed to
see them): small charts over a query's latest batches, and its pane timeline as the
shell's ``\\plot`` draws it (docs/guides/shell.md): event time across, processing time
up, each pane a rectangle over its window from the window's previous pane up to its
``emit_time``, coloured by its timing, its value on top; a retraction a dashed red line
across its window at the instant it was emitted; the watermark a blue line (at each
processing time, the event time it has reached).

What is drawn is capped, so that a query with many live windows still draws quickly and
small: the MAX_PANELS keys that fired last, each with its PER_PANEL latest windows; the
page says how many it leaves out."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from dfsql.model.pane_columns import PANE_COLUMNS
from dfsql.server.console_data import figure
from dfsql.spark.stream.progress_log import record_time

if TYPE_CHECKING:
    import pandas as pd

    from dfsql.server.console_data import Windows

#: the shell's \plot colours (dfsql/shell/plot.py), so both pictures read alike
COLOURS = {"EARLY": "#f2c14e", "ON_TIME": "#5bb85b", "LATE": "#9b6fd6"}
WATERMARK = "#1f5fbf"
RETRACTION = "#d62728"
#: what names one pane of a key (with the key): its window and its index
PANE_IDENTITY = PANE_COLUMNS[:3]
MAX_PANELS, PER_PANEL, HISTORY = 6, 60, 400


def _f(x: float) -> str:
    return f"{x:.1f}"


def spark_line(values: Sequence[float | None], title: str, width: int = 110,
               height: int = 30, colour: str = "#1f5fbf", unit: str = "") -> str:
    """A small line over ``values`` (one per batch, oldest first; None: not known), with
    its latest value in the tooltip."""
    known = [v for v in values if v is not None]
    head = (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} '
            f'{height}" role="img"><title>{escape(title)}</title>')
    if not known:
        return head + f'<text x="4" y="{height - 12}" class="none">no batch yet</text></svg>'
    lo, hi = min(known), max(known)
    span = (hi - lo) or 1.0
    last = known[-1]
    text = (f"{last:,.0f}" if abs(last) >= 10 or last == int(last) else f"{last:,.2f}") + unit
    head = head.replace(f'width="{width}" height', f'width="{width + 56}" height').replace(
        f'viewBox="0 0 {width} ', f'viewBox="0 0 {width + 56} ')
    head += (f'<text class="last" x="{width + 4}" y="{height / 2 + 4}">{escape(text)}</text>'
             f'<rect class="sparkbox" x="0.5" y="0.5" width="{width - 1}" '
             f'height="{height - 1}"/>')
    step = (width - 4) / max(1, len(values) - 1)
    pts = [f"{_f(2 + i * step)},{_f(height - 3 - (v - lo) / span * (height - 6))}"
           for i, v in enumerate(values) if v is not None]
    line = f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(pts)}"/>'
    if len(pts) == 1:  # one batch so far: its value, at the right (the latest)
        line = f'<circle cx="{width - 5}" cy="{height / 2}" r="2.5" fill="{colour}"/>'
    return head + line + "</svg>"


def _num(values: Any) -> Any:
    """Instants (datetimes, NaT or None for none) as seconds since the epoch (NaN)."""
    import numpy as np

    arr = np.asarray(values, dtype="datetime64[us]")
    out = arr.astype("int64") / 1e6
    out[np.isnat(arr)] = np.nan
    return out


#: round steps between ticks: of time (seconds), and of batch ids
TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
              43200, 86400, 172800, 604800)
BATCH_STEPS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


def _ticks(lo: float, hi: float, steps: Sequence[int], most: int = 5) -> list[float]:
    """Round instants (or batch ids) between lo and hi, at most ``most`` of them."""
    step = next((st for st in steps if (hi - lo) / st <= most), steps[-1])
    first = -(-lo // step) * step
    return [first + i * step for i in range(most + 1) if first + i * step <= hi]


def _tick(t: float, span: float) -> str:
    d = dt.datetime.fromtimestamp(t, dt.timezone.utc).replace(tzinfo=None)
    return d.strftime("%m-%d %H:%M" if span > 86400 else "%H:%M:%S")


class _Axes:
    """One panel's box and its two time scales (seconds since the epoch)."""

    def __init__(self, x0: float, y0: float, w: float, h: float,
                 xs: tuple[float, float], ys: tuple[float, float], x_time: bool = True,
                 ) -> None:
        self.x0, self.y0, self.w, self.h = x0, y0, w, h
        self.x_time = x_time  # else batch ids across
        self.data_xs = xs
        pad_x = max((xs[1] - xs[0]) * 0.02, 1.0)
        pad_y = max((ys[1] - ys[0]) * 0.08, 1.0)
        self.xs = (xs[0] - pad_x, xs[1] + pad_x)
        # below: room for a window's first pane (it rises from the bottom); above: for the
        # top panes' values
        self.ys = (ys[0] - 2.5 * pad_y, ys[1] + 2 * pad_y)

    def x(self, t: float) -> float:
        lo, hi = self.xs
        return self.x0 + (min(max(t, lo), hi) - lo) / (hi - lo) * self.w

    def y(self, t: float) -> float:
        lo, hi = self.ys
        return self.y0 + self.h - (min(max(t, lo), hi) - lo) / (hi - lo) * self.h

    def frame(self, title: str) -> list[str]:
        out = [f'<rect class="panel" x="{_f(self.x0)}" y="{_f(self.y0)}" width="{_f(self.w)}"'
               f' height="{_f(self.h)}"/>',
               f'<text class="ptitle" x="{_f(self.x0)}" y="{_f(self.y0 - 6)}">'
               f'{escape(title)}</text>']
        for axis in ("x", "y"):
            lo, hi = self.xs if axis == "x" else self.ys
            batches = axis == "x" and not self.x_time
            if batches:
                lo, hi = self.data_xs
            for t in _ticks(lo, hi, BATCH_STEPS if batches else TIME_STEPS):
                if axis == "x":
                    px = self.x(t)
                    text = f"batch {round(t)}" if batches else _tick(t, hi - lo)
                    out.append(f'<text class="tick" x="{_f(px)}" y="{_f(self.y0 + self.h + 13)}"'
                               f' text-anchor="middle">{text}</text>')
                else:
                    py = self.y(t)
                    out.append(f'<text class="tick" x="{_f(self.x0 - 4)}" y="{_f(py + 3)}" '
                               f'text-anchor="end">{_tick(t, hi - lo)}</text>')
        return out


def clock_chart(series: list[dict], width: int = 470, height: int = 180) -> str:
    """The watermark (blue) and the frontier (grey: the query's clock) over its latest
    batches; the gap between them is how far the watermark lags."""
    pts = [(r["batch_id"], progress_seconds(r, "watermark"), progress_seconds(r, "frontier"))
           for r in series]
    known = [v for _, a, b in pts for v in (a, b) if v is not None]
    if not known:
        return ('<p class="none">No watermark or frontier yet: dfsql&#39;s executor reports them '
                'with each batch it runs.</p>')
    ax = _Axes(64, 18, width - 76, height - 44, (pts[0][0], pts[-1][0]),
               (min(known), max(known)), x_time=False)
    out = [f'<svg class="clock" width="{width}" height="{height}" viewBox="0 0 {width} '
           f'{height}" role="img" aria-label="watermark and frontier over time">',
           *ax.frame("event time reached, per batch")]
    for i, (cls, label) in enumerate((("watermark", "watermark"), ("frontier", "frontier"))):
        line = " ".join(f"{_f(ax.x(b))},{_f(ax.y(p[i + 1]))}" for p in pts
                        if (b := p[0]) is not None and p[i + 1] is not None)
        if line:
            out.append(f'<polyline class="{cls}" points="{line}"/>')
        if len(pts) <= 30:  # few batches: each one a dot
            out += [f'<circle class="{cls}" cx="{_f(ax.x(p[0]))}" cy="{_f(ax.y(p[i + 1]))}" '
                    'r="2.5"/>' for p in pts if p[i + 1] is not None]
        out.append(f'<line class="{cls}" x1="{width - 190 + i * 95}" x2="{width - 172 + i * 95}"'
                   f' y1="10" y2="10"/><text class="legend" x="{width - 168 + i * 95}" y="14">'
                   f'{label}</text>')
    out.append("</svg>")
    return "".join(out)


def timeline(w: Windows, series: list[dict], name: str, width: int = 940) -> tuple[str, str]:
    """The pane timeline of query ``name``'s live windows, and a line saying what it
    leaves out ('' when nothing)."""
    if w.current is None or not len(w.current):
        return ('<p class="none">No live window yet: the timeline appears once a window '
                'has fired a pane.</p>', "")
    cur, recent = _timed(w.current), None if w.recent is None else _timed(w.recent)
    keys = w.keys
    if keys:
        last = cur.groupby(keys, dropna=False, sort=False)["emit_time"].max()
        chosen = last.sort_values(ascending=False).head(MAX_PANELS).index.tolist()
        chosen = [k if isinstance(k, tuple) else (k,) for k in chosen]
    else:
        chosen = [()]
    cols = 1 if len(chosen) == 1 else 2
    pw = (width - 80 - (cols - 1) * 70) / cols
    ph = 300.0 if cols == 1 else 210.0
    rows_n = (len(chosen) + cols - 1) // cols
    height = int(rows_n * (ph + 58) + 44)
    out = [f'<svg class="timeline" width="{width}" height="{height}" viewBox="0 0 {width} '
           f'{height}" role="img" aria-label="pane timeline of {escape(name)}">']
    drawn = 0
    for i, key in enumerate(chosen):
        mine, hist = _of_key(cur, recent, keys, key)
        mine = mine.sort_values("window_end").tail(PER_PANEL)
        drawn += len(mine)
        title = ", ".join(f"{k}={v}" for k, v in zip(keys, key, strict=True)) or "all rows"
        x0 = 70 + (i % cols) * (pw + 70)
        y0 = 26 + (i // cols) * (ph + 58)
        out += _panel(mine, hist, w, series, name, title, key, x0, y0, pw, ph)
    out += _legend(height - 14)
    out.append("</svg>")
    live_keys = len(cur.groupby(keys, dropna=False, sort=False)) if keys else 1
    note = ""
    if drawn < len(cur):
        note = (f"Drawn: {drawn} of {len(cur):,} live windows (the {PER_PANEL} latest of each "
                f"of the {len(chosen)} keys that fired last, of {live_keys:,} keys).")
    return "".join(out), note


def _timed(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its instants also as seconds since the epoch (``__ws``, ``__we``,
    ``__em``; NaN for none), once for every panel."""
    return frame.assign(__ws=_num(frame["window_start"]), __we=_num(frame["window_end"]),
                        __em=_num(frame["emit_time"]))


def _of_key(cur: pd.DataFrame, recent: pd.DataFrame | None, keys: list[str],
            key: tuple) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The current rows and the recent panes and retractions of one key."""
    import pandas as pd

    def pick(frame: pd.DataFrame) -> pd.DataFrame:
        mask = pd.Series(True, index=frame.index)
        for k, v in zip(keys, key, strict=True):
            mask &= frame[k].isna() if pd.isna(v) else frame[k] == v
        return frame[mask]

    hist = None if recent is None else pick(recent).tail(HISTORY)
    return pick(cur), hist


def _panel(mine: pd.DataFrame, hist: pd.DataFrame | None, w: Windows, series: list[dict],
           name: str, title: str, key: tuple, x0: float, y0: float, pw: float,
           ph: float) -> list[str]:
    """One key's panes (its live windows' current rows, and the panes and retractions
    of the latest batches over the same windows), in emit order, and the watermark."""
    import numpy as np
    import pandas as pd

    lo_x = float(np.nanmin(mine["__ws"].to_numpy()))
    if hist is not None and len(hist):
        hist = hist[hist["__we"].to_numpy() > lo_x]
        seen = hist[~hist["is_retraction"]][list(PANE_IDENTITY)]
        fresh = mine.merge(seen.assign(__seen=True), how="left", on=list(PANE_IDENTITY))
        rows = pd.concat([hist, mine[fresh["__seen"].isna().to_numpy()]
                          .assign(is_retraction=False)], ignore_index=True)
    else:
        rows = mine.assign(is_retraction=False)
    rows = rows.sort_values("emit_time", kind="stable")
    ws, we, em = (rows[c].to_numpy() for c in ("__ws", "__we", "__em"))
    wm = [(progress_seconds(r, "watermark"), progress_seconds(r, "frontier")) for r in series]
    wm = [(a, b) for a, b in wm if a is not None and b is not None]
    xs = (float(np.nanmin(ws)), float(np.nanmax(we)))
    ys = (float(np.nanmin(em)), float(np.nanmax(em)))
    # the panes decide the scales; the watermark is drawn where it falls within them
    # (a query's clock may stand an hour past its last pane: the picture stays on the panes)
    now = wm[-1][0] if wm else None
    if now is not None and xs[0] - (xs[1] - xs[0]) <= now <= xs[1] + (xs[1] - xs[0]):
        xs = (min(xs[0], now), max(xs[1], now))
    else:
        now = None
    ax = _Axes(x0, y0, pw, ph, xs, ys)
    out = ax.frame(title)
    out.append(f'<text class="axis" x="{_f(x0 + pw)}" y="{_f(y0 + ph + 26)}" '
               'text-anchor="end">event time →</text>'
               f'<text class="axis" x="{_f(x0 - 6)}" y="{_f(y0 - 6)}" text-anchor="end">'
               'emitted ↑</text>')
    below: list[tuple[float, float, float]] = []  # (start, end, emit) of the panes drawn
    live = set(zip(mine["__ws"].tolist(), mine["__we"].tolist(),
                   strict=True))
    values = rows[w.value].tolist() if w.value else [""] * len(rows)
    for s, e, t, v, retract, timing, index in zip(
            ws.tolist(), we.tolist(), em.tolist(), values, rows["is_retraction"].tolist(),
            rows["pane_timing"].tolist(), rows["pane_index"].tolist(), strict=True):
        s = ax.xs[0] if s != s else s
        e = ax.xs[1] if e != e else e
        label = _label(v)
        if retract:
            y = ax.y(t)
            tip = f"{title}: retraction of {label} from window [{_iso(s)}, {_iso(e)}) at {_iso(t)}"
            out.append(f'<g class="retracted"><line class="retraction" x1="{_f(ax.x(s))}" '
                       f'x2="{_f(ax.x(e))}" y1="{_f(y)}" y2="{_f(y)}"/><text class="rlabel" '
                       f'x="{_f(ax.x(e) + 2)}" y="{_f(y + 4)}">-{escape(label)}</text>'
                       f'<title>{escape(tip)}</title></g>')
            continue
        under = [em0 for s0, e0, em0 in below if s <= s0 and e0 <= e and em0 <= t]
        y_from = max(under) if under else ax.ys[0]
        below.append((s, e, t))
        out.append(_pane(ax, name, title, key, w.keys, s, e, y_from, t, label, timing, index,
                         (s, e) in live))
    inside = [(a, b) for a, b in wm if ax.ys[0] <= b <= ax.ys[1] and ax.xs[0] <= a <= ax.xs[1]]
    if len(inside) > 1:
        pts = " ".join(f"{_f(ax.x(a))},{_f(ax.y(b))}" for a, b in inside)
        out.append(f'<polyline class="watermark" points="{pts}"><title>the watermark at each '
                   'batch: the event time it had reached (across) when the query stood at '
                   'that processing time (up)</title></polyline>')
    if now is not None:
        x = _f(ax.x(now))
        out.append(f'<g><line class="watermark now" x1="{x}" x2="{x}" y1="{_f(ax.y0)}" '
                   f'y2="{_f(ax.y0 + ax.h)}"/><text class="wlabel" x="{x}" '
                   f'y="{_f(ax.y0 + 11)}" text-anchor="end">watermark now {_hm(now)}&#160;'
                   '</text><title>the watermark now: windows ending left of it have had '
                   'their on-time pane</title></g>')
    return out


def _pane(ax: _Axes, name: str, title: str, key: tuple, keys: list[str], s: float, e: float,
          y_from: float, t: float, label: str, timing: str, index: Any,
          live: bool) -> str:
    """A pane's rectangle and value; a live window's is a link to its firings."""
    x1, x2, y1, y2 = ax.x(s), ax.x(e), ax.y(t), ax.y(y_from)
    start, end = (_iso(s), _iso(e))
    tip = (f"{title}: window [{start}, {end}) pane {index} {timing} = {label}, emitted "
           f"{_iso(t)}" + (" (click for what it waits for)" if live else ""))
    body = (f'<rect class="pane" x="{_f(x1)}" y="{_f(y1)}" width="{_f(max(x2 - x1, 1.5))}" '
            f'height="{_f(max(y2 - y1, 2.0))}" fill="{COLOURS.get(timing, "#999999")}"/>')
    if x2 - x1 > 7 * len(label) + 4:
        body += (f'<text class="value" x="{_f((x1 + x2) / 2)}" y="{_f(y1 - 3)}" '
                 f'text-anchor="middle">{escape(label)}</text>')
    body += f"<title>{escape(tip)}</title>"
    if not live:
        return f"<g>{body}</g>"
    key_json = json.dumps(dict(zip(keys, (str(k) for k in key), strict=True)))
    href = window_href(name, start, end, dict(zip(keys, (str(k) for k in key), strict=True)))
    return (f'<a class="window" href="{escape(href)}" data-start="{start}" data-end="{end}" '
            f'data-key="{escape(key_json)}">{body}</a>')


def window_href(name: str, start: str, end: str, key: dict[str, str]) -> str:
    """The page of one window's firings (what the picture's link opens without script)."""
    return f"/query/{quote(name)}/window?" + urlencode({"start": start, "end": end, **{
        f"key.{k}": v for k, v in key.items()}})


def _legend(y: float) -> list[str]:
    out, x = [], 70.0
    for timing, colour in COLOURS.items():
        out.append(f'<rect x="{x}" y="{y - 9}" width="14" height="10" fill="{colour}" '
                   f'class="pane"/><text class="legend" x="{x + 18}" y="{y}">{timing} pane'
                   f'</text>')
        x += 110
    out.append(f'<line class="retraction" x1="{x}" x2="{x + 22}" y1="{y - 4}" y2="{y - 4}"/>'
               f'<text class="legend" x="{x + 26}" y="{y}">retraction</text>')
    x += 110
    out.append(f'<line class="watermark" x1="{x}" x2="{x + 22}" y1="{y - 4}" y2="{y - 4}"/>'
               f'<text class="legend" x="{x + 26}" y="{y}">watermark</text>')
    out.append(f'<text class="legend" x="{x + 130}" y="{y}">across: event time · up: '
               'processing time (emit_time)</text>')
    return out


def _hm(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%H:%M:%S")


def _iso(t: float) -> str:
    d = dt.datetime.fromtimestamp(t, dt.timezone.utc).replace(tzinfo=None)
    return d.isoformat(" ")


def _label(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "NULL" if v is None else str(v)


def progress_seconds(record: dict, name: str) -> float | None:
    """One of a batch record's instants (dfsql's figure) in seconds since the epoch."""
    d = record_time(figure(record, name))
    return None if d is None else (d - dt.datetime(1970, 1, 1)).total_seconds()
