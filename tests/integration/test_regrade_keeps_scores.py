"""A group regrade on PostgreSQL, either choice: "update" lets the new results count, "keep"
gives new feedback only (the score that counts stays, written in the gradebook's audit trail),
the report says which scores were kept, and a later "update" lifts a kept score."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from devkit.courses import PASSWORD, Factory
from devkit.gradebook import MAX, claim_again, graded, result_document
from service.core import db
from service.core.queue import enqueue
from service.grading.exactly_once import store_result
from service.models import CourseRole, Role, Submission
from service.submissions.gradebook import score_of
from service.submissions.instructor import regrade_report, start_regrade

OLD, NAMED = "wrong-output", "weights-plus-one"


@pytest.fixture
def books(pg_factory: Factory) -> dict[str, Any]:
    """Two students of one unexplained group, both `wrong-output` at 4 of 10."""
    course = pg_factory.course()
    teacher = pg_factory.user("prof", role=Role.INSTRUCTOR, course=course,
                              course_role=CourseRole.INSTRUCTOR)
    assignment = pg_factory.assignment(course)
    assignment.max_score = MAX
    db.session().commit()
    students = {name: pg_factory.user(name, course=course) for name in ("una", "vic")}
    return {"assignment": assignment, "teacher": teacher, "students": students,
            "submissions": {name: graded(user, assignment, 4.0, codes=(OLD,))
                            for name, user in students.items()}}


def _store_new_round(submission: Submission, score: float) -> None:
    """The worker's side: the new round's result, now naming the mistake."""
    db.session().refresh(submission)
    assert store_result(db.session(), claim_again(submission),
                        result_document(score, (NAMED,)))
    db.session().refresh(submission)


def _seen_by(client: FlaskClient, factory: Factory, student: Any,
             submission: Submission) -> tuple[float, list[str]]:
    body = client.get(f"/api/v1/submissions/{submission.id}",
                      headers=factory.headers(student)).json
    return body["score"], [d["code"] for d in body["results"]["diagnoses"]]


def test_update_lets_the_new_score_count_keep_keeps_it_and_the_books_say_so(
        pg_app: Flask, pg_factory: Factory, books: dict[str, Any]) -> None:
    client = pg_app.test_client()
    assignment, teacher = books["assignment"], books["teacher"]
    una, vic = books["submissions"]["una"], books["submissions"]["vic"]
    headers = pg_factory.headers(teacher)

    # "keep": una's group is regraded for feedback only; the new round scores 7.
    run = start_regrade(db.session(), assignment, scope="group", by=teacher, enqueue=enqueue,
                        submission_ids=[una.id], keep_scores=True)
    assert score_of(db.session(), una).final == 4.0, "the score does not move while it runs"
    _store_new_round(una, 7.0)
    assert _seen_by(client, pg_factory, books["students"]["una"], una) == (4.0, [NAMED])
    kept = score_of(db.session(), una)
    assert (kept.raw, kept.final, kept.codes) == (7.0, 4.0, (NAMED,))
    trail = client.get(f"/api/v1/instructor/submissions/{una.id}/adjustments",
                       headers=headers).json["adjustments"]
    assert [(a["old_score"], a["new_score"], a["by"]) for a in trail] == [(4.0, 4.0, "prof")]
    assert "score kept by the instructor" in trail[0]["reason"]
    assert f"regrade {run.id}" in trail[0]["reason"]
    report = regrade_report(db.session(), run)
    assert report["finished"] and report["keep_scores"] and report["up"] == 1
    assert report["kept"] == [{"submission_id": una.id, "score": 4.0}]
    assert report["changes"][0]["kept"] == 4.0 and report["codes_gained"] == {NAMED: 1}

    # "update" (the API's scores=update, the default): vic's new result counts.
    started = client.post("/api/v1/instructor/assignments/attention/regrade?scope=all"
                          "&scores=update", headers=headers)
    assert started.status_code == 202, started.json
    assert not started.json["regrade"]["keep_scores"]
    assert started.json["regrade"]["lifted"] == [una.id], "the kept score is lifted"
    _store_new_round(vic, 7.0)
    _store_new_round(una, 7.5)
    assert _seen_by(client, pg_factory, books["students"]["vic"], vic) == (7.0, [NAMED])
    assert _seen_by(client, pg_factory, books["students"]["una"], una) == (7.5, [NAMED])
    trail = client.get(f"/api/v1/instructor/submissions/{una.id}/adjustments",
                       headers=headers).json["adjustments"]
    assert [(a["old_score"], a["new_score"]) for a in trail] == [(4.0, None), (4.0, 4.0)]
    assert "is lifted" in trail[0]["reason"]
    assert client.get(f"/api/v1/instructor/submissions/{vic.id}/adjustments",
                      headers=headers).json["adjustments"] == [], "nothing kept, nothing written"
    report = client.get(f"/api/v1/instructor/assignments/attention/regrades/"
                        f"{started.json['regrade']['id']}", headers=headers).json
    assert report["finished"] and report["kept"] == [] and report["up"] == 2


def test_a_hand_adjustment_outlives_an_update_and_a_bad_choice_is_refused(
        pg_app: Flask, pg_factory: Factory, books: dict[str, Any]) -> None:
    client = pg_app.test_client()
    headers = pg_factory.headers(books["teacher"])
    una = books["submissions"]["una"]
    made = client.post(f"/api/v1/instructor/submissions/{una.id}/adjustments", headers=headers,
                       json={"score": 6, "reason": "partial credit"})
    assert made.status_code == 201
    refused = client.post("/api/v1/instructor/assignments/attention/regrade?scores=maybe",
                          headers=headers)
    assert refused.status_code == 400 and "update" in refused.json["detail"]
    kept = client.post("/api/v1/instructor/assignments/attention/regrade?scores=keep",
                       headers=headers)
    assert kept.status_code == 202
    assert [k["submission_id"] for k in kept.json["regrade"]["kept"]] == [
        books["submissions"]["vic"].id], "una's score is her instructor's already"
    _store_new_round(una, 8.0)
    _store_new_round(books["submissions"]["vic"], 8.0)
    started = client.post("/api/v1/instructor/assignments/attention/regrade", headers=headers)
    assert started.status_code == 202
    assert started.json["regrade"]["lifted"] == [books["submissions"]["vic"].id]
    _store_new_round(una, 9.0)
    assert score_of(db.session(), una).final == 6.0
    assert [a["reason"] for a in client.get(
        f"/api/v1/instructor/submissions/{una.id}/adjustments",
        headers=headers).json["adjustments"]] == ["partial credit"]


def test_the_regrade_page_lists_the_kept_scores(pg_app: Flask, pg_factory: Factory,
                                                 books: dict[str, Any]) -> None:
    pages = pg_app.test_client()
    ids = [s.id for s in books["submissions"].values()]
    start_regrade(db.session(), books["assignment"], scope="group", by=books["teacher"],
                  enqueue=enqueue, submission_ids=ids, keep_scores=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"',
                      pages.get("/login").get_data(as_text=True))
    assert token
    pages.post("/login", data={"csrf_token": token[1], "username": "prof",
                               "password": PASSWORD})
    page = pages.get(f"/dashboard/courses/{books['assignment'].course.code}/assignments/"
                     "attention/regrade").get_data(as_text=True)
    assert "New feedback only" in page
    kept = re.findall(r'<tr data-submission="(\d+)">.*?<td class="num">([^<]+)</td>', page)
    assert sorted(kept) == sorted((str(i), "4 / 10") for i in ids)
