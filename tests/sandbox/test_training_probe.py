"""The ``learns`` check through the real sandboxes: the training runs next to the student's code,
only data comes back, and the host's verdict is the same from the local and the Docker backend."""

from __future__ import annotations

from typing import Any

import pytest

from devkit.corpora import corpus_file
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline
from sandbox import SandboxBackend
from sandbox.local import LocalBackend

CASES = [
    ("attention", "correct_matmul.py", "1.11", []),
    ("attention", "softmax_dim_minus2.py", "1.11", ["softmax-wrong-axis"]),
    ("multi-head-attention", "correct_einsum.py", "2.15", []),
    ("multi-head-attention", "causal_ignored.py", "2.15", ["causal-leak"]),
]


def _learns(backend: SandboxBackend, slug: str, name: str, number: str,
            seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    document = GradingPipeline(backend=backend).grade(
        load_assignment(slug), corpus_file(slug, name), seed=seed)
    test, = [t for t in document["tests"] if t["number"] == number]
    return document, test


def _assert_verdict(document: dict[str, Any], test: dict[str, Any], codes: list[str]) -> None:
    if not codes:
        assert test["status"] == "passed", test["output"]
        assert document["diagnoses"] == []
    else:
        assert (test["status"], test["score"]) == ("failed", 0.0)
        assert test["tags"] == codes, test["output"]
        assert [d["code"] for d in document["diagnoses"]] == codes


@pytest.mark.slow
@pytest.mark.parametrize(("slug", "name", "number", "codes"), CASES)
def test_the_local_sandbox_trains_and_the_host_judges(slug: str, name: str, number: str,
                                                      codes: list[str]) -> None:
    document, test = _learns(LocalBackend(), slug, name, number, seed=5)
    _assert_verdict(document, test, codes)


@pytest.mark.docker
@pytest.mark.parametrize(("slug", "name", "number", "codes"), CASES)
def test_the_docker_sandbox_trains_and_the_host_judges(docker_backend: SandboxBackend, slug: str,
                                                       name: str, number: str,
                                                       codes: list[str]) -> None:
    document, test = _learns(docker_backend, slug, name, number, seed=5)
    _assert_verdict(document, test, codes)
