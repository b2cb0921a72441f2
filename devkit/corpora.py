"""Corpora of student-style submissions: their manifests, their seeds, grading one on a seed, and
what every graded document must hold.

A corpus directory holds one folder per assignment slug with submission files and a
``manifest.toml`` giving each file's exact codes and score (what SPEC says it deserves).

Each grading is a sandbox run (a fresh interpreter importing torch, a costly start), so
the multi-seed tests grade a file's seeds concurrently, one sandbox per core, and a grading
already made in this test session (same file, same seed) is reused rather than repeated.
"""

from __future__ import annotations

import os
import tomllib
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assignments import Assignment
from devkit.paths import CORPUS
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline

SLUGS = ("attention", "multi-head-attention", "attention-kv-cache", "adamw", "cross-entropy")
# How many seeds the multi-seed corpus tests grade each file on; AUTOGRADE_CORPUS_SEEDS overrides.
DEFAULT_SEED_COUNT = 5
# Fewer seeds where a grading costs more: the cache assignment's calls are several forwards each
# and its variants run them all; the loss lab has many files (check proves it on seeds 0-11).
SEED_COUNTS = {"attention-kv-cache": 2, "cross-entropy": 2}


def corpus_file(slug: str, name: str) -> dict[str, bytes]:
    """A corpus submission as the files mapping the pipeline takes."""
    return {name: (CORPUS / slug / name).read_bytes()}


def corpus(slug: str, name: str) -> tuple[str, bytes]:
    """A corpus file as (the entry file name, its bytes)."""
    entry = {"attention": "attention.py", "multi-head-attention": "mha.py",
             "attention-kv-cache": "attention_kv_cache.py", "adamw": "adamw.py",
             "cross-entropy": "cross_entropy.py"}[slug]
    return entry, (CORPUS / slug / name).read_bytes()


@dataclass(frozen=True)
class CorpusFile:
    """One submission and what it deserves."""

    slug: str
    path: Path
    codes: frozenset[str]
    score: float

    @property
    def id(self) -> str:
        return f"{self.slug}/{self.path.name}"


@dataclass(frozen=True)
class Verdict:
    """What the grader said about a file on one seed."""

    seed: int
    codes: frozenset[str]
    score: float
    document: dict[str, Any]


def corpus_files(root: Path) -> list[CorpusFile]:
    """Every manifest entry under ``root``, in a stable order."""
    files = []
    for slug in SLUGS:
        if not (root / slug).is_dir():
            continue  # a corpus need not cover every assignment (the real-world one does not)
        manifest = tomllib.loads((root / slug / "manifest.toml").read_text(encoding="utf-8"))
        for name, entry in sorted(manifest["files"].items()):
            files.append(CorpusFile(slug, root / slug / name, frozenset(entry["codes"]),
                                    float(entry["score"])))
    return files


def base_seed(name: str) -> int:
    """The seed a file is graded on when one seed is enough: fixed per file, varied across files."""
    return zlib.crc32(name.encode())


def seeds_for(name: str, count: int | None = None) -> list[int]:
    """``count`` distinct seeds for a file, starting with its base seed.

    The others are derived from the name too, so different files cover different seeds while
    every run of the suite grades a file on the same ones (a failure reproduces).
    """
    if count is None:
        count = int(os.environ.get("AUTOGRADE_CORPUS_SEEDS", DEFAULT_SEED_COUNT))
    seeds = [base_seed(name)]
    index = 1
    while len(seeds) < count:
        seed = zlib.crc32(f"{name}#{index}".encode())
        index += 1
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def seeds_for_file(file: CorpusFile) -> list[int]:
    """The seeds a multi-seed test grades ``file`` on: its assignment's count (SEED_COUNTS),
    unless AUTOGRADE_CORPUS_SEEDS says otherwise."""
    if "AUTOGRADE_CORPUS_SEEDS" in os.environ:
        return seeds_for(file.path.name)
    return seeds_for(file.path.name, SEED_COUNTS.get(file.slug, DEFAULT_SEED_COUNT))


