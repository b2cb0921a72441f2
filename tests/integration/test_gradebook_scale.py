"""A 300-student course on PostgreSQL: the scores CSV matches the student pages row for row."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable

import pytest
from flask import Flask

from devkit.courses import seed_course, signed_in
from service.core import db
from service.models import CourseAssignment, User
from service.submissions.instructor import export_scores_csv

pytestmark = pytest.mark.slow


def test_the_csv_matches_every_students_page(pg_app: Flask, pg_url: str,
                                             make_app: Callable[..., Flask]) -> None:
    seeded = seed_course(db.session(), students=300, submissions=10, missing=10)
    assignment = db.session().query(CourseAssignment).filter_by(slug=seeded.slug).one()
    rows = list(csv.DictReader(io.StringIO(export_scores_csv(
        db.session(), assignment, every_submission=False))))
    assert len(rows) == 300, "a row per enrolled student, never cut off"
    assert sum(r["status"] == "missing" for r in rows) == 10
    assert any(r["extension"] for r in rows) and any(r["adjusted"] for r in rows)
    assert any(r["late_days"] not in ("", "0") for r in rows)
    by_name = {r["username"]: r for r in rows}
    users = {u.id: u.username for u in db.session().query(User).filter(
        User.id.in_(seeded.student_ids))}

    app = make_app(pg_url)
    page_url = f"/courses/{seeded.course_code}/assignments/{seeded.slug}"
    for user_id in seeded.student_ids:
        pages = signed_in(app, user_id)
        html = pages.get(page_url).get_data(as_text=True)
        row = by_name[users[user_id]]
        shown = re.search(rf'id="counted-score">([\d.]+) / {seeded.max_score:g}<', html)
        if row["final_score"] == "":
            assert shown is None and row["status"] != "graded", row
        else:
            assert shown is not None and shown[1] == row["final_score"], (row, shown)
        assert ("(extension " in html) == bool(row["extension"]), row
