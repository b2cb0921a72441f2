"""LTI 1.3 in one process: the app served over real HTTP on loopback, the test LMS beside it."""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import jwt
import pytest
import requests
from flask import Flask, current_app
from sqlalchemy import delete, select, update
from werkzeug.serving import make_server

from devkit.courses import PASSWORD
from devkit.lti_platform import (
    INSTITUTION_INSTRUCTOR,
    INSTRUCTOR,
    LEARNER,
    MENTOR,
    TEACHING_ASSISTANT,
    LmsPlatform,
    new_key,
)
from service.core import db
from service.courses.accounts import create_user, issue_token
from service.grading.exactly_once import GradingPolicy, claim, store_result
from service.lti.identity import lms_users_of
from service.lti.keys import rotate_key
from service.lti.passback import GradePassback, PassbackSettings, publish, scores_url
from service.lti.platforms import Registration, register_platform
from service.lti.runtime import lti_runtime as runtime
from service.models import (
    CourseAssignment,
    Extension,
    LtiUser,
    PassbackStatus,
    Role,
    ScorePassback,
    ScorePolicy,
    Submission,
    User,
    utcnow,
)
from service.tasks import current_announcer

POLICY = GradingPolicy(lease_seconds=60, max_attempts=3)


@dataclass
class Tool:
    app: Flask
    url: str


@pytest.fixture
def tool(make_app: Callable[..., Flask], sqlite_url: str) -> Iterator[Tool]:
    app = make_app(sqlite_url, SECRET_KEY="lti-tests", LTI_COOKIE_SECURE=0,
                   LTI_RETRY_BASE_SECONDS=0, LTI_MAX_ATTEMPTS=4)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with app.app_context():
            yield Tool(app, f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        app.extensions["autograde.db"].engine.dispose()


@pytest.fixture
def lms(tool: Tool) -> Iterator[LmsPlatform]:
    platform = LmsPlatform(tool_url=tool.url).start()
    register_platform(db.session(), Registration(
        issuer=platform.issuer, client_id=platform.client_id,
        deployments=(platform.deployment_id,), auth_login_url=platform.url + "/auth",
        access_token_url=platform.token_url, jwks_url=platform.url + "/jwks"))
    db.session().commit()
    yield platform
    platform.stop()


def _student_launch(lms: LmsPlatform, sub: str = "student-1",
                    browser: requests.Session | None = None) -> requests.Response:
    return lms.launch(browser or requests.Session(), sub=sub, roles=[LEARNER],
                      **lms.resource_link("link-1", assignment="attention",
                                          lineitem=lms.lineitem())).response


def _user(sub: str) -> User:
    found = db.session().scalar(select(User).join(LtiUser).where(LtiUser.sub == sub))
    assert found is not None
    return found


def _graded(user: User, score: float, *, hidden: bool = False,
            held_until_due: bool = False) -> Submission:
    """A submission of ``user`` graded ``score``/10 through the real claim and store (with a
    check students see only once results are published, when ``hidden``, or only after their
    deadline, when ``held_until_due``)."""
    assignment = db.session().scalar(select(CourseAssignment).where(
        CourseAssignment.slug == "attention"))
    assert assignment is not None
    submission = Submission(user_id=user.id, assignment_id=assignment.id,
                            assignment_version=assignment.version, seed=1)
    db.session().add(submission)
    db.session().commit()
    taken = claim(db.session(), submission.id, POLICY)
    assert taken is not None
    visibility = "after_published" if hidden else "after_due_date" if held_until_due else None
    checks = [{"number": "1", "name": "held back", "score": 1.0, "max_score": 1.0,
               "status": "passed", "visibility": visibility}] if visibility else []
    assert store_result(db.session(), taken, {"score": score, "max_score": 10.0,
                                              "diagnoses": [], "tests": checks},
                        current_announcer())
    return submission


def _publish(delivery_id: int) -> str:
    return publish(db.session(), delivery_id,
                   settings=PassbackSettings.from_config(current_app.config),
                   tokens=runtime().tokens).status


def _deliveries() -> list[ScorePassback]:
    return list(db.session().scalars(select(ScorePassback).order_by(ScorePassback.id),
                                     execution_options={"populate_existing": True}))


def test_jwks_publishes_the_active_key_and_recently_retired_ones(tool: Tool) -> None:
    first = requests.get(tool.url + "/lti/jwks", timeout=10).json()["keys"]
    assert len(first) == 1 and first[0]["alg"] == "RS256" and "d" not in first[0]
    rotate_key(db.session())
    db.session().commit()
    second = requests.get(tool.url + "/lti/jwks", timeout=10).json()["keys"]
    assert [k["kid"] for k in second][1:] == [first[0]["kid"]]


def test_student_launch_provisions_and_logs_in(lms: LmsPlatform, tool: Tool) -> None:
    browser = requests.Session()
    response = _student_launch(lms, browser=browser)
    assert response.status_code == 303, response.text
    course = db.session().scalar(select(CourseAssignment).where(
        CourseAssignment.slug == "attention")).course  # type: ignore[union-attr]
    assert course.title == "Machine learning 101"
    assert response.headers["Location"].endswith(f"/courses/{course.code}/assignments/attention")
    page = browser.get(tool.url + response.headers["Location"], timeout=30)
    assert page.status_code == 200 and "User student-1" in page.text
    user = _user("student-1")
    assert user.display_name == "User student-1"


def test_instructor_deep_links_an_assignment(lms: LmsPlatform, tool: Tool) -> None:
    browser = requests.Session()
    picker = lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR],
                        **lms.deep_linking()).response
    assert picker.status_code == 200, picker.text
    assert "frame-ancestors" in picker.headers["Content-Security-Policy"]
    token = re.search(r'name="token" value="([^"]+)"', picker.text)
    choice = re.search(r'name="assignment" value="(\d+)"[^<]*\s*<button[^>]*value="attention"',
                       picker.text)
    assert token and choice, picker.text
    returned = browser.post(tool.url + "/lti/deep-link", timeout=30, data={
        "token": token.group(1), "assignment": choice.group(1)})
    assert returned.status_code == 200, returned.text
    assert f"form-action 'self' {lms.url}" in returned.headers["Content-Security-Policy"]
    assert f'action="{lms.url}/deep-link-return"' in returned.text
    response_jwt = re.search(r'name="JWT" value="([^"]+)"', returned.text)
    assert response_jwt
    posted = requests.post(lms.url + "/deep-link-return", data={"JWT": response_jwt.group(1)},
                           timeout=10)
    assert posted.status_code == 200, lms.refusals
    (claims,) = lms.deep_link_responses
    (item,) = claims["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"]
    assert claims["https://purl.imsglobal.org/spec/lti-dl/claim/data"] == "opaque-platform-data"
    assert item["type"] == "ltiResourceLink" and item["url"] == tool.url + "/lti/launch"
    assert item["custom"] == {"assignment": "attention"}
    assert item["lineItem"]["scoreMaximum"] == 11.0 and item["lineItem"]["resourceId"]

    tampered = browser.post(tool.url + "/lti/deep-link", timeout=30, data={
        "token": token.group(1) + "x", "assignment": choice.group(1)})
    assert tampered.status_code == 400 and "altered" in tampered.text


