"""Grading through the local sandbox: complete documents for good and bad submissions alike."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from assignments import Assignment
from devkit.corpora import assert_complete, corpus_file
from devkit.paths import CORPUS
from grader.pipeline import GradingPipeline


def _codes(document: dict[str, Any]) -> set[str]:
    return {diagnosis["code"] for diagnosis in document["diagnoses"]}


def test_a_correct_submission_gets_full_marks_and_no_code(
        local_pipeline: GradingPipeline, attention: Assignment) -> None:
    document = local_pipeline.grade(attention, corpus_file("attention", "correct_matmul.py"))
    assert_complete(document, attention)
    assert document["score"] == attention.max_score and _codes(document) == set()
    assert "All checks passed" in document["output"]
    (training,) = document["training"]  # the curve the student sees: theirs against the reference
    assert (training["tests"], training["passed"], training["outcome"]) == (
        ["1.11"], True, "learned")
    assert len(training["curve"]) == len(training["reference_curve"]) == len(training["steps"])
    assert training["curve"][-1] < 0.5 * training["curve"][0]


def test_the_seed_makes_a_regrade_reproducible(
        local_pipeline: GradingPipeline, attention: Assignment) -> None:
    files = corpus_file("attention", "softmax_dim_minus2.py")
    first = local_pipeline.grade(attention, files)
    again = local_pipeline.grade(attention, files, seed=first["autograde"]["seed"])
    assert _codes(first) == _codes(again) == {"softmax-wrong-axis"}
    assert [t["output"] for t in first["tests"]] == [t["output"] for t in again["tests"]]


@pytest.mark.parametrize(("source", "code"), [
    (b"", "interface-error"),
    (b"\x00\x01\xff\xfe binary", "syntax-error"),
    (b"#" * ((1 << 20) + 1), "interface-error"),
    (b"def attention(q, k, v, allowed)\n    return q\n", "syntax-error"),
    (b"import torch\n\ndef attend(q, k, v, allowed):\n    return q, q\n", "interface-error"),
    (b"import torch\n\ndef attention(q, k, v):\n    return q, q\n", "interface-error"),
    (b"import torch\n\ndef attention(q, k, v, allowed):\n    return q @ k.transpose(-2, -1)\n",
     "interface-error"),
    (b"raise RuntimeError('boom at import')\n", "runtime-error"),
    (b"import torch\n\ndef attention(q, k, v, allowed):\n    return 1 / 0\n", "runtime-error"),
])
def test_bad_input_gets_a_complete_document_with_its_code(
        local_pipeline: GradingPipeline, attention: Assignment, source: bytes, code: str) -> None:
    document = local_pipeline.grade(attention, {"attention.py": source})
    assert_complete(document, attention)
    assert document["score"] == 0
    assert code in _codes(document)


def test_nan_outputs_fail_without_crashing_the_grader(
        local_pipeline: GradingPipeline, attention: Assignment) -> None:
    source = (b"import torch\n\ndef attention(q, k, v, allowed):\n"
              b"    if not allowed.any(-1).all():\n        raise ValueError('row')\n"
              b"    w = torch.full(q.shape[:-1] + k.shape[-2:-1], float('nan'), dtype=q.dtype)\n"
              b"    return w @ v, w\n")
    document = local_pipeline.grade(attention, {"attention.py": source})
    assert_complete(document, attention)
    assert "wrong-output" in _codes(document)
    assert any("NaN" in t["output"] for t in document["tests"])


def test_the_runtime_error_points_at_the_students_line(
        local_pipeline: GradingPipeline, attention: Assignment) -> None:
    source = (b"import torch\n\n\ndef attention(q, k, v, allowed):\n"
              b"    scores = q @ k\n    return scores, scores\n")
    document = local_pipeline.grade(attention, {"attention.py": source})
    runtime = [d for d in document["diagnoses"] if d["code"] == "runtime-error"]
    assert runtime and "RuntimeError" in runtime[0]["message"]
    assert "line 5" in runtime[0]["message"]


def test_cli_json_prints_exactly_the_document_and_exits_zero() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "service.cli", "grade", "--assignment", "attention",
         "--backend", "local", "--json", str(CORPUS / "attention" / "no_scale_matmul.py")],
        capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert _codes(document) == {"missing-scale"}
    assert document["score"] < document["max_score"]


def test_cli_report_is_readable() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "service.cli", "grade", "--assignment", "attention",
         "--backend", "local", str(CORPUS / "attention" / "no_scale_matmul.py")],
        capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0
    assert "Score:" in completed.stdout and "[missing-scale]" in completed.stdout
    assert "Hint:" in completed.stdout
    (training,) = [line for line in completed.stdout.splitlines() if line.startswith("Training")]
    assert re.fullmatch(r"Training \(check 1\.11\): loss \S+ -> \S+, reference -> \S+; "
                        r"held-out accuracy \d+%, reference \d+%: .+", training), training


def test_cli_unknown_assignment_is_a_clear_error() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "service.cli", "grade", "--assignment", "nope", "x.py"],
        capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 2
    assert "unknown assignment 'nope'" in completed.stderr
    assert "Traceback" not in completed.stderr
