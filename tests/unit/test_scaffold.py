"""`autograde assignments new` writes a package that `assignments check` proves sound, found
through AUTOGRADE_ASSIGNMENTS_DIR; `check` explains a broken package in the author's terms."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assignments.spec import AssignmentError, list_assignments, load_spec
from assignments.starter_notebook import starter_notebook
from grader.authoring import coverage_report
from grader.loader import load_assignment
from service.cli import main


@pytest.fixture
def course(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOGRADE_ASSIGNMENTS_DIR", str(tmp_path))
    return tmp_path


def test_new_then_check_is_sound(course: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["assignments", "new", "week-one"]) == 0
    assert (course / "week-one" / "hidden" / "reference.py").is_file()
    assert "week-one" in list_assignments()
    assert main(["assignments", "check", "week-one"]) == 0
    out = capsys.readouterr().out
    assert "sound" in out and "NOT sound" not in out
    assert load_assignment("week-one").entry == "week_one.py"


@pytest.mark.slow
def test_public_tests_pass_on_a_correct_solution(course: Path) -> None:
    assert main(["assignments", "new", "week-one"]) == 0
    package = course / "week-one"
    solution = (package / "starter" / "week_one.py").read_text().replace(
        "raise NotImplementedError",
        "return q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5")
    (course / "week_one.py").write_text(solution)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               str(package / "public_tests")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=course,
                          env={**os.environ, "SUBMISSION": str(course / "week_one.py")})
    assert done.returncode == 0, done.stdout + done.stderr
    starter = subprocess.run(command, capture_output=True, text=True, cwd=course)
    assert starter.returncode == 1  # the starter raises NotImplementedError


def test_new_refuses_bad_or_taken_slugs(course: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["assignments", "new", "../escape"]) == 2
    assert "bad slug" in capsys.readouterr().err
    assert main(["assignments", "new", "attention"]) == 2
    assert "exists already" in capsys.readouterr().err
    assert not list(course.iterdir())


def test_new_without_a_course_folder_is_a_clear_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AUTOGRADE_ASSIGNMENTS_DIR", raising=False)
    assert main(["assignments", "new", "week-one"]) == 2
    assert "AUTOGRADE_ASSIGNMENTS_DIR" in capsys.readouterr().err


def test_check_explains_a_mistake_that_changes_nothing(course: Path) -> None:
    assert main(["assignments", "new", "week-one"]) == 0
    reference = course / "week-one" / "hidden" / "reference.py"
    reference.write_text(reference.read_text().replace("scale = 1.0\n    elif", "pass\n    elif"))
    report = coverage_report(load_assignment("week-one"), seed=0)
    assert not report.sound
    text = report.render()
    assert coverage_report(load_assignment("week-one"), seed=0, workers=2).render() == text
    assert "mistake missing-scale scores full marks" in text
    assert "not recognised: missing-scale" in text  # in its pairs
    assert "check 1.3 (output dtype equals input dtype) lost points" in text


def test_an_unknown_feedback_code_is_named(course: Path) -> None:
    assert main(["assignments", "new", "week-one"]) == 0
    reference = course / "week-one" / "hidden" / "reference.py"
    reference.write_text(reference.read_text().replace('"wrong-scale", "scores divided',
                                                       '"scale-by-d", "scores divided'))
    with pytest.raises(AssignmentError, match="'scale-by-d', which is neither lab-neutral nor "
                       r"declared: add a \[codes.scale-by-d\] table") as refused:
        load_assignment("week-one")
    assert str(refused.value).startswith(f"{reference}:23: ")


def test_new_writes_the_starter_notebook_the_shipped_labs_have(course: Path) -> None:
    import nbformat

    assert main(["assignments", "new", "week-one"]) == 0
    path = course / "week-one" / "starter" / "week_one.ipynb"
    assert path.read_text() == starter_notebook(load_spec("week-one"))
    notebook = nbformat.reads(path.read_text(), as_version=4)  # type: ignore[no-untyped-call]
    nbformat.validate(notebook)
    sources = [cell.source for cell in notebook.cells]
    starter = (course / "week-one" / "starter" / "week_one.py").read_text()
    assert starter.rstrip("\n") in sources
    assert any('autograde.check("week-one")' in source for source in sources)


EPSILONS = {"scale-epsilon": ("sqrt(D + 1e-4)", "1.0 / math.sqrt(d + 1e-4)"),
            "scale-epsilon-outside": ("sqrt(D) + 4e-5", "1.0 / (math.sqrt(d) + 4e-5)")}


def _with_epsilons(package: Path, epsilons: dict[str, tuple[str, str]] = EPSILONS) -> None:
    """More scale mistakes, each of its own code (by default two that move the float64 scores
    by fewer tolerances than the evidence margin, about 6 and 14, and differ by 8)."""
    reference = package / "hidden" / "reference.py"
    text = reference.read_text()
    for mistake, (description, scale) in epsilons.items():
        declared = f'KnownMistake("{mistake}", "{mistake}", "{description}", excludes=_SCALES)'
        text = text.replace('    KnownMistake("wrong-scale-d"',
                            f'    {declared},\n    KnownMistake("wrong-scale-d"')
        text = text.replace('    elif "wrong-scale-d" in mistakes:',
                            f'    elif "{mistake}" in mistakes:\n        scale = {scale}\n'
                            '    elif "wrong-scale-d" in mistakes:')
    reference.write_text(text.replace('"wrong-scale-d"})', '"wrong-scale-d", *EPSILONS})').replace(
        "_SCALES = ", f"EPSILONS = {sorted(epsilons)!r}\n_SCALES = "))
    spec = package / "assignment.toml"
    spec.write_text(spec.read_text() + "".join(
        f'\n[codes.{mistake}]\ntitle = "an epsilon in the scale"\n'
        'message = "On {input}, your scores match {variant}."\nhint = "D is never zero."\n'
        for mistake in epsilons))


def test_mistakes_below_the_evidence_margin_are_named_or_shown_as_blind_spots(
        course: Path) -> None:
    assert main(["assignments", "new", "week-one"]) == 0
    _with_epsilons(course / "week-one")
    report = coverage_report(load_assignment("week-one"), seed=0)
    rows = {row.mistakes: row for row in report.rows}
    # Each alone: named by its own code, though the call cannot tell either from the reference.
    assert all(rows[(mistake,)].ok for mistake in EPSILONS)
    # Beside a float32 answer, neither shows: check says where, by how much, and what would.
    assert not rows[("scale-epsilon", "dtype-changed")].ok
    text = report.render()
    assert ("scale-epsilon beside dtype-changed moves no call's outputs by more than 20 "
            "tolerances, the least that is evidence: at most 0.0245 on call heads") in text
    assert "Add a call on whose input the step it changes matters more" in text


def test_two_mistakes_no_call_tells_apart_are_shown_as_such(course: Path) -> None:
    """sqrt(D + 1e-4) and sqrt(D) + 1.768e-5 agree to a fraction of a tolerance for D = 8."""
    assert main(["assignments", "new", "week-one"]) == 0
    _with_epsilons(course / "week-one", {
        "scale-epsilon": EPSILONS["scale-epsilon"],
        "scale-epsilon-outside": ("sqrt(D) + 1.768e-5", "1.0 / (math.sqrt(d) + 1.768e-5)")})
    report = coverage_report(load_assignment("week-one"), seed=0)
    assert not report.sound
    assert ("- no call tells scale-epsilon-outside (scale-epsilon-outside) from scale-epsilon "
            "(scale-epsilon): their outputs are at most") in report.render()
