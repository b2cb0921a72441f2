"""The corpus of independently written student submissions, graded through the local sandbox.

Each file's manifest entry states the exact set of feedback codes and the exact score its real
outputs deserve: correct submissions in many styles, every SPEC code from at least two
differently written files, and combinations of two mistakes.
"""

from __future__ import annotations

import tomllib
import zlib
from typing import Any

import pytest

from assignments import load_assignment
from grader.pipeline import GradingPipeline
from tests.conftest import CORPUS
from tests.integration.test_grade_local import assert_complete

SLUGS = ("attention", "multi-head-attention")


def _entries() -> list[Any]:
    params = []
    for slug in SLUGS:
        manifest = tomllib.loads((CORPUS / slug / "manifest.toml").read_text(encoding="utf-8"))
        for name, expected in sorted(manifest["files"].items()):
            params.append(pytest.param(slug, name, expected, id=f"{slug}/{name}"))
    return params


@pytest.mark.slow
@pytest.mark.parametrize(("slug", "name", "expected"), _entries())
def test_corpus_submission_gets_its_exact_codes_and_score(
        local_pipeline: GradingPipeline, slug: str, name: str, expected: dict[str, Any]) -> None:
    assignment = load_assignment(slug)
    seed = zlib.crc32(name.encode())  # fixed per file, different across files
    document = local_pipeline.grade(assignment, {name: (CORPUS / slug / name).read_bytes()},
                                    seed=seed)
    assert_complete(document, assignment)
    codes = {diagnosis["code"] for diagnosis in document["diagnoses"]}
    assert codes == set(expected["codes"]), document["output"]
    assert document["score"] == pytest.approx(expected["score"]), document["output"]


def test_every_spec_code_is_produced_by_two_different_corpus_files() -> None:
    seen: dict[str, set[str]] = {}
    for slug in SLUGS:
        manifest = tomllib.loads((CORPUS / slug / "manifest.toml").read_text(encoding="utf-8"))
        for name, expected in manifest["files"].items():
            for code in expected["codes"]:
                seen.setdefault(code, set()).add(f"{slug}/{name}")
    from grader.feedback import CATALOGUE

    missing = {code: len(seen.get(code, ())) for code in CATALOGUE if len(seen.get(code, ())) < 2}
    assert not missing, f"codes with fewer than two corpus files: {missing}"


def test_the_corpus_has_correct_submissions_and_combinations() -> None:
    for slug in SLUGS:
        manifest = tomllib.loads((CORPUS / slug / "manifest.toml").read_text(encoding="utf-8"))
        files = manifest["files"].values()
        assert sum(1 for f in files if not f["codes"]) >= 4, slug
        assert sum(1 for f in files if len(f["codes"]) == 2) >= 3, slug
