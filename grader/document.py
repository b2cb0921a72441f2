"""The results document (SPEC §3): a superset of Gradescope's results.json. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from assignments import Assignment, CheckSpec
from grader.checks import CheckVerdict
from grader.feedback import CATALOGUE, Diagnosis


@dataclass(frozen=True)
class RunFacts:
    """Facts about the grading run recorded in the document (for regrades and support)."""

    seed: int
    backend: str
    termination: str
    sandbox_seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    phases: dict[str, float] = field(default_factory=dict)
    forbidden: dict[str, Any] = field(default_factory=dict)
    """Forbidden APIs: the calls that reached one, and the references in the text."""
    integrity: tuple[dict[str, str], ...] = ()
    """Integrity flags with their evidence (``{"flag", "evidence"}``): for instructors only
    (the student's view of the document leaves them out), never scored."""


def build_document(
    assignment: Assignment,
    checks: Sequence[tuple[CheckSpec, CheckVerdict, float]],
    diagnoses: Sequence[Diagnosis],
    facts: RunFacts,
    execution_time: float,
) -> dict[str, Any]:
    """Assemble the document from judged checks (with their scores) and diagnoses."""
    tests: list[dict[str, Any]] = []
    for check, verdict, score in checks:
        tags = [d.code for d in diagnoses if check.number in d.tests]
        tests.append({
            "name": check.name,
            "number": check.number,
            "score": score,
            "max_score": check.points,
            "status": "passed" if verdict.passed and score == check.points else "failed",
            "output": verdict.observation if not verdict.passed else "",
            "visibility": check.visibility.value,
            "tags": tags,
        })
    score = round(sum(test["score"] for test in tests), 4)
    return {
        "score": score,
        "max_score": assignment.max_score,
        "execution_time": round(execution_time, 3),
        "output": summary(score, assignment.max_score, tests, diagnoses),
        "tests": tests,
        "diagnoses": [d.to_json() for d in diagnoses],
        "autograde": {
            "assignment": assignment.slug,
            "assignment_version": assignment.version,
            "seed": facts.seed,
            "backend": facts.backend,
            "termination": facts.termination,
            "sandbox_seconds": round(facts.sandbox_seconds, 3),
            "phases": {name: round(seconds, 4) for name, seconds in facts.phases.items()},
            "stdout": facts.stdout,
            "stderr": facts.stderr,
            "output_truncated": facts.output_truncated,
            **({"forbidden": facts.forbidden} if facts.forbidden else {}),
            "integrity": list(facts.integrity),
        },
    }


def unrunnable_document(assignment: Assignment, code: str, message: str, facts: RunFacts,
                        execution_time: float) -> dict[str, Any]:
    """A complete document for a submission that could not run at all: every check scores 0."""
    diagnosis = Diagnosis(code, message, CATALOGUE[code].hint,
                          tuple(check.number for check in assignment.checks))
    verdicts = [(check, CheckVerdict(False, (), CATALOGUE[code].title + "."), 0.0)
                for check in assignment.checks]
    return build_document(assignment, verdicts, [diagnosis], facts, execution_time)


def summary(score: float, max_score: float, tests: Sequence[dict[str, Any]],
            diagnoses: Sequence[Diagnosis]) -> str:
    """The one-paragraph summary a student reads first."""
    failed = [t for t in tests if t["status"] == "failed"]
    lines = [f"Score {score:g}/{max_score:g}."]
    if not failed:
        lines.append("All checks passed.")
    else:
        lines.append(f"{len(failed)} of {len(tests)} checks failed.")
    for diagnosis in diagnoses:
        lines.append(f"[{diagnosis.code}] {CATALOGUE[diagnosis.code].title}")
    return "\n".join(lines)
