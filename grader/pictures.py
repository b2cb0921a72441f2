"""Pictures of grading data drawn as text: SVG for pages, shaded characters for terminals. Pure.

No script, no styles from outside and no torch: the web process and the CLI draw with it, and
the pages keep their strict Content-Security-Policy (SVG presentation attributes only). Every
picture reads without colour: blocked cells carry a mark, differing cells a thick outline,
curves a dash pattern and a marker of their own, and each picture has a text alternative.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

Grid = Sequence[Sequence[float | None]]
"""Rows of numbers; None for a value that was not finite (NaN or infinite)."""
Marks = Sequence[Sequence[bool]]

CELL = 26
_LIGHT, _DARK = (247, 250, 255), (17, 42, 110)
SHADES = " ░▒▓█"
"""Terminal shades from 0 to 1 (a quarter each); ``·`` is a blocked key, ``?`` not a number."""
BLOCKED_MARK, NAN_MARK = "·", "?"


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: str) -> str:
    """Text content escaped, without the characters XML cannot hold at all."""
    return escape(_NOT_XML.sub("\ufffd", value))


def _attr(value: str) -> str:
    return quoteattr(_NOT_XML.sub("\ufffd", value))


def shade(value: float | None) -> str:
    """The fill for a weight in [0, 1] (clamped): white to dark blue, lightness carrying it."""
    if value is None:
        return "#ffffff"
    t = min(1.0, max(0.0, value))
    rgb = (round(a + (b - a) * t) for a, b in zip(_LIGHT, _DARK, strict=True))
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _at(marks: Marks | None, i: int, j: int) -> bool:
    return bool(marks is not None and i < len(marks) and j < len(marks[i]) and marks[i][j])


def heatmap_svg(values: Grid, *, title: str, blocked: Marks | None = None,
                differs: Marks | None = None, rows: str = "queries",
                columns: str = "keys") -> str:
    """One grid of weights, a query per row: blocked cells dotted, differing cells outlined."""
    height = len(values)
    width = max((len(row) for row in values), default=0)
    left, top = 44, 34
    w, h = left + width * CELL + 8, top + height * CELL + 8
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" width="{w}" height="{h}" '
             f'viewBox="0 0 {w} {h}" role="img" aria-label={_attr(title)}>',
             f"<title>{_text(title)}</title>",
             f'<text x="{left}" y="11" font-size="11" fill="#1d2433">{_text(columns)} →</text>',
             f'<text x="10" y="{top}" font-size="11" fill="#1d2433" '
             f'transform="rotate(90 10 {top})">{_text(rows)} →</text>']
    for j in range(width):
        parts.append(f'<text x="{left + j * CELL + CELL / 2:g}" y="{top - 5}" font-size="10" '
                     f'text-anchor="middle" fill="#475467">{j}</text>')
    outlines = []
    for i, row in enumerate(values):
        y = top + i * CELL
        parts.append(f'<text x="{left - 4}" y="{y + CELL - 8}" font-size="10" text-anchor="end" '
                     f'fill="#475467">{i}</text>')
        for j, value in enumerate(row):
            x = left + j * CELL
            parts.append(f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" '
                         f'fill="{shade(value)}" stroke="#c3cad6" stroke-width="0.5"/>')
            ink = "#ffffff" if value is not None and value > 0.5 else "#b42318"
            if value is None:
                parts.append(f'<text x="{x + CELL / 2:g}" y="{y + CELL - 8}" font-size="14" '
                             f'text-anchor="middle" fill="{ink}">{NAN_MARK}</text>')
            elif _at(blocked, i, j):
                parts.append(f'<circle cx="{x + CELL / 2:g}" cy="{y + CELL / 2:g}" r="3" '
                             f'fill="{ink}"/>')
            if _at(differs, i, j):
                outlines.append(f'<rect x="{x + 1.5}" y="{y + 1.5}" width="{CELL - 3}" '
                                f'height="{CELL - 3}" fill="none" stroke="#c2410c" '
                                f'stroke-width="2.5"/>')
    parts += outlines
    parts.append("</svg>")
    return "".join(parts)


def differing(student: Grid, expected: Grid) -> list[list[bool]]:
    """Cells where two grids disagree beyond the rounding kept (a missing number differs)."""
    return [[(a is None) != (b is None) or (a is not None and b is not None
                                            and abs(a - b) > 1e-3 + 1e-2 * abs(b))
             for a, b in zip(row_a, row_b, strict=False)]
            for row_a, row_b in zip(student, expected, strict=False)]


def text_grid(values: Grid, *, blocked: Marks | None = None) -> list[str]:
    """The grid in shaded characters, one query row per line (two characters a cell)."""
    lines = []
    for i, row in enumerate(values):
        cells = []
        for j, value in enumerate(row):
            if value is None:
                cells.append(NAN_MARK * 2)
            elif _at(blocked, i, j) and abs(value) < 0.125:
                cells.append(BLOCKED_MARK + " ")
            else:
                t = min(1.0, max(0.0, value))
                cells.append(SHADES[min(len(SHADES) - 1, math.ceil(t * 4 - 0.5))] * 2)
        lines.append("".join(cells))
    return lines


@dataclass(frozen=True)
class Curve:
    """A named series of (x, y) points, e.g. a loss against training steps."""

    name: str
    points: Sequence[tuple[float, float]]


_CURVE_STYLES = (("#1d4ed8", "", "circle"), ("#b42318", "6 4", "square"),
                 ("#15803d", "2 3", "diamond"))


def curves_svg(curves: Sequence[Curve], *, title: str, x_label: str, y_label: str,
               description: str = "", log_y: bool = False, width: int = 420,
               height: int = 240) -> str:
    """Line chart of several curves on shared axes, each with its own dash and marker, and a
    legend (the training check's loss curves: the student's against the reference);
    ``description`` is the picture's ``desc``, what it shows in words. With ``log_y`` the y axis
    is logarithmic, marked at each power of ten (points at or below 0 are left out): a loss
    falls over orders of magnitude."""

    def drawable(point: tuple[float, float]) -> bool:
        return _drawable(point) and (not log_y or point[1] > 0)

    def scaled(y: float) -> float:
        return math.log10(y) if log_y else y

    finite = [p for c in curves for p in c.points if drawable(p)]
    x0, x1 = _span([p[0] for p in finite])
    y0, y1 = _span([scaled(p[1]) for p in finite])
    left, right, top, bottom = 64, 12, 16, 40 + 16 * len(curves)
    pw, ph = width - left - right, height - top - bottom
    if ph < 40:
        height, ph = height + 40 - ph, 40

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - (y - y0) / (y1 - y0) * ph

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="curves" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f"aria-label={_attr(title)}>", f"<title>{_text(title)}</title>",
             *([f"<desc>{_text(description)}</desc>"] if description else []),
             f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
             f'stroke="#98a2b3"/>']
    ticks = [y0, y1]
    if log_y:
        # Powers of ten inside the span (at most about six), none overprinting an end's label.
        decades = range(math.ceil(y0), math.floor(y1) + 1)
        ticks += [d for d in decades[::max(1, math.ceil(len(decades) / 6))]
                  if min(abs(py(d) - py(y0)), abs(py(d) - py(y1))) > 14]
    for tick in ticks:
        value, y = 10 ** tick if log_y else tick, py(tick)
        parts.append(f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end" '
                     f'fill="#475467">{value:.3g}</text>')
    for value, x in ((x0, px(x0)), (x1, px(x1))):
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 13}" font-size="10" '
                     f'text-anchor="middle" fill="#475467">{value:.4g}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + 27}" font-size="11" '
                 f'text-anchor="middle" fill="#1d2433">{_text(x_label)}</text>')
    parts.append(f'<text x="12" y="{top + ph / 2:.1f}" font-size="11" text-anchor="middle" '
                 f'fill="#1d2433" transform="rotate(-90 12 {top + ph / 2:.1f})">'
                 f"{_text(y_label)}</text>")
    for n, curve in enumerate(curves):
        colour, dash, marker = _CURVE_STYLES[n % len(_CURVE_STYLES)]
        points = [(px(x), py(scaled(y))) for x, y in curve.points if drawable((x, y))]
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        if points:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                         f'stroke-width="2"{dashes}/>')
        parts += [_marker(marker, x, y, colour) for x, y in points[:: max(1, len(points) // 12)]]
        ly = top + ph + 38 + 16 * n
        parts.append(f'<line x1="{left}" y1="{ly}" x2="{left + 24}" y2="{ly}" stroke="{colour}" '
                     f'stroke-width="2"{dashes}/>')
        parts.append(_marker(marker, left + 12, ly, colour))
        parts.append(f'<text x="{left + 30}" y="{ly + 4}" font-size="11" fill="#1d2433">'
                     f"{_text(curve.name)}</text>")
    parts.append("</svg>")
    return "".join(parts)


_LIMIT = 1e12
"""Points beyond this magnitude (a diverged loss) are left out rather than flatten the rest."""


def _drawable(point: tuple[float, float]) -> bool:
    return all(math.isfinite(v) and abs(v) < _LIMIT for v in point)


def _span(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if high - low <= 1e-9 * max(1.0, abs(low)):
        return low, low + max(1.0, abs(low))
    return low, high


def _marker(kind: str, x: float, y: float, colour: str) -> str:
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>'
    if kind == "square":
        return f'<rect x="{x - 3:.1f}" y="{y - 3:.1f}" width="6" height="6" fill="{colour}"/>'
    return (f'<polygon points="{x:.1f},{y - 4:.1f} {x + 4:.1f},{y:.1f} {x:.1f},{y + 4:.1f} '
            f'{x - 4:.1f},{y:.1f}" fill="{colour}"/>')
