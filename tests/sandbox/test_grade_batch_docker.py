"""A folder graded through the Docker backend's one warm pool, several submissions at once,
judged as the corpus manifest says."""

from __future__ import annotations

import tomllib

import pytest

from assignments import Assignment
from grader.pipeline import GradingPipeline
from sandbox.docker_backend import DockerBackend
from service.cli.batch import Entry, grade_all
from tests.conftest import CORPUS

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NAMES = ("correct_einsum.py", "softmax_dim_minus2.py", "mask_inverted_where.py")


def test_submissions_graded_at_once_share_the_warm_pool(docker_backend: DockerBackend,
                                                        attention: Assignment) -> None:
    manifest = tomllib.loads((CORPUS / "attention" / "manifest.toml").read_text())["files"]
    entries = [Entry(name, {name: (CORPUS / "attention" / name).read_bytes()}) for name in NAMES]
    entries.append(Entry("notes.txt", problem="neither a .py file nor a folder"))
    seen = []
    outcomes = grade_all(GradingPipeline(backend=docker_backend), attention, entries, jobs=2,
                         seed=5, done=lambda outcome: seen.append(outcome.entry.name))
    assert sorted(seen) == sorted(e.name for e in entries)
    assert [o.entry.name for o in outcomes] == [e.name for e in entries]
    for outcome in outcomes[:3]:
        assert outcome.document is not None, outcome.error
        assert outcome.document["autograde"]["backend"] == "docker"
        expected = manifest[outcome.entry.name]
        assert [d["code"] for d in outcome.document["diagnoses"]] == expected["codes"]
        assert outcome.document["score"] == expected["score"]
    assert outcomes[3].error == "neither a .py file nor a folder"
