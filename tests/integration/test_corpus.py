"""The corpus of independently written student submissions, graded through the local sandbox.

Each file's manifest entry states the exact set of feedback codes and the exact score its real
outputs deserve: correct submissions in many styles, every SPEC code from at least two
differently written files, and combinations of two mistakes.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator

import pytest

from devkit.corpora import (
    SLUGS,
    CorpusFile,
    assert_complete,
    base_seed,
    corpus_files,
    grade,
    graded_ahead,
    selected_files,
)
from devkit.paths import CORPUS
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline


@pytest.fixture(scope="module", autouse=True)
def _graded_ahead(request: pytest.FixtureRequest,
                  local_pipeline: GradingPipeline) -> Iterator[None]:
    """The selected files are graded in the background, one sandbox per core."""
    files = selected_files(request, "test_corpus_submission_gets_its_exact_codes_and_score")
    with graded_ahead(local_pipeline, [(file, base_seed(file.path.name)) for file in files]):
        yield


@pytest.mark.slow
@pytest.mark.parametrize("file", [pytest.param(f, id=f.id) for f in corpus_files(CORPUS)])
def test_corpus_submission_gets_its_exact_codes_and_score(
        local_pipeline: GradingPipeline, file: CorpusFile) -> None:
    verdict = grade(local_pipeline, file, base_seed(file.path.name))
    assert_complete(verdict.document, load_assignment(file.slug))
    assert verdict.codes == file.codes, verdict.document["output"]
    assert verdict.score == pytest.approx(file.score), verdict.document["output"]


def test_every_spec_code_is_produced_by_two_different_corpus_files() -> None:
    seen: dict[str, set[str]] = {}
    for slug in SLUGS:
        manifest = tomllib.loads((CORPUS / slug / "manifest.toml").read_text(encoding="utf-8"))
        for name, expected in manifest["files"].items():
            for code in expected["codes"]:
                seen.setdefault(code, set()).add(f"{slug}/{name}")
    from grader.feedback import catalogue_of

    codes = {code for slug in SLUGS for code in catalogue_of(load_assignment(slug))}
    missing = {code: len(seen.get(code, ())) for code in codes if len(seen.get(code, ())) < 2}
    assert not missing, f"codes with fewer than two corpus files: {missing}"


def test_the_corpus_has_correct_submissions_and_combinations() -> None:
    for slug in SLUGS:
        manifest = tomllib.loads((CORPUS / slug / "manifest.toml").read_text(encoding="utf-8"))
        files = manifest["files"].values()
        assert sum(1 for f in files if not f["codes"]) >= 4, slug
        assert sum(1 for f in files if len(f["codes"]) == 2) >= 3, slug
