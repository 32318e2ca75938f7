"""``\\plot`` of an ``EXPLAIN WATERMARK`` result: completeness against latency.

One labelled point per watermark: across, the ON_TIME panes' median latency (seconds
after the window's end), with a bar on to their 90th percentile (a hollow marker
there); up, the fraction of the input that arrived late. A watermark low and to the
left is both complete and prompt; the plot shows what each one trades.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dfsql.errors import DfsqlError

#: the columns that make a result an EXPLAIN WATERMARK result
COLUMNS = ("watermark", "late_fraction", "on_time_latency_p50_s", "on_time_latency_p90_s")


@dataclass
class TradeoffSummary:
    """What was drawn: one (watermark, late fraction, p50, p90) per point."""

    path: str
    points: list[tuple[str, float, float | None, float | None]] = field(default_factory=list)
    figure: Any = None


def is_tradeoff(columns: Sequence[str]) -> bool:
    """Whether a result with these columns is an EXPLAIN WATERMARK result."""
    return all(c in columns for c in COLUMNS)


def plot_tradeoff(columns: Sequence[str], rows: Sequence[Sequence[Any]], path: str,
                  title: str = "") -> TradeoffSummary:
    """Draw the rows of an EXPLAIN WATERMARK result into ``path`` (a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise DfsqlError("\\plot: the EXPLAIN WATERMARK result has no rows")
    at = {c: list(columns).index(c) for c in COLUMNS}
    summary = TradeoffSummary(path)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for r in rows:
        name, late = str(r[at["watermark"]]), float(r[at["late_fraction"]] or 0.0)
        p50, p90 = r[at["on_time_latency_p50_s"]], r[at["on_time_latency_p90_s"]]
        summary.points.append((name, late, p50, p90))
        if p50 is None:  # no ON_TIME pane: no latency to place it at
            ax.annotate(f"{name} (no ON_TIME pane)", (0, late), fontsize=8,
                        xytext=(4, 4), textcoords="offset points", color="grey")
            continue
        line = ax.errorbar([p50], [late], xerr=[[0], [max(p90 - p50, 0)]], fmt="o",
                           capsize=4, markersize=7)
        ax.plot([p90], [late], marker="o", markersize=7, markerfacecolor="none",
                color=line[0].get_color())
        ax.annotate(name, (p50, late), fontsize=9, xytext=(5, 6), textcoords="offset points")
    ax.set_xlabel("ON_TIME pane latency after the window's end (s): p50 ●, p90 ○")
    ax.set_ylabel("late fraction of the input rows")
    ax.set_xlim(left=min(0.0, ax.get_xlim()[0]))
    ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
    ax.grid(alpha=0.3)
    title = " ".join(title.lstrip("-").split())
    if title:
        ax.set_title("\n".join(textwrap.wrap(title, 110)), fontsize=8)
    fig.tight_layout()
    save(fig, path)
    summary.figure = fig
    return summary


def save(fig, path: str, dpi: int = 110) -> None:
    """Write ``fig`` to ``path`` and close it (it is saved, not shown); a file that
    cannot be written is a DfsqlError, shown without a traceback (also \\plot's panes)."""
    import matplotlib.pyplot as plt

    try:
        fig.savefig(path, dpi=dpi)
    except OSError as exc:
        raise DfsqlError(f"\\plot cannot write {path}: {exc.strerror or exc}",
                         hint="name a PNG file in a directory you can write") from None
    finally:
        plt.close(fig)
