"""Figures for pages, server-drawn SVG with a table: a results document's attention maps and
its training curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from grader.pictures import Grid, Marks, differing, heatmap_svg
from grader.training_curves import TrainingCurves, read_section, sampled

MAX_SIDE = 32
"""Refuse to draw grids larger than this (a document holds at most 16; older or foreign
documents are not trusted to be small)."""


@dataclass(frozen=True)
class Cell:
    student: float | None
    expected: float | None
    blocked: bool
    differs: bool


@dataclass(frozen=True)
class Panel:
    label: str
    student_svg: Markup
    expected_svg: Markup
    rows: list[list[Cell]]
    student_sums: list[float | None]
    expected_sums: list[float | None]
    differing: int


@dataclass(frozen=True)
class AttentionFigure:
    input: str
    caption: str
    student_label: str
    truncated: bool
    panels: list[Panel]


def attention_figure(picture: Any) -> AttentionFigure | None:
    """What the page draws for a diagnosis's ``attention_map`` (version 1), or None when
    there is none or it is not one this code can read."""
    if not isinstance(picture, Mapping) or picture.get("version") != 1:
        return None
    panels_data = picture.get("panels")
    if not isinstance(panels_data, list) or not panels_data:
        return None
    reproduced = picture.get("source") == "reproduced"
    student_label = ("Weights that reproduce your outputs" if reproduced else "Your weights")
    panels = []
    for data in panels_data[:8]:
        panel = _panel(data, student_label, picture)
        if panel is None:
            return None
        panels.append(panel)
    return AttentionFigure(input=str(picture.get("input", "")),
                           caption=str(picture.get("caption", "")),
                           student_label=student_label,
                           truncated=bool(picture.get("truncated")), panels=panels)


def _panel(data: Any, student_label: str, picture: Mapping[str, Any]) -> Panel | None:
    if not isinstance(data, Mapping):
        return None
    student, expected = _grid(data.get("student")), _grid(data.get("expected"))
    blocked = _marks(data.get("blocked"))
    if student is None or expected is None or blocked is None:
        return None
    head = data.get("head")
    label = f"head {head}" if isinstance(head, int) and not isinstance(head, bool) else ""
    differs = differing(student, expected)
    rows_name, columns_name = str(picture.get("rows", "queries")), str(picture.get("columns",
                                                                                    "keys"))
    where = f" ({label})" if label else ""

    def svg(grid: Grid, name: str) -> Markup:
        # The SVG is built from numbers and escaped text only (grader.pictures escapes).
        return Markup(heatmap_svg(grid, title=name + where, blocked=blocked,
                                  differs=differs if grid is student else None,
                                  rows=rows_name, columns=columns_name))

    rows = [[Cell(s, e, _get(blocked, i, j), _get(differs, i, j))
             for j, (s, e) in enumerate(zip(srow, erow, strict=False))]
            for i, (srow, erow) in enumerate(zip(student, expected, strict=False))]
    return Panel(label=label, student_svg=svg(student, student_label),
                 expected_svg=svg(expected, "Expected weights"), rows=rows,
                 student_sums=[_sum(row) for row in student],
                 expected_sums=[_sum(row) for row in expected],
                 differing=sum(cell.differs for row in rows for cell in row))


def _grid(value: Any) -> list[list[float | None]] | None:
    if not isinstance(value, list) or not 0 < len(value) <= MAX_SIDE:
        return None
    grid = []
    for row in value:
        if not isinstance(row, list) or len(row) > MAX_SIDE:
            return None
        cells: list[float | None] = []
        for cell in row:
            if cell is None:
                cells.append(None)
            elif isinstance(cell, int | float) and not isinstance(cell, bool):
                cells.append(float(cell))
            else:
                return None
        grid.append(cells)
    return grid


def _marks(value: Any) -> list[list[bool]] | None:
    if not isinstance(value, list) or len(value) > MAX_SIDE:
        return None
    if not all(isinstance(row, list) and len(row) <= MAX_SIDE for row in value):
        return None
    return [[cell is True for cell in row] for row in value]


def _get(marks: Marks, i: int, j: int) -> bool:
    return i < len(marks) and j < len(marks[i]) and bool(marks[i][j])


def _sum(row: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in row) else round(sum(v for v in row if v is not None), 3)


TABLE_ROWS = 11
"""The training table lists this many steps, evenly spread (the picture has them all)."""


@dataclass(frozen=True)
class LossRow:
    step: int
    student: float | None
    reference: float | None


@dataclass(frozen=True)
class TrainingFigure:
    curves: TrainingCurves
    svg: Markup
    caption: str
    rows: list[LossRow]


def training_figures(section: Any) -> list[TrainingFigure]:
    """What the page draws for a document's ``training`` section: per training run, the
    student's loss curve against the reference's, a sentence and a table of some steps."""
    figures = []
    for curves in read_section(section):
        caption = curves.caption()
        # The SVG is built from numbers and escaped text only (grader.pictures escapes).
        svg = Markup(curves.svg())
        rows = [LossRow(curves.steps[i], curves.curve[i], curves.reference_curve[i])
                for i in sampled(len(curves.steps), TABLE_ROWS)]
        figures.append(TrainingFigure(curves=curves, svg=svg, caption=caption, rows=rows))
    return figures
