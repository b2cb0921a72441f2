"""Feedback codes declared by assignments: the tables' shape, and the loader's refusals, each
naming the file and line to fix."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignments import AssignmentError
from assignments.codes import SLOTS, CatalogueError, read_codes
from grader.feedback import NEUTRAL, catalogue_of
from grader.loader import load_assignment

SHIPPED = Path(__file__).resolve().parents[2] / "assignments"

literal = st.text(st.characters(min_codepoint=32, max_codepoint=0x24f,
                                blacklist_characters="{}", blacklist_categories=("Cc", "Cs")),
                  max_size=12)
known_slot = st.sampled_from(sorted(SLOTS)).map(lambda name: "{" + name + "}")
other_name = st.from_regex(r"[a-z_]{1,10}", fullmatch=True).filter(lambda n: n not in SLOTS)


def _catalogue(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "codes.toml"
    path.write_text(body, encoding="utf-8")
    return path


def _table(message: str) -> str:
    escaped = message.replace("\\", "\\\\").replace('"', '\\"')
    return f'# a comment\n\n[codes.my-code]\ntitle = "t"\nmessage = "{escaped}"\nhint = "h"\n'


@given(st.lists(st.one_of(literal, known_slot), max_size=6))
def test_a_message_of_known_slots_is_accepted(tmp_path_factory: pytest.TempPathFactory,
                                              parts: list[str]) -> None:
    message = "On " + "".join(parts)
    path = _catalogue(tmp_path_factory.mktemp("codes"), _table(message))
    declared = read_codes(path)["my-code"]
    assert declared.text is not None and declared.text.message == message
    assert declared.where == f"{path}:3"


@given(literal, other_name, literal)
def test_an_unknown_slot_is_refused_with_its_name_and_line(
        tmp_path_factory: pytest.TempPathFactory, before: str, name: str, after: str) -> None:
    path = _catalogue(tmp_path_factory.mktemp("codes"), _table(f"{before}{{{name}}}{after}"))
    with pytest.raises(CatalogueError) as refused:
        read_codes(path)
    assert str(refused.value).startswith(f"{path}:3: ")
    assert f"{{{name}}}" in str(refused.value) and "{input}" in str(refused.value)


@pytest.mark.parametrize(("table", "says"), [
    ('title = "t"\nmessage = "m"\n', "has no hint"),
    ('title = "t"\nhint = "h"\n', "has no message"),
    ('title = "t"\nmessage = "m"\nhint = "h"\ncolour = "red"\n', "unknown keys colour"),
    ('title = "t"\nmessage = "m"\nhint = ""\n', "hint must be a non-empty string"),
    ('title = "{input}"\nmessage = "m"\nhint = "h"\n', "title uses the unknown slot {input}"),
    ('title = "t"\nmessage = "a {"\nhint = "h"\n', "not a valid template"),
])
def test_a_malformed_table_is_refused_at_its_line(tmp_path: Path, table: str, says: str) -> None:
    path = _catalogue(tmp_path, "title = 'x'\n\n[codes.my-code]\n" + table)
    with pytest.raises(CatalogueError, match=re.escape(says)) as refused:
        read_codes(path)
    assert str(refused.value).startswith(f"{path}:3: ")


def test_a_code_must_be_a_stable_identifier(tmp_path: Path) -> None:
    path = _catalogue(tmp_path, '[codes.Wrong_Axis]\ntitle = "t"\nmessage = "m"\nhint = "h"\n')
    with pytest.raises(CatalogueError, match="lower-case words joined by hyphens"):
        read_codes(path)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the shipped ``attention`` package and the course catalogue it names."""
    shutil.copytree(SHIPPED / "attention", tmp_path / "attention",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(SHIPPED / "catalogues", tmp_path / "catalogues")
    return tmp_path / "attention"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _line(path: Path, needle: str) -> int:
    return next(number for number, line in enumerate(
        path.read_text(encoding="utf-8").splitlines(), 1) if needle in line)


def test_the_copied_package_loads_with_the_course_words(package: Path) -> None:
    assignment = load_assignment("attention", root=package.parent)
    catalogue = catalogue_of(assignment)
    assert catalogue["mask-inverted"].title == "mask read the wrong way round"
    assert "softmax" in catalogue["wrong-output"].hint
    assert catalogue["wrong-output"].message == NEUTRAL["wrong-output"].message


def test_an_undeclared_mistake_code_is_refused_at_the_reference_line(package: Path) -> None:
    reference = package / "hidden" / "reference.py"
    _edit(reference, 'KnownMistake("missing-scale", "missing-scale"',
          'KnownMistake("missing-scale", "unscaled-scores"')
    with pytest.raises(AssignmentError) as refused:
        load_assignment("attention", root=package.parent)
    line = _line(reference, '"unscaled-scores"')
    assert str(refused.value).startswith(f"{reference}:{line}: known mistake 'missing-scale'")
    assert "[codes.unscaled-scores]" in str(refused.value)


def test_a_lab_declares_its_own_code_in_assignment_toml(package: Path) -> None:
    reference = package / "hidden" / "reference.py"
    _edit(reference, 'KnownMistake("missing-scale", "missing-scale"',
          'KnownMistake("missing-scale", "unscaled-scores"')
    spec = package / "assignment.toml"
    spec.write_text(spec.read_text(encoding="utf-8") + (
        '\n[codes.unscaled-scores]\ntitle = "no scale"\n'
        'message = "On {input}, your outputs match {variant}."\nhint = "Scale them."\n'),
        encoding="utf-8")
    assignment = load_assignment("attention", root=package.parent)
    assert catalogue_of(assignment)["unscaled-scores"].hint == "Scale them."


@pytest.mark.parametrize(("table", "says"), [
    ('[codes.mask-inverted]\nhint = "h"\n', "has only a hint, but 'mask-inverted' is not"),
    ('[codes.wrong-output]\ntitle = "t"\nmessage = "m"\nhint = "h"\n',
     "'wrong-output' is a lab-neutral code"),
    ('[codes.my-code]\ntitle = "t"\nmessage = "m"\nhint = "h"\nevidence = "vibes"\n',
     "evidence 'vibes' is not a check kind"),
    ('[codes.my-code]\ntitle = "t"\nmessage = "On {where}"\nhint = "h"\n',
     "unknown slot {where}"),
])
def test_the_loader_refuses_a_table_at_its_line(package: Path, table: str, says: str) -> None:
    spec = package / "assignment.toml"
    spec.write_text(spec.read_text(encoding="utf-8") + "\n" + table, encoding="utf-8")
    header = table.splitlines()[0]
    with pytest.raises(AssignmentError, match=re.escape(says)) as refused:
        load_assignment("attention", root=package.parent)
    assert str(refused.value).startswith(f"{spec}:{_line(spec, header)}: ")


def test_a_missing_shared_catalogue_is_named(package: Path) -> None:
    shutil.rmtree(package.parent / "catalogues")
    with pytest.raises(AssignmentError, match=r"codes_from names '../catalogues/attention.toml'"):
        load_assignment("attention", root=package.parent)


def test_a_check_kind_that_gives_a_code_needs_it_declared(package: Path) -> None:
    catalogue = package.parent / "catalogues" / "attention.toml"
    _edit(catalogue, "[codes.causal-leak]", "[codes.causal-leakage]")
    spec = package / "assignment.toml"
    with pytest.raises(AssignmentError, match="gives the code 'causal-leak'") as refused:
        load_assignment("attention", root=package.parent)
    assert str(refused.value).startswith(f"{spec}:")


def test_a_changed_shared_catalogue_is_a_new_version(package: Path) -> None:
    before = load_assignment("attention", root=package.parent).version
    _edit(package.parent / "catalogues" / "attention.toml", 'title = "scores not scaled"',
          'title = "the scores are not scaled"')
    assert load_assignment("attention", root=package.parent).version != before
