"""The results document of a known-mistake variant judged in process, as the pipeline would
store it: for tests of what a document says, without a sandbox run."""

from __future__ import annotations

import json
from typing import Any

from assignments import Assignment
from grader.document import RunFacts, build_document
from grader.in_process import run_in_process
from grader.pipeline import judge_outcomes, use_one_thread


def judged_document(assignment: Assignment, mistakes: set[str], seed: int) -> dict[str, Any]:
    """The document of the reference with ``mistakes`` switched on, graded on ``seed``, after
    a round trip through JSON (as stored)."""
    use_one_thread()
    plan = assignment.build_plan(seed)
    student = run_in_process(assignment.reference(frozenset(mistakes)), plan)
    judged = judge_outcomes(assignment, plan, student)
    document = build_document(assignment, judged.scored, judged.diagnoses,
                              RunFacts(seed=seed, backend="test", termination="exited"), 0.1,
                              training=judged.training)
    stored: dict[str, Any] = json.loads(json.dumps(document))
    return stored
