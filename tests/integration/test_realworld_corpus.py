"""Multi-seed grading of the corpora: a file's codes are a property of the file, not of the seed.

``tests/corpus-realworld`` holds submissions written after public attention code and the bug
reports about it (course repos, tutorials, model zoos); each must get exactly its manifest's
codes and score on every seed. The hand-written corpus in ``tests/corpus`` (exact codes on one
seed in ``test_corpus.py``) must get the same codes and score on every seed.

Every grading is a sandbox run, so this module is the slowest part of the slow suite (about 850
gradings at the default 5 seeds, 750 after test_corpus.py in the same session; the seed count is
AUTOGRADE_CORPUS_SEEDS=N, e.g. 2 for a quick local pass). ``tests/corpus-realworld/grade_with.py``
checks another worktree's grader against the same manifests and seeds.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devkit.corpora import (
    CorpusFile,
    assert_complete,
    corpus_files,
    describe,
    grade_on_seeds,
    graded_ahead,
    seeds_for,
    seeds_for_file,
    selected_files,
)
from devkit.paths import CORPUS, TESTS
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline

REALWORLD = TESTS / "corpus-realworld"

# Verdicts settled before any probe input exists or by a resource limit rather than by the
# inputs: one seed (test_corpus.py) says all there is, and a time limit costs its full wall clock.
SEED_FREE_CODES = frozenset({"syntax-error", "time-limit", "memory-limit", "output-limit"})

# Files whose mistake no grader branch can name yet, as strict xfails (checked against main and
# the verdicts branch of issue #10, which names every file of this corpus): the reason says
# what the grader reports instead. Until that branch is merged, main fails the files it misnames.
STILL_UNNAMED: dict[str, str] = {}


def _params(files: list[CorpusFile], *, unnamed: dict[str, str]) -> list[object]:
    return [pytest.param(file, id=file.id, marks=[pytest.mark.xfail(
        strict=True, reason=unnamed[file.id])] if file.id in unnamed else [])
        for file in files]


@pytest.fixture(scope="module", autouse=True)
def _graded_ahead(request: pytest.FixtureRequest,
                  local_pipeline: GradingPipeline) -> Iterator[None]:
    """Every selected file's seeds are graded in the background, one sandbox per core, in the
    tests' order: a file's last seeds would otherwise leave a core idle."""
    jobs = [(file, seed) for file in selected_files(
        request, "test_realworld_submission_gets_its_exact_codes_and_score_on_every_seed")
        for seed in seeds_for(file.path.name)]
    jobs += [(file, seed) for file in selected_files(
        request, "test_corpus_submission_gets_the_same_codes_and_score_on_every_seed")
        for seed in seeds_for_file(file)]
    with graded_ahead(local_pipeline, jobs):
        yield


def test_the_realworld_corpus_is_large_and_mixed() -> None:
    files = corpus_files(REALWORLD)
    for slug in ("attention", "multi-head-attention"):
        assert {p.name for p in (REALWORLD / slug).glob("*.py")} == {
            f.path.name for f in files if f.slug == slug}, f"{slug}: files and manifest differ"
    assert len(files) >= 40
    assert sum(1 for f in files if not f.codes) >= 15
    assert sum(1 for f in files if f.codes) >= 20


@pytest.mark.slow
@pytest.mark.parametrize("file", _params(corpus_files(REALWORLD), unnamed=STILL_UNNAMED))
def test_realworld_submission_gets_its_exact_codes_and_score_on_every_seed(
        local_pipeline: GradingPipeline, file: CorpusFile) -> None:
    assignment = load_assignment(file.slug)
    verdicts = grade_on_seeds(local_pipeline, file, seeds_for(file.path.name))
    for verdict in verdicts:
        assert_complete(verdict.document, assignment)
    expected = f"expected {sorted(file.codes)} {file.score}"
    assert all(v.codes == file.codes for v in verdicts), f"{expected}\n{describe(verdicts)}"
    assert all(v.score == pytest.approx(file.score) for v in verdicts), (
        f"{expected}\n{describe(verdicts)}")


@pytest.mark.slow
@pytest.mark.parametrize("file", _params(
    [f for f in corpus_files(CORPUS) if not f.codes & SEED_FREE_CODES], unnamed={}))
def test_corpus_submission_gets_the_same_codes_and_score_on_every_seed(
        local_pipeline: GradingPipeline, file: CorpusFile) -> None:
    verdicts = grade_on_seeds(local_pipeline, file, seeds_for_file(file))
    assert len({v.codes for v in verdicts}) == 1, describe(verdicts)
    assert len({v.score for v in verdicts}) == 1, describe(verdicts)
