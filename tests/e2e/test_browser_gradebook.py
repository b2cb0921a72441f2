"""The gradebook in a real Chromium against the real service: an instructor extends a deadline
for one student, adjusts a score with a reason, and regrades all, the books readable throughout.

Runs on the ``attention`` assignment only (the other browser tests use the module one)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from assignments.spec import load_spec
from devkit.browser import COURSE, Live, login, screenshot
from devkit.courses import PASSWORD
from service.app import create_app
from service.cli.database import app_session
from service.courses.accounts import create_user
from service.courses.enrolment import course_by_code, enrol
from service.models import (
    CourseAssignment,
    LatePolicy,
    Result,
    Submission,
    SubmissionFile,
    SubmissionStatus,
    utcnow,
)

pytestmark = pytest.mark.browser

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "attention"
MAX = load_spec("attention").max_score
"""The assignment's maximum, which the gradebook shows every score out of."""
DASHBOARD = f"/dashboard/courses/{COURSE}/assignments/attention"
REGRADE_TIMEOUT_MS = 240_000
STUDENTS = {
    # user name: (corpus file, raw score stored before the regrade, hours after the deadline)
    "gina": ("no_scale_matmul.py", 8.0, 25),
    "hank": ("softmax_dim_minus2.py", 5.0, -3),
    "ines": ("correct_matmul.py", 9.0, -2),
}


def _document(score: float) -> dict[str, Any]:
    return {"score": score, "max_score": MAX, "execution_time": 0.1, "output": "",
            "tests": [{"name": "stored before", "number": "1", "score": score,
                       "max_score": MAX, "status": "failed", "output": "",
                       "visibility": "visible", "tags": []}], "diagnoses": []}


@pytest.fixture(scope="module")
def books(live: Live) -> dict[str, Any]:
    """Three students graded on ``attention`` two days after its deadline (one a day late,
    under a 25%-a-day penalty), as a worker would have left them."""
    app = create_app({"DATABASE_URL": live.database_url, "BROKER_URL": "memory://",
                      "SECRET_KEY": "seed"})
    ids: dict[str, int] = {}
    with app_session(app) as session:
        course = course_by_code(session, COURSE)
        assignment = session.scalars(select(CourseAssignment).where(
            CourseAssignment.course_id == course.id, CourseAssignment.slug == "attention")).one()
        due = utcnow() - timedelta(days=2)
        assignment.due_at, assignment.late_policy = due, LatePolicy.PENALTY
        assignment.late_penalty_per_day = 0.25
        for username, (name, score, hours) in STUDENTS.items():
            user = create_user(session, username=username, password=PASSWORD,
                               display_name=username.title())
            enrol(session, course=course, user=user)
            content = (CORPUS / name).read_bytes()
            submission = Submission(
                user=user, assignment=assignment, assignment_version=assignment.version,
                seed=7, status=SubmissionStatus.GRADED,
                requested_at=due + timedelta(hours=hours), graded_at=utcnow())
            submission.files = [SubmissionFile(name="attention.py", sha256="0" * 64,
                                               size=len(content), content=content)]
            submission.results = [Result(round=1, score=score, final_score=score,
                                         max_score=MAX, codes=[], document=_document(score),
                                         attempt_token="seed")]
            session.add(submission)
            session.flush()
            ids[username] = submission.id
    app.extensions["autograde.db"].engine.dispose()
    return {"ids": ids, "due": due}


def _row(page: Any, username: str) -> dict[str, str]:
    row = page.locator(f"#gradebook-table tr[data-student='{username}']")
    return {key: row.locator(f".{key}").inner_text().strip()
            for key in ("status", "late-days", "raw", "final")}


