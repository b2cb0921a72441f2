"""Graded submissions for the gradebook's tests, as a worker leaves them: a results document of
one check, a submission graded with it by ``store_result``, and a new claim on one (a regrade's
round under way) that the next result is stored under."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from service.core import db
from service.grading.exactly_once import Claim, store_result
from service.models import CourseAssignment, Submission, SubmissionStatus, User, utcnow

MAX = 10.0
"""The maximum score of the assignments these documents are for."""


def result_document(score: float, codes: tuple[str, ...] = ()) -> dict[str, Any]:
    """A results document of one check scoring ``score`` of ``MAX``, diagnosed with ``codes``."""
    return {"score": score, "max_score": MAX, "execution_time": 0.1, "output": "",
            "tests": [{"name": "all", "number": "1", "score": score, "max_score": MAX,
                       "status": "passed" if score == MAX else "failed", "output": "",
                       "visibility": "visible", "tags": list(codes)}],
            "diagnoses": [{"code": c, "message": "m", "hint": "h", "tests": ["1"]}
                          for c in codes]}


def graded(user: User, assignment: CourseAssignment, score: float, *, at: Any = None,
           codes: tuple[str, ...] = ()) -> Submission:
    """A submission graded as a worker would leave it (its result stored by ``store_result``)."""
    session = db.session()
    submission = Submission(user=user, assignment=assignment,
                            assignment_version=assignment.version, seed=1,
                            requested_at=at or utcnow(), status=SubmissionStatus.RUNNING,
                            attempt_token="tok")
    session.add(submission)
    session.commit()
    assert store_result(session, Claim(submission.id, "tok", submission.round),
                        result_document(score, codes))
    session.refresh(submission)
    return submission


def claim_again(submission: Submission) -> Claim:
    """The submission running again under a new claim (a regrade's round being graded)."""
    db.session().execute(update(Submission).where(Submission.id == submission.id)
                         .values(status=SubmissionStatus.RUNNING, attempt_token="tok2"))
    db.session().commit()
    return Claim(submission.id, "tok2", submission.round)
