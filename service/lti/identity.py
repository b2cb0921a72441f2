"""Who a student is in the LMS, for events sent elsewhere (webhooks)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import LtiContext, LtiMembership, LtiPlatform, LtiUser, Submission


def lms_identity(session: Session, submission: Submission) -> dict[str, Any] | None:
    """The student's LMS identity in the submission's course: the platform's issuer, the LMS
    user id (``sub``), the LMS course id, and the name and email when the platform shares
    them; None for a student who never came from an LMS."""
    row = session.execute(
        select(LtiUser, LtiPlatform, LtiContext)
        .join(LtiPlatform, LtiPlatform.id == LtiUser.platform_id)
        .outerjoin(LtiMembership, LtiMembership.lti_user_id == LtiUser.id)
        .outerjoin(LtiContext, (LtiContext.id == LtiMembership.context_id)
                   & (LtiContext.course_id == submission.assignment.course_id))
        .where(LtiUser.user_id == submission.user_id)
        .order_by(LtiContext.id.is_(None), LtiUser.id).limit(1)).first()
    if row is None:
        return None
    lti_user, platform, context = row
    return {"platform": platform.issuer, "user_id": lti_user.sub,
            "course_id": context.context_id if context is not None else None,
            "name": lti_user.name or None, "email": lti_user.email}


def lms_users_of(session: Session, course_id: int) -> dict[int, LtiUser]:
    """The LMS identity (``sub``, name, email) of each member of a course who came from an LMS
    (by launch or roster), by user id: what a gradebook shows beside its own columns."""
    rows = session.scalars(
        select(LtiUser).join(LtiMembership, LtiMembership.lti_user_id == LtiUser.id)
        .join(LtiContext, LtiContext.id == LtiMembership.context_id)
        .where(LtiContext.course_id == course_id).order_by(LtiUser.id))
    return {lti_user.user_id: lti_user for lti_user in rows}