def test_extending_one_students_deadline_lifts_their_penalty_at_once(
        live: Live, browser: Any, books: dict[str, Any]) -> None:
    page = browser.new_page()
    login(page, live, "prof")
    page.goto(live.path(DASHBOARD + "/gradebook"))
    assert _row(page, "gina") == {"status": "graded", "late-days": "2", "raw": "8",
                                  "final": f"4 / {MAX:g}"}
    page.goto(live.path(DASHBOARD + "/extensions"))
    page.fill("#students", "gina")
    local = (books["due"] + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    page.fill("#ext_due_at", local)
    page.fill("#ext_zone", "UTC")
    page.fill("#reason", "illness, note from the office")
    page.click("#grant-extension")
    page.wait_for_selector("#extensions-table tr[data-student='gina']")
    assert "illness" in page.inner_text("#extensions-table tr[data-student='gina']")
    screenshot(page, "instructor-extensions")

    page.goto(live.path(DASHBOARD + "/gradebook"))
    assert _row(page, "gina") == {"status": "graded", "late-days": "0", "raw": "8",
                                  "final": f"8 / {MAX:g}"}
    assert _row(page, "hank")["late-days"] == "0"

    student = browser.new_page()
    login(student, live, "gina")
    student.goto(live.path(f"/courses/{COURSE}/assignments/attention"))
    assert "Your deadline:" in student.inner_text("#your-deadline")
    assert "extension until" in student.inner_text("#your-deadline")
    assert student.inner_text("#counted-score") == f"8 / {MAX:g}"
    assert re.search(r"\d+ of \d+ submissions in the last", student.inner_text("#rate-status"))


def test_adjusting_a_score_needs_a_reason_and_leaves_an_audit_trail(
        live: Live, browser: Any, books: dict[str, Any]) -> None:
    page = browser.new_page()
    login(page, live, "prof")
    submission = books["ids"]["hank"]
    page.goto(live.path(f"/dashboard/submissions/{submission}"))
    page.fill("#adjust-score", "6.5")
    page.click("#adjust-button")  # no reason: the browser refuses to send the form
    assert page.url.endswith(f"/dashboard/submissions/{submission}")
    assert "No adjustment." in page.inner_text("#audit-trail")
    page.fill("#adjust-reason", "regrade request: the mask check was too strict")
    page.click("#adjust-button")
    page.wait_for_selector("#audit-trail td:has-text('mask check')")
    trail = page.inner_text("#audit-trail")
    assert "prof" in trail and "5" in trail and "6.5" in trail
    assert f"6.5 / {MAX:g}" in page.inner_text("#final-score")
    page.fill("#comment-body", "I raised your score: see the note on the mask check.")
    page.click("#comment-form button")
    page.wait_for_selector("#comments blockquote")
    screenshot(page, "instructor-adjustment")
    page.goto(live.path(DASHBOARD + "/gradebook"))
    assert _row(page, "hank")["final"].startswith(f"6.5 / {MAX:g}")

    student = browser.new_page()
    login(student, live, "hank")
    student.goto(live.path(f"/submissions/{submission}"))
    assert student.inner_text("#score").strip() == f"6.5 / {MAX:g}"
    assert "raised your score" in student.inner_text("#student-comments")


def test_regrade_all_keeps_the_gradebook_readable_and_reports_what_changed(
        live: Live, browser: Any, books: dict[str, Any]) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    login(page, live, "prof")
    page.goto(live.path(DASHBOARD + "/gradebook"))
    before = {name: _row(page, name)["final"] for name in STUDENTS}
    assert all(value for value in before.values())

    page.goto(live.path(DASHBOARD))
    page.click("#regrade-all")
    page.wait_for_url(live.path(DASHBOARD + "/regrade"))
    assert page.is_checked("input[name=scope][value=counted]"), "counted only by default"
    assert "Every submission" in page.inner_text("#regrade-form")
    page.click("#confirm-regrade")
    page.wait_for_url(re.compile(r".*/attention#queue$"))
    page.wait_for_selector("#regrade-progress:not([hidden])")

    watcher = browser.new_page()
    finished, seen_during = False, 0
    while not finished:
        # Throughout: every student keeps a final score, the previous one until the new
        # result is stored.
        watcher.goto(live.path(DASHBOARD + "/gradebook"))
        running = watcher.locator("#gradebook-regrading").count() == 1
        for name in STUDENTS:
            row = _row(watcher, name)
            assert row["status"] == "graded" and re.match(r"[\d.]+ / [\d.]+", row["final"]), \
                (name, row)
        seen_during += running
        finished = page.get_attribute("#regrade-progress", "data-finished") == "yes"
        if not finished:
            page.wait_for_timeout(1000)
            assert page.evaluate("performance.now()") < REGRADE_TIMEOUT_MS, "regrade too slow"
    assert seen_during >= 1, "the gradebook was read while the regrade ran"
    report = page.inner_text("#regrade-report")
    assert report.startswith("Regrade done:") and "up" in report and "down" in report
    screenshot(page, "instructor-regrade-done")
    watcher.goto(live.path(DASHBOARD + "/gradebook"))
    after = _row(watcher, "ines")
    assert after["raw"] != "9", "the new round's result is now the one shown"
    assert errors == []