def test_a_learner_cannot_deep_link(lms: LmsPlatform) -> None:
    response = lms.launch(requests.Session(), sub="student-9", roles=[LEARNER],
                          **lms.deep_linking()).response
    assert response.status_code == 403 and "instructors" in response.text


def _refused(response: requests.Response, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    assert words in response.text, response.text
    assert "Traceback" not in response.text and "text/html" in response.headers["Content-Type"]


def test_forged_expired_replayed_and_undeployed_launches_are_refused(lms: LmsPlatform) -> None:
    browser = requests.Session()
    link = lms.resource_link("link-1", assignment="attention", lineitem=lms.lineitem())

    def post(token: str, state: str) -> requests.Response:
        return browser.post(lms.tool_url + "/lti/launch", data={"id_token": token,
                                                                 "state": state})

    state, nonce, _ = lms.login(browser)
    forged = lms.id_token(nonce=nonce, sub="mallory", roles=[INSTRUCTOR], key=new_key(), **link)
    _refused(post(forged, state), 401, "signature is not valid")

    state, nonce, _ = lms.login(browser)
    expired = lms.id_token(nonce=nonce, sub="s", roles=[LEARNER], expires_in=-600, **link)
    _refused(post(expired, state), 401, "expired")

    state, nonce, _ = lms.login(browser)
    other_tool = lms.id_token(nonce=nonce, sub="s", roles=[LEARNER], audience="other", **link)
    _refused(post(other_tool, state), 401, "another tool")

    state, _, _ = lms.login(browser)
    wrong_nonce = lms.id_token(nonce="guessed", sub="s", roles=[LEARNER], **link)
    _refused(post(wrong_nonce, state), 401, "nonce")

    state, nonce, _ = lms.login(browser)
    undeployed = lms.id_token(nonce=nonce, sub="s", roles=[LEARNER], deployment_id="rogue",
                              **link)
    _refused(post(undeployed, state), 403, "deployment")

    done = lms.launch(browser, sub="s", roles=[LEARNER], **link)
    assert done.response.status_code == 303
    _refused(post(done.id_token, done.state), 401, "not started in this browser")
    browser.cookies.set("autograde_lti_state", done.state)  # even with the cookie put back
    _refused(post(done.id_token, done.state), 401, "already used")

    state, nonce, _ = lms.login(browser)
    good = lms.id_token(nonce=nonce, sub="s", roles=[LEARNER], **link)
    stranger = requests.Session()  # another browser: no state cookie
    _refused(stranger.post(lms.tool_url + "/lti/launch", data={"id_token": good,
                                                               "state": state}),
             401, "not started in this browser")
    _refused(requests.get(lms.tool_url + "/lti/login",
                          params={"iss": "https://unknown.example", "login_hint": "x"}),
             403, "not registered")
    assert db.session().scalar(select(User).join(LtiUser).where(
        LtiUser.sub == "mallory")) is None


def test_graded_submission_publishes_the_score_with_a_token(lms: LmsPlatform) -> None:
    assert _student_launch(lms).status_code == 303
    submission = _graded(_user("student-1"), 7.0)
    (delivery,) = _deliveries()
    assert delivery.status is PassbackStatus.PENDING
    assert delivery.submission_id == submission.id

    assert _publish(delivery.id) == "delivered"
    assert _publish(delivery.id) == "skipped"  # a duplicate task sends nothing
    (score,) = lms.scores
    assert score["userId"] == "student-1" and score["lineitem"] == lms.lineitem()
    assert (score["scoreGiven"], score["scoreMaximum"]) == (7.0, 10.0)
    assert score["activityProgress"] == "Completed"
    assert score["gradingProgress"] == "FullyGraded"
    assert datetime.fromisoformat(score["timestamp"]).tzinfo is not None
    (request,) = lms.token_requests
    header = jwt.get_unverified_header(request["client_assertion"])
    assert header["alg"] == "RS256" and header["kid"]
    (done,) = _deliveries()
    assert (done.status, done.attempts, done.score_given) == (PassbackStatus.DELIVERED, 1, 7.0)

    _graded(_user("student-1"), 4.0)
    assert _publish(_deliveries()[-1].id) == "delivered"
    assert lms.scores[-1]["scoreGiven"] == 7.0  # best by default
    assert len(lms.token_requests) == 1  # the token is reused until it expires


def test_latest_policy_and_superseded_deliveries(lms: LmsPlatform) -> None:
    assert _student_launch(lms).status_code == 303
    assignment = db.session().scalar(select(CourseAssignment).where(
        CourseAssignment.slug == "attention"))
    assert assignment is not None
    assignment.score_policy = ScorePolicy.LATEST
    db.session().commit()
    _graded(_user("student-1"), 9.0)
    _graded(_user("student-1"), 3.0)
    first, second = _deliveries()
    assert first.status is PassbackStatus.SUPERSEDED
    assert _publish(first.id) == "skipped"
    assert _publish(second.id) == "delivered"
    assert [s["scoreGiven"] for s in lms.scores] == [3.0]


def test_a_score_waits_until_its_checks_are_released(lms: LmsPlatform) -> None:
    assert _student_launch(lms).status_code == 303
    _graded(_user("student-1"), 6.0, hidden=True)
    (delivery,) = _deliveries()
    assert _publish(delivery.id) == "held"
    (held,) = _deliveries()
    assert (held.status, held.attempts) == (PassbackStatus.PENDING, 0)
    assert "not released" in (held.last_error or "") and not lms.scores
    assert _publish(delivery.id) == "skipped"  # not due again yet
    assignment = held.submission.assignment
    assignment.results_published = True
    held.next_attempt_at = held.created_at  # what the periodic recheck finds due
    db.session().commit()
    assert _publish(delivery.id) == "delivered"
    assert lms.scores[-1]["scoreGiven"] == 6.0


def test_a_score_waits_for_the_students_own_deadline_when_an_extension_moved_it(
        lms: LmsPlatform) -> None:
    # The course's deadline has passed, but this student's extension runs two more days: their
    # page still withholds the after-deadline check, so the LMS gradebook (theirs to read) must
    # not get the score that counts it either.
    assert _student_launch(lms).status_code == 303
    student = _user("student-1")
    assignment = db.session().scalar(select(CourseAssignment).where(
        CourseAssignment.slug == "attention"))
    assert assignment is not None
    assignment.due_at = utcnow() - timedelta(hours=1)
    db.session().add(Extension(course_id=assignment.course_id, user_id=student.id,
                               assignment_id=assignment.id,
                               due_at=utcnow() + timedelta(days=2)))
    db.session().commit()
    _graded(student, 7.0, held_until_due=True)
    (delivery,) = _deliveries()
    assert _publish(delivery.id) == "held" and not lms.scores
    (held,) = _deliveries()
    assert held.next_attempt_at is not None and held.next_attempt_at < utcnow() + timedelta(
        days=1)  # rechecked as usual, not parked until the extended deadline's far side

    db.session().execute(delete(Extension))
    held.next_attempt_at = held.created_at
    db.session().commit()
    assert _publish(delivery.id) == "delivered"  # without the extension it is past due
    assert lms.scores[-1]["scoreGiven"] == 7.0


def test_failures_retry_with_backoff_then_deliver_or_give_up(lms: LmsPlatform,
                                                             tool: Tool) -> None:
    assert _student_launch(lms).status_code == 303
    lms.fail_scores = 2
    _graded(_user("student-1"), 6.0)
    (delivery,) = _deliveries()
    assert [_publish(delivery.id) for _ in range(3)] == ["retry", "retry", "delivered"]
    (done,) = _deliveries()
    assert (done.status, done.attempts) == (PassbackStatus.DELIVERED, 3)

    lms.fail_scores = 10
    _graded(_user("student-1"), 8.0)
    last = _deliveries()[-1]
    assert [_publish(last.id) for _ in range(4)] == ["retry", "retry", "retry", "failed"]
    failed = _deliveries()[-1]
    assert failed.status is PassbackStatus.FAILED and "HTTP 503" in (failed.last_error or "")

    teacher = lms.launch(requests.Session(), sub="teacher-1", roles=[INSTRUCTOR],
                         **lms.resource_link("link-1"))
    assert teacher.response.status_code == 303
    headers = {"Authorization": "Bearer "
               + issue_token(db.session(), _user("teacher-1")).token}
    db.session().commit()
    listed = requests.get(tool.url + "/api/v1/lti/assignments/attention/passbacks",
                          headers=headers, timeout=10).json()["passbacks"]
    assert [p["status"] for p in listed] == ["failed", "delivered"]
    assert listed[0]["attempts"] == 4 and listed[1]["score_given"] == 6.0
    lms.fail_scores = 0
    again = requests.post(f"{tool.url}/api/v1/lti/assignments/attention/passbacks/"
                          f"{failed.id}/resend", headers=headers, timeout=10)
    assert again.status_code == 202 and again.json()["status"] == "pending"
    assert _publish(failed.id) == "delivered"
    assert lms.scores[-1]["scoreGiven"] == 8.0

    student = {"Authorization": "Bearer " + issue_token(db.session(), _user("student-1")).token}
    db.session().commit()
    assert requests.get(tool.url + "/api/v1/lti/assignments/attention/passbacks",
                        headers=student, timeout=10).status_code == 403


def test_instructor_pages_list_passbacks_and_register_platforms(lms: LmsPlatform,
                                                                tool: Tool) -> None:
    assert _student_launch(lms).status_code == 303
    _graded(_user("student-1"), 5.0)
    browser = requests.Session()
    teacher = lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR],
                         **lms.resource_link("link-1"))
    location = teacher.response.headers["Location"]
    assert "/dashboard/courses/" in location
    course = location.split("/courses/")[1].split("/")[0]
    page = browser.get(f"{tool.url}/dashboard/lti/courses/{course}/assignments/attention/"
                       "passbacks", timeout=30)
    assert page.status_code == 200 and 'data-status="pending"' in page.text

    platforms = browser.get(tool.url + "/dashboard/lti/platforms", timeout=30)
    assert platforms.status_code == 200 and tool.url + "/lti/jwks" in platforms.text
    csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', platforms.text)
    assert csrf
    form = {"csrf_token": csrf.group(1), "issuer": "https://moodle.example.edu",
            "client_id": "abc", "deployments": "1\n2", "auth_login_url":
            "https://moodle.example.edu/mod/lti/auth.php", "access_token_url":
            "https://moodle.example.edu/mod/lti/token.php", "jwks_url":
            "https://moodle.example.edu/mod/lti/certs.php"}
    done = browser.post(tool.url + "/dashboard/lti/platforms", data=form, timeout=30)
    assert done.status_code == 200 and "Registered" in done.text and "moodle" in done.text
    without_token = browser.post(tool.url + "/dashboard/lti/platforms",
                                 data={**form, "csrf_token": ""}, timeout=30)
    assert "Registered" not in without_token.text


