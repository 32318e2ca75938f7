"""``\\plot``: a windowed result drawn the way the Dataflow paper draws its figures.

Event time runs across, processing time up. Each pane is a rectangle over its window
``[window_start, window_end)``, from the previous pane of that window (or the window's
first element) up to the pane's ``emit_time``, coloured by timing (EARLY, ON_TIME, LATE)
and labelled with its value at the top; a retraction is a dashed red line across its
window at the instant it was emitted, labelled ``-value``. Where the query replays a table (PROCESSING TIME), the input elements are
dots at (event time, arrival time) labelled with the value they carry, and the watermark
is a line: at each processing time, the event time the watermark has reached. A result
with several keys gets one panel per key, and one with several aggregates one panel per
aggregate and key (at most :data:`MAX_PANELS`), each with the input and the watermark.
The figure's title is the whole query, wrapped; an axis whose times span several days
shows dates.

An EXPLAIN FIRINGS result is drawn as the same picture for one key (the first that
fired): its FIRE and RETRACT events are the panes and retractions, each pane annotated
with the trigger leaf that fired it, and each MERGE marked where it happened.
"""

from __future__ import annotations

import datetime as dt
import decimal
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dfsql.errors import DfsqlError
from dfsql.language.names import PANE_COLUMNS
from dfsql.shell.plot_firings import firings_as_panes, is_firings
from dfsql.shell.plot_input import Input, read_input
from dfsql.shell.plot_time import mid, num, time_axis
from dfsql.shell.tradeoff import TradeoffSummary, is_tradeoff, plot_tradeoff

MAX_PANELS = 6
DPI = 110  # the figure's, so what is measured on screen is what is saved
COLOURS = {"EARLY": "#f2c14e", "ON_TIME": "#5bb85b", "LATE": "#9b6fd6"}


@dataclass
class PlotSummary:
    """What was drawn (so a caller or a test can say what the picture shows)."""

    path: str
    value_column: str
    panels: list[str] = field(default_factory=list)
    #: (panel, window_start, window_end, value label, timing) per pane, in emit order
    panes: list[tuple[str, Any, Any, str, str]] = field(default_factory=list)
    #: (panel, window_start, value label) per retraction
    retractions: list[tuple[str, Any, str]] = field(default_factory=list)
    elements: int = 0  # the input elements read (of every panel's key)
    watermark_points: int = 0
    #: what the picture leaves out, and why
    notes: list[str] = field(default_factory=list)
    #: the matplotlib Figure drawn (closed: saved, not shown), its axes one per panel
    figure: Any = None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | decimal.Decimal) and not isinstance(v, bool)


