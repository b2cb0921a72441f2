"""The shipped assignment packages: specs load, hidden parts stay hidden, plans are seeded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assignments import Assignment, AssignmentError, list_assignments
from assignments.spec import load_spec
from assignments.starter_notebook import starter_notebook
from grader.loader import load_assignment


def test_the_shipped_assignments() -> None:
    assert list_assignments() == ["adamw", "attention", "attention-kv-cache", "cross-entropy",
                                  "multi-head-attention"]


def test_unknown_assignment_is_a_clear_error() -> None:
    with pytest.raises(AssignmentError, match="unknown assignment 'nope'"):
        load_assignment("nope")


@pytest.mark.parametrize(("slug", "max_score"), [
    ("attention", 11), ("multi-head-attention", 11),  # ten for the probes, one for learning
    ("attention-kv-cache", 10),  # no training check yet
    ("adamw", 10),
    ("cross-entropy", 10),
])
def test_scores_and_numbers(slug: str, max_score: int) -> None:
    assignment = load_assignment(slug)
    assert assignment.max_score == max_score
    numbers = [check.number for check in assignment.checks]
    assert len(numbers) == len(set(numbers))


@pytest.mark.parametrize("slug", ["attention", "multi-head-attention", "attention-kv-cache",
                                  "adamw", "cross-entropy"])
def test_public_files_hold_nothing_hidden(slug: str) -> None:
    assignment = load_assignment(slug)
    assert "README.md" in assignment.public_files
    for name, path in assignment.public_files.items():
        assert "hidden" not in path.parts, name
    assert any(name.startswith("starter/") for name in assignment.public_files)
    assert any(name.startswith("public_tests/") for name in assignment.public_files)


def test_the_runner_plan_carries_calls_and_inputs_only(mha: Assignment) -> None:
    plan = mha.build_plan(3)
    document = json.loads(plan.runner_json())
    assert set(document) == {"entry", "call_timeout", "run_seconds", "memory_bytes", "forbidden",
                             "calls"}
    text = json.dumps(document)
    for hidden_word in ("describe", "group", "meta", "mistake", "reference", "expected"):
        assert hidden_word not in text


def test_plans_are_reproducible_by_seed_and_differ_between_seeds(attention: Assignment) -> None:
    first, again, other = (attention.build_plan(s) for s in (5, 5, 6))
    assert first.inputs_safetensors() == again.inputs_safetensors()
    assert first.inputs_safetensors() != other.inputs_safetensors()


@pytest.mark.parametrize("slug", list_assignments())
def test_each_starter_notebook_is_the_starter_as_written_now(slug: str) -> None:
    spec = load_spec(slug)
    path = spec.root / "starter" / (Path(spec.entry).stem + ".ipynb")
    assert path.read_text(encoding="utf-8") == starter_notebook(spec), (
        f"rewrite it: python -m assignments.starter_notebook {slug}")