def test_scores_url_keeps_the_line_item_query() -> None:
    assert scores_url("https://m.example/mod/lti/services.php/2/lineitems/7/lineitem?type_id=1") \
        == "https://m.example/mod/lti/services.php/2/lineitems/7/lineitem/scores?type_id=1"
    assert scores_url("https://c.example/api/lti/courses/1/line_items/5/") \
        == "https://c.example/api/lti/courses/1/line_items/5/scores"


def test_a_delivery_is_dispatched_once_and_long_backoffs_wait_for_the_sweep(
        lms: LmsPlatform, tool: Tool) -> None:
    assert _student_launch(lms).status_code == 303
    _graded(_user("student-1"), 6.0)  # storing the result sent the delivery's task
    (delivery,) = _deliveries()
    assert delivery.dispatched_at is not None
    passback = GradePassback()
    assert passback.send_due(db.session()) == 0  # its task is queued: no copy of it
    db.session().execute(update(ScorePassback).values(
        dispatched_at=utcnow() - timedelta(hours=1)))
    db.session().commit()
    assert passback.send_due(db.session()) == 1  # long unanswered: taken as lost, sent again

    lms.fail_scores = 1
    current_app.config.update(LTI_RETRY_BASE_SECONDS=60, VISIBILITY_TIMEOUT=10)
    outcome = publish(db.session(), delivery.id,
                      settings=PassbackSettings.from_config(current_app.config),
                      tokens=runtime().tokens)
    # Too long to hold as a countdown past the broker's visibility timeout: the sweep sends it.
    assert (outcome.status, outcome.retry_in) == ("retry", None)
    (waiting,) = _deliveries()
    assert waiting.dispatched_at is None and waiting.next_attempt_at > utcnow()
    assert passback.send_due(db.session()) == 0  # not due yet


