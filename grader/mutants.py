"""``autograde assignments mutants``: grade mutants of the reference, to find what the checks miss.

Each mutant (``grader.mutation``) is submitted as a student's file and graded by the real
pipeline in a sandbox (the local backend unless told otherwise). The author reads three lists:

- ``full-marks``: the checks cannot see the change (a hole, or a mutant equivalent to the
  reference: read its line);
- ``wrong-output``: the checks see it but no known mistake explains it (a mistake worth
  cataloguing as a variant, with its own code);
- ``named``: diagnosed with a specific code already.

Mutants that raise on some call (``runtime-error``, ``interface-error``, limits) are counted
apart: students are shown the exception and where it happened. A report that is mostly noise
is narrowed by operator (only those mutants are graded) or by verdict (only those are listed).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grader.mutation import Mutant, mutants, specialise

if TYPE_CHECKING:  # types only: the CLI reads VERDICTS without torch
    from assignments import Assignment

VERDICTS = ("full-marks", "wrong-output", "named", "crashed")
"""A mutant's verdicts, in the order the report lists them."""
LISTED = frozenset({"full-marks", "wrong-output"})
"""The verdicts a report lists mutant by mutant unless told otherwise: the to-do list."""

_CRASH_CODES = frozenset({"runtime-error", "interface-error", "syntax-error", "time-limit",
                          "memory-limit", "output-limit", "forbidden-api"})


@dataclass(frozen=True)
class MutantResult:
    mutant: Mutant
    score: float
    max_score: float
    codes: tuple[str, ...]
    failed_checks: tuple[str, ...]
    """``number name`` of every check that lost points."""

    @property
    def verdict(self) -> str:
        if self.score >= self.max_score and not self.codes:
            return "full-marks"
        codes = set(self.codes)
        # A mutant that raises on some calls: the student is shown the exception first (codes
        # beside it, e.g. all-masked-row where it raised the wrong exception, follow from it).
        if codes & _CRASH_CODES:
            return "crashed"
        if not codes - {"wrong-output"}:
            return "wrong-output"
        return "named"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.mutant.id, "operator": self.mutant.operator, "line": self.mutant.line,
                "before": self.mutant.before, "after": self.mutant.after,
                "verdict": self.verdict, "score": self.score, "max_score": self.max_score,
                "codes": list(self.codes), "failed_checks": list(self.failed_checks)}


@dataclass(frozen=True)
class MutationReport:
    slug: str
    seed: int
    backend: str
    total: int
    """Mutants the operators produced (``results`` may be fewer under ``--limit``)."""
    results: tuple[MutantResult, ...]
    seconds: float

    def of(self, verdict: str) -> list[MutantResult]:
        return [result for result in self.results if result.verdict == verdict]

    def counts(self) -> dict[str, int]:
        found = Counter(result.verdict for result in self.results)
        return {verdict: found.get(verdict, 0) for verdict in VERDICTS}

    def render(self, listed: frozenset[str] = LISTED) -> str:
        """The counts, then the mutants of the ``listed`` verdicts one by one."""
        counts = self.counts()
        lines = [f"Mutation search for {self.slug} (seed {self.seed}, {self.backend} sandbox): "
                 f"{len(self.results)} of {self.total} mutants graded in {self.seconds:.0f} s",
                 "",
                 f"  full marks (the checks miss them)      {counts['full-marks']:>4}",
                 f"  wrong-output only (uncatalogued)       {counts['wrong-output']:>4}",
                 f"  diagnosed with a specific code         {counts['named']:>4}",
                 f"  raise or break the interface           {counts['crashed']:>4}"]
        for verdict in VERDICTS:
            rows = self.of(verdict)
            if verdict not in listed or not rows:
                continue
            lines += ["", _TITLES[verdict]]
            for row in rows:
                lines.append(f"  {row.mutant.id:<22} line {row.mutant.line:<4} "
                             f"{row.mutant.before}  ->  {row.mutant.after}")
                if verdict == "wrong-output":
                    numbers = ", ".join(check.split()[0] for check in row.failed_checks)
                    lines.append(f"  {'':<22} {row.score:g}/{row.max_score:g}, checks "
                                 f"{numbers} lost points")
                elif verdict != "full-marks":
                    lines.append(f"  {'':<22} {row.score:g}/{row.max_score:g}, "
                                 f"{', '.join(row.codes)}")
        named = Counter(code for row in self.of("named") for code in row.codes
                        if code != "wrong-output")
        if named:
            lines += ["", "Codes of the diagnosed mutants: "
                      + ", ".join(f"{code} {count}" for code, count in named.most_common())]
        return "\n".join(lines)

    def to_json(self, listed: frozenset[str] = frozenset(VERDICTS)) -> dict[str, Any]:
        """The whole report; ``mutants`` holds those of the ``listed`` verdicts."""
        return {"assignment": self.slug, "seed": self.seed, "backend": self.backend,
                "total": self.total, "graded": len(self.results), "seconds": round(self.seconds, 1),
                "counts": self.counts(), "mutants": [result.to_json() for result in self.results
                                                     if result.verdict in listed]}


