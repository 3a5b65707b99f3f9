"""The status-over-time chart as inline SVG: one stacked step area per funnel
stage (of a launch's deployments, or of a poll's sessions), drawn on the
server for the live page and the reports alike (no script draws anything)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape

from ._stages import Stage
from ._timeline import Sample

__all__ = ["chart_svg", "stacked_chart_svg"]

# Bottom to top: what is settled under what is still moving.
LAYERS = (Stage.DELIVERED, Stage.SENT, Stage.FAILED, Stage.UNKNOWN, Stage.WAITING)
WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 10, 26


def _seconds(span: float) -> str:
    if span < 120:
        return f"{span:.0f} s"
    return f"{span / 60:.0f} min" if span < 7200 else f"{span / 3600:.1f} h"


def _steps(xs: Sequence[float], ys: Sequence[float]) -> list[tuple[float, float]]:
    """A step line: each value held from its sample's x to the next one's."""
    return [point for i, v in enumerate(ys) for point in ((xs[i], v), (xs[i + 1], v))]


def chart_svg(samples: Sequence[Sample]) -> str:
    """Deployments per stage over the time of ``samples`` (time order)."""
    return stacked_chart_svg(
        [sample.at for sample in samples],
        [(stage, [sample.stages.count(stage) for sample in samples]) for stage in LAYERS],
        "deployments",
    )


def stacked_chart_svg(
    times: Sequence[datetime], layers: Sequence[tuple[Stage, Sequence[int]]], noun: str
) -> str:
    """``noun`` per stage over ``times`` (time order): each layer's counts at
    those times, stacked bottom to top in the order given."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    start = times[0] if times else None
    offsets = [(at - start).total_seconds() for at in times] if start else []
    elapsed = offsets[-1] if offsets else 0.0
    # The last sample holds for a twentieth of the width, so the end shows.
    span = elapsed + max(elapsed / 19, 1.0)
    peak = max((sum(column) for column in zip(*(c for _, c in layers), strict=True)), default=0)
    xs = [LEFT + plot_w * t / span for t in offsets]
    xs.append(LEFT + plot_w)

    def y(count: int) -> float:
        return TOP + plot_h * (1 - count / peak) if peak else TOP + plot_h

    paths = []
    below = [0] * len(times)
    for stage, counts in layers:
        above = [b + n for b, n in zip(below, counts, strict=True)]
        if above != below:
            edge = _steps(xs, [y(n) for n in above]) + _steps(xs, [y(n) for n in below])[::-1]
            points = " ".join(f"{x:.1f},{v:.1f}" for x, v in edge)
            title = f"<title>{stage}</title>"
            paths.append(f'<polygon class="area st-{stage}" points="{points}">{title}</polygon>')
        below = above
    axis_y = TOP + plot_h
    label = f"{noun} by stage over {_seconds(elapsed)}"
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(label)}">'
        f'<line class="axis" x1="{LEFT}" y1="{axis_y}" x2="{WIDTH - RIGHT}" y2="{axis_y}"/>'
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{axis_y}"/>'
        + "".join(paths)
        + f'<text class="tick" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{peak}</text>'
        f'<text class="tick" x="{LEFT - 6}" y="{axis_y}" text-anchor="end">0</text>'
        f'<text class="tick" x="{LEFT}" y="{HEIGHT - 8}">0 s</text>'
        + (
            f'<text class="tick" x="{xs[-2]:.1f}" y="{HEIGHT - 8}" text-anchor="end">'
            f"{_seconds(elapsed)}</text>"
            if elapsed
            else ""
        )
        + "</svg>"
    )