def test_administrators_rotate_the_signing_key_from_the_dashboard(tool: Tool) -> None:
    for name, role in (("root", Role.ADMIN), ("prof", Role.INSTRUCTOR)):
        create_user(db.session(), username=name, password=PASSWORD, role=role)
    db.session().commit()
    before = requests.get(tool.url + "/lti/jwks", timeout=10).json()["keys"]

    def logged_in(name: str) -> tuple[requests.Session, str]:
        browser = requests.Session()
        login = browser.get(tool.url + "/login", timeout=10).text
        browser.post(tool.url + "/login", timeout=10, data={
            "username": name, "password": PASSWORD, "csrf_token": _csrf(login)})
        page = browser.get(tool.url + "/dashboard/lti/platforms", timeout=10)
        assert page.status_code == 200
        return browser, page.text

    instructor, page = logged_in("prof")
    assert "Rotate the signing key" not in page and before[0]["kid"] in page
    refused = instructor.post(tool.url + "/dashboard/lti/keys/rotate", timeout=10,
                              data={"rotate-csrf_token": _csrf(page)})
    assert refused.status_code == 403

    admin, page = logged_in("root")
    assert "Rotate the signing key" in page
    forged = admin.post(tool.url + "/dashboard/lti/keys/rotate", timeout=10, data={})
    assert forged.status_code == 400  # no CSRF token
    assert requests.get(tool.url + "/lti/jwks", timeout=10).json()["keys"] == before
    done = admin.post(tool.url + "/dashboard/lti/keys/rotate", timeout=10,
                      data={"rotate-csrf_token": _csrf(page, prefix="rotate-")})
    assert done.status_code == 200 and "New signing key" in done.text
    after = requests.get(tool.url + "/lti/jwks", timeout=10).json()["keys"]
    assert len(after) == 2 and after[1]["kid"] == before[0]["kid"]
    assert f'data-kid="{before[0]["kid"]}"' in done.text and "retired" in done.text