_TITLES = {
    "full-marks": "Full marks: add a probe or a check that sees these (or confirm the mutant is "
                  "equivalent):",
    "wrong-output": "Only wrong-output: candidates for known-mistake variants:",
    "named": "Diagnosed with a specific code:",
    "crashed": "Raise or break the interface:",
}


def reference_submission(assignment: Assignment) -> str:
    """The reference without its mistake switches: the file the mutants are made from."""
    from grader.loader import _load_hidden  # torch: the CLI reads VERDICTS without it

    module = _load_hidden(assignment.root, "reference")
    source = (assignment.root / "hidden" / "reference.py").read_text(encoding="utf-8")
    return specialise(source, assignment.required_names, vars(module))


def spread(found: list[Mutant], limit: int | None) -> list[Mutant]:
    """At most ``limit`` mutants, taken in turn from each operator (deterministic)."""
    if limit is None or limit >= len(found):
        return found
    by_operator: dict[str, list[Mutant]] = {}
    for mutant in found:
        by_operator.setdefault(mutant.operator, []).append(mutant)
    chosen: list[Mutant] = []
    while len(chosen) < limit:
        for group in by_operator.values():
            if group and len(chosen) < limit:
                chosen.append(group.pop(0))
    return sorted(chosen, key=lambda mutant: mutant.id)


def mutation_report(assignment: Assignment, *, seed: int = 0, limit: int | None = None,
                    jobs: int = 1, backend: str = "local",
                    operators: frozenset[str] | None = None) -> MutationReport:
    """Grade the reference's mutants (those of ``operators`` only, when given; ``total``
    counts those); AssignmentError-free: a reference that cannot be
    specialised raises ``grader.mutation.SpecialiseError``, a specialised reference short of
    full marks raises RuntimeError (the mutants would mean nothing)."""
    from grader.pipeline import GradingPipeline
    from sandbox import create_backend

    started = time.perf_counter()
    baseline = reference_submission(assignment)
    found = [mutant for mutant in mutants(baseline)
             if operators is None or mutant.operator in operators]
    chosen = spread(found, limit)
    local = threading.local()
    backends: list[Any] = []
    lock = threading.Lock()

    def pipeline() -> GradingPipeline:
        if not hasattr(local, "pipeline"):
            made = create_backend(backend, warm=False)
            with lock:
                backends.append(made)
            local.pipeline = GradingPipeline(backend=made)
        return local.pipeline  # type: ignore[no-any-return]

    def grade(source: str) -> dict[str, Any]:
        files = {assignment.entry: source.encode()}
        return pipeline().grade(assignment, files, seed=seed, label="mutant")

    try:
        document = grade(baseline)
        if document["score"] < document["max_score"]:
            raise RuntimeError(refusal(document, baseline, assignment.entry))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            documents = list(pool.map(lambda mutant: grade(mutant.source), chosen))
    finally:
        for made in backends:
            made.close()
    results = tuple(_result(mutant, document) for mutant, document in zip(chosen, documents,
                                                                          strict=True))
    return MutationReport(assignment.slug, seed, backend, len(found), results,
                          time.perf_counter() - started)


def refusal(document: dict[str, Any], baseline: str, entry: str) -> str:
    """Why the mutants would mean nothing: the stripped reference's score, what the grader
    told it (the exception, where) and the stripped lines it points at, numbered as graded."""
    lines = [f"the reference, stripped of its mistake switches, scores {document['score']}/"
             f"{document['max_score']} ({_codes(document)}): fix the reference first"]
    told = [f"{d['code']}: {d['message']}" for d in document.get("diagnoses", [])
            if d.get("message")]
    if not told:  # no diagnosis: the checks' own words
        told = [f"check {test['number']}: {test['output']}" for test in document["tests"]
                if test["score"] < test["max_score"] and test.get("output")]
    lines += [f"  {text}" for text in told[:3]]
    source = baseline.splitlines()
    pointed = dict.fromkeys(int(number) for text in told for number in re.findall(
        rf"{re.escape(entry)}, line (\d+)", text))
    for number in pointed:
        if 1 <= number <= len(source):
            lines.append(f"  the stripped reference, line {number}: "
                         f"{source[number - 1].strip()}")
    return "\n".join(lines)


def _codes(document: dict[str, Any]) -> str:
    return ", ".join(d["code"] for d in document.get("diagnoses", [])) or "no diagnosis"


def _result(mutant: Mutant, document: dict[str, Any]) -> MutantResult:
    return MutantResult(
        mutant=mutant, score=float(document["score"]), max_score=float(document["max_score"]),
        codes=tuple(sorted({d["code"] for d in document.get("diagnoses", [])})),
        failed_checks=tuple(f"{test['number']} {test['name']}" for test in document["tests"]
                            if test["score"] < test["max_score"]))
