"""``\\plot``: a windowed result drawn the way the Dataflow paper draws its figures.

Event time runs across, processing time up. Each pane is a rectangle over its window
``[window_start, window_end)``, from the previous pane of that window (or the window's
first element) up to the pane's ``emit_time``, coloured by timing (EARLY, ON_TIME, LATE)
and labelled with its value at the top; a retraction is a dashed red line across its
window at the instant it was emitted, labelled ``-value``. Where the query replays a
table (PROCESSING TIME), the input elements are dots at (event time, arrival time)
labelled with the value they carry, and the watermark is a line: at each processing
time, the event time the watermark has reached. A result with several keys gets one
panel per key, and one with several aggregates one panel per aggregate and key (at most
:data:`MAX_PANELS`), each with that key's input (:mod:`.plot_input`) and the watermark,
which is global. A batch result (no emit times) draws each pane as a bar over its
window, with no processing axis. Labels never overlap: where there is no room, one is
left out (:mod:`.plot_labels`); time ticks are round instants (:mod:`.plot_time`). The
figure's title is the whole query, wrapped.

An EXPLAIN FIRINGS result is drawn as the same picture for one key (the first that
fired): its FIRE and RETRACT events are the panes and retractions, each pane annotated
with the trigger leaf that fired it, and each MERGE marked where it happened
(:mod:`.plot_firings`).
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
from dfsql.model.pane_columns import PANE_TIMES
from dfsql.shell.plot_firings import firings_as_panes, is_firings
from dfsql.shell.plot_input import Input, read_input
from dfsql.shell.plot_labels import Label, Placer, Spot, above, at_ends, beside
from dfsql.shell.plot_time import num, nums, time_axis
from dfsql.shell.plot_tradeoff import TradeoffSummary, is_tradeoff, plot_tradeoff, save

MAX_PANELS = 6
DPI = 110  # the figure's, so what is measured on screen is what is saved
COLOURS = {"EARLY": "#f2c14e", "ON_TIME": "#5bb85b", "LATE": "#9b6fd6"}
WATERMARK_COLOUR = "#1f5fbf"
#: a batch pane's bar, in a panel whose processing axis is [0, 1]: below the top, so
#: its value label fits above it
BATCH_BAR = (0.05, 0.85)


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
    #: value labels left out where they would overlap others (dense panels)
    labels_left_out: int = 0
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
    """Draw ``rows`` (a windowed result with docs/reference.md#output-columns's columns) into ``path``.
    ``plan`` (the result's BlockPlan, when known) adds input elements and the watermark.
    An EXPLAIN WATERMARK result is drawn as its trade-off instead (:mod:`.tradeoff`).
    A result that cannot be drawn, or a file that cannot be written, raises a
    DfsqlError: the shell and the notebook show its message, not a traceback."""
    rows = [tuple(_plain(v) for v in r) for r in rows]
    if is_tradeoff(columns):
        return plot_tradeoff(columns, rows, path, title)
    notes: list[tuple[Any, Any, Any, str]] = []
    if is_firings(columns):
        columns, rows, notes, key = firings_as_panes(columns, rows, _label)
        title = f"{key}: {title}" if key else title
    cols = list(columns)
    _check(cols, rows)
    lay, keyed = _layout(cols, rows, plan)
    try:
        fig, summary = _figure(path, rows, lay, keyed, title, notes)
    except (ValueError, TypeError, OverflowError) as exc:  # matplotlib's refusals
        raise DfsqlError(f"\\plot cannot draw this result: {exc}",
                         hint="\\plot draws the rows of a windowed query as it returns "
                              "them") from exc
    save(fig, path, DPI)
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
    missing = [c for c in PANE_COLUMNS if (c in PANE_TIMES or c == "pane_timing")
               and c not in cols]
    if missing:
        raise DfsqlError(f"\\plot draws a windowed result; the last result has no "
                         f"{', '.join(missing)}", hint="run a query with WINDOW first")
    if not rows:
        raise DfsqlError("\\plot: the last windowed result has no rows")
    if all(c in PANE_COLUMNS for c in cols):
        raise DfsqlError("\\plot: the result has only window and pane columns, no value to "
                         "label its panes with", hint="select an aggregate too")
    for c in PANE_TIMES:
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
    """The figure: one panel per key and aggregate, its legend, its title, and then
    (once laid out, where they will be) every panel's labels; unsaved."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # one panel per key and aggregate: (its name, its key's panel, its aggregate)
    panels = [(k if len(lay.values) == 1 else v if k == "all" else f"{k}: {v}", k, v)
              for k in keyed for v in lay.values][:MAX_PANELS]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 4.2 * len(panels)), dpi=DPI,
                             squeeze=False)
    summary = PlotSummary(path, lay.value_col, [p[0] for p in panels])
    labels: list[list[Label]] = []  # per panel, in order of importance
    for i, (ax, (name, key, value)) in enumerate(zip(axes[:, 0], panels, strict=True)):
        values, dots = _draw_panel(ax, name, [r for r in rows if lay.key_of(r) == key],
                                   lay, summary, value)
        labels.append(values + (_firing_notes(ax, notes, lay) if i == 0 else []) + dots)
        if len(panels) > 1 or lay.keys:
            ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.25)
    if lay.input is not None:
        summary.elements = len(lay.input.elements)
        summary.notes += [f"input elements not drawn: the key column {k} is not itself a "
                          "GROUP BY key, so which panel each element belongs to is unknown"
                          for k in lay.input.unmatched]
        if lay.input.watermark is not None:
            summary.watermark_points = len(lay.input.watermark[0])
    legend = _legend(axes[0, 0], summary.watermark_points > 0)
    title = " ".join(title.lstrip("-").split())
    if title:
        lines = textwrap.wrap(title, 130)
        fig.suptitle("\n".join(lines), fontsize=9)
        # tight_layout leaves the suptitle out: keep its lines' height free at the top
        fig.tight_layout(rect=(0, 0, 1, 1 - (0.16 * len(lines) + 0.1) / (4.2 * len(panels))))
    else:
        fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    for ax, mine in zip(axes[:, 0], labels, strict=True):
        placer = Placer(ax, renderer, [legend.get_window_extent(renderer).extents]
                        if ax is axes[0, 0] else [])
        for label in mine:  # in order of importance (see _draw_panel)
            placer.place(label)
        summary.labels_left_out += placer.left_out
    if summary.labels_left_out:
        summary.notes.append(f"{summary.labels_left_out} value labels left out where they "
                             "would overlap others")
    return fig, summary