def _csrf(page: str, prefix: str = "") -> str:
    found = re.search(rf'name="{prefix}csrf_token" type="hidden" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


# --- Roles, roster, line items, due dates, release, key rotation, picker, identity. ----------

def _sync(context_sub: str = "") -> None:
    from service.lti.services import ServiceSettings, sync_context
    from service.models import LtiContext

    db.session().expire_all()  # as a task's session would: what the pages changed is read
    for context in db.session().scalars(select(LtiContext)):
        sync_context(db.session(), context.id, tokens=runtime().tokens,
                     settings=ServiceSettings.from_config(current_app.config))


def _course_id() -> int:
    from service.models import Course

    found = db.session().scalar(select(Course.id).where(Course.code == _course_code()))
    assert found is not None
    return found


def _course_code() -> str:
    from service.models import Course

    course = db.session().scalar(select(Course).where(Course.code.like("lti-%")))
    assert course is not None
    return course.code


def test_an_institution_instructor_gets_the_student_view(lms: LmsPlatform, tool: Tool) -> None:
    browser = requests.Session()
    launched = lms.launch(browser, sub="prof-elsewhere", roles=[INSTITUTION_INSTRUCTOR],
                          **lms.resource_link("link-1", assignment="attention"))
    assert launched.response.status_code == 303, launched.response.text
    assert launched.response.headers["Location"].startswith("/courses/")  # not /dashboard
    dashboard = browser.get(tool.url + f"/dashboard/courses/{_course_code()}/assignments/"
                            "attention", timeout=30)
    assert dashboard.status_code == 403
    mixed = lms.launch(requests.Session(), sub="ta-and-student",
                       roles=[LEARNER, INSTITUTION_INSTRUCTOR,
                              "http://purl.imsglobal.org/vocab/lis/v2/institution/person#"
                              "Administrator"],
                       **lms.resource_link("link-1", assignment="attention"))
    assert mixed.response.headers["Location"].startswith("/courses/")
    teacher = lms.launch(requests.Session(), sub="prof", roles=[TEACHING_ASSISTANT],
                         **lms.resource_link("link-1", assignment="attention"))
    assert teacher.response.headers["Location"].startswith("/dashboard/")


def test_a_launch_without_roles_is_refused(lms: LmsPlatform) -> None:
    refused = lms.launch(requests.Session(), sub="nobody", roles=None,
                         **lms.resource_link("link-1", assignment="attention")).response
    _refused(refused, 400, "no roles claim")
    assert db.session().scalar(select(LtiUser).where(LtiUser.sub == "nobody")) is None


def test_a_mentor_sees_the_assignment_but_cannot_submit(lms: LmsPlatform, tool: Tool) -> None:
    browser = requests.Session()
    launched = lms.launch(browser, sub="parent-1", roles=[MENTOR],
                          **lms.resource_link("link-1", assignment="attention")).response
    assert launched.status_code == 303
    page = browser.get(tool.url + launched.headers["Location"], timeout=30)
    assert page.status_code == 200 and 'id="observer-note"' in page.text
    assert 'id="submit-button"' not in page.text
    form = browser.get(tool.url + "/account/tokens", timeout=30).text  # a CSRF token
    posted = browser.post(tool.url + launched.headers["Location"] + "/submissions",
                          data={"csrf_token": _csrf(form)},
                          files=[("files", ("attention.py", b"x = 1\n"))], timeout=30)
    assert posted.status_code == 200 and "do not submit" in posted.text  # said on the page
    assert db.session().scalar(select(Submission)) is None


def test_a_link_made_without_deep_linking_finds_or_makes_its_line_item(
        lms: LmsPlatform, tool: Tool) -> None:
    claims = {**lms.resource_link("hand-made"), **lms.ags_claim()}
    claims["https://purl.imsglobal.org/spec/lti/claim/custom"] = {"assignment": "attention"}
    launched = lms.launch(requests.Session(), sub="student-1", roles=[LEARNER], **claims)
    assert launched.response.status_code == 303, launched.response.text
    (item,) = lms.lineitems.values()
    assert (item["label"], item["scoreMaximum"], item["resourceLinkId"], item["tag"]) == (
        "Scaled dot-product attention", 11.0, "hand-made", "autograde") or \
        (item["scoreMaximum"] == 11.0 and item["resourceLinkId"] == "hand-made")
    # Another student: the line item is found, not made twice.
    assert lms.launch(requests.Session(), sub="student-2", roles=[LEARNER],
                      **claims).response.status_code == 303
    assert len(lms.lineitems) == 1 and lms.lineitem_requests.count("POST /lineitems") == 1
    _graded(_user("student-1"), 7.0)
    (delivery,) = _deliveries()
    assert delivery.lineitem_url == item["id"]
    assert _publish(delivery.id) == "delivered"
    assert lms.scores[-1]["lineitem"] == item["id"] and lms.scores[-1]["scoreGiven"] == 7.0


def test_a_link_without_an_assignment_asks_the_instructor_not_the_student(
        lms: LmsPlatform, tool: Tool) -> None:
    claims = {**lms.resource_link("bare"), **lms.ags_claim()}
    student = lms.launch(requests.Session(), sub="student-1", roles=[LEARNER], **claims)
    assert student.response.status_code == 200 and "not ready yet" in student.response.text
    browser = requests.Session()
    teacher = lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR], **claims).response
    assert teacher.status_code == 303 and "/attach" in teacher.headers["Location"]
    page = browser.get(tool.url + teacher.headers["Location"], timeout=30)
    choice = re.search(r'name="assignment" value="(\d+)"><button[^>]*value="attention"',
                       page.text)
    assert page.status_code == 200 and choice, page.text
    attached = browser.post(tool.url + teacher.headers["Location"], timeout=30, data={
        "attach-csrf_token": _csrf(page.text, "attach-"), "assignment": choice.group(1)})
    assert attached.status_code == 200 and "now opens" in attached.text
    assert len(lms.lineitems) == 1
    again = lms.launch(requests.Session(), sub="student-1", roles=[LEARNER], **claims).response
    assert again.status_code == 303 and again.headers["Location"].endswith("/attention")


def test_line_items_are_kept_in_step_and_give_the_due_date(lms: LmsPlatform, tool: Tool) -> None:
    item = lms.add_lineitem(label="Old name", scoreMaximum=5, resourceLinkId="link-1",
                            endDateTime="2030-01-15T23:59:00Z")
    claims = {**lms.resource_link("link-1", assignment="attention"),
              **lms.ags_claim(lineitem=item["id"])}
    assert lms.launch(requests.Session(), sub="teacher-1", roles=[INSTRUCTOR],
                      **claims).response.status_code == 303
    _sync()
    (fixed,) = lms.lineitems.values()
    assert fixed["scoreMaximum"] == 11.0 and fixed["label"] != "Old name"
    assert fixed["endDateTime"] == "2030-01-15T23:59:00Z"  # what we do not own stays
    assignment = db.session().scalar(select(CourseAssignment).where(
        CourseAssignment.slug == "attention"), execution_options={"populate_existing": True})
    assert assignment is not None
    assert assignment.due_at == datetime.fromisoformat("2030-01-15T23:59:00+00:00")
    browser = requests.Session()
    teacher = lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR], **claims).response
    page = browser.get(f"{tool.url}/dashboard/lti/courses/{_course_code()}/assignments/"
                       "attention", timeout=30)
    assert teacher.status_code == 303 and page.status_code == 200
    assert item["id"] in page.text and "2030-01-15" in page.text


