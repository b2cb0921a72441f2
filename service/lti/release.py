"""Releasing an assignment's results: students see every check, and the LMS gets the scores.

The one way an assignment's settings change (the dashboard's buttons, the API and the CLI call
it), so whatever waited for a release or a due date leaves at once instead of at the next
periodic recheck.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from service.lti.passback import send_held_now
from service.models import CourseAssignment, User
from service.submissions.instructor import update_settings

log = logging.getLogger(__name__)


def release_results(session: Session, assignment: CourseAssignment, *,
                    by: User | None) -> int:
    """Publish the assignment's results (committed), then send the LMS every score that waited
    for them; how many were sent."""
    return apply_settings(session, assignment, {"results_published": True}, by=by)


def apply_settings(session: Session, assignment: CourseAssignment,
                   changes: Mapping[str, Any], *, by: User | None) -> int:
    """Change the assignment's settings (``service.submissions.instructor.SETTINGS``) and
    commit. When the change may show students more checks (results released, the due date
    moved), the scores that waited for it are sent to the LMS now; returns how many."""
    published, due = assignment.results_published, assignment.due_at
    update_settings(session, assignment, changes)
    session.commit()
    released = assignment.results_published and not published
    if released:
        log.info("results of %s/%s released by %s", assignment.course.code, assignment.slug,
                 by.username if by is not None else "an administrator")
    if released or assignment.due_at != due:
        return send_held_now(session, assignment)
    return 0
