"""Bulk download on PostgreSQL: the zip holds each student's counted submission (or every one)
under their user name with a manifest that agrees with the gradebook; only the course's
instructors get it, through the API and the dashboard alike."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from devkit.courses import PASSWORD, Factory
from service.core import db
from service.grading.exactly_once import Claim, store_result
from service.models import (
    CourseAssignment,
    CourseRole,
    ReportStatus,
    Role,
    SimilarityRun,
    Submission,
    SubmissionFile,
    SubmissionStatus,
    User,
    utcnow,
)
from service.submissions.similarity import run_report


def _document(score: float) -> dict[str, Any]:
    return {"score": score, "max_score": 10.0, "execution_time": 0.1, "output": "",
            "tests": [{"name": "all", "number": "1", "score": score, "max_score": 10.0,
                       "status": "passed" if score == 10 else "failed", "output": "",
                       "visibility": "visible", "tags": []}], "diagnoses": []}


def _submit(user: User, assignment: CourseAssignment, files: dict[str, bytes], *,
            score: float | None, minutes_ago: int) -> Submission:
    session = db.session()
    submission = Submission(user=user, assignment=assignment,
                            assignment_version=assignment.version, seed=1,
                            requested_at=utcnow() - timedelta(minutes=minutes_ago),
                            status=SubmissionStatus.RUNNING if score is not None
                            else SubmissionStatus.QUEUED, attempt_token="tok")
    session.add(submission)
    session.flush()
    for name, data in files.items():
        session.add(SubmissionFile(submission_id=submission.id, name=name, sha256="0" * 64,
                                   size=len(data), content=data))
    session.commit()
    if score is not None:
        assert store_result(session, Claim(submission.id, "tok", submission.round),
                            _document(score))
    return submission


def _log_in(client: FlaskClient, username: str) -> None:
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page)
    assert token, page[:300]
    response = client.post("/login", data={"csrf_token": token[1], "username": username,
                                           "password": PASSWORD})
    assert response.status_code == 302


def _manifest(archive: zipfile.ZipFile) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(archive.read("manifest.csv").decode())))


def test_names_stored_before_the_upload_rule_enter_the_archive_made_plain(
        pg_app: Flask, pg_factory: Factory) -> None:
    course = pg_factory.course("ml101")
    prof = pg_factory.user("prof", role=Role.INSTRUCTOR, course=course,
                           course_role=CourseRole.INSTRUCTOR)
    assignment = pg_factory.assignment(course)
    ada = pg_factory.user("=ada", course=course)
    _submit(ada, assignment, {"attention.py": b"# a\n", "CON.py": b"# b\n",
                              "util\u202eyp.py": b"# c\n", "..\\..\\evil.py": b"# d\n"},
            score=9, minutes_ago=5)
    response = pg_app.test_client().get(
        "/api/v1/instructor/assignments/attention/submissions.zip",
        headers=pg_factory.headers(prof))
    archive = zipfile.ZipFile(io.BytesIO(response.get_data()))
    folder = "_=ada"  # the username, as a folder, meets the same rule
    assert sorted(archive.namelist()) == sorted([
        "manifest.csv", f"{folder}/attention.py", f"{folder}/_CON.py",
        f"{folder}/_util_yp.py", f"{folder}/evil.py"])
    assert [row["username"] for row in _manifest(archive)] == ["'=ada"]


def test_the_zip_holds_the_counted_submissions_and_a_true_manifest(
        pg_app: Flask, pg_factory: Factory, pg_url: str,
        make_app: Callable[..., Flask]) -> None:
    course = pg_factory.course("ml101")
    other = pg_factory.course("cs200")
    prof = pg_factory.user("prof", role=Role.INSTRUCTOR, course=course,
                           course_role=CourseRole.INSTRUCTOR)
    stranger = pg_factory.user("stranger", role=Role.INSTRUCTOR, course=other,
                               course_role=CourseRole.INSTRUCTOR)
    assignment = pg_factory.assignment(course)
    ada = pg_factory.user("ada", course=course)
    bob = pg_factory.user("bob", course=course)
    pg_factory.user("cy", course=course)  # enrolled, never submitted
    first = _submit(ada, assignment, {"attention.py": b"# ada one\n"}, score=4, minutes_ago=30)
    best = _submit(ada, assignment, {"attention.py": b"# ada two\n", "util.py": b"X = 1\n"},
                   score=9, minutes_ago=20)
    queued = _submit(bob, assignment, {"attention.py": b"# bob\n"}, score=None, minutes_ago=5)
    headers = pg_factory.headers(prof)
    client = pg_app.test_client()

    response = client.get("/api/v1/instructor/assignments/attention/submissions.zip",
                          headers=headers)
    assert response.status_code == 200 and response.mimetype == "application/zip"
    assert response.is_streamed
    assert "ml101-attention-counted-submissions.zip" in response.headers["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response.get_data()))
    assert archive.testzip() is None
    # The latest graded submission counts (the default policy): ada's second, both its files.
    assert sorted(archive.namelist()) == ["ada/attention.py", "ada/util.py", "manifest.csv"]
    assert archive.read("ada/attention.py") == b"# ada two\n"
    rows = {row["username"]: row for row in _manifest(archive)}
    assert list(rows) == ["ada", "bob", "cy"]
    assert rows["ada"]["submission_id"] == str(best.id)
    assert rows["ada"]["counted_score"] == "9" and rows["ada"]["status"] == "graded"
    assert rows["ada"]["submitted_at"] == best.requested_at.isoformat()
    assert rows["ada"]["display_name"] == "ada"
    assert rows["bob"]["status"] == "pending" and rows["bob"]["submission_id"] == ""
    assert rows["cy"]["status"] == "missing"

    every = client.get("/api/v1/instructor/assignments/attention/submissions.zip?all=true",
                       headers=headers)
    archive = zipfile.ZipFile(io.BytesIO(every.get_data()))
    assert sorted(archive.namelist()) == sorted([
        "manifest.csv", f"ada/{first.id}/attention.py", f"ada/{best.id}/attention.py",
        f"ada/{best.id}/util.py", f"bob/{queued.id}/attention.py"])
    assert archive.read(f"ada/{first.id}/attention.py") == b"# ada one\n"
    by_id = {row["submission_id"]: row for row in _manifest(archive)}
    assert by_id[str(first.id)]["counted"] == "no" and by_id[str(first.id)]["score"] == "4"
    assert by_id[str(best.id)]["counted"] == "yes"
    assert by_id[str(queued.id)]["status"] == "queued" and by_id[str(queued.id)]["score"] == ""

    # Another course's instructor: the assignment is not theirs to see (404); a student of the
    # course sees it but may not download (403); the same through the dashboard.
    refused = client.get("/api/v1/instructor/assignments/attention/submissions.zip?course=ml101",
                         headers=pg_factory.headers(stranger))
    assert refused.status_code == 404 and b"ada" not in refused.get_data()
    refused = client.get("/api/v1/instructor/assignments/attention/submissions.zip?course=ml101",
                         headers=pg_factory.headers(ada))
    assert refused.status_code == 403 and b"# ada" not in refused.get_data()

    page_url = "/dashboard/courses/ml101/assignments/attention/submissions.zip"
    for username, status in (("stranger", 404), ("ada", 403), ("prof", 200)):
        pages = make_app(pg_url).test_client()
        _log_in(pages, username)
        got = pages.get(page_url)
        assert got.status_code == status, (username, got.status_code)
        if status == 200:
            names = zipfile.ZipFile(io.BytesIO(got.get_data())).namelist()
            assert sorted(names) == ["ada/attention.py", "ada/util.py", "manifest.csv"]
        pages.application.extensions["autograde.db"].engine.dispose()
    prof_pages = make_app(pg_url).test_client()
    _log_in(prof_pages, "prof")
    overview = prof_pages.get("/dashboard/courses/ml101/assignments/attention")
    assert page_url.encode() in overview.get_data()
    prof_pages.application.extensions["autograde.db"].engine.dispose()


@pytest.mark.slow
def test_the_similarity_report_is_computed_in_the_background_for_instructors_only(
        pg_app: Flask, pg_factory: Factory, pg_url: str,
        make_app: Callable[..., Flask]) -> None:
    import random

    from devkit.similarity import distinct_submission, near_copy

    course = pg_factory.course("ml101")
    other = pg_factory.course("cs200")
    pg_factory.user("prof", role=Role.INSTRUCTOR, course=course,
                    course_role=CourseRole.INSTRUCTOR)
    pg_factory.user("stranger", role=Role.INSTRUCTOR, course=other,
                    course_role=CourseRole.INSTRUCTOR)
    assignment = pg_factory.assignment(course)
    rng = random.Random(2)
    sources = {f"st{i:02d}": distinct_submission(rng) for i in range(24)}
    sources["st23"] = near_copy(sources["st05"])
    students = {}
    for minutes, (name, code) in enumerate(sorted(sources.items())):
        students[name] = pg_factory.user(name, course=course)
        _submit(students[name], assignment, {"attention.py": code.encode()}, score=5,
                minutes_ago=60 - minutes)
    url = "/dashboard/courses/ml101/assignments/attention/similarity"
    for username, status in (("stranger", 404), ("st05", 403)):
        pages = make_app(pg_url).test_client()
        _log_in(pages, username)
        assert pages.get(url).status_code == status
        assert pages.get(url + "/progress").status_code == status
        assert pages.get(url + "/st05/st23").status_code == status
        assert pages.get(url + ".csv").status_code == status
        assert pages.post(url, data={}).status_code in (400, status)
        pages.application.extensions["autograde.db"].engine.dispose()
    assert db.session().scalar(select(func.count(SimilarityRun.id))) == 0

    pages = make_app(pg_url).test_client()
    _log_in(pages, "prof")
    page = pages.get(url).get_data(as_text=True)
    assert 'id="similarity-none-yet"' in page and 'id="similarity-compute"' in page
    assert pages.get(url + ".csv").status_code == 409  # nothing computed: said, not a 500

    def start() -> None:
        token = re.search(r'name="similarity-csrf_token" type="hidden" value="([^"]+)"',
                          pages.get(url).get_data(as_text=True))
        assert token is not None
        assert pages.post(url, data={"similarity-csrf_token": token[1]}).status_code == 303

    start()
    (run,) = db.session().scalars(select(SimilarityRun)).all()
    assert run.status is ReportStatus.QUEUED
    waiting = pages.get(url).get_data(as_text=True)
    assert 'id="similarity-progress"' in waiting and 'id="similarity-compute"' not in waiting
    assert pages.get(url + "/progress").get_json()["pending"] is True

    # The worker's similarity task: one copy computes it, a second delivery finds it taken.
    assert run_report(db.session(), run.id) == "done"
    assert run_report(db.session(), run.id) == "skipped"
    db.session().expire_all()
    progress = pages.get(url + "/progress").get_json()
    assert progress == {"status": "done", "pending": False, "done": 276, "total": 276}
    page = pages.get(url).get_data(as_text=True)
    assert re.findall(r'data-pair="([^"]+)"', page) == ["st05 st23"]
    assert "24 students, 276 pairs compared" in page
    assert 'id="similarity-compute"' not in page  # current: nothing to compute again
    side = pages.get(url + "/st05/st23")
    assert side.status_code == 200
    body = side.get_data(as_text=True)
    assert body.count("<mark>") >= 2 and "# my solution" in body
    assert pages.get(url + "/st05/nobody").status_code == 404
    rows = list(csv.DictReader(io.StringIO(pages.get(url + ".csv").get_data(as_text=True))))
    assert [(row["first"], row["second"]) for row in rows] == [("st05", "st23")]
    assert float(rows[0]["score"]) > 0.9 > float(rows[0]["threshold"])
    assert b'href="' + url.encode() in pages.get(
        "/dashboard/courses/ml101/assignments/attention").get_data()

    # A new counted submission: the report stays readable and says it is out of date.
    _submit(students["st01"], assignment, {"attention.py": distinct_submission(rng).encode()},
            score=9, minutes_ago=0)
    stale = pages.get(url).get_data(as_text=True)
    assert 'id="similarity-stale"' in stale and re.findall(r'data-pair="([^"]+)"', stale)
    start()
    latest = db.session().scalars(select(SimilarityRun).order_by(SimilarityRun.id.desc())).first()
    assert latest is not None and latest.id != run.id and latest.status is ReportStatus.QUEUED
    # Its worker dies: after a while without a sign of life it is said to have stopped, and a
    # new one can be asked for.
    latest.status, latest.updated_at = ReportStatus.RUNNING, utcnow() - timedelta(hours=1)
    db.session().commit()
    lost = pages.get(url).get_data(as_text=True)
    assert 'id="similarity-failed"' in lost and 'id="similarity-compute"' in lost
    start()
    assert db.session().scalar(select(func.count(SimilarityRun.id))) == 3
    pages.application.extensions["autograde.db"].engine.dispose()
