"""Courses, enrolments, and assignments synced from the packages under ``assignments/``."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from assignments.spec import AssignmentSpec, list_assignments, load_spec
from service.core.errors import Conflict, Forbidden, NotFound
from service.models import (
    AssignmentVersion,
    Course,
    CourseAssignment,
    CourseRole,
    Enrolment,
    Role,
    User,
    utcnow,
)


def create_course(session: Session, *, code: str, title: str = "") -> Course:
    if session.scalar(select(Course).where(Course.code == code)) is not None:
        raise Conflict(f"A course with code {code!r} already exists.")
    course = Course(code=code, title=title or code)
    session.add(course)
    session.flush()
    return course


def course_by_code(session: Session, code: str) -> Course:
    course = session.scalar(select(Course).where(Course.code == code))
    if course is None:
        raise NotFound(f"There is no course {code!r}.")
    return course


def enrol(session: Session, *, course: Course, user: User,
          role: CourseRole = CourseRole.STUDENT) -> Enrolment:
    enrolment = session.scalar(select(Enrolment).where(Enrolment.course_id == course.id,
                                                       Enrolment.user_id == user.id))
    if enrolment is None:
        enrolment = Enrolment(course=course, user=user, role=role)
        session.add(enrolment)
    enrolment.role = role
    session.flush()
    return enrolment


@dataclass(frozen=True)
class SyncReport:
    slug: str
    version: str
    change: str
    """``new``, ``new version`` or ``unchanged``."""


def sync_assignments(session: Session, course: Course,
                     slugs: list[str] | None = None) -> list[SyncReport]:
    """Bring the course's assignments up to the packages on disk (a changed hash: new version)."""
    reports = []
    for slug in slugs or list_assignments():
        package = load_spec(slug)
        record = session.scalar(select(CourseAssignment).where(
            CourseAssignment.course_id == course.id, CourseAssignment.slug == slug))
        if record is None:
            record = CourseAssignment(course=course, slug=slug, title=package.title,
                                      version=package.version, max_score=package.max_score)
            session.add(record)
            change = "new"
        elif record.version != package.version:
            change = "new version"
        else:
            change = "unchanged"
        record.title, record.version = package.title, package.version
        record.max_score = package.max_score
        known = {v.version for v in record.versions}
        if package.version not in known:
            record.versions.append(_version(package))
        reports.append(SyncReport(slug, package.version, change))
    session.flush()
    return reports


def _version(package: AssignmentSpec) -> AssignmentVersion:
    checks = [{"number": c.number, "name": c.name, "points": c.points,
               "visibility": c.visibility.value} for c in package.checks]
    return AssignmentVersion(version=package.version, max_score=package.max_score,
                             checks={"checks": checks}, synced_at=utcnow())


def course_role(session: Session, user: User, course_id: int) -> CourseRole | None:
    """The user's role in the course; admins act as instructors everywhere."""
    if user.role is Role.ADMIN:
        return CourseRole.INSTRUCTOR
    return session.scalar(select(Enrolment.role).where(Enrolment.course_id == course_id,
                                                       Enrolment.user_id == user.id))


def visible_assignments(session: Session, user: User) -> list[CourseAssignment]:
    """Assignments the user may see: published ones of their courses, all for their instructors."""
    query = select(CourseAssignment).join(Course).order_by(Course.code, CourseAssignment.slug)
    if user.role is not Role.ADMIN:
        query = query.join(Enrolment, (Enrolment.course_id == Course.id)
                           & (Enrolment.user_id == user.id)).where(
            (CourseAssignment.published.is_(True)) | (Enrolment.role == CourseRole.INSTRUCTOR))
    return list(session.scalars(query))


def find_assignment(session: Session, user: User, slug: str,
                    course: str | None = None) -> CourseAssignment:
    """The assignment ``slug`` as this user sees it (404 when they may not see it)."""
    matches = [a for a in visible_assignments(session, user)
               if a.slug == slug and (course is None or a.course.code == course)]
    if not matches:
        raise NotFound(f"There is no assignment {slug!r}"
                       + (f" in course {course!r}" if course else "") + " that you can see.")
    if len(matches) > 1:
        codes = ", ".join(a.course.code for a in matches)
        raise Conflict(f"Assignment {slug!r} exists in several of your courses ({codes}); "
                       "say which with the `course` parameter.")
    return matches[0]


def require_instructor(session: Session, user: User, assignment: CourseAssignment) -> None:
    if course_role(session, user, assignment.course_id) is not CourseRole.INSTRUCTOR:
        raise Forbidden("Only the course's instructors may do this.")


def taught_assignment(session: Session, user: User, slug: str,
                      course: str | None = None) -> CourseAssignment:
    """The assignment ``slug`` of a course ``user`` teaches (404 unseen, 403 not theirs)."""
    target = find_assignment(session, user, slug, course)
    require_instructor(session, user, target)
    return target
