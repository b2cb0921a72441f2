"""The coverage report on made-up rows: what it counts and how it explains a failing row; and
how its runs are shared between sets of mistakes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from grader.authoring import CoverageReport, CoverageRow, _Switches, _Traced, explain
from grader.outcomes import CallOutcome


def _row(mistakes: tuple[str, ...], expected: set[str], diagnosed: set[str]) -> CoverageRow:
    return CoverageRow(mistakes, frozenset(expected), frozenset(diagnosed), 1.0, 5.0)


def test_outputs_left_unexplained_are_not_blamed_on_another_variant() -> None:
    lines = "\n".join(explain(_row(("rows-inverted", "padding-inverted"), {"mask-inverted"},
                                   {"wrong-output"})))
    assert "not recognised: mask-inverted" in lines
    assert "also diagnosed: wrong-output" in lines
    assert "another variant" not in lines


def test_another_code_is_blamed_on_another_variant() -> None:
    lines = "\n".join(explain(_row(("missing-scale",), {"missing-scale"},
                                   {"missing-scale", "wrong-scale"})))
    assert "also diagnosed: wrong-scale — another variant explains the same outputs" in lines


def test_every_pair_is_counted_examined_or_not_with_why() -> None:
    rows = (CoverageRow((), frozenset(), frozenset(), 5.0, 5.0),
            _row(("a",), {"x"}, {"x"}), _row(("b",), {"x"}, {"x"}), _row(("c",), {"y"}, {"y"}),
            _row(("a", "b"), {"x"}, {"x"}), _row(("a", "c"), {"x", "y"}, {"x", "y"}))
    report = CoverageReport("toy", 0, rows, excluded=(("b", "c"),))
    text = report.render()
    assert "pairs of mistakes: 3; examined 2, of which 2 diagnosed with exactly their codes" in text
    assert "not examined: 1 that cannot co-occur (declared in excludes)" in text
    assert report.skipped == () and report.sound and text.endswith("sound")


def test_a_pair_neither_examined_nor_excluded_is_skipped_and_not_sound() -> None:
    rows = (CoverageRow((), frozenset(), frozenset(), 5.0, 5.0),
            _row(("a",), {"x"}, {"x"}), _row(("b",), {"x"}, {"x"}), _row(("c",), {"y"}, {"y"}),
            _row(("a", "b"), {"x"}, {"x"}))
    report = CoverageReport("toy", 0, rows, excluded=(("b", "c"),))
    assert report.skipped == (("a", "c"),)
    text = report.render()
    assert "pairs of mistakes: 3; examined 1" in text
    assert "(declared in excludes), 1 skipped" in text and "SKIPPED a + c" in text
    assert not report.sound and "NOT sound" in text


def test_switches_answer_as_the_set_and_note_only_what_was_asked() -> None:
    switches = _Switches(frozenset({"a", "b"}))
    assert "a" in switches and "c" not in switches
    assert switches & {"b", "d"} == frozenset({"b"}) == {"b", "e"} & switches
    assert switches.isdisjoint({"f"}) and switches.intersection({"a", "g"}) == {"a"}
    assert switches.asked == frozenset("abcdefg")


@pytest.mark.parametrize("read", [len, list, hash, bool, sorted, repr, frozenset,
                                  lambda s: s == frozenset({"a"}), lambda s: s | {"x"},
                                  lambda s: s - {"a"}, lambda s: {"a"} <= s])
def test_a_read_of_the_whole_set_asks_about_every_switch(read: Callable[[Any], Any]) -> None:
    switches = _Switches(frozenset({"a"}))
    assert read(switches) == read(frozenset({"a"}))
    assert switches.asked is None


def test_a_run_stands_for_the_mistakes_that_answer_its_questions_alike() -> None:
    outcome = CallOutcome(id="c", status="ok", forwards=())
    run = _Traced(frozenset({"a", "b"}), frozenset({"a", "c"}), outcome)
    assert run.same_for(frozenset({"a"})) and run.same_for(frozenset({"a", "d"}))
    assert not run.same_for(frozenset({"b"})) and not run.same_for(frozenset({"a", "c"}))
    whole = _Traced(frozenset({"a"}), None, outcome)
    assert whole.same_for(frozenset({"a"})) and not whole.same_for(frozenset({"a", "d"}))
