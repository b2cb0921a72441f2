"""The mutation search on a scaffolded assignment, through the real local sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main

pytestmark = pytest.mark.slow


def test_mutants_of_the_scaffold_are_graded_and_sorted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AUTOGRADE_ASSIGNMENTS_DIR", str(tmp_path))
    assert main(["assignments", "new", "week-one"]) == 0
    report = tmp_path / "mutants.json"
    assert main(["assignments", "mutants", "week-one", "--limit", "12", "--jobs", "2",
                 "--json", str(report)]) == 0
    text = capsys.readouterr().out
    document = json.loads(report.read_text())
    assert document["graded"] == 12 and document["total"] > 12
    assert sum(document["counts"].values()) == 12
    by_change = {(m["before"], m["after"]): m for m in document["mutants"]}
    # Dropping the scale is the scaffold's catalogued mistake: named, never full marks.
    dropped = by_change.get(("q @ k.transpose(-2, -1) * scale", "q @ k.transpose(-2, -1)"))
    if dropped is not None:
        assert dropped["verdict"] == "named" and dropped["codes"] == ["missing-scale"]
    for mutant in document["mutants"]:
        assert mutant["verdict"] in {"full-marks", "wrong-output", "named", "crashed"}
        if mutant["verdict"] == "full-marks":
            assert mutant["score"] == mutant["max_score"]
        else:
            assert mutant["score"] < mutant["max_score"] and mutant["codes"]
    assert "Mutation search for week-one" in text
    # A dropped softmax-free transpose of k cannot run on (T, D) @ (S, D): a crash, not a hole.
    assert all(m["verdict"] != "full-marks" for m in document["mutants"]
               if m["operator"] == "drop-method")


_SHARED_HELPER = '''
def _scale(d: int, mistakes: frozenset[str]) -> float:
    """1 / sqrt(d), or a known mistake's scale."""
    if "missing-scale" in mistakes:
        return 1.0
    if "wrong-scale-d" in mistakes:
        return 1.0 / d
    return 1.0 / math.sqrt(d)


def scores(q: torch.Tensor, k: torch.Tensor, *,
           mistakes: frozenset[str] = frozenset()) -> torch.Tensor:
    """q (..., T, D), k (..., S, D) -> q kᵀ / sqrt(D)."""
    scale = _scale(q.shape[-1], mistakes)
    if "input-mutated" in mistakes:
        q = q.mul_(scale)
        scale = 1.0
    result = (q @ k.transpose(-2, -1)) * scale
    if "dtype-changed" in mistakes:
        return result.float()
    return result


class Scores(torch.nn.Module):
    """The same scores as a module."""

    def __init__(self, mistakes: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.mistakes = mistakes

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (q @ k.transpose(-2, -1)) * _scale(d=q.shape[-1], mistakes=self.mistakes)


def namespace(mistakes: frozenset[str]) -> dict[str, Any]:
    """What a submission with exactly these mistakes would export."""
    return {"scores": functools.partial(scores, mistakes=mistakes),
            "Scores": functools.partial(Scores, mistakes=mistakes)}
'''


def test_a_helper_shared_by_a_function_and_a_module_is_stripped_at_its_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AUTOGRADE_ASSIGNMENTS_DIR", str(tmp_path))
    assert main(["assignments", "new", "week-one"]) == 0
    package = tmp_path / "week-one"
    spec = package / "assignment.toml"
    spec.write_text(spec.read_text().replace('required_names = ["scores"]',
                                             'required_names = ["scores", "Scores"]'))
    reference = package / "hidden" / "reference.py"
    text = reference.read_text()
    reference.write_text(text[:text.index("def scores(")] + _SHARED_HELPER.lstrip())
    capsys.readouterr()
    assert main(["assignments", "mutants", "week-one", "--limit", "4", "--jobs", "2",
                 "--operators", "constant,sign", "--only", "named,crashed", "--json", "-"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["graded"] == 4
    assert {m["operator"] for m in document["mutants"]} <= {"constant", "sign"}
    assert {m["verdict"] for m in document["mutants"]} <= {"named", "crashed"}
    assert len(document["mutants"]) == document["counts"]["named"] + document["counts"][
        "crashed"]

    # A reference that still breaks once stripped: the exception and the line, not a score.
    reference.write_text(reference.read_text().replace(
        "    return 1.0 / math.sqrt(d)",
        "    assert mistakes <= {mistake.id for mistake in MISTAKES}\n"
        "    return 1.0 / math.sqrt(d)"))
    assert main(["assignments", "mutants", "week-one", "--limit", "4"]) == 2
    error = capsys.readouterr().err
    assert "NameError: name 'KnownMistake' is not defined" in error
    assert "the stripped reference, line " in error and "MISTAKES: list[KnownMistake]" in error