_graded: dict[tuple[Path, int], Verdict] = {}
# Gradings under way in the background (graded_ahead), by the same key as _graded.
_ahead: dict[tuple[Path, int], Future[Verdict]] = {}


def grade(pipeline: GradingPipeline, file: CorpusFile, seed: int) -> Verdict:
    """The grader's verdict on ``file`` for ``seed`` (a file's verdict must not depend on state)."""
    key = (file.path, seed)
    if key in _graded:
        return _graded[key]
    future = _ahead.get(key)
    if future is not None:
        return future.result()  # what the grading raised, raised here
    return _grade_now(pipeline, file, seed)


def _grade_now(pipeline: GradingPipeline, file: CorpusFile, seed: int) -> Verdict:
    document = pipeline.grade(load_assignment(file.slug),
                              {file.path.name: file.path.read_bytes()}, seed=seed)
    verdict = Verdict(seed, frozenset(d["code"] for d in document["diagnoses"]),
                      float(document["score"]), document)
    _graded[(file.path, seed)] = verdict
    return verdict


@contextmanager
def graded_ahead(pipeline: GradingPipeline,
                 jobs: Iterable[tuple[CorpusFile, int]]) -> Iterator[None]:
    """Grade ``jobs`` (file, seed) in the background, one sandbox per core, in the order given,
    while the tests that ask for them (through ``grade``) run one at a time.

    A test grading one file at a time leaves the other cores idle; with the jobs in the
    tests' order each test waits for its own gradings only, which are under way or done by
    then. Whatever has not started when the block ends is cancelled."""
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                              thread_name_prefix="corpus-ahead")
    submitted: list[tuple[Path, int]] = []
    try:
        for file, seed in jobs:
            key = (file.path, seed)
            if key not in _graded and key not in _ahead:
                _ahead[key] = pool.submit(_grade_now, pipeline, file, seed)
                submitted.append(key)
        yield
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for key in submitted:
            del _ahead[key]


def selected_files(request: pytest.FixtureRequest, test_name: str) -> list[CorpusFile]:
    """The ``file`` parameters of this session's selected items of ``test_name`` in the
    requesting module, in the order they will run."""
    files = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if (isinstance(item, pytest.Function) and item.module is request.module
                and item.originalname == test_name and callspec is not None
                and "file" in callspec.params):
            files.append(callspec.params["file"])
    return files


def grade_on_seeds(pipeline: GradingPipeline, file: CorpusFile, seeds: list[int]) -> list[Verdict]:
    """The verdicts for every seed, graded concurrently (each one is its own sandbox process)."""
    workers = max(1, min(len(seeds), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda seed: grade(pipeline, file, seed), seeds))


def describe(verdicts: list[Verdict]) -> str:
    """One line per seed: the codes, the score and the failed checks with their tags."""
    lines = []
    for verdict in verdicts:
        failed = " ".join(f"{t['number']}:{'/'.join(t['tags'])}"
                          for t in verdict.document["tests"] if t["status"] == "failed")
        lines.append(f"seed {verdict.seed}: {sorted(verdict.codes)} {verdict.score} [{failed}]")
    return "\n".join(lines)


SPEC_KEYS = {"score", "max_score", "execution_time", "output", "tests", "diagnoses"}


def assert_complete(document: dict[str, Any], assignment: Assignment) -> None:
    """SPEC §3: every check present, statuses and scores consistent, codes tagged."""
    assert set(document) >= SPEC_KEYS
    assert document["max_score"] == assignment.max_score
    assert [t["number"] for t in document["tests"]] == [c.number for c in assignment.checks]
    for test in document["tests"]:
        assert test["status"] in {"passed", "failed"}
        assert test["visibility"] in {"visible", "hidden", "after_due_date", "after_published"}
        assert (test["status"] == "passed") == (test["score"] == test["max_score"])
        if test["status"] == "failed":
            assert test["tags"], f"failed check {test['number']} carries no code"
    assert document["score"] == pytest.approx(sum(t["score"] for t in document["tests"]))
    for diagnosis in document["diagnoses"]:
        assert diagnosis["message"] and diagnosis["hint"]
