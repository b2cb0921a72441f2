"""Shared fixtures: the shipped assignments, a grading pipeline on the local sandbox, the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from assignments import Assignment, load_assignment
from grader.pipeline import GradingPipeline
from sandbox.local import LocalBackend

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS / "corpus"


@pytest.fixture(scope="session")
def attention() -> Assignment:
    return load_assignment("attention")


@pytest.fixture(scope="session")
def mha() -> Assignment:
    return load_assignment("multi-head-attention")


@pytest.fixture(scope="session")
def local_pipeline() -> GradingPipeline:
    return GradingPipeline(backend=LocalBackend())


def corpus_file(slug: str, name: str) -> dict[str, bytes]:
    """A corpus submission as the files mapping the pipeline takes."""
    return {name: (CORPUS / slug / name).read_bytes()}


from tests.servicekit import *  # noqa: E402, F403 - the grading service's fixtures
from tests.webhookkit import receiver  # noqa: E402, F401 - a real webhook receiver
