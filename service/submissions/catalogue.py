"""What students may download of an assignment: statement, starter code, public tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from assignments.spec import load_spec
from service.core.errors import NotFound
from service.courses.enrolment import course_role
from service.courses.serialise import assignment_json
from service.models import CourseAssignment, CourseRole, User, utcnow
from service.submissions.gradebook import deadline_of
from service.submissions.visibility import released


def public_files(assignment: CourseAssignment) -> dict[str, Path]:
    """The package's public files that exist (never anything under ``hidden/``)."""
    package = load_spec(assignment.slug)
    return {name: path for name, path in package.public_files.items() if path.is_file()}


def public_file(assignment: CourseAssignment, name: str) -> Path:
    path = public_files(assignment).get(name)
    if path is None:
        raise NotFound(f"Assignment {assignment.slug} has no public file {name!r}.")
    return path


def assignment_detail(session: Session, user: User, assignment: CourseAssignment
                      ) -> dict[str, Any]:
    files = public_files(assignment)
    statement = files["README.md"].read_text(encoding="utf-8") if "README.md" in files else ""
    version = next((v for v in assignment.versions if v.version == assignment.version), None)
    checks = version.checks["checks"] if version is not None else []
    if course_role(session, user, assignment.course_id) is not CourseRole.INSTRUCTOR:
        now, deadline = utcnow(), deadline_of(session, assignment, user.id).at
        checks = [c for c in checks if released(c["visibility"], now=now, due_at=deadline,
                                                results_published=assignment.results_published)]
    return assignment_json(assignment, checks=checks, files=sorted(files), statement=statement)
