"""The similarity report's computation: in a seeded class of 100 distinct submissions the two
planted near-copies are the only pairs reported, the cut comes from the class itself, and the
side-by-side segments are the code, cut, never altered."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from devkit.notebooks import notebook
from devkit.similarity import distinct_submission, near_copy, seeded_class
from service.submissions.similarity import FLOOR, compare, segments, source_text, threshold

STARTER = (Path(__file__).resolve().parents[2] / "assignments" / "attention" / "starter"
           / "attention.py").read_text()


def test_the_planted_near_copies_are_flagged_and_nothing_else() -> None:
    report = compare(seeded_class(100), [STARTER])
    assert report.students == 100 and report.compared == 100 * 99 // 2
    assert sorted((pair.first, pair.second) for pair in report.flagged) == [
        ("s010", "s090"), ("s020", "s091")]
    assert all(pair.score > 0.9 for pair in report.flagged)
    # The class's own distribution sets the cut, not the floor: it sits well above the median
    # pair (similar attention functions share a lot) and above the floor.
    assert report.threshold > FLOOR and report.threshold > 2 * report.median
    # Matching regions cover the copied file almost whole.
    pair = report.flagged[0]
    covered = sum(end - start for start, end in pair.regions[1])
    assert covered > 0.8 * len(seeded_class(100)[pair.second])


def test_a_class_without_copies_reports_nothing() -> None:
    import random

    rng = random.Random(4)
    report = compare({f"s{i:02d}": distinct_submission(rng) for i in range(40)}, [STARTER])
    assert report.flagged == []


def test_boilerplate_alone_is_not_similarity() -> None:
    """Two students who hand in the starter file untouched share only what they were given."""
    import random

    rng = random.Random(8)
    sources = {f"s{i:02d}": distinct_submission(rng) for i in range(20)}
    sources["lazy1"] = sources["lazy2"] = STARTER
    flagged = {(p.first, p.second) for p in compare(sources, [STARTER]).flagged}
    assert ("lazy1", "lazy2") not in flagged
    # Without the starter as boilerplate they would be a perfect match: it is the boilerplate
    # that keeps them out.
    assert ("lazy1", "lazy2") in {(p.first, p.second) for p in compare(sources).flagged}


def test_a_copy_is_found_whatever_it_renames() -> None:
    import random

    source = distinct_submission(random.Random(1))
    pair = compare({"a": source, "b": near_copy(source)}).flagged
    assert pair and pair[0].shares[0] > 0.9


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=0, max_size=60))
def test_the_threshold_is_at_least_the_floor_and_the_upper_quartile(scores: list[float]) -> None:
    cut = threshold(scores)
    assert cut >= FLOOR
    if len(scores) >= 4:
        assert cut >= sorted(scores)[(3 * (len(scores) - 1)) // 4]


@given(st.text(max_size=200), st.lists(st.tuples(st.integers(0, 250), st.integers(0, 250)),
                                        max_size=8))
def test_segments_are_the_code_cut_and_nothing_else(code: str,
                                                    ranges: list[tuple[int, int]]) -> None:
    parts = segments(code, [(min(a, b), max(a, b)) for a, b in ranges])
    assert "".join(text for text, _ in parts) == code
    assert all(text for text, _ in parts)
    assert all(a[1] != b[1] for a, b in pairwise(parts))


def test_a_notebook_is_compared_by_its_code_cells() -> None:
    data = notebook(("markdown", "# prose is not code"), ("code", "import torch"),
                    ("code", "def attention(q, k, v, allowed):\n    return q, q"))
    assert source_text("lab.ipynb", data) == ("import torch\ndef attention(q, k, v, allowed):\n"
                                              "    return q, q")
    assert source_text("a.py", b"x = 1\n") == "x = 1\n"
    assert source_text("lab.ipynb", b"{broken") is None
    assert source_text("notes.txt", b"x") is None
