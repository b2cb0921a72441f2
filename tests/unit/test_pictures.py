"""The drawing functions: valid SVG for any grid or curve, text escaped, the terminal grid."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from grader.pictures import (
    BLOCKED_MARK,
    Curve,
    curves_svg,
    differing,
    heatmap_svg,
    shade,
    text_grid,
)

SVG = "{http://www.w3.org/2000/svg}"
numbers = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
grids = st.integers(1, 8).flatmap(lambda width: st.lists(
    st.lists(numbers, min_size=width, max_size=width), min_size=1, max_size=8))


@given(grids, st.data(), st.text(max_size=40), st.text(max_size=20))
def test_heatmap_is_valid_svg_for_any_grid_and_label(grid, data, title, axis):
    marks = data.draw(st.lists(st.lists(st.booleans(), max_size=10), max_size=10))
    svg = heatmap_svg(grid, title=title, blocked=marks, differs=marks, rows=axis, columns=axis)
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    assert root.find(SVG + "title") is not None
    cells = [r for r in root.iter(SVG + "rect") if r.get("fill") != "none"]
    assert len(cells) == sum(len(row) for row in grid)
    assert "<script" not in svg and "style=" not in svg


def test_labels_are_escaped_not_markup():
    svg = heatmap_svg([[0.5]], title='<script>alert(1)</script>" onload="x',
                      rows="</text><script>", columns="&amp;")
    root = ET.fromstring(svg)
    assert not list(root.iter(SVG + "script"))
    assert root.find(SVG + "title").text == '<script>alert(1)</script>" onload="x'
    assert root.get("aria-label") == '<script>alert(1)</script>" onload="x'


def test_blocked_and_differing_cells_are_marked_by_shape_not_hue_alone():
    svg = heatmap_svg([[0.0, 0.9], [0.5, None]], title="t", blocked=[[True, False]],
                      differs=[[False, True]])
    root = ET.fromstring(svg)
    assert len(list(root.iter(SVG + "circle"))) == 1          # the blocked key's dot
    outlines = [r for r in root.iter(SVG + "rect") if r.get("fill") == "none"]
    assert len(outlines) == 1 and float(outlines[0].get("stroke-width")) >= 2
    assert any(t.text == "?" for t in root.iter(SVG + "text"))  # not a number


def test_shades_carry_the_value_in_lightness():
    lightness = [sum(int(shade(v)[i:i + 2], 16) for i in (1, 3, 5)) for v in (0, .25, .5, 1)]
    assert lightness == sorted(lightness, reverse=True)
    assert shade(-3) == shade(0) and shade(7) == shade(1)


curve_points = st.lists(st.tuples(st.floats(), st.floats()), max_size=30)


@given(st.lists(st.tuples(st.text(max_size=20), curve_points), max_size=4),
       st.text(max_size=30), st.booleans())
def test_curves_are_valid_svg_for_any_points(series, label, log_y):
    svg = curves_svg([Curve(name, points) for name, points in series], title=label,
                     x_label=label, y_label=label, description=label, log_y=log_y)
    root = ET.fromstring(svg)
    for line in root.iter(SVG + "polyline"):
        for pair in line.get("points").split():
            assert all(math.isfinite(float(v)) for v in pair.split(","))


def test_curves_have_a_legend_entry_and_distinct_dashes():
    svg = curves_svg([Curve("yours", [(0, 2.0), (1, 1.0)]),
                      Curve("reference", [(0, 2.0), (1, 0.5)])],
                     title="loss", x_label="step", y_label="loss")
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "yours" in texts and "reference" in texts
    dashes = {line.get("stroke-dasharray") for line in root.iter(SVG + "polyline")}
    assert len(dashes) == 2


def test_a_log_scale_marks_the_powers_of_ten_and_leaves_out_what_is_not_positive():
    svg = curves_svg([Curve("yours", [(0, 2.0), (1, 0.0), (2, 1e-4)])], title="loss",
                     x_label="step", y_label="loss", log_y=True)
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter(SVG + "text")]
    assert {"2", "0.0001", "0.1", "0.001"} <= set(texts)
    (line,) = root.iter(SVG + "polyline")
    assert len(line.get("points").split()) == 2


@given(grids)
def test_text_grid_has_two_characters_a_cell_and_a_line_a_row(grid):
    lines = text_grid(grid, blocked=[[True] * 8] * 8)
    assert len(lines) == len(grid)
    assert [len(line) for line in lines] == [2 * len(row) for row in grid]


def test_text_grid_golden():
    grid = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, None]]
    blocked = [[False, True, True], [False, False, True], [False, False, False]]
    assert text_grid(grid, blocked=blocked) == [
        "██· · ",
        "▒▒▒▒· ",
        "░░░░??",
    ]
    # A blocked key that still holds weight shows its shade: that is the leak to see.
    assert text_grid([[0.6, 0.4]], blocked=[[False, True]]) == ["▒▒▒▒"]
    assert BLOCKED_MARK == "·"


def test_differing_tolerates_rounding_only():
    assert differing([[0.25, None, 0.1]], [[0.2504, 0.0, 0.2]]) == [[False, True, True]]
