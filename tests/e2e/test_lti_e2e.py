"""LTI 1.3 end to end: gunicorn, a Celery worker on Redis, PostgreSQL, and the test LMS.

Deep linking by an instructor, a student's launch and web submission graded by the real worker,
the score arriving at the LMS with a valid token after two failures; refused launches.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from sqlalchemy import create_engine, text

from devkit.corpora import corpus
from devkit.lti_platform import INSTRUCTOR, LEARNER, LmsPlatform, new_key
from devkit.stack import Stack, redis_or_skip

pytestmark = pytest.mark.slow


@pytest.fixture
def stack(make_stack: Callable[..., Stack], pg_url: str) -> Iterator[Stack]:
    redis_or_skip()
    built = make_stack(pg_url, LTI_COOKIE_SECURE=0, LTI_RETRY_BASE_SECONDS=1,
                       LTI_RETRY_CAP_SECONDS=2, SECRET_KEY="lti-e2e")
    built.start_server()
    yield built


@pytest.fixture
def lms(stack: Stack) -> Iterator[LmsPlatform]:
    platform = LmsPlatform(tool_url=stack.url, fail_scores=2).start()
    yield platform
    platform.stop()


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def _deep_link(lms: LmsPlatform, stack: Stack) -> dict[str, Any]:
    """The instructor picks `attention` in the LMS; the LMS verifies and keeps the link."""
    browser = requests.Session()
    picker = lms.launch(browser, sub="teacher-1", roles=[INSTRUCTOR],
                        **lms.deep_linking()).response
    assert picker.status_code == 200, picker.text
    token = re.search(r'name="token" value="([^"]+)"', picker.text)
    choice = re.search(r'name="assignment" value="(\d+)"[^<]*\s*<button[^>]*value="attention"',
                       picker.text)
    assert token and choice, picker.text
    back = browser.post(stack.url + "/lti/deep-link", timeout=30,
                        data={"token": token.group(1), "assignment": choice.group(1)})
    form = re.search(r'<form method="post" action="([^"]+)"', back.text)
    jwt_field = re.search(r'name="JWT" value="([^"]+)"', back.text)
    assert back.status_code == 200 and form and jwt_field, back.text
    posted = requests.post(form.group(1), data={"JWT": jwt_field.group(1)}, timeout=30)
    assert posted.status_code == 200, lms.refusals
    (claims,) = lms.deep_link_responses
    (item,) = claims["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"]
    return dict(item)


def _submit_on_the_web(browser: requests.Session, stack: Stack, page_url: str) -> int:
    page = browser.get(page_url, timeout=30)
    assert page.status_code == 200, page.text
    name, content = corpus("attention", "softmax_dim_minus2.py")
    done = browser.post(page_url + "/submissions", data={"csrf_token": _csrf(page.text)},
                        files=[("files", (name, content))], allow_redirects=False, timeout=30)
    assert done.status_code == 303, done.text
    return int(done.headers["Location"].rstrip("/").rsplit("/", 1)[1])


def _wait(what: Callable[[], object], timeout: float, why: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, why()
        time.sleep(0.3)


def test_lti_launch_grade_and_passback_through_a_flaky_lms(stack: Stack, lms: LmsPlatform,
                                                          pg_url: str) -> None:
    registered = stack.autograde("admin", "lti", "register-platform", *lms.register_args())
    assert registered.returncode == 0, registered.stderr
    listed = stack.autograde("admin", "lti", "list", "--url", stack.url)
    assert f"{stack.url}/lti/jwks" in listed.stdout and "deployment-1" in listed.stdout
    item = _deep_link(lms, stack)
    assert item["url"] == stack.url + "/lti/launch"
    assert item["lineItem"]["scoreMaximum"] == 11.0 and item["lineItem"]["resourceId"]
    # The instructor releases results, so the gradebook may show the whole score at once
    # (until then a score with unreleased checks waits).
    engine = create_engine(pg_url)
    with engine.connect() as connection:
        (code,) = connection.execute(text("SELECT code FROM courses")).one()
    released = stack.autograde("admin", "assignment", code, "attention", "--release-results",
                               "--score-policy", "latest")
    assert released.returncode == 0, released.stderr
    stack.start_worker()

    # The LMS made the link and its gradebook column from the content item.
    link = lms.resource_link("link-1", assignment=item["custom"]["assignment"],
                             lineitem=lms.lineitem(1))
    browser = requests.Session()
    launched = lms.launch(browser, sub="student-1", roles=[LEARNER], **link).response
    assert launched.status_code == 303, launched.text
    submission_id = _submit_on_the_web(browser, stack, stack.url + launched.headers["Location"])

    def status() -> dict[str, object]:
        body: dict[str, object] = browser.get(
            f"{stack.url}/submissions/{submission_id}/status.json", timeout=10).json()
        return body

    _wait(lambda: status()["done"], 180, lambda: stack.log("worker"))
    graded = status()
    assert graded["status"] == "graded", graded
    _wait(lambda: lms.scores, 60, lambda: f"{lms.refusals}\n{stack.log('worker')}")
    with engine.connect() as connection:
        (result,) = connection.execute(text(
            f"SELECT final_score, max_score FROM results WHERE submission_id = {submission_id}"))
        (delivery,) = connection.execute(text(
            "SELECT status, attempts, score_given FROM lti_score_passbacks"))
    engine.dispose()
    (score,) = lms.scores
    assert score["userId"] == "student-1" and score["lineitem"] == lms.lineitem(1)
    assert (score["scoreGiven"], score["scoreMaximum"]) == tuple(result)
    assert (score["activityProgress"], score["gradingProgress"]) == ("Completed", "FullyGraded")
    assert lms.score_attempts == 3 and not lms.refusals
    assert tuple(delivery) == ("delivered", 3, result[0])


def test_lti_refuses_forged_expired_replayed_and_undeployed_launches(stack: Stack,
                                                                     lms: LmsPlatform) -> None:
    assert stack.autograde("admin", "lti", "register-platform",
                           *lms.register_args()).returncode == 0
    browser = requests.Session()
    link = lms.resource_link("link-1", assignment="attention")

    def post(token: str, state: str) -> requests.Response:
        return browser.post(stack.url + "/lti/launch", data={"id_token": token, "state": state},
                            timeout=30)

    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"key": new_key()}, 401, "signature"), ({"expires_in": -600}, 401, "expired"),
             ({"deployment_id": "rogue"}, 403, "deployment")]
    for options, status, words in cases:
        state, nonce, _ = lms.login(browser)
        refused = post(lms.id_token(nonce=nonce, sub="s", roles=[LEARNER], **options, **link),
                       state)
        assert refused.status_code == status and words in refused.text, refused.text
        assert "Traceback" not in refused.text
    done = lms.launch(browser, sub="s", roles=[LEARNER], **link)
    assert done.response.status_code == 303
    browser.cookies.set("autograde_lti_state", done.state)
    replay = post(done.id_token, done.state)
    assert replay.status_code == 401 and "already used" in replay.text


def _rows(pg_url: str, query: str) -> list[tuple[Any, ...]]:
    engine = create_engine(pg_url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(query))]
    finally:
        engine.dispose()


@pytest.fixture
def lms_stack(make_stack: Callable[..., Stack], pg_url: str) -> Iterator[Stack]:
    """The stack with no periodic task at all and a recheck of held scores far away: a score
    that reaches the LMS soon after the release was sent by the release itself."""
    redis_or_skip()
    built = make_stack(pg_url, LTI_COOKIE_SECURE=0, SECRET_KEY="lti-e2e",
                       LTI_HOLD_RECHECK_SECONDS=3600, LTI_ROSTER_LAUNCH_SECONDS=0)
    built.start_server()
    built.start_worker()
    yield built


def test_a_released_score_reaches_the_lms_gradebook_without_a_shell(lms_stack: Stack,
                                                                    pg_url: str) -> None:
    stack = lms_stack
    lms = LmsPlatform(tool_url=stack.url).start()
    try:
        assert stack.autograde("admin", "lti", "register-platform",
                               *lms.register_args()).returncode == 0
        item = _deep_link(lms, stack)  # the instructor, in the LMS
        link = {**lms.resource_link("link-1", assignment=item["custom"]["assignment"],
                                    lineitem=lms.lineitem(1)), **lms.nrps_claim()}
        student = requests.Session()
        launched = lms.launch(student, sub="student-1", roles=[LEARNER], **link).response
        assert launched.status_code == 303, launched.text
        submission_id = _submit_on_the_web(student, stack,
                                           stack.url + launched.headers["Location"])
        # Graded, and its score held: `attention` has checks shown only after the due date,
        # and an LMS-made course has none.
        _wait(lambda: _rows(pg_url, "SELECT last_error FROM lti_score_passbacks "
                                    "WHERE last_error LIKE 'held%'"), 180,
              lambda: stack.log("worker"))
        assert not lms.scores

        teacher = requests.Session()
        opened = lms.launch(teacher, sub="teacher-1", roles=[INSTRUCTOR], **link).response
        assert opened.status_code == 303 and "/dashboard/" in opened.headers["Location"]
        course = opened.headers["Location"].split("/courses/")[1].split("/")[0]
        page_url = f"{stack.url}/dashboard/lti/courses/{course}/assignments/attention"
        page = teacher.get(page_url, timeout=30)
        assert page.status_code == 200 and 'data-waiting="1"' in page.text
        assert "until you release results" in page.text

        clicked = time.monotonic()
        released = teacher.post(page_url + "/release", timeout=30,
                                data={"release-csrf_token": _csrf_prefixed(page.text,
                                                                           "release-")})
        assert released.status_code == 200, released.text
        _wait(lambda: lms.scores, 60, lambda: f"{lms.refusals}\n{stack.log('worker')}")
        elapsed = time.monotonic() - clicked
        print(f"\nrelease click -> score in the LMS gradebook: {elapsed:.2f} s")
        (score,) = lms.scores
        ((final, maximum),) = _rows(pg_url, "SELECT final_score, max_score FROM results "
                                            f"WHERE submission_id = {submission_id}")
        assert score["userId"] == "student-1" and score["lineitem"] == lms.lineitem(1)
        assert (score["scoreGiven"], score["scoreMaximum"]) == (final, maximum)
        assert not lms.refusals
    finally:
        lms.stop()


def test_a_300_member_roster_syncs_on_launch(lms_stack: Stack, pg_url: str) -> None:
    stack = lms_stack
    lms = LmsPlatform(tool_url=stack.url).start()
    try:
        assert stack.autograde("admin", "lti", "register-platform",
                               *lms.register_args()).returncode == 0
        lms.enrol("teacher-1", [INSTRUCTOR])
        for n in range(299):
            lms.enrol(f"s{n:03}", [LEARNER], name=f"Student {n:03}")
        teacher = requests.Session()
        opened = lms.launch(teacher, sub="teacher-1", roles=[INSTRUCTOR], **lms.nrps_claim(),
                            **lms.resource_link("link-1", assignment="attention")).response
        assert opened.status_code == 303
        course = opened.headers["Location"].split("/courses/")[1].split("/")[0]
        roster_url = f"{stack.url}/dashboard/lti/courses/{course}/roster"

        def listed() -> int:
            return teacher.get(roster_url, timeout=30).text.count('data-status="active"')

        _wait(lambda: listed() == 300, 120, lambda: stack.log("worker"))
        page = teacher.get(roster_url, timeout=30).text
        assert 'data-sub="s298"' in page and "Student 298" in page
        people = teacher.get(f"{stack.url}/dashboard/courses/{course}/people?per_page=500",
                             timeout=30).text
        assert "Student 000" in people and "Student 298" in people  # never launched
        ((enrolled,),) = _rows(pg_url, "SELECT count(*) FROM enrolments")
        assert enrolled == 300 and len(lms.roster_requests) == 3
    finally:
        lms.stop()


def _csrf_prefixed(page: str, prefix: str) -> str:
    found = re.search(rf'name="{prefix}csrf_token" type="hidden" value="([^"]+)"', page)
    assert found, page
    return found.group(1)
