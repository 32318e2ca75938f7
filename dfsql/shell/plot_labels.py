"""The text labels of ``\\plot``, placed so that no two overlap.

A dense panel has more labels than room: pane values stacked a few seconds apart, dots
every second. Each label has spots to go to, in order of preference (above a pane's top,
else just under it; beside a dot, any corner). Once the figure is laid out, a panel's
labels are placed in order of importance, each at its first spot that lies inside the
panel and clear of every label placed before (measured in display pixels, through the
renderer); a label with no such spot is left out, and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: the gap kept between two labels, in display pixels
MARGIN = 1.0
_HA = {"left": 0.0, "center": 0.5, "right": 1.0}
_VA = {"bottom": 0.0, "center": 0.5, "top": 1.0}


@dataclass(frozen=True)
class Spot:
    """Where a label may go: its anchor (data coordinates), an offset from it in points
    and the text's alignment there."""

    x: float
    y: float
    dx: float
    dy: float
    ha: str
    va: str


@dataclass
class Label:
    """One label to place: its text, style (Text properties) and spots, best first."""

    text: str
    spots: list[Spot]
    style: dict[str, Any] = field(default_factory=dict)


def above(x: float, y: float) -> list[Spot]:
    """A pane's value: centred above its top, else just under it."""
    return [Spot(x, y, 0, 2, "center", "bottom"), Spot(x, y, 0, -2, "center", "top")]


def beside(x: float, y: float, gap: float = 3) -> list[Spot]:
    """A dot's value: up right of it, up left, down right, down left."""
    return [Spot(x, y, gap, gap, "left", "bottom"), Spot(x, y, -gap, gap, "right", "bottom"),
            Spot(x, y, gap, -gap, "left", "top"), Spot(x, y, -gap, -gap, "right", "top")]


def at_ends(x0: float, x1: float, y: float) -> list[Spot]:
    """A retraction's value: above either end of its line, else below either end."""
    return [Spot(x0, y, 2, 1, "left", "bottom"), Spot(x1, y, -2, 1, "right", "bottom"),
            Spot(x0, y, 2, -1, "left", "top"), Spot(x1, y, -2, -1, "right", "top")]


class Placer:
    """Places one panel's labels (see the module docstring); ``taken`` are display boxes
    (x0, y0, x1, y1) no label may cover, e.g. the legend's."""

    def __init__(self, ax, renderer, taken: list[tuple[float, float, float, float]]):
        self.ax, self.renderer = ax, renderer
        self.boxes = np.array(taken, dtype=float).reshape(-1, 4)
        self.inside = ax.get_window_extent(renderer).extents
        self.points = renderer.points_to_pixels(1.0)
        # data to display pixels: both axes are linear, so the transform is one affine
        # matrix, fixed once the figure is laid out (faster than transData, point by point)
        self.to_px = ax.transData.get_affine().get_matrix()
        self.left_out = 0
        self._sizes: dict[tuple, tuple[float, float]] = {}

    def place(self, label: Label) -> Any | None:
        """Draw ``label`` at its first free spot; the Text, or None if it is left out."""
        w, h = self._size(label)
        for spot in label.spots:
            box = self._box(spot, w, h)
            if self._free(box):
                self.boxes = np.vstack([self.boxes, box])
                return self.ax.annotate(label.text, (spot.x, spot.y),
                                        xytext=(spot.dx, spot.dy), textcoords="offset points",
                                        ha=spot.ha, va=spot.va, annotation_clip=False,
                                        **label.style)
        self.left_out += 1
        return None

    def _size(self, label: Label) -> tuple[float, float]:
        """The text's width and height in pixels, measured once per text and style (on a
        scratch text: most labels that find no room are never drawn at all)."""
        key = (label.text, tuple(sorted(label.style.items())))
        if key not in self._sizes:
            scratch = self.ax.text(0, 0, label.text, **label.style)
            bb = scratch.get_window_extent(self.renderer)
            scratch.remove()
            self._sizes[key] = (bb.width, bb.height)
        return self._sizes[key]

    def _box(self, spot: Spot, w: float, h: float) -> np.ndarray:
        """The display box a text of w x h pixels covers at ``spot``."""
        ax_, ay_, _ = self.to_px @ (spot.x, spot.y, 1.0)
        x0 = ax_ + spot.dx * self.points - w * _HA[spot.ha]
        y0 = ay_ + spot.dy * self.points - h * _VA[spot.va]
        return np.array([x0, y0, x0 + w, y0 + h])

    def _free(self, box: np.ndarray) -> bool:
        """Inside the panel, and clear (by MARGIN) of every box placed or taken."""
        lo_x, lo_y, hi_x, hi_y = self.inside
        if not np.all(np.isfinite(box)) or box[0] < lo_x or box[1] < lo_y \
                or box[2] > hi_x or box[3] > hi_y:
            return False
        b = self.boxes
        hit = (b[:, 0] < box[2] + MARGIN) & (box[0] < b[:, 2] + MARGIN) \
            & (b[:, 1] < box[3] + MARGIN) & (box[1] < b[:, 3] + MARGIN)
        return not hit.any()
