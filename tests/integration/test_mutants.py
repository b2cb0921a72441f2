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
