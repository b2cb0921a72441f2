"""The gradebook through the API and the pages: deadlines and extensions re-derive lateness at
once, regrades keep the books readable, one counted score on every surface, one validation."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from devkit.courses import PASSWORD, Factory
from devkit.gradebook import MAX, claim_again, graded, result_document
from service.core import db
from service.grading.exactly_once import store_result
from service.models import (
    CourseAssignment,
    CourseRole,
    LatePolicy,
    Result,
    Role,
    utcnow,
)
from service.submissions.instructor import export_scores_csv
from service.submissions.submitting import requeue_for_regrade


@pytest.fixture
def course(factory: Factory) -> dict[str, Any]:
    made = factory.course()
    teacher = factory.user("prof", role=Role.INSTRUCTOR, course=made,
                           course_role=CourseRole.INSTRUCTOR)
    assignment = factory.assignment(made)
    assignment.max_score = MAX
    db.session().commit()
    return {"course": made, "assignment": assignment, "teacher": teacher,
            "headers": factory.headers(teacher)}


@pytest.fixture
def pages(make_app: Callable[..., Flask], sqlite_url: str) -> FlaskClient:
    """A client of an app of its own on the same database: each request gets its own app
    context (and so its own CSRF state), as in production."""
    return make_app(sqlite_url).test_client()


def _csv(assignment: CourseAssignment) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(export_scores_csv(
        db.session(), assignment, every_submission=False))))


def test_an_extension_rederives_late_flags_and_penalties_without_a_regrade(
        client: FlaskClient, factory: Factory, course: dict[str, Any]) -> None:
    assignment, headers = course["assignment"], course["headers"]
    due = utcnow() - timedelta(days=5)
    patch = client.patch("/api/v1/instructor/assignments/attention", headers=headers, json={
        "due_at": due.isoformat(), "late_policy": "penalty", "late_penalty_per_day": 0.2})
    assert patch.status_code == 200, patch.json
    alice = factory.user("alice", course=course["course"])
    submission = graded(alice, assignment, 8.0, at=due + timedelta(days=1, hours=2))
    [row] = _csv(assignment)
    assert (row["late_days"], row["raw_score"], row["final_score"]) == ("2", "8", "4.8")

    granted = client.post("/api/v1/instructor/assignments/attention/extensions",
                          headers=headers, json={"students": ["alice"], "extra_days": 3,
                                                 "reason": "accommodation"})
    assert granted.status_code == 201, granted.json
    [row] = _csv(assignment)
    # The reported bug: here the late-day count went negative and 8 became a bonus.
    assert (row["late_days"], row["final_score"], row["extension"]) == ("0", "8", "+3 days")
    student = factory.headers(alice)
    body = client.get(f"/api/v1/submissions/{submission.id}", headers=student).json
    assert body["late"] is False and body["score"] == 8.0
    assert body["deadline"] == (due + timedelta(days=3)).isoformat()

    # Moving the assignment's deadline later also applies at once, for everyone.
    client.patch("/api/v1/instructor/assignments/attention", headers=headers,
                 json={"due_at": (due + timedelta(days=30)).isoformat()})
    assert _csv(assignment)[0]["late_days"] == "0"


def test_a_new_deadline_for_one_student_only(client: FlaskClient, factory: Factory,
                                             course: dict[str, Any]) -> None:
    assignment, headers = course["assignment"], course["headers"]
    due = utcnow() - timedelta(hours=1)
    client.patch("/api/v1/instructor/assignments/attention", headers=headers, json={
        "due_at": due.isoformat(), "late_policy": "reject"})
    bob, carol = (factory.user(n, course=course["course"]) for n in ("bob", "carol"))
    granted = client.post("/api/v1/instructor/assignments/attention/extensions",
                          headers=headers, json={"students": "bob",
                                                 "due_at": "2099-01-02T10:00",
                                                 "time_zone": "Europe/Paris"})
    assert granted.status_code == 201, granted.json
    assert granted.json["extensions"][0]["due_at"] == "2099-01-02T09:00:00+00:00"
    upload = {"files": [(io.BytesIO(b"x = 1\n"), "attention.py")]}
    ok = client.post("/api/v1/assignments/attention/submissions", headers=factory.headers(bob),
                     data=upload, content_type="multipart/form-data")
    assert ok.status_code == 202, ok.json
    refused = client.post("/api/v1/assignments/attention/submissions",
                          headers=factory.headers(carol),
                          data={"files": [(io.BytesIO(b"x = 1\n"), "attention.py")]},
                          content_type="multipart/form-data")
    assert refused.status_code == 403
    detail = client.get("/api/v1/assignments/attention", headers=factory.headers(bob)).json
    assert detail["your_deadline"].startswith("2099-01-02T09:00")
    unknown = client.post("/api/v1/instructor/assignments/attention/extensions",
                          headers=headers, json={"students": ["bob", "nobody"],
                                                 "extra_days": 2})
    assert unknown.status_code == 400 and "nobody" in unknown.json["detail"]
    assert assignment.late_policy is LatePolicy.REJECT


def test_every_surface_reads_the_same_counted_score(client: FlaskClient, factory: Factory,
                                                    course: dict[str, Any]) -> None:
    assignment, headers = course["assignment"], course["headers"]
    dora = factory.user("dora", course=course["course"])
    factory.user("eve", course=course["course"])  # enrolled, never submits
    early = utcnow() - timedelta(hours=3)
    best = graded(dora, assignment, 9.0, at=early, codes=())
    graded(dora, assignment, 6.0, at=early + timedelta(hours=1), codes=("missing-scale",))
    rows = {r["username"]: r for r in _csv(assignment)}
    assert set(rows) == {"dora", "eve"}, "one row per enrolled student, instructors left out"
    assert rows["eve"]["status"] == "missing" and rows["eve"]["final_score"] == ""
    assert rows["dora"]["submission_id"] == str(best.id) and rows["dora"]["final_score"] == "9"
    gradebook = client.get("/api/v1/instructor/assignments/attention/gradebook",
                           headers=headers).json
    assert gradebook["total"] == 2
    assert {s["username"]: s["final_score"] for s in gradebook["students"]} == {
        "dora": 9.0, "eve": None}
    export = client.get("/api/v1/instructor/assignments/attention/gradescope.json",
                        headers=headers).json
    assert [(s["username"], s["results"]["score"]) for s in export["submissions"]] == [
        ("dora", 9.0)]
    client.patch("/api/v1/instructor/assignments/attention", headers=headers,
                 json={"score_policy": "latest"})
    assert _csv(assignment)[0]["final_score"] == "6"


def test_a_regrade_keeps_the_previous_result_counted_until_the_new_one(
        client: FlaskClient, factory: Factory, course: dict[str, Any]) -> None:
    assignment, headers = course["assignment"], course["headers"]
    fay = factory.user("fay", course=course["course"])
    submission = graded(fay, assignment, 7.0, codes=("missing-scale",))
    started = client.post("/api/v1/instructor/assignments/attention/regrade", headers=headers)
    assert started.status_code == 202 and started.json["regraded"] == [submission.id]
    run_id = started.json["regrade"]["id"]
    [row] = _csv(assignment)
    assert (row["final_score"], row["status"]) == ("7", "graded"), "readable throughout"
    student = client.get(f"/api/v1/submissions/{submission.id}",
                         headers=factory.headers(fay)).json
    assert student["status"] == "queued" and student["score"] == 7.0
    db.session().refresh(submission)
    assert store_result(db.session(), claim_again(submission), result_document(9.5))
    report = client.get(f"/api/v1/instructor/assignments/attention/regrades/{run_id}",
                        headers=headers).json
    assert report["finished"] and (report["up"], report["down"]) == (1, 0)
    assert report["codes_lost"] == {"missing-scale": 1}
    assert _csv(assignment)[0]["final_score"] == "9.5"


def test_latency_leaves_regrades_out(factory: Factory, course: dict[str, Any]) -> None:
    from service.submissions.dashboard import grading_latency

    assignment = course["assignment"]
    gus = factory.user("gus", course=course["course"])
    old = graded(gus, assignment, 5.0, at=utcnow() - timedelta(days=30))
    assert grading_latency(db.session(), assignment)["samples"] == 1
    requeue_for_regrade(old)
    db.session().commit()
    assert grading_latency(db.session(), assignment)["samples"] == 0


def test_score_adjustments_need_a_reason_and_keep_an_audit_trail(
        client: FlaskClient, factory: Factory, course: dict[str, Any]) -> None:
    headers = course["headers"]
    hal = factory.user("hal", course=course["course"])
    submission = graded(hal, course["assignment"], 4.0)
    url = f"/api/v1/instructor/submissions/{submission.id}/adjustments"
    assert client.post(url, headers=headers, json={"score": 6}).status_code == 400
    for bad in (-1, 10.5, "nan", True, "six"):
        response = client.post(url, headers=headers, json={"score": bad, "reason": "r"})
        assert response.status_code == 400, bad
        assert "from 0 to 10" in response.json["detail"]
    made = client.post(url, headers=headers, json={"score": 6, "reason": "partial credit"})
    assert made.status_code == 201, made.json
    assert made.json["submission"]["score"] == 6.0
    trail = client.get(url, headers=headers).json["adjustments"]
    assert [(a["old_score"], a["new_score"], a["by"], a["reason"]) for a in trail] == [
        (4.0, 6.0, "prof", "partial credit")]
    assert _csv(course["assignment"])[0]["final_score"] == "6"
    assert client.post(url, headers=factory.headers(hal),
                       json={"score": 10, "reason": "x"}).status_code == 403
    comment = client.post(f"/api/v1/instructor/submissions/{submission.id}/comments",
                          headers=headers, json={"body": "See me about the mask."})
    assert comment.status_code == 201
    mine = client.get(f"/api/v1/submissions/{submission.id}", headers=factory.headers(hal)).json
    assert [c["body"] for c in mine["comments"]] == ["See me about the mask."]
    assert mine["adjusted"] is True


def test_the_page_and_the_api_refuse_the_same_settings(client: FlaskClient, pages: FlaskClient,
                                                        course: dict[str, Any]) -> None:
    api = client.patch("/api/v1/instructor/assignments/attention", headers=course["headers"],
                       json={"late_penalty_per_day": "2"})
    assert api.status_code == 400
    _log_in(pages, "prof")
    settings = "/dashboard/courses/ml101/assignments/attention/settings"
    token = _token(pages, settings)
    page = pages.post(settings, data={
        "csrf_token": token, "due_at": "2026-12-24T18:00", "time_zone": "America/New_York",
        "late_policy": "penalty", "late_penalty_per_day": "2", "score_policy": "best"})
    assert page.status_code == 400
    assert api.json["detail"] in page.get_data(as_text=True)
    assert pages.post(settings, data={"due_at": "2026-12-24T18:00"}).status_code == 400
    saved = pages.post(settings, data={
        "csrf_token": token, "due_at": "2026-12-24T18:00", "time_zone": "America/New_York",
        "late_policy": "penalty", "late_penalty_per_day": "0.1", "score_policy": "latest",
        "rate_limit_count": "5", "rate_limit_window_seconds": "3600", "published": "on",
        "results_published": "on"})
    assert saved.status_code == 303
    db.session().expire_all()
    assignment = db.session().get(CourseAssignment, course["assignment"].id)
    assert assignment is not None
    assert assignment.due_at is not None and assignment.due_at.isoformat() == \
        "2026-12-24T23:00:00+00:00"
    assert assignment.time_zone == "America/New_York" and assignment.results_published
    assert assignment.rate_limit_count == 5 and assignment.score_policy.value == "latest"


def test_the_limit_is_shown_before_it_is_reached(client: FlaskClient, pages: FlaskClient,
                                                 factory: Factory,
                                                 course: dict[str, Any]) -> None:
    client.patch("/api/v1/instructor/assignments/attention", headers=course["headers"],
                 json={"rate_limit_count": 3, "rate_limit_window_seconds": 3600})
    ivy = factory.user("ivy", course=course["course"])
    headers = factory.headers(ivy)
    for _ in range(3):
        assert client.post("/api/v1/assignments/attention/submissions", headers=headers,
                           data={"files": [(io.BytesIO(b"x = 1\n"), "attention.py")]},
                           content_type="multipart/form-data").status_code == 202
    limit = client.get("/api/v1/assignments/attention", headers=headers).json[
        "submission_limit"]
    assert (limit["used"], limit["limit"], limit["remaining"]) == (3, 3, 0)
    assert re.fullmatch(r"3 of 3 submissions in the last 1 h; next at \d\d:\d\d UTC",
                        limit["text"])
    refused = client.post("/api/v1/assignments/attention/submissions", headers=headers,
                          data={"files": [(io.BytesIO(b"x = 1\n"), "attention.py")]},
                          content_type="multipart/form-data")
    assert refused.status_code == 429
    assert refused.json["detail"].startswith("Submission limit reached")
    assert limit["next_at"][11:16] in refused.json["detail"]
    _log_in(pages, "ivy")
    page = pages.get("/courses/ml101/assignments/attention").get_data(as_text=True)
    assert "3 of 3 submissions in the last 1 h" in page


def test_lists_are_paginated_with_totals_and_keep_their_filters(
        client: FlaskClient, pages: FlaskClient, factory: Factory,
        course: dict[str, Any]) -> None:
    jo = factory.user("jo", course=course["course"])
    for i in range(7):
        graded(jo, course["assignment"], float(i), codes=("missing-scale",) if i % 2 else ())
    _log_in(pages, "prof")
    url = "/dashboard/courses/ml101/assignments/attention/submissions"
    page = pages.get(url + "?code=missing-scale&per_page=2").get_data(as_text=True)
    assert "1 to 2 of 3 submissions" in page
    following = re.search(r'rel="next" href="([^"]+)"', page)
    assert following is not None and "code=missing-scale" in following[1]
    last = pages.get(url + "?code=missing-scale&per_page=2&page=2").get_data(as_text=True)
    assert "3 to 3 of 3 submissions" in last
    api = client.get("/api/v1/instructor/assignments/attention/submissions?limit=3",
                     headers=course["headers"]).json
    assert api["total"] == 7 and len(api["submissions"]) == 3
    assert pages.get(url + "?page=0").status_code == 400


def _log_in(client: FlaskClient, username: str) -> None:
    token = _token(client, "/login")
    response = client.post("/login", data={"csrf_token": token, "username": username,
                                           "password": PASSWORD})
    assert response.status_code == 302, response.get_data(as_text=True)[:500]


def _token(client: FlaskClient, path: str) -> str:
    page = client.get(path).get_data(as_text=True)
    match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page) or re.search(
        r'id="csrf_token" name="csrf_token" type="hidden" value="([^"]+)"', page)
    assert match, page[:500]
    return match[1]


def test_result_records_never_exceed_the_maximum(app: Flask, factory: Factory,
                                                 course: dict[str, Any]) -> None:
    kim = factory.user("kim", course=course["course"])
    submission = graded(kim, course["assignment"], 12.0)
    stored = db.session().query(Result).filter_by(submission_id=submission.id).one()
    assert stored.final_score == MAX


@pytest.mark.parametrize("moment", ["0001-01-01T00:00", "9999-12-31T23:59:59+00:00",
                                    "2026-13-01T00:00", "yesterday"])
def test_impossible_deadlines_are_refused_everywhere(client: FlaskClient, factory: Factory,
                                                     course: dict[str, Any],
                                                     moment: str) -> None:
    factory.user("lee", course=course["course"])
    headers = course["headers"]
    settings = client.patch("/api/v1/instructor/assignments/attention", headers=headers,
                            json={"due_at": moment, "time_zone": "Pacific/Kiritimati"})
    extension = client.post("/api/v1/instructor/assignments/attention/extensions",
                            headers=headers, json={"students": ["lee"], "due_at": moment})
    assert (settings.status_code, extension.status_code) == (400, 400)
    assert "due_at" in settings.json["detail"] and "due_at" in extension.json["detail"]
    zone = client.patch("/api/v1/instructor/assignments/attention", headers=headers,
                        json={"time_zone": "../../etc/passwd"})
    assert zone.status_code == 400 and "time zone" in zone.json["detail"]


def test_the_cli_and_the_page_agree_on_the_maximum() -> None:
    """The CLI printed 7.5 / 9.5 where the page and the statement say 10."""
    from service.cli.client import print_outcome
    from service.submissions.visibility import student_view

    document = result_document(7.5)
    document["tests"] = [
        {**document["tests"][0], "score": 7.5, "max_score": 9.5},
        {"name": "after the deadline", "number": "2", "score": 0.0, "max_score": 0.5,
         "status": "failed", "output": "", "visibility": "after_due_date", "tags": []}]
    now = utcnow()
    view = student_view(document, now=now, due_at=now + timedelta(days=1),
                        results_published=False)
    out = io.StringIO()
    print_outcome({"status": "graded", "results": view, "files": [{"name": "attention.py"}],
                   "assignment": "attention", "id": 1, "score": None, "max_score": MAX},
                  as_json=False, out=out)
    text = out.getvalue()
    assert "Score: 7.5 / 10" in text and "9.5" not in text.split("\n\n")[1].split("\n")[0]
    assert "1 more check(s) (0.5 points) graded but shown only after release" in text
    assert "Final score: shown once every check is released." in text