def test_canvas_custom_substitution_gives_the_due_date(lms: LmsPlatform) -> None:
    claims = lms.resource_link("link-1", assignment="attention", lineitem=lms.lineitem())
    claims["https://purl.imsglobal.org/spec/lti/claim/custom"] = {
        "assignment": "attention", "canvas_assignment_due_at": "2031-03-01T12:00:00-05:00",
        "submission_end": "$ResourceLink.submission.endDateTime"}
    assert lms.launch(requests.Session(), sub="s", roles=[LEARNER],
                      **claims).response.status_code == 303
    assignment = db.session().scalar(select(CourseAssignment).where(
        CourseAssignment.slug == "attention"))
    assert assignment is not None
    assert assignment.due_at == datetime.fromisoformat("2031-03-01T17:00:00+00:00")


def test_the_roster_syncs_every_member_and_keeps_enrolments_in_step(
        lms: LmsPlatform, tool: Tool) -> None:
    from service.models import CourseRole, Enrolment, LtiMembership, MembershipStatus

    lms.enrol("teacher-1", [INSTRUCTOR])
    for n in range(299):
        lms.enrol(f"s{n:03}", [LEARNER], email=f"s{n:03}@uni.example")
    browser = requests.Session()
    launched = lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR], **lms.nrps_claim(),
                          **lms.resource_link("link-1", assignment="attention"))
    assert launched.response.status_code == 303
    _sync()
    assert len(lms.roster_requests) == 3  # 300 members, 100 a page, by the "next" links

    def enrolled() -> dict[str, CourseRole]:
        return {sub: role for sub, role in db.session().execute(
            select(LtiUser.sub, Enrolment.role).join(Enrolment, Enrolment.user_id
                                                      == LtiUser.user_id))}

    assert len(enrolled()) == 300 and enrolled()["s042"] is CourseRole.STUDENT
    roster = browser.get(f"{tool.url}/dashboard/lti/courses/{_course_code()}/roster",
                         timeout=30)
    assert roster.status_code == 200 and roster.text.count('data-status="active"') == 300
    assert 'data-sub="s299"' not in roster.text and "s298@uni.example" in roster.text
    people = browser.get(f"{tool.url}/dashboard/courses/{_course_code()}/people?per_page=500",
                         timeout=30)
    assert people.text.count("User s") >= 299  # members who never launched are there

    lms.drop("s001")
    lms.enrol("s002", [TEACHING_ASSISTANT])
    lms.enrol("late-joiner", [LEARNER], name="Late Joiner")
    _sync()
    assert lms.roster_requests[-1] == json.dumps({"since": "300"})  # only the differences
    now = enrolled()
    assert "s001" not in now and now["s002"] is CourseRole.INSTRUCTOR
    assert now["late-joiner"] is CourseRole.STUDENT and len(now) == 300
    dropped = db.session().scalar(select(LtiMembership).join(LtiUser).where(
        LtiUser.sub == "s001"))
    assert dropped is not None and dropped.status is MembershipStatus.DROPPED

    lms.forget_differences = True  # the platform no longer knows that point in time
    lms.drop("s003")
    before = len(lms.roster_requests)
    _sync()
    asked = lms.roster_requests[before:]
    assert asked[:2] == [json.dumps({"since": "303"}), "{}"]  # refused: the whole roster
    assert "s003" not in enrolled() and len(enrolled()) == 299
    identities = lms_users_of(db.session(), _course_id())
    assert {u.sub for u in identities.values()} >= {"s000", "late-joiner", "teacher-1"}
    assert identities[_user("s042").id].email == "s042@uni.example"


def _enrolled_subs() -> set[str]:
    from service.models import Enrolment

    return set(db.session().scalars(select(LtiUser.sub).join(
        Enrolment, Enrolment.user_id == LtiUser.user_id)))


def _course_with_roster(lms: LmsPlatform, students: int) -> requests.Session:
    """An LMS course of a teacher and ``students`` students (s00, s01, ...), synced once; the
    teacher's browser, logged in by their launch. Later syncs read the whole roster."""
    lms.enrol("teacher-1", [INSTRUCTOR])
    for n in range(students):
        lms.enrol(f"s{n:02}", [LEARNER])
    browser = requests.Session()
    launched = lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR], **lms.nrps_claim(),
                          **lms.resource_link("link-1", assignment="attention"))
    assert launched.response.status_code == 303
    _sync()
    assert _enrolled_subs() == {"teacher-1", *(f"s{n:02}" for n in range(students))}
    lms.forget_differences = True  # as the outside check saw: whole rosters, no differences
    return browser


def _people(tool: Tool, browser: requests.Session) -> str:
    page = browser.get(f"{tool.url}/dashboard/courses/{_course_code()}/people?per_page=500",
                       timeout=30)
    assert page.status_code == 200, page.text[:300]
    return page.text


