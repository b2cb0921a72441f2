"""What the instructors' LMS pages show: an assignment's links, line items, release state and
roster. Read-only queries over the models."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.lti.passback import held_count
from service.models import (
    Course,
    CourseAssignment,
    LtiContext,
    LtiMembership,
    LtiResourceLink,
    Submission,
    utcnow,
)


@dataclass(frozen=True)
class ReleaseState:
    """What waits before a score may reach the LMS gradebook, until when."""

    released: bool
    """The instructor released the results: nothing waits."""
    after_due_date: int
    """Checks shown (and scored in the LMS) once the due date passes."""
    after_release: int
    """``after_published`` and ``hidden`` checks: shown once results are released."""
    due_at: datetime | None
    due_passed: bool
    waiting: int
    """Scores held now."""

    @property
    def holds(self) -> bool:
        return not self.released and (self.after_release > 0 or (
            self.after_due_date > 0 and not self.due_passed))


@dataclass(frozen=True)
class LmsPage:
    links: list[LtiResourceLink]
    release: ReleaseState
    contexts: list[LtiContext]


def release_state(session: Session, assignment: CourseAssignment) -> ReleaseState:
    version = next((v for v in assignment.versions if v.version == assignment.version), None)
    kinds = Counter(str(c.get("visibility")) for c in (version.checks["checks"] if version
                                                        else []))
    due = assignment.due_at
    return ReleaseState(
        released=assignment.results_published, after_due_date=kinds["after_due_date"],
        after_release=kinds["after_published"] + kinds["hidden"], due_at=due,
        due_passed=due is not None and due <= utcnow(), waiting=held_count(session, assignment))


def release_notice(session: Session, assignment: CourseAssignment) -> ReleaseState | None:
    """What the dashboard says about the LMS gradebook: the release state of an assignment that
    an LMS link opens, when scores wait (None otherwise)."""
    linked = session.scalar(select(LtiResourceLink.id).where(
        LtiResourceLink.assignment_id == assignment.id).limit(1))
    if linked is None:
        return None
    state = release_state(session, assignment)
    return state if state.holds else None


def lms_page(session: Session, assignment: CourseAssignment) -> LmsPage:
    links = list(session.scalars(select(LtiResourceLink).where(
        LtiResourceLink.assignment_id == assignment.id).order_by(LtiResourceLink.id)))
    return LmsPage(links, release_state(session, assignment),
                   course_contexts(session, assignment.course))


def course_contexts(session: Session, course: Course) -> list[LtiContext]:
    return list(session.scalars(select(LtiContext).where(LtiContext.course_id == course.id)
                                .order_by(LtiContext.id)))


@dataclass(frozen=True)
class RosterRow:
    membership: LtiMembership
    submissions: int


def roster_of(session: Session, course: Course) -> list[RosterRow]:
    """Every member the LMS listed for the course (launched or not), with their submissions."""
    memberships = list(session.scalars(
        select(LtiMembership).join(LtiContext).where(LtiContext.course_id == course.id)
        .order_by(LtiMembership.status, LtiMembership.role, LtiMembership.id)))
    counts = dict(session.execute(
        select(Submission.user_id, func.count()).join(CourseAssignment)
        .where(CourseAssignment.course_id == course.id).group_by(Submission.user_id)).all())
    return [RosterRow(m, counts.get(m.lti_user.user_id, 0)) for m in memberships]