def _legend(ax, watermark: bool):
    """The timings' colours (and the watermark's line) in the first panel's corner."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=c, alpha=0.45, edgecolor="black", label=t)
               for t, c in COLOURS.items()]
    if watermark:
        handles.append(Line2D([], [], color=WATERMARK_COLOUR, label="watermark"))
    return ax.legend(handles=handles, loc="upper left", fontsize=8)


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
        lay.y_lo, lay.y_hi = y_lo - pad, y_hi + 2 * pad  # room for the top panes' labels
    return lay, panels


def _draw_panel(ax, panel: str, mine: list, lay: _Layout, summary: PlotSummary,
                value: str) -> tuple[list[Label], list[Label]]:
    """One key's panes, retractions, input elements and watermark on ``ax``, and its
    axes; returns their labels, to place once the figure is laid out: the panes' values
    in order of importance (ON_TIME first: the watermark's answer, then LATE, then
    EARLY) and the retractions', and apart, the input elements'."""
    elements = lay.elements_of(mine[0])
    panes, retractions = _draw_panes(ax, panel, mine, lay, summary, value,
                                     _first_arrivals(mine, elements, lay.at))
    dots: list[Label] = []
    if elements:
        xs, ys = nums([el[0] for el in elements]), nums([el[1] for el in elements])
        ax.scatter(xs, ys, s=14, color="black", zorder=3)
        dots = [Label(_label(el[2]), beside(x, y), {"fontsize": 7})
                for x, y, el in zip(xs, ys, elements, strict=True) if el[2] is not None]
    if lay.input is not None and lay.input.watermark is not None:
        wx, wy = lay.input.watermark  # the same line in every panel: it is global
        ax.plot(nums(wx), nums(wy), color=WATERMARK_COLOUR, linewidth=1.6, label="watermark")
    _set_axes(ax, lay)
    rank = {"ON_TIME": 0, "LATE": 1, "EARLY": 2}
    return [label for _, label in sorted(panes, key=lambda p: rank.get(p[0], 3))] \
        + retractions, dots


def _first_arrivals(mine: list, elements: list, at: dict[str, int]) -> dict[tuple, Any]:
    """Each window's first element's arrival (where its first pane starts)."""
    first: dict[tuple, Any] = {}
    for e, p, _, _ in elements:
        for r in mine:
            ws, we = r[at["window_start"]], r[at["window_end"]]
            if (ws is None or ws <= e) and (we is None or e < we):
                first[(ws, we)] = min(first.get((ws, we), p), p)
    return first


def _draw_panes(ax, panel: str, mine: list, lay: _Layout, summary: PlotSummary, value: str,
                first_arrival: dict[tuple, Any]) -> tuple[list[tuple[str, Label]],
                                                          list[Label]]:
    """Each pane a rectangle, each retraction a dashed line; their labels, the panes'
    with their timing."""
    from matplotlib.patches import Rectangle

    at = lay.at
    drawn: list[tuple[Any, Any, Any]] = []  # (window_start, window_end, emit_time)
    panes: list[tuple[str, Label]] = []
    retractions: list[Label] = []
    for r in mine:
        ws, we = r[at["window_start"]], r[at["window_end"]]
        x0, x1 = num(ws if ws is not None else lay.x_lo), num(we if we is not None else lay.x_hi)
        label, y1 = _label(r[at[value]]), r[at["emit_time"]]
        if lay.retract is not None and r[lay.retract]:
            # a dashed red line across the retracted window, at the retraction's time
            ax.plot([x0, x1], [num(y1), num(y1)], color="red", linestyle="--", linewidth=1.2)
            retractions.append(Label(f"-{label}", at_ends(x0, x1, num(y1)),
                                     {"color": "red", "fontsize": 9, "fontweight": "bold"}))
            summary.retractions.append((panel, ws, label))
            continue
        if lay.batch:
            y0, y1 = BATCH_BAR
        else:
            # on top of every earlier pane this window covers (its own earlier panes,
            # and those of the windows a merged session absorbed), else from its
            # first element's arrival
            below = [e for s0, s1, e in drawn if _within(s0, s1, ws, we)]
            y0 = max(below) if below else first_arrival.get((ws, we), lay.y_lo)
            drawn.append((ws, we, y1))
            y0, y1 = num(y0), num(y1)
        timing = r[at["pane_timing"]]
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, alpha=0.45,
                               facecolor=COLOURS.get(timing, "#999999"),
                               edgecolor="black", linewidth=0.8))
        panes.append((timing, Label(label, above((x0 + x1) / 2, y1),
                                    {"fontsize": 10, "fontweight": "bold"})))
        summary.panes.append((panel, ws, we, label, timing))
    return panes, retractions


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


def _within(s0: Any, s1: Any, ws: Any, we: Any) -> bool:
    """Whether window [s0, s1) lies inside [ws, we) (None: unbounded, GLOBAL)."""
    return (ws is None or (s0 is not None and ws <= s0)) and \
        (we is None or (s1 is not None and s1 <= we))


def _firing_notes(ax, notes: list[tuple[Any, Any, Any, str]], lay: _Layout) -> list[Label]:
    """Each merge marked where it happened; the labels: each pane's firing leaf under
    its top, each merge's result beside its mark."""
    out = []
    for ws, we, t, text in notes:
        x0 = num(ws if ws is not None else lay.x_lo)
        x1 = num(we if we is not None else lay.x_hi)
        if text.startswith("MERGE"):
            ax.plot([x0], [num(t)], marker="D", color="#7a1f1f", markersize=4)
            out.append(Label(text, beside(x0, num(t), 2), {"fontsize": 6,
                                                           "color": "#7a1f1f"}))
        else:
            out.append(Label(text, [Spot((x0 + x1) / 2, num(t), 0, -3, "center", "top"),
                                    Spot((x0 + x1) / 2, num(t), 0, -11, "center", "top")],
                             {"fontsize": 6, "color": "#333333"}))
    return out