def test_an_empty_roster_drops_nobody_and_waits_for_the_instructor(
        lms: LmsPlatform, tool: Tool) -> None:
    """The outside check: the LMS answers an empty member list just after a student launched.
    Nobody is un-enrolled; the instructor sees the request and dismisses it, and the next syncs
    leave those members be."""
    from service.models import DropState, RosterDrop

    browser = _course_with_roster(lms, 10)
    assert _student_launch(lms, "s00").status_code == 303
    lms.roster_answer = "empty"
    _sync()
    assert len(_enrolled_subs()) == 11
    held = db.session().scalars(select(RosterDrop)).all()
    assert {d.membership.lti_user.sub for d in held} == {f"s{n:02}" for n in range(1, 10)}
    assert {d.state for d in held} == {DropState.HELD}
    page = _people(tool, browser)
    assert 'data-held="9"' in page and "Nobody has been dropped" in page
    assert 'data-sub="s00"' not in page.split('id="roster-held"')[1].split("</section>")[0]

    answer = browser.post(f"{tool.url}/dashboard/lti/courses/{_course_code()}/roster/held",
                          data={"held-csrf_token": _csrf(page, "held-"), "decision": "keep"},
                          timeout=30)
    assert answer.status_code == 200 and "0 member(s) dropped" in answer.text
    assert "9 kept" in answer.text
    _sync()  # the LMS still answers nothing
    assert len(_enrolled_subs()) == 11
    states = db.session().scalars(select(RosterDrop.state)).all()
    assert sorted(s.value for s in states) == ["dismissed"] * 9  # not asked again


def test_a_partial_paged_roster_is_held_then_dropped_and_undone_keeping_grades(
        lms: LmsPlatform, tool: Tool) -> None:
    """A roster read over pages that lists only some of the course: held (and said on the
    roster page); confirmed, the omitted are un-enrolled with their submissions and results
    kept, but one who launched since the proposal stays; one drop undone puts the student back
    with the same role, and the next sync leaves them there."""
    from service.models import Result

    lms.page_size = 4
    browser = _course_with_roster(lms, 12)
    graded = _graded(_user("s09"), 7.0)
    lms.roster_answer, lms.roster_partial = "partial", 5  # the teacher and s00..s03
    before = len(lms.roster_requests)
    _sync()
    assert len(lms.roster_requests) - before >= 2  # pages followed by rel="next"
    assert len(_enrolled_subs()) == 13
    page = _people(tool, browser)
    assert 'data-held="8"' in page
    roster = browser.get(f"{tool.url}/dashboard/lti/courses/{_course_code()}/roster", timeout=30)
    assert "would drop 8 member(s) at once" in roster.text
    assert _student_launch(lms, "s11").status_code == 303  # after the proposal: kept

    answer = browser.post(f"{tool.url}/dashboard/lti/courses/{_course_code()}/roster/held",
                          data={"held-csrf_token": _csrf(page, "held-"), "decision": "drop"},
                          timeout=30)
    assert answer.status_code == 200 and "7 member(s) dropped" in answer.text
    assert "1 kept" in answer.text
    assert _enrolled_subs() == {"teacher-1", "s00", "s01", "s02", "s03", "s11"}
    kept = db.session().get(Submission, graded.id)
    assert kept is not None and db.session().scalar(
        select(Result.final_score).where(Result.submission_id == graded.id)) == 7.0
    page = _people(tool, browser)
    row = page.split('data-sub="s09" data-state="done"')[1].split("</tr>")[0]
    undo = re.search(r'action="([^"]+/undo)"', row)
    assert undo is not None
    answer = browser.post(tool.url + undo.group(1), timeout=30,
                          data={"undo-csrf_token": _csrf(page, "undo-")})
    assert answer.status_code == 200 and "enrolled again as student" in answer.text
    _sync()  # still partial: s09 stays, as the instructor said
    assert _enrolled_subs() == {"teacher-1", "s00", "s01", "s02", "s03", "s09", "s11"}
    assert 'data-sub="s09" data-state="undone"' in _people(tool, browser)

    lms.roster_answer = "full"
    _sync()
    assert len(_enrolled_subs()) == 13


def test_failing_and_slow_rosters_change_nothing_and_small_drops_apply(
        lms: LmsPlatform, tool: Tool) -> None:
    from service.models import LtiContext

    lms.page_size = 3
    _course_with_roster(lms, 6)
    everyone = _enrolled_subs()

    def error() -> str | None:
        context = db.session().scalar(select(LtiContext), execution_options={
            "populate_existing": True})
        assert context is not None
        return context.roster_error

    for answer in ("failing", "failing-after-first-page"):
        lms.roster_answer = answer
        _sync()
        assert _enrolled_subs() == everyone and "503" in (error() or ""), answer
    lms.roster_answer = "full"
    current_app.config["LTI_HTTP_TIMEOUT_SECONDS"] = 1
    lms.roster_delay_seconds = 3  # slower than the tool waits
    _sync()
    assert _enrolled_subs() == everyone and error()
    current_app.config["LTI_HTTP_TIMEOUT_SECONDS"] = 10
    lms.roster_delay_seconds = 0.2  # slow, within the time allowed
    del lms.members["s05"]  # one student left the course: a small change, made at once
    _sync()
    assert _enrolled_subs() == everyone - {"s05"} and error() is None


