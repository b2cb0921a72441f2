"""The pages through Flask's test client: security, visibility and rendering (no browser, fast)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from devkit.courses import PASSWORD, Factory
from devkit.pages import csrf_token, log_in
from grader.fingerprints import NearMistake, behaviour_section
from service.core import db
from service.models import (
    CourseAssignment,
    CourseRole,
    Result,
    Role,
    Submission,
    SubmissionFile,
    SubmissionStatus,
    User,
    utcnow,
)
from service.submissions.dashboard import (
    code_frequency,
    pointed_lines,
    score_histogram,
    stuck_students,
    submission_timeline,
)
from service.submissions.gradebook import Scored
from service.web.render import markdown

ASSIGNMENT = "/courses/ml101/assignments/attention"
PAYLOAD = '<script>alert(1)</script><img src=x onerror=alert(2)>'


@pytest.fixture
def site(make_app: Callable[..., Flask], sqlite_url: str) -> Flask:
    """The app, with no app context held open: each request gets its own, as in production."""
    return make_app(sqlite_url)


@pytest.fixture
def client(site: Flask) -> FlaskClient:
    return site.test_client()


@contextmanager
def database(site: Flask) -> Iterator[Session]:
    with site.app_context():
        yield db.session()


@pytest.fixture
def factory(site: Flask) -> Iterator[Factory]:
    with site.app_context():
        made = Factory(site)
        course = made.course("ml101", slugs=("attention",))
        made.user("student", course=course)
        made.user("other", course=course)
        made.user("prof", role=Role.INSTRUCTOR, course=course,
                  course_role=CourseRole.INSTRUCTOR)
    return made


def graded(site: Flask, username: str, document: dict[str, Any],
           files: dict[str, bytes] | None = None) -> int:
    """A submission with a stored result, as a worker would have left it; its id."""
    with database(site) as session:
        user = session.scalars(select(User).where(User.username == username)).one()
        assignment = session.scalars(select(CourseAssignment)).first()
        submission = Submission(user=user, assignment=assignment, assignment_version="v",
                                seed=1, status=SubmissionStatus.GRADED, graded_at=utcnow())
        submission.files = [SubmissionFile(name=n, sha256="0" * 64, size=len(c), content=c)
                            for n, c in (files or {"attention.py": b"x = 1\n"}).items()]
        codes = [d["code"] for d in document["diagnoses"]]
        submission.results = [Result(round=1, score=document["score"],
                                     final_score=document["score"],
                                     max_score=document["max_score"], codes=codes,
                                     document=document, attempt_token="t")]
        session.add(submission)
        session.commit()
        return submission.id


def document(*tests: dict[str, Any], diagnoses: list[dict[str, Any]] | None = None,
             stdout: str = "") -> dict[str, Any]:
    return {"score": sum(t["score"] for t in tests),
            "max_score": sum(t["max_score"] for t in tests), "execution_time": 1.0,
            "output": "summary", "tests": list(tests), "diagnoses": diagnoses or [],
            "autograde": {"stdout": stdout, "stderr": "", "seed": 1}}


def check(number: str, name: str, passed: bool, visibility: str = "visible",
          output: str = "", tags: list[str] | None = None) -> dict[str, Any]:
    return {"number": number, "name": name, "score": 1.0 if passed else 0.0, "max_score": 1.0,
            "status": "passed" if passed else "failed", "output": output,
            "visibility": visibility, "tags": tags or []}


def test_login_sets_a_hardened_session_cookie(client: FlaskClient, factory: Factory) -> None:
    response = log_in(client, "student")
    assert response.status_code == 302
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    assert client.get("/assignments").status_code == 200


def test_session_cookie_is_secure_over_https(client: FlaskClient, factory: Factory) -> None:
    https = "https://grader.example"
    page = client.get("/login", base_url=https).get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page)
    assert token
    response = client.post("/login", base_url=https, headers={"Referer": https + "/login"},
                           data={"username": "student", "password": PASSWORD,
                                 "csrf_token": token.group(1)})
    assert response.status_code == 302
    assert "Secure" in response.headers["Set-Cookie"]


def test_forms_without_a_csrf_token_are_refused(client: FlaskClient, site: Flask,
                                                factory: Factory) -> None:
    refused = client.post("/login", data={"username": "student", "password": PASSWORD})
    assert refused.status_code == 400
    assert "Form expired" in refused.get_data(as_text=True)
    log_in(client, "student")
    upload = client.post(ASSIGNMENT + "/submissions", data={"code": "x = 1", "filename": "a.py"})
    assert upload.status_code == 400
    with database(site) as session:
        assert session.query(Submission).count() == 0


def test_the_api_still_takes_bearer_tokens_without_csrf(client: FlaskClient,
                                                        factory: Factory) -> None:
    response = client.post("/auth/login", json={"username": "student", "password": PASSWORD})
    assert response.status_code == 201


@pytest.mark.slow  # a dozen argon2 verifications
def test_failed_logins_are_rate_limited(client: FlaskClient, factory: Factory) -> None:
    statuses = [log_in(client, "student", "wrong password").status_code for _ in range(11)]
    assert statuses[:10] == [401] * 10
    assert statuses[10] == 429
    locked = log_in(client, "student")
    assert locked.status_code == 429 and "Retry-After" in locked.headers


def test_login_never_redirects_off_site(client: FlaskClient, factory: Factory) -> None:
    token = csrf_token(client, "/login")
    response = client.post("/login?next=//evil.example/x", data={
        "username": "student", "password": PASSWORD, "csrf_token": token})
    assert response.headers["Location"] == "/assignments"


def test_pages_need_a_login_and_pass_on_where_to_go(client: FlaskClient) -> None:
    response = client.get("/assignments")
    assert response.status_code == 302
    assert "/login?next=/assignments" in response.headers["Location"]


def test_pasted_code_becomes_a_queued_submission(client: FlaskClient, site: Flask,
                                                 factory: Factory) -> None:
    log_in(client, "student")
    token = csrf_token(client, ASSIGNMENT)
    response = client.post(ASSIGNMENT + "/submissions", data={
        "code": "def attention(q, k, v, allowed):\n    return q, q\n", "filename": "",
        "csrf_token": token})
    assert response.status_code == 303
    with database(site) as session:
        submission = session.query(Submission).one()
        assert [f.name for f in submission.files] == ["attention.py"]
        assert response.headers["Location"].endswith(f"/submissions/{submission.id}")
        status = client.get(f"/submissions/{submission.id}/status.json").get_json()
    assert status["status"] == "queued" and status["done"] is False


def test_upload_errors_are_shown_on_the_page(client: FlaskClient, factory: Factory) -> None:
    log_in(client, "student")
    token = csrf_token(client, ASSIGNMENT)
    response = client.post(ASSIGNMENT + "/submissions", follow_redirects=True, data={
        "csrf_token": token, "code": ""})
    assert "No files were submitted" in response.get_data(as_text=True)


def test_students_see_released_checks_only(client: FlaskClient, site: Flask,
                                           factory: Factory) -> None:
    found = graded(site, "student", document(
        check("1.1", "visible check", True),
        check("1.2", "secret hidden check", False, "hidden", "hidden output",
              ["mask-inverted"]),
        diagnoses=[{"code": "mask-inverted", "message": "secret evidence", "hint": "h",
                    "tests": ["1.2"]}]))
    log_in(client, "student")
    page = client.get(f"/submissions/{found}").get_data(as_text=True)
    assert "visible check" in page
    assert "secret hidden check" not in page and "secret evidence" not in page
    assert "mask-inverted" not in page
    assert "All checks passed" not in page
    assert "1 more check" in page

    teacher = site.test_client()
    log_in(teacher, "prof")
    full = teacher.get(f"/dashboard/submissions/{found}").get_data(as_text=True)
    assert "secret hidden check" in full and "secret evidence" in full


def test_students_cannot_read_others_or_the_dashboard(client: FlaskClient, site: Flask,
                                                      factory: Factory) -> None:
    theirs = graded(site, "other", document(check("1.1", "c", True)))
    log_in(client, "student")
    assert client.get(f"/submissions/{theirs}").status_code == 404
    assert client.get(f"/submissions/{theirs}/status.json").status_code == 404
    assert client.get("/dashboard/").status_code == 403
    assert client.get("/dashboard" + ASSIGNMENT).status_code == 403
    assert client.get(f"/dashboard/submissions/{theirs}").status_code == 404
    assert client.get("/dashboard/courses/ml101/people").status_code == 403


def test_student_controlled_text_is_escaped(client: FlaskClient, site: Flask,
                                            factory: Factory) -> None:
    with database(site) as session:
        session.scalars(select(User).where(User.username == "student")).one(
        ).display_name = PAYLOAD
        session.commit()
    found = graded(site, "student", document(
        check("1.1", "c", False, output=PAYLOAD),
        diagnoses=[{"code": "runtime-error", "message": PAYLOAD, "hint": "", "tests": ["1.1"]}],
        stdout=PAYLOAD), files={PAYLOAD + ".py": PAYLOAD.encode()})
    log_in(client, "prof")
    for path in (f"/dashboard/submissions/{found}", f"/submissions/{found}",
                 "/dashboard" + ASSIGNMENT + "/submissions", "/dashboard/courses/ml101/people"):
        response = client.get(path)
        html = response.get_data(as_text=True)
        assert response.status_code == 200, path
        assert "<script>alert" not in html and "<img src=x" not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_dashboard_counts_codes_and_exports(client: FlaskClient, site: Flask,
                                            factory: Factory) -> None:
    leak = {"code": "causal-leak", "message": "m", "hint": "h", "tests": ["1.1"]}
    graded(site, "student", document(check("1.1", "c", False), diagnoses=[leak]))
    graded(site, "other", document(check("1.1", "c", True)))
    log_in(client, "prof")
    page = client.get("/dashboard" + ASSIGNMENT).get_data(as_text=True)
    data = re.search(r'<script type="application/json" id="dashboard-data">(.*?)</script>',
                     page, re.S)
    assert data
    charts = json.loads(data.group(1))
    assert charts["codes"] == [{"code": "causal-leak", "students": 1, "share": 0.5}]
    assert charts["checks"][0]["rate"] == 0.5
    filtered = client.get("/dashboard" + ASSIGNMENT + "/submissions?code=causal-leak")
    assert filtered.get_data(as_text=True).count("/dashboard/submissions/") == 1
    csv = client.get("/dashboard" + ASSIGNMENT + "/scores.csv")
    assert csv.mimetype == "text/csv" and "causal-leak" in csv.get_data(as_text=True)
    gradescope = client.get("/dashboard" + ASSIGNMENT + "/gradescope.json")
    assert len(json.loads(gradescope.get_data())["submissions"]) == 2


def test_regrade_all_queues_a_new_round_and_reports_progress(
        client: FlaskClient, site: Flask, factory: Factory) -> None:
    found = graded(site, "student", document(check("1.1", "c", True)))
    log_in(client, "prof")
    token = csrf_token(client, "/dashboard" + ASSIGNMENT)
    response = client.post("/dashboard" + ASSIGNMENT + "/regrade",
                           data={"regrade-csrf_token": token})
    assert response.status_code == 303
    with database(site) as session:
        submission = session.get(Submission, found)
        assert submission is not None
        assert submission.round == 2 and submission.status is SubmissionStatus.QUEUED
    progress = client.get("/dashboard" + ASSIGNMENT + "/queue.json").get_json()
    assert {k: progress["regrade"][k] for k in ("scope", "total", "queued", "done",
                                                "finished")} == {
        "scope": "counted", "total": 1, "queued": 1, "done": 0, "finished": False}
    # The previous result stays counted while the new round waits.
    assert progress["graded_students"] == 1


def test_instructor_creates_and_enrols_a_user_and_tokens_are_shown_once(
        client: FlaskClient, site: Flask, factory: Factory) -> None:
    log_in(client, "prof")
    token = csrf_token(client, "/dashboard/courses/ml101/people")
    page = client.post("/dashboard/courses/ml101/people", data={
        "new-csrf_token": token, "new-username": "newbie", "new-display_name": "New Bie",
        "new-role": "student", "new-submit": "Create and enrol"}).get_data(as_text=True)
    password = re.search(r'<code id="new-password">([^<]+)</code>', page)
    assert password, page
    assert log_in(site.test_client(), "newbie", password.group(1)).status_code == 302
    token = csrf_token(client, "/account/tokens")
    page = client.post("/account/tokens", data={"csrf_token": token, "name": "laptop"}
                       ).get_data(as_text=True)
    issued = re.search(r'<code id="new-token">(ag_[^<]+)</code>', page)
    assert issued, page
    assert issued.group(1) not in client.get("/account/tokens").get_data(as_text=True)
    assert client.get("/api/v1/assignments", headers={
        "Authorization": f"Bearer {issued.group(1)}"}).status_code == 200


def test_statement_markdown_shows_raw_html_as_text() -> None:
    html = str(markdown("# Title\n\n<script>x()</script>\n\n[a](javascript:alert(1))"))
    assert "<h1>Title</h1>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html


def test_statement_tables_scroll_in_a_box_the_keyboard_reaches() -> None:
    html = str(markdown("| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n\n| c |\n|---|\n| 3 |"))
    boxes = re.findall(r'<div class="table-scroll" tabindex="0" role="region" '
                       r'aria-label="([^"]+)">\s*<table>', html)
    assert boxes == ["Table 1 of the statement", "Table 2 of the statement"]
    assert html.count("</table>\n</div>") == 2


def test_pointed_lines_follow_tracebacks_and_syntax_errors() -> None:
    results = {"diagnoses": [
        {"code": "runtime-error", "message": "ValueError: x (in mha.py, line 50, in forward: "
                                             "`y`)"},
        {"code": "syntax-error", "message": "`helpers.py` line 3, column 5: invalid syntax."}],
        "tests": [{"number": "2.1", "output": "(in mha.py, line 7, in __init__: `z`)"}]}
    assert pointed_lines(results, ["student_upload.py"], "mha.py") == {
        "student_upload.py": {50: ["runtime-error"], 7: ["check 2.1"]}}
    assert pointed_lines(results, ["mha.py", "helpers.py"], "mha.py") == {
        "mha.py": {50: ["runtime-error"], 7: ["check 2.1"]},
        "helpers.py": {3: ["syntax-error"]}}


def test_chart_data_helpers() -> None:
    assert score_histogram([0.0, 5.0, 10.0, 9.99], 10.0)["counts"] == [1, 0, 0, 0, 0, 1, 0,
                                                                        0, 0, 2]
    assert code_frequency([["a", "b"], ["a"], []]) == [
        {"code": "a", "students": 2, "share": 0.6667},
        {"code": "b", "students": 1, "share": 0.3333}]
    due = utcnow().replace(minute=30, second=0, microsecond=0)
    timeline = submission_timeline([due - timedelta(hours=1), due + timedelta(minutes=10)], due)
    # A one-hour lab is drawn in minutes, not as one or two bars.
    assert timeline["step_minutes"] == 5 and len(timeline["labels"]) == 15
    assert timeline["on_time"][0] == 1 and sum(timeline["on_time"]) == 1
    assert timeline["late"][-1] == 1 and sum(timeline["late"]) == 1
    assert timeline["deadline_label"] == timeline["labels"][12]
    month = submission_timeline([due - timedelta(days=30), due], due)
    assert month["step_minutes"] == 24 * 60 and len(month["labels"]) == 31
    year = submission_timeline([due - timedelta(days=400), due], None)
    assert year["step_minutes"] == 7 * 24 * 60
    histogram = score_histogram([0.0, 0.0, 4.0, 10.0], 10.0)
    assert (histogram["mean"], histogram["median"], histogram["zeros"]) == (3.5, 2.0, 2)


def test_students_stuck_on_one_code() -> None:
    def scored(user: int, n: int, codes: tuple[str, ...]) -> Scored:
        return Scored(submission_id=n, user_id=user, submitted_at=utcnow(), round=1,
                      status=SubmissionStatus.GRADED, late_days=0, result_id=n, raw=0.0,
                      max_score=10.0, codes=codes, adjusted=None, final=0.0)

    history = [scored(1, 1, ("a",)), scored(1, 2, ("a", "b")), scored(1, 3, ("a", "b")),
               scored(2, 4, ("b",)), scored(2, 5, ("b",)),
               scored(3, 6, ("c",)), scored(3, 7, ("c",)), scored(3, 8, ()),
               scored(3, 9, ("c",))]
    assert stuck_students(history) == {"a": [1]}


def test_every_page_has_the_frame_and_the_favicon(client: FlaskClient, factory: Factory) -> None:
    """Navigation and log-out on the account, webhook and LMS pages too, not only the main ones."""
    log_in(client, "prof")
    for path in ("/assignments", "/account/tokens", "/account/sessions",
                 "/dashboard/courses/ml101/webhooks",
                 "/dashboard/courses/ml101/assignments/attention"):
        page = client.get(path)
        assert page.status_code == 200, path
        html = page.get_data(as_text=True)
        assert 'aria-label="Main"' in html and "Log out" in html, path
        assert 'rel="icon"' in html, path
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and b"<svg" in icon.data


def test_a_result_page_draws_the_attention_map_as_svg_with_its_table(
        client: FlaskClient, site: Flask, factory: Factory) -> None:
    picture = {"version": 1, "call": "masked", "input": "q (1, 2, 8) with <b>a mask</b>",
               "tests": ["1.1"], "source": "returned", "rows": "queries", "columns": "keys",
               "caption": "Blocked cells (·) still get weight.", "truncated": False,
               "panels": [{"head": None, "student": [[0.5, 0.5], [0.2, None]],
                           "expected": [[1.0, 0.0], [0.2, 0.8]],
                           "blocked": [[False, True], [False, False]]}]}
    diagnosis = {"code": "mask-ignored", "message": "m", "hint": "h", "tests": ["1.1"],
                 "attention_map": picture}
    held = {**diagnosis, "code": "mask-inverted", "tests": ["1.2"],
            "attention_map": {**picture, "tests": ["1.2"]}}
    submission = graded(site, "student", document(
        check("1.1", "masked", False, tags=["mask-ignored"]),
        check("1.2", "hidden one", False, visibility="hidden", tags=["mask-inverted"]),
        diagnoses=[diagnosis, held]))
    log_in(client, "student")
    page = client.get(f"/submissions/{submission}/result")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="heatmap"') == 2
    assert "<b>a mask</b>" not in html and "&lt;b&gt;a mask&lt;/b&gt;" in html
    assert "0.50 / 0.00 · ≠" in html          # the table: yours / expected, blocked, differs
    assert 'id="map-mask-inverted"' not in html  # its check is not released to the student


def test_a_result_page_draws_the_training_curves_of_released_checks_only(
        client: FlaskClient, site: Flask, factory: Factory) -> None:
    def training(call: str, number: str, curve: list[float | None]) -> dict[str, Any]:
        return {"version": 1, "call": call, "tests": [number], "passed": False,
                "outcome": "learned-part", "steps": list(range(len(curve))), "curve": curve,
                "reference_curve": [2.08, 0.5, 0.01], "accuracy": 0.25,
                "reference_accuracy": 1.0, "chance": 0.125, "truncated": False}

    submission = graded(site, "student", {**document(
        check("1.11", "it learns", False), check("1.12", "hidden one", False,
                                                 visibility="hidden")),
        "training": [training("training", "1.11", [2.08, 1.9, 1.7]),
                     training("held", "1.12", [2.08, None, None])]})
    log_in(client, "student")
    html = client.get(f"/submissions/{submission}/result").get_data(as_text=True)
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="curves"') == 1
    assert 'id="curve-training"' in html and 'id="curve-held"' not in html
    assert ("Your model learned only part of the task: its loss stopped at 1.7 while the "
            "reference reached 0.01 on the same seed") in html
    assert "<desc>Your model learned only part" in html and 'role="img"' in html
    assert "<td class=\"num\">1.9</td><td class=\"num\">0.5</td>" in html  # the table


def test_the_unexplained_page_groups_for_instructors_only(
        client: FlaskClient, site: Flask, factory: Factory) -> None:
    unexplained = {"code": "wrong-output", "message": "m", "hint": "h", "tests": ["1.1"]}
    behaviour = behaviour_section({"plain": {"0.1": ["differs", "axis-1.sum=moved"]}},
                                  failed_checks=["1.1"], codes=["wrong-output"],
                                  nearest=[NearMistake("mask-ignored", "mask-ignored", 0.25)])
    printed = {**document(check("1.1", "c", False), diagnoses=[unexplained]),
               "behaviour": behaviour}
    graded(site, "student", printed)
    graded(site, "other", document(check("1.1", "c", False), diagnoses=[unexplained]))
    page = "/dashboard" + ASSIGNMENT + "/unexplained"
    log_in(client, "student")
    assert client.get(page).status_code == 403
    log_in(client, "prof")
    html = client.get(page).get_data(as_text=True)
    key = re.search(r'data-group="([0-9a-f]{12})"', html)
    assert key and html.count('data-group="') == 1
    assert "mask-ignored" in html and "graded before fingerprints" in html
    group = client.get(f"{page}/{key.group(1)}")
    assert group.status_code == 200 and "axis-1.sum=moved" in group.get_data(as_text=True)
    assert client.get(f"{page}/000000000000").status_code == 404
    assert client.post(f"{page}/{key.group(1)}/regrade").status_code == 400
    token = csrf_token(client, f"{page}/{key.group(1)}")
    refused = client.post(f"{page}/{key.group(1)}/regrade",
                          data={"group-csrf_token": token, "scores": "maybe"})
    assert refused.status_code == 303 and refused.location.endswith(f"/{key.group(1)}")
    token = csrf_token(client, f"{page}/{key.group(1)}")
    assert client.post(f"{page}/{key.group(1)}/regrade",
                       data={"group-csrf_token": token}).status_code == 303
    progress = client.get("/dashboard" + ASSIGNMENT + "/queue.json").get_json()
    assert (progress["regrade"]["scope"], progress["regrade"]["total"]) == ("group", 1)
    assert progress["regrade"]["keep_scores"], "new feedback only unless the instructor says"
