"""Behaviour fingerprints as a grading stores them: equal for one submission on two seeds,
different for two unexplained mistakes, absent where the catalogue explains the outputs."""

from __future__ import annotations

from assignments import Assignment
from devkit.paths import UNEXPLAINED_CORPUS
from grader.fingerprints import fingerprint_of
from grader.pipeline import GradingPipeline


def _files(name: str) -> dict[str, bytes]:
    return {"attention.py": (UNEXPLAINED_CORPUS / "attention" / name).read_bytes()}


def test_a_graded_fingerprint_is_the_same_on_two_seeds_and_names_its_neighbours(
        local_pipeline: GradingPipeline, attention: Assignment) -> None:
    first = local_pipeline.grade(attention, _files("plus_one_matmul.py"), seed=3)
    again = local_pipeline.grade(attention, _files("plus_one_einsum.py"), seed=4)
    other = local_pipeline.grade(attention, _files("cosine_norms.py"), seed=3)
    assert [d["code"] for d in first["diagnoses"]] == ["wrong-output"]
    found, same, different = (fingerprint_of(d) for d in (first, again, other))
    assert found is not None and same is not None and different is not None
    assert found.key == same.key  # another seed, another style: the same mistake
    assert found.distance(different) > 0.1
    assert "check:1.2" in found.tokens  # the weights no longer sum to 1
    assert found.nearest and all(0 < near.distance <= 1 for near in found.nearest)


def test_an_explained_submission_stores_no_behaviour(
        local_pipeline: GradingPipeline, attention: Assignment) -> None:
    document = local_pipeline.grade(attention, _files("no_scale_matmul.py"), seed=3)
    assert [d["code"] for d in document["diagnoses"]] == ["missing-scale"]
    assert "behaviour" not in document and fingerprint_of(document) is None