def test_release_from_the_dashboard_sends_held_scores_at_once(lms: LmsPlatform,
                                                              tool: Tool) -> None:
    assert _student_launch(lms).status_code == 303
    _graded(_user("student-1"), 6.0, hidden=True)
    (delivery,) = _deliveries()
    assert _publish(delivery.id) == "held"
    browser = requests.Session()
    lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR], **lms.resource_link("link-1"))
    url = f"{tool.url}/dashboard/lti/courses/{_course_code()}/assignments/attention"
    page = browser.get(url, timeout=30)
    assert 'data-waiting="1"' in page.text and "until you release results" in page.text
    overview = browser.get(f"{tool.url}/dashboard/courses/{_course_code()}/assignments/"
                           "attention", timeout=30)  # where an instructor's launch lands
    assert 'id="lms-release-notice"' in overview.text and "<strong>1</strong>" in overview.text
    forged = browser.post(url + "/release", data={}, timeout=30)
    assert forged.status_code == 400 and _deliveries()[0].next_attempt_at > utcnow()
    released = browser.post(url + "/release", timeout=30,
                            data={"release-csrf_token": _csrf(page.text, "release-")})
    assert released.status_code == 200 and "1 waiting score" in released.text
    (due,) = _deliveries()
    # Due now and its task sent on the release (not left for the periodic recheck).
    assert due.next_attempt_at <= utcnow() and due.dispatched_at is not None
    assert _publish(delivery.id) == "delivered" and lms.scores[-1]["scoreGiven"] == 6.0
    assert 'data-released="yes"' in browser.get(url, timeout=30).text


def test_a_rotated_platform_key_is_fetched_at_once_and_forged_kids_are_rate_limited(
        lms: LmsPlatform) -> None:
    assert _student_launch(lms).status_code == 303
    lms.rotate_key()
    assert _student_launch(lms).status_code == 303  # signed with the new key, accepted now
    assert lms.jwks_fetches == 2  # the first launch's, and one at once for the new kid
    assert _student_launch(lms).status_code == 303 and lms.jwks_fetches == 2  # cached
    browser = requests.Session()
    for _ in range(3):  # forged tokens with made-up kids, just after that refetch
        state, nonce, _ = lms.login(browser)
        claims = jwt.decode(lms.id_token(nonce=nonce, sub="m", roles=[LEARNER]),
                            options={"verify_signature": False})
        forged = jwt.encode(claims, new_key(), algorithm="RS256",
                            headers={"kid": secrets.token_hex(4)})
        _refused(browser.post(lms.tool_url + "/lti/launch",
                              data={"id_token": forged, "state": state}, timeout=30),
                 401, "not signed by a key of the LMS")
    assert lms.jwks_fetches == 2  # rate-limited: the platform's JWKS is not hammered


def test_the_picker_token_works_only_in_the_instructors_browser(lms: LmsPlatform,
                                                               tool: Tool) -> None:
    browser = requests.Session()
    picker = lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR],
                        **lms.deep_linking()).response
    token = re.search(r'name="token" value="([^"]+)"', picker.text)
    choice = re.search(r'name="assignment" value="(\d+)"', picker.text)
    assert token and choice
    stolen = requests.post(tool.url + "/lti/deep-link", timeout=30,
                           data={"token": token.group(1), "assignment": choice.group(1)})
    assert stolen.status_code == 403 and "another browser" in stolen.text
    mine = browser.post(tool.url + "/lti/deep-link", timeout=30,
                        data={"token": token.group(1), "assignment": choice.group(1)})
    assert mine.status_code == 200 and 'name="JWT"' in mine.text


def test_webhook_events_carry_the_lms_identity(lms: LmsPlatform) -> None:
    from service.grading.events import Event
    from service.webhooks.delivery import event_payload

    claims = {**lms.resource_link("link-1", assignment="attention"), "email": "ada@uni.example"}
    assert lms.launch(requests.Session(), sub="lms-ada", roles=[LEARNER],
                      **claims).response.status_code == 303
    submission = _graded(_user("lms-ada"), 5.0)
    student = event_payload(db.session(), submission, Event.GRADED)["data"]["student"]
    assert student["lms"] == {"platform": lms.issuer, "user_id": "lms-ada",
                              "course_id": lms.context_id, "name": "User lms-ada",
                              "email": "ada@uni.example"}


def test_releasing_over_the_api_sends_held_scores_at_once(lms: LmsPlatform, tool: Tool) -> None:
    assert _student_launch(lms).status_code == 303
    _graded(_user("student-1"), 6.0, hidden=True)
    (delivery,) = _deliveries()
    assert _publish(delivery.id) == "held"
    lms.launch(requests.Session(), sub="teacher-1", roles=[INSTRUCTOR],
               **lms.resource_link("link-1"))
    headers = {"Authorization": "Bearer " + issue_token(db.session(), _user("teacher-1")).token}
    db.session().commit()
    url = f"{tool.url}/api/v1/instructor/assignments/attention"
    unchanged = requests.patch(url, json={"score_policy": "latest"}, headers=headers, timeout=30)
    assert unchanged.status_code == 200 and _deliveries()[0].next_attempt_at > utcnow()
    done = requests.patch(url, json={"results_published": True}, headers=headers, timeout=30)
    assert done.status_code == 200 and done.json()["results_published"] is True
    (due,) = _deliveries()
    assert due.next_attempt_at <= utcnow() and due.dispatched_at is not None
    assert _publish(delivery.id) == "delivered"


def test_the_canvas_configuration_asks_for_every_service_and_the_due_date(tool: Tool) -> None:
    config = requests.get(tool.url + "/lti/canvas.json", timeout=10).json()
    assert set(config["scopes"]) == {
        "https://purl.imsglobal.org/spec/lti-ags/scope/score",
        "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
        "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly",
        "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"}
    assert config["custom_fields"]["canvas_assignment_due_at"] == \
        "$Canvas.assignment.dueAt.iso8601"


def test_a_roster_member_has_no_password_to_log_in_with(lms: LmsPlatform, tool: Tool) -> None:
    lms.enrol("s1", [LEARNER])
    lms.launch(requests.Session(), sub="teacher-1", roles=[INSTRUCTOR], **lms.nrps_claim(),
               **lms.resource_link("link-1", assignment="attention"))
    _sync()
    user = _user("s1")
    for password in ("!lms", "", user.username):
        answer = requests.post(tool.url + "/auth/login", timeout=10,
                               json={"username": user.username, "password": password})
        assert answer.status_code in (400, 401), answer.text
