"""The results document (docs/authors/contract.md): a superset of Gradescope's results.json. Pure.

Beside Gradescope's keys it has ``diagnoses``, ``autograde`` (facts of the run) and
``training``: per training call of a ``learns`` check, the loss curve of the student's model
against the reference's on the same seed, bounded (at most ``MAX_CURVE_POINTS`` points, numbers
to 4 significant digits, ``null`` for a value that is not finite)::

    {"version": 1, "call": "training", "tests": ["1.11"], "passed": true, "outcome": "learned",
     "steps": [0, 1, ..., 80], "curve": [2.128, ...], "reference_curve": [2.131, ...],
     "accuracy": 0.98, "reference_accuracy": 1.0, "chance": 0.125, "truncated": false}

``steps[i]`` is the training step of ``curve[i]`` and ``reference_curve[i]``; the last point is
the final loss on all training sequences. ``passed`` is the training's verdict, ``outcome``
what the curve shows, in the order the check's observation names it: ``learned`` (it passed),
``diverged``, ``untrained-weights`` (weights no gradient reached), ``leaks-the-future``,
``learned-nothing``, ``learned-part`` or ``inconsistent``
(accurate, but its weights compute something else with correct attention). A student reads an
entry only while one of its ``tests`` is released to them (``service/submissions/visibility.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assignments import Assignment, CheckSpec
from grader.checks import CheckVerdict
from grader.feedback import Diagnosis, catalogue_of
from grader.learning import TrainingEvidence
from grader.training_curves import sampled

TRAINING_VERSION = 1
MAX_CURVE_POINTS = 201


@dataclass(frozen=True)
class RunFacts:
    """Facts about the grading run recorded in the document (for regrades and support)."""

    seed: int
    backend: str
    termination: str
    isolation: str = ""
    """The backend's own words for how the run was isolated (``SandboxBackend.isolation``)."""
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
    *,
    training: Mapping[str, TrainingEvidence] | None = None,
    behaviour: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the document from judged checks (with their scores), diagnoses, the
    evidence of each training call and, where outputs stay unexplained, their behaviour
    section (``grader.fingerprints``)."""
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
        "training": training_section([check for check, _, _ in checks], training or {}),
        "autograde": {
            "assignment": assignment.slug,
            "assignment_version": assignment.version,
            "seed": facts.seed,
            "backend": facts.backend,
            "isolation": facts.isolation,
            "termination": facts.termination,
            "sandbox_seconds": round(facts.sandbox_seconds, 3),
            "phases": {name: round(seconds, 4) for name, seconds in facts.phases.items()},
            "stdout": facts.stdout,
            "stderr": facts.stderr,
            "output_truncated": facts.output_truncated,
            **({"forbidden": facts.forbidden} if facts.forbidden else {}),
            "integrity": list(facts.integrity),
        },
        **({"behaviour": dict(behaviour)} if behaviour else {}),
    }


def training_section(checks: Sequence[CheckSpec],
                     evidence: Mapping[str, TrainingEvidence]) -> list[dict[str, Any]]:
    """Each training call's curves, the student's and the reference's, with the checks that
    look at it (those decide who may read it)."""
    section = []
    for call_id, found in evidence.items():
        kept = list(sampled(min(len(found.curve), len(found.reference_curve)),
                            MAX_CURVE_POINTS))
        section.append({
            "version": TRAINING_VERSION,
            "call": call_id,
            "tests": [check.number for check in checks if call_id in check.calls],
            "passed": found.passed,
            "outcome": found.outcome,
            "steps": kept,
            "curve": [_number(found.curve[i]) for i in kept],
            "reference_curve": [_number(found.reference_curve[i]) for i in kept],
            "accuracy": _number(found.accuracy),
            "reference_accuracy": _number(found.reference_accuracy),
            "chance": _number(found.chance),
            "truncated": len(kept) < len(found.curve),
        })
    return section


def _number(value: float) -> float | None:
    """JSON-safe: 4 significant digits (a loss near 0 keeps its size), and None for NaN or an
    infinity (JSON has neither)."""
    return float(f"{value:.4g}") if math.isfinite(value) else None


def unrunnable_document(assignment: Assignment, code: str, message: str, facts: RunFacts,
                        execution_time: float) -> dict[str, Any]:
    """A complete document for a submission that could not run at all: every check scores 0."""
    text = catalogue_of(assignment)[code]
    diagnosis = Diagnosis(code, text.title, message, text.hint,
                          tuple(check.number for check in assignment.checks))
    verdicts = [(check, CheckVerdict(False, (), text.title + "."), 0.0)
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
        lines.append(f"[{diagnosis.code}] {diagnosis.title}")
    return "\n".join(lines)
