"""Releasing an assignment's results: students see every check, and the LMS gets the scores.

The one way a release happens (the dashboard's buttons and the CLI call it), so whatever waited
for it leaves at once instead of at the next periodic recheck.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from service.lti.passback import send_held_now
from service.models import CourseAssignment, User

log = logging.getLogger(__name__)


def release_results(session: Session, assignment: CourseAssignment, *,
                    by: User | None) -> int:
    """Publish the assignment's results (commits), then send the LMS every score that waited
    for it; returns how many scores were sent."""
    assignment.results_published = True
    session.commit()
    log.info("results of %s/%s released by %s", assignment.course.code, assignment.slug,
             by.username if by is not None else "an administrator")
    return scores_released(session, assignment)


def scores_released(session: Session, assignment: CourseAssignment) -> int:
    """After any change that may release checks (results published, the due date moved into
    the past; committed by the caller): send the scores that waited, now."""
    return send_held_now(session, assignment)
