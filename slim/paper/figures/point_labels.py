"""Labels beside scatter points that overlap nothing: each label takes the first place around its
point (right, left, above, below) that stays inside the axes and clears every marker, every
vertical line and every label placed before it, or is left out. Sizes are estimated from the font,
so the result needs no renderer and is the same on every run."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

OFFSETS = ((1, 0), (1, 1), (1, -1), (-1, 0), (-1, 1), (-1, -1), (0, 1), (0, -1))
"""Where a label may go around its point, in order of preference: right, left, above, below (level
with the point first, where it is least ambiguous)."""
CHARACTER_WIDTH = 0.62
"""A digit's width, in ems (DejaVu Sans: 0.636)."""
GAP_POINTS = 2.5
"""Between a marker's edge and its label."""


@dataclass(frozen=True)
class PointLabel:
    """A label for the point at (`x`, `y`) in data coordinates, whose marker reaches `radius_points`
    from its centre."""

    x: float
    y: float
    text: str
    color: str
    radius_points: float


Box = tuple[float, float, float, float]


def place_labels(ax, labels: Sequence[PointLabel], font_size: float, markers: Sequence[PointLabel] = (),
                 vertical_lines: Sequence[float] = ()) -> int:
    """Annotate `ax` with `labels`, in their order of priority, each where it overlaps neither the
    markers of `labels` and `markers`, the `vertical_lines` (data x), nor the labels placed before
    it; the number placed. The axes' limits are fixed first (`fix_limits`)."""
    fix_limits(ax)
    pixels = ax.figure.dpi / 72.0   # per point
    box = ax.get_window_extent()
    taken: list[Box] = []
    for marker in [*labels, *markers]:
        x, y = ax.transData.transform((marker.x, marker.y))
        radius = marker.radius_points * pixels
        taken.append((x - radius, y - radius, x + radius, y + radius))
    for line in vertical_lines:
        x = ax.transData.transform((line, 1.0))[0]
        taken.append((x - pixels, box.y0, x + pixels, box.y1))
    height, placed = font_size * pixels, 0
    for label in labels:
        x, y = ax.transData.transform((label.x, label.y))
        width = CHARACTER_WIDTH * font_size * len(label.text) * pixels
        clear = (label.radius_points + GAP_POINTS) * pixels
        for dx, dy in OFFSETS:
            left = x + clear if dx > 0 else x - clear - width if dx < 0 else x - width / 2
            bottom = y + clear if dy > 0 else y - clear - height if dy < 0 else y - height / 2
            candidate = (left, bottom, left + width, bottom + height)
            inside = box.x0 <= left and left + width <= box.x1 and box.y0 <= bottom and bottom + height <= box.y1
            if inside and not any(_overlap(candidate, other) for other in taken):
                taken.append(candidate)
                ax.annotate(label.text, (label.x, label.y), xytext=((left - x) / pixels, (bottom - y) / pixels),
                            textcoords="offset points", fontsize=font_size, color=label.color, ha="left",
                            va="bottom")
                placed += 1
                break
    return placed


def fix_limits(ax) -> None:
    """Fix the axes' limits where autoscaling has put them, so that data map to where they will be
    drawn (and the labels added next do not move them)."""
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())


def near(a: PointLabel, b: PointLabel, ax) -> bool:
    """Whether the markers of `a` and `b` overlap on `ax` (one label serves both); limits fixed first."""
    fix_limits(ax)
    first, second = ax.transData.transform((a.x, a.y)), ax.transData.transform((b.x, b.y))
    return math.dist(first, second) < (a.radius_points + b.radius_points) * ax.figure.dpi / 72.0


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
