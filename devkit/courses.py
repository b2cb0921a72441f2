"""Courses for the tests and benchmarks: a factory of users, courses and assignments in the
current app's database, and a seeded course for the gradebook's scale test and benchmark: N
students x M submissions, with deadlines, late work, extensions, adjustments and students who
never submitted."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import flask
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from service.core import db
from service.courses.accounts import create_user, hash_password, issue_token
from service.courses.enrolment import create_course, enrol, sync_assignments
from service.models import (
    Course,
    CourseAssignment,
    CourseRole,
    Enrolment,
    Extension,
    LatePolicy,
    Result,
    Role,
    ScoreAdjustment,
    Submission,
    SubmissionStatus,
    User,
    utcnow,
)
from service.web.session_auth import log_in

PASSWORD = "correct horse battery"


@dataclass
class Factory:
    """Builds users, courses and assignments in the current app's database."""

    app: Flask
    courses: dict[str, Course] = field(default_factory=dict)

    def course(self, code: str = "ml101", *, slugs: tuple[str, ...] = ("attention",)) -> Course:
        session = db.session()
        course = create_course(session, code=code)
        sync_assignments(session, course, list(slugs))
        session.commit()
        self.courses[code] = course
        return course

    def user(self, username: str | None = None, *, role: Role = Role.STUDENT,
             course: Course | None = None,
             course_role: CourseRole = CourseRole.STUDENT) -> User:
        session = db.session()
        user = create_user(session, username=username or f"u{secrets.token_hex(4)}",
                           password=PASSWORD, role=role)
        if course is not None:
            enrol(session, course=course, user=user, role=course_role)
        session.commit()
        return user

    def headers(self, user: User) -> dict[str, str]:
        issued = issue_token(db.session(), user)
        db.session().commit()
        return {"Authorization": f"Bearer {issued.token}"}

    def assignment(self, course: Course, slug: str = "attention") -> CourseAssignment:
        return next(a for a in db.session().query(CourseAssignment).filter_by(course_id=course.id)
                    if a.slug == slug)


CODES = ["softmax-wrong-axis", "missing-scale", "mask-inverted", "mask-ignored",
         "gradient-blocked", "dtype-changed", "wrong-output"]


@dataclass(frozen=True)
class SeededCourse:
    course_code: str
    slug: str
    instructor_id: int
    student_ids: list[int]
    missing: int
    max_score: float
    """The assignment's maximum, which every page shows a score out of."""


def _document(rng: random.Random, checks: int, maximum: float) -> tuple[float, list[str],
                                                                         dict[str, Any]]:
    per = maximum / checks
    tests: list[dict[str, Any]] = []
    codes: list[str] = []
    for number in range(1, checks + 1):
        passed = rng.random() < 0.7
        tags = [] if passed else [rng.choice(CODES)]
        codes += tags
        tests.append({"name": f"check {number}", "number": f"1.{number}",
                      "score": per if passed else 0.0, "max_score": per,
                      "status": "passed" if passed else "failed",
                      "output": "" if passed else "observed something else on input 3",
                      "visibility": "visible", "tags": tags})
    score = round(sum(t["score"] for t in tests), 4)
    codes = sorted(set(codes))
    document = {"score": score, "max_score": maximum, "execution_time": 1.0,
                "output": "summary", "tests": tests,
                "diagnoses": [{"code": c, "message": "what we saw", "hint": "what to check",
                               "tests": []} for c in codes],
                "autograde": {"seed": 1, "backend": "local", "stdout": "", "stderr": ""}}
    return score, codes, document


def seed_course(session: Session, *, students: int = 300, submissions: int = 10,
                missing: int = 10, code: str = "big101", seed: int = 12) -> SeededCourse:
    """The course, committed. The last ``missing`` students never submit."""
    rng = random.Random(seed)
    course = create_course(session, code=code, title="A large course")
    sync_assignments(session, course, ["attention"])
    assignment = session.scalars(select(CourseAssignment).where(
        CourseAssignment.course_id == course.id)).one()
    now = utcnow()
    due = now - timedelta(days=1)
    assignment.due_at, assignment.late_policy = due, LatePolicy.PENALTY
    assignment.late_penalty_per_day, assignment.results_published = 0.1, True
    password = hash_password(PASSWORD)
    teacher = User(username=f"{code}-prof", display_name="Prof", password_hash=password,
                   role=Role.INSTRUCTOR)
    session.add(teacher)
    session.flush()
    enrol(session, course=course, user=teacher, role=CourseRole.INSTRUCTOR)
    user_ids = list(session.scalars(insert(User).returning(User.id), [
        {"username": f"{code}-s{i:03d}", "display_name": f"Student {i:03d}",
         "password_hash": password, "role": Role.STUDENT, "active": True, "created_at": now}
        for i in range(students)]))
    session.execute(insert(Enrolment), [
        {"course_id": course.id, "user_id": uid, "role": CourseRole.STUDENT, "created_at": now}
        for uid in user_ids])
    rows, documents = [], []
    for uid in user_ids[:students - missing]:
        for _ in range(submissions):
            at = due + timedelta(hours=rng.uniform(-72, 60))
            status = rng.choices([SubmissionStatus.GRADED, SubmissionStatus.FAILED,
                                  SubmissionStatus.QUEUED], [0.95, 0.03, 0.02])[0]
            rows.append({"user_id": uid, "assignment_id": assignment.id,
                         "assignment_version": assignment.version, "status": status,
                         "seed": 1, "round": 1, "attempts": 1, "late": at > due,
                         "requested_at": at, "enqueued_at": at,
                         "started_at": at + timedelta(seconds=rng.uniform(0.1, 5)),
                         "graded_at": at + timedelta(seconds=rng.uniform(5, 30))
                         if status is SubmissionStatus.GRADED else None})
            documents.append(_document(rng, 10, assignment.max_score)
                             if status is SubmissionStatus.GRADED else None)
    ids = list(session.scalars(
        insert(Submission).returning(Submission.id, sort_by_parameter_order=True), rows))
    session.execute(insert(Result), [
        {"submission_id": sid, "round": 1, "score": doc[0], "final_score": doc[0],
         "max_score": assignment.max_score, "codes": doc[1], "document": doc[2],
         "attempt_token": "seed", "created_at": now}
        for sid, doc in zip(ids, documents, strict=True) if doc is not None])
    for uid in rng.sample(user_ids, 20):
        session.add(Extension(course_id=course.id, user_id=uid, extra_days=rng.randint(1, 3),
                              reason="accommodation"))
    for uid in rng.sample(user_ids, 10):
        session.add(Extension(course_id=course.id, user_id=uid, assignment_id=assignment.id,
                              due_at=due + timedelta(hours=rng.uniform(1, 80)), reason="ill"))
    graded = [sid for sid, doc in zip(ids, documents, strict=True) if doc is not None]
    for sid in rng.sample(graded, 15):
        session.add(ScoreAdjustment(submission_id=sid, old_score=None,
                                    new_score=round(rng.uniform(0, assignment.max_score), 1),
                                    reason="seeded adjustment", by_id=teacher.id))
    session.commit()
    return SeededCourse(code, assignment.slug, teacher.id, user_ids, missing, assignment.max_score)


def signed_in(app: Flask, user_id: int) -> FlaskClient:
    """A test client of ``app`` logged in as the user, through a real server-side web session."""
    with app.test_request_context():
        log_in(db.session().get_one(User, user_id))
        key = flask.session["sid"]
    client = app.test_client()
    with client.session_transaction() as cookie:
        cookie["sid"] = key
    return client
