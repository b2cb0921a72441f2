"""The attention map of a diagnosis is built from what the Docker sandbox handed back (the
student's returned weights, as safetensors), the same as from the local backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.loader import load_assignment
from grader.pipeline import GradingPipeline
from sandbox.local import LocalBackend

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "attention"
SEED = 5


@pytest.mark.docker
def test_the_map_of_a_docker_grading_is_the_students_returned_weights(
        docker_backend: object) -> None:
    assignment = load_assignment("attention")
    files = {"attention.py": (CORPUS / "softmax_dim_minus2.py").read_bytes()}
    maps = []
    for backend in (docker_backend, LocalBackend()):
        document = GradingPipeline(backend=backend).grade(  # type: ignore[arg-type]
            assignment, files, seed=SEED)
        (diagnosis,) = [d for d in document["diagnoses"] if d["code"] == "softmax-wrong-axis"]
        maps.append(diagnosis["attention_map"])
    docker_map, local_map = maps
    assert docker_map["source"] == "returned"
    assert docker_map == local_map
    (panel,) = docker_map["panels"]
    # The wrong axis, seen in the numbers: columns sum to 1, rows do not.
    columns = [sum(row[j] for row in panel["student"]) for j in range(len(panel["student"][0]))]
    assert all(abs(total - 1) < 1e-3 for total in columns)
    assert any(abs(sum(row) - 1) > 0.05 for row in panel["student"])
