"""JSON forms of the resources (the ones the OpenAPI document describes)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import ApiToken, CourseAssignment, Enrolment, User


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def user_json(session: Session, user: User) -> dict[str, Any]:
    enrolments = session.scalars(select(Enrolment).where(Enrolment.user_id == user.id))
    return {"id": user.id, "username": user.username, "display_name": user.display_name,
            "role": user.role.value,
            "courses": [{"code": e.course.code, "role": e.role.value} for e in enrolments]}


def token_json(token: ApiToken) -> dict[str, Any]:
    return {"id": token.id, "prefix": token.prefix, "name": token.name,
            "created_at": iso(token.created_at), "expires_at": iso(token.expires_at),
            "last_used_at": iso(token.last_used_at), "revoked": token.revoked_at is not None}


def assignment_json(assignment: CourseAssignment, *, checks: list[dict[str, Any]] | None = None,
                    files: list[str] | None = None, statement: str | None = None
                    ) -> dict[str, Any]:
    body: dict[str, Any] = {
        "slug": assignment.slug, "course": assignment.course.code, "title": assignment.title,
        "version": assignment.version, "max_score": assignment.max_score,
        "due_at": iso(assignment.due_at), "late_policy": assignment.late_policy.value,
        "late_penalty_per_day": assignment.late_penalty_per_day,
        "published": assignment.published, "results_published": assignment.results_published,
        "score_policy": assignment.score_policy.value,
    }
    if checks is not None:
        body["checks"] = checks
    if files is not None:
        body["files"] = files
    if statement is not None:
        body["statement"] = statement
    return body