def _label(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "NULL" if v is None else str(v)


@dataclass
class _Layout:
    """Where a result's columns are and the ranges its panels share."""

    at: dict[str, int]  # column -> its index in a row
    value_col: str  # the first aggregate
    values: list[str]  # every aggregate, one panel each
    keys: list[str]  # the key columns, one panel per combination
    retract: int | None  # the index of is_retraction, if any
    batch: bool  # no emit times: a batch result, drawn without processing time
    times: list[Any]  # every event time shown (window bounds, input elements)
    x_lo: Any
    x_hi: Any
    y_lo: Any
    y_hi: Any
    input: Input | None  # the replayed input of the keys shown, and the watermark

    def key_of(self, r: Sequence[Any]) -> str:
        """The name of the panel of a row's key."""
        return ", ".join(f"{k}={_label(r[self.at[k]])}" for k in self.keys) or "all"

    def elements_of(self, r: Sequence[Any]) -> list[tuple[Any, Any, Any, tuple]]:
        """The input elements of a row's key."""
        if self.input is None:
            return []
        return self.input.of(tuple(r[self.at[k]] for k in self.input.key_columns))


def plot_result(columns: Sequence[str], rows: Sequence[Sequence[Any]], path: str,
                title: str = "", plan=None) -> PlotSummary | TradeoffSummary:
    """Draw ``rows`` (a windowed result with LANGUAGE.md §7's columns) into ``path``.
    ``plan`` (the result's BlockPlan, when known) adds input elements and the watermark.
    An EXPLAIN WATERMARK result is drawn as its trade-off instead (:mod:`.tradeoff`).
    A result that cannot be drawn, or a file that cannot be written, raises a
    DfsqlError: the shell and the notebook show its message, not a traceback."""
    if is_tradeoff(columns):
        return plot_tradeoff(columns, rows, path, title)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    notes: list[tuple[Any, Any, Any, str]] = []
    if is_firings(columns):
        columns, rows, notes, key = firings_as_panes(columns, rows, _label)
        title = f"{key}: {title}" if key else title
    cols = list(columns)
    rows = [tuple(_plain(v) for v in r) for r in rows]
    _check(cols, rows)
    lay, keyed = _layout(cols, rows, plan)
    try:
        fig, summary = _figure(path, rows, lay, keyed, title, notes)
    except (ValueError, TypeError, OverflowError) as exc:  # matplotlib's refusals
        raise DfsqlError(f"\\plot cannot draw this result: {exc}",
                         hint="\\plot draws the rows of a windowed query as it returns "
                              "them") from exc
    try:
        fig.savefig(path)
    except OSError as exc:
        raise DfsqlError(f"\\plot cannot write {path}: {exc.strerror or exc}",
                         hint="name a PNG file in a directory you can write") from None
    finally:
        plt.close(fig)
    summary.figure = fig
    return summary


def _plain(v: Any) -> Any:
    """A value as Spark's collect() gives it: the notebook's rows come through pandas,
    where a NULL time is NaT (a datetime whose arithmetic gives NaN axis limits), a
    NULL number NaN, a time a pandas Timestamp and an integer a numpy one."""
    if isinstance(v, float | decimal.Decimal | dt.datetime) and v != v:
        return None  # NaN, NaT
    if isinstance(v, dt.datetime) and hasattr(v, "to_pydatetime"):
        return v.to_pydatetime()
    if type(v).__module__ == "numpy" and hasattr(v, "item"):
        return v.item()
    return v


def _check(cols: list[str], rows: list[tuple]) -> None:
    """Refuse, with what is wrong, a result \\plot cannot draw."""
    missing = [c for c in ("window_start", "window_end", "pane_timing", "emit_time")
               if c not in cols]
    if missing:
        raise DfsqlError(f"\\plot draws a windowed result; the last result has no "
                         f"{', '.join(missing)}", hint="run a query with WINDOW first")
    if not rows:
        raise DfsqlError("\\plot: the last windowed result has no rows")
    if all(c in PANE_COLUMNS for c in cols):
        raise DfsqlError("\\plot: the result has only window and pane columns, no value to "
                         "label its panes with", hint="select an aggregate too")
    for c in ("window_start", "window_end", "emit_time"):
        odd = {type(v).__name__ for v in (r[cols.index(c)] for r in rows)
               if v is not None and not isinstance(v, dt.datetime)}
        if odd:
            raise DfsqlError(f"\\plot: {c} holds {', '.join(sorted(odd))}, not times",
                             hint="plot a windowed result as its query returns it")
    emits = {r[cols.index("emit_time")] is None for r in rows}
    if len(emits) > 1:
        raise DfsqlError("\\plot: some panes have an emit_time and some have none",
                         hint="a windowed result has emit times on every pane (PROCESSING "
                              "TIME) or on none (a batch query)")


def _figure(path: str, rows: list[tuple], lay: _Layout, keyed: list[str], title: str,
            notes: list) -> tuple[Any, PlotSummary]:
    """The figure: one panel per key and aggregate, its legend, its title; unsaved."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    # one panel per key and aggregate: (its name, its key's panel, its aggregate)
    panels = [(k if len(lay.values) == 1 else v if k == "all" else f"{k}: {v}", k, v)
              for k in keyed for v in lay.values][:MAX_PANELS]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 4.2 * len(panels)), dpi=DPI,
                             squeeze=False)
    summary = PlotSummary(path, lay.value_col, [p[0] for p in panels])
    retraction_labels: list[tuple[Any, list, list]] = []
    for ax, (name, key, value) in zip(axes[:, 0], panels, strict=True):
        marks, texts = _draw_panel(ax, name, [r for r in rows if lay.key_of(r) == key],
                                   lay, summary, value)
        retraction_labels.append((ax, marks, texts))
        if len(panels) > 1 or lay.keys:
            ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.25)
    handles = [Patch(facecolor=c, alpha=0.45, edgecolor="black", label=t)
               for t, c in COLOURS.items()]
    if lay.input is not None:
        summary.elements = len(lay.input.elements)
        summary.notes += [f"input elements not drawn: the key column {k} is not itself a "
                          "GROUP BY key, so which panel each element belongs to is unknown"
                          for k in lay.input.unmatched]
    if lay.input is not None and lay.input.watermark is not None:
        summary.watermark_points = len(lay.input.watermark[0])
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="#1f5fbf", label="watermark"))
    axes[0, 0].legend(handles=handles, loc="upper left", fontsize=8)
    title = " ".join(title.lstrip("-").split())
    if title:
        lines = textwrap.wrap(title, 130)
        fig.suptitle("\n".join(lines), fontsize=9)
        # tight_layout leaves the suptitle out: keep its lines' height free at the top
        fig.tight_layout(rect=(0, 0, 1, 1 - (0.16 * len(lines) + 0.1) / (4.2 * len(panels))))
    else:
        fig.tight_layout()
    _place_retraction_labels(fig, retraction_labels)
    _annotate(axes[0, 0], notes, lay)
    return fig, summary


def _layout(cols: list[str], rows: Sequence[Sequence[Any]], plan) -> tuple[_Layout, list[str]]:
    """The value and key columns, the panels (one per key), the replayed input of their
    keys and the watermark (of a replay), and the axes' ranges."""
    at = {c: cols.index(c) for c in cols}
    values = [c for c in cols if c not in PANE_COLUMNS
              and any(_is_number(r[at[c]]) for r in rows)]
    value_col = values[0] if values else next(c for c in cols if c not in PANE_COLUMNS)
    keys = [c for c in cols[: at[value_col]] if c not in PANE_COLUMNS]
    batch = all(r[at["emit_time"]] is None for r in rows)
    lay = _Layout(at, value_col, values or [value_col], keys, at.get("is_retraction"),
                  batch, [], None, None, None, None, None)
    firsts: dict[str, Sequence[Any]] = {}  # each panel's first row
    for r in rows:
        firsts.setdefault(lay.key_of(r), r)
    panels = list(firsts)[:MAX_PANELS]
    if plan is not None and not batch:
        lay.input = read_input(plan, keys, [tuple(firsts[p][at[k]] for k in keys)
                                            for p in panels])

    times = [r[at[c]] for r in rows for c in ("window_start", "window_end")
             if r[at[c]] is not None]
    emits = [r[at["emit_time"]] for r in rows if r[at["emit_time"]] is not None]
    if lay.input is not None:
        times += [el[0] for el in lay.input.elements]
        emits += [el[1] for el in lay.input.elements]
    lay.times = times
    # a GLOBAL window with no event times to show spans an axis without dates
    lay.x_lo, lay.x_hi = (min(times), max(times)) if times else (0.0, 1.0)
    if batch:
        lay.y_lo, lay.y_hi = 0.0, 1.0
    else:
        y_lo, y_hi = min(emits), max(emits)
        pad = max((y_hi - y_lo) * 0.05, dt.timedelta(seconds=1))
        lay.y_lo, lay.y_hi = y_lo - pad, y_hi + pad
    return lay, panels


def _draw_panel(ax, panel: str, mine: list, lay: _Layout, summary: PlotSummary,
                value: str) -> tuple[list[tuple[float, float, float, str]], list]:
    """One key's panes, retractions, input elements and watermark on ``ax``, and its
    axes; returns the retractions' marks and the panes' value labels (for placing the
    retraction labels once the figure is laid out)."""
    from matplotlib.patches import Rectangle

    at, x_lo, x_hi, y_lo, batch = lay.at, lay.x_lo, lay.x_hi, lay.y_lo, lay.batch
    elements = lay.elements_of(mine[0])
    first_arrival: dict[Any, Any] = {}
    for e, p, _, _ in elements:
        for r in mine:
            ws, we = r[at["window_start"]], r[at["window_end"]]
            if (ws is None or ws <= e) and (we is None or e < we):
                key = (ws, we)
                first_arrival[key] = min(first_arrival.get(key, p), p)
    drawn: list[tuple[Any, Any, Any]] = []  # (window_start, window_end, emit_time)
    texts: list[Any] = []  # the panes' value labels
    marks: list[tuple[float, float, float, str]] = []  # retractions: x0, x1, y, label
    for r in mine:
        ws, we = r[at["window_start"]], r[at["window_end"]]
        x0 = ws if ws is not None else x_lo
        x1 = we if we is not None else x_hi
        label = _label(r[at[value]])
        y1 = r[at["emit_time"]]
        if lay.retract is not None and r[lay.retract]:
            # a dashed red line across the retracted window, at the retraction's time
            ax.plot([num(x0), num(x1)], [num(y1), num(y1)], color="red",
                    linestyle="--", linewidth=1.2)
            marks.append((num(x0), num(x1), num(y1), f"-{label}"))
            summary.retractions.append((panel, ws, label))
            continue
        if batch:
            y0, y1 = 0.05, 0.95
        else:
            # on top of every earlier pane this window covers (its own earlier panes,
            # and those of the windows a merged session absorbed), else from its
            # first element's arrival
            below = [e for s0, s1, e in drawn if _within(s0, s1, ws, we)]
            y0 = max(below) if below else first_arrival.get((ws, we), y_lo)
            drawn.append((ws, we, y1))
        timing = r[at["pane_timing"]]
        x0n, x1n = num(x0), num(x1)
        y0n, y1n = (y0, y1) if batch else (num(y0), num(y1))
        ax.add_patch(Rectangle((x0n, y0n), x1n - x0n, y1n - y0n, alpha=0.45,
                               facecolor=COLOURS.get(timing, "#999999"),
                               edgecolor="black", linewidth=0.8))
        texts.append(ax.annotate(label, (mid(x0, x1), y1), ha="center", va="bottom",
                                 fontsize=10, fontweight="bold", xytext=(0, 2),
                                 textcoords="offset points"))
        summary.panes.append((panel, ws, we, label, timing))
    if elements:
        ax.scatter([num(el[0]) for el in elements], [num(el[1]) for el in elements], s=14,
                   color="black", zorder=3)
        for e, p, v, _ in elements:
            if v is not None:
                ax.annotate(_label(v), (num(e), num(p)), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
    if lay.input is not None and lay.input.watermark is not None:
        wx, wy = lay.input.watermark  # the same line in every panel: it is global
        ax.plot(wx, wy, color="#1f5fbf", linewidth=1.6, label="watermark")
    _set_axes(ax, lay)
    return marks, texts


def _set_axes(ax, lay: _Layout) -> None:
    """Event time across (dates, or none for a GLOBAL window), processing time up (or
    nothing for a batch result)."""

    pad = (num(lay.x_hi) - num(lay.x_lo)) * 0.03 or 1.0
    ax.set_xlim(num(lay.x_lo) - pad, num(lay.x_hi) + pad)
    if lay.times:
        time_axis(ax.xaxis, lay.x_lo, lay.x_hi)
        ax.set_xlabel("event time")
    else:
        ax.set_xticks([])
        ax.set_xlabel("event time (the global window)")
    if lay.batch:
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.set_ylabel("batch (no processing time)")
    else:
        ax.set_ylim(num(lay.y_lo), num(lay.y_hi))
        time_axis(ax.yaxis, lay.y_lo, lay.y_hi)
        ax.set_ylabel("processing time")


def _place_retraction_labels(fig, per_axis: list[tuple[Any, list, list]]) -> None:
    """Each retraction's ``-value`` at one end of its dashed line, above or below it,
    wherever it overlaps no pane label or earlier retraction label (retractions of
    merged sessions share instants and window starts, so one fixed place collides)."""
    renderer = fig.canvas.get_renderer()
    for ax, marks, texts in per_axis:
        boxes = [t.get_window_extent(renderer) for t in texts]
        for x0, x1, y, label in marks:
            places = [(x0, "left", 1, "bottom"), (x1, "right", 1, "bottom"),
                      (x0, "left", -1, "top"), (x1, "right", -1, "top")]
            for i, (x, ha, dy, va) in enumerate(places):
                text = ax.annotate(label, (x, y), color="red", ha=ha, va=va, fontsize=9,
                                   fontweight="bold", textcoords="offset points",
                                   xytext=(2 if ha == "left" else -2, dy))
                box = text.get_window_extent(renderer)
                if i == len(places) - 1 or not any(box.overlaps(b) for b in boxes):
                    break
                text.remove()
            boxes.append(box)


def _within(s0: Any, s1: Any, ws: Any, we: Any) -> bool:
    """Whether window [s0, s1) lies inside [ws, we) (None: unbounded, GLOBAL)."""
    return (ws is None or (s0 is not None and ws <= s0)) and \
        (we is None or (s1 is not None and s1 <= we))


def _annotate(ax, notes: list[tuple[Any, Any, Any, str]], lay: _Layout) -> None:
    """The firing leaf under each pane's top and each merge where it happened."""
    for ws, we, t, text in notes:
        x0 = ws if ws is not None else lay.x_lo
        x1 = we if we is not None else lay.x_hi
        merge = text.startswith("MERGE")
        ax.annotate(text, (num(mid(x0, x1)) if not merge else num(x0), num(t)),
                    fontsize=6, color="#7a1f1f" if merge else "#333333",
                    ha="left" if merge else "center", va="top", xytext=(2, -3),
                    textcoords="offset points")
        if merge:
            ax.plot([num(x0)], [num(t)], marker="D", color="#7a1f1f", markersize=4)
