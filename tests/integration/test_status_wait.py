"""Waiting for a result: the long poll is woken by the stored result (Redis pub/sub on
PostgreSQL, the database's change counter on SQLite), a timeout answers with the state as it is,
waits are bounded in number, and another student's submission is a 404 as without a wait."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from devkit.corpora import corpus
from devkit.courses import PASSWORD, Factory
from devkit.stack import REDIS_URL, redis_or_skip
from service.core import db
from service.grading.exactly_once import GradingPolicy, claim
from service.grading.status_watch import RedisSource, SqliteSource, StatusWatch, status_publisher
from service.models import Submission
from service.submissions.submitting import RateLimit, submit
from service.tasks import current_grading

SYNTAX = corpus("attention", "syntax_missing_colon.py")
POLICY = GradingPolicy(lease_seconds=60, max_attempts=3)
WAIT = 60  # long enough that an answer before it was a wake-up, not the timeout


def _redis_db() -> str:
    return REDIS_URL.rsplit("/", 1)[0] + "/6"


@pytest.fixture
def redis_app(make_app: Callable[..., Flask], pg_url: str, queue_name: str) -> Iterator[Flask]:
    """PostgreSQL and a Redis broker: the production layout."""
    redis_or_skip(_redis_db())
    application = make_app(pg_url, BROKER_URL=_redis_db(), QUEUE=queue_name)
    with application.app_context():
        yield application
    application.extensions["autograde.db"].engine.dispose()


def _submission(factory: Factory) -> tuple[Submission, dict[str, str]]:
    course = factory.courses.get("ml101") or factory.course()
    user = factory.user(course=course)
    submission = submit(db.session(), user=user, assignment=factory.assignment(course),
                        files=dict([SYNTAX]), limit=RateLimit(100, 60))
    db.session().commit()
    return submission, factory.headers(user)


def _signed_in(app: Flask, username: str) -> FlaskClient:
    """A browser's client, signed in through the login form."""
    client = app.test_client()
    html = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="(?:\w+-)?csrf_token" type="hidden" value="([^"]+)"', html)
    assert token
    response = client.post("/login", data={"username": username, "password": PASSWORD,
                                           "csrf_token": token.group(1)})
    assert response.status_code in (302, 303)
    return client


def _in_thread(app: Flask, work: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        time.sleep(0.3)  # the request is waiting by then (if not, it sees the change at once)
        with app.app_context():
            work()
            db.database().sessions.remove()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_stored_result_wakes_the_long_poll_on_redis(redis_app: Flask) -> None:
    factory = Factory(redis_app)
    submission, headers = _submission(factory)
    assert isinstance(redis_app.extensions["autograde.status_watch"].source, RedisSource)
    client = redis_app.test_client()
    thread = _in_thread(redis_app,
                        lambda: current_grading().grade_and_store(db.session(), submission.id))
    started = time.monotonic()
    seen = "queued"
    while seen not in ("graded", "failed"):
        response = client.get(f"/api/v1/submissions/{submission.id}?wait={WAIT}&since={seen}",
                              headers=headers)
        assert response.status_code == 200
        seen = response.get_json()["status"]
    thread.join()
    body = response.get_json()
    assert body["status"] == "graded" and body["results"]["diagnoses"][0]["code"] == \
        "syntax-error"
    assert time.monotonic() - started < WAIT


def test_the_publisher_wakes_exactly_that_submission(redis_app: Flask) -> None:
    watch: StatusWatch = redis_app.extensions["autograde.status_watch"]
    publish = status_publisher(redis_app.config)
    with watch.watching(1) as mine, watch.watching(2) as other:
        assert mine is not None and other is not None
        mine.wait(10)  # the subscription's first wake-up (anything before it was missed)
        mine.clear()
        other.clear()
        deadline = time.monotonic() + 30
        while not mine.is_set() and time.monotonic() < deadline:
            publish(1)  # again until the subscription is in place
            mine.wait(0.5)
        assert mine.is_set()
        assert not other.is_set()


def test_sqlite_waiters_are_woken_by_another_connection_s_commit(app: Flask,
                                                                 factory: Factory) -> None:
    submission, headers = _submission(factory)
    assert isinstance(app.extensions["autograde.status_watch"].source, SqliteSource)
    thread = _in_thread(app, lambda: claim(db.session(), submission.id, POLICY))
    started = time.monotonic()
    response = app.test_client().get(f"/api/v1/submissions/{submission.id}?wait={WAIT}",
                                     headers=headers)
    thread.join()
    assert response.get_json()["status"] == "running"
    assert time.monotonic() - started < WAIT


def test_the_web_page_status_waits_too(app: Flask, factory: Factory) -> None:
    submission, _ = _submission(factory)
    browser = _signed_in(app, submission.user.username)
    thread = _in_thread(app, lambda: claim(db.session(), submission.id, POLICY))
    response = browser.get(f"/submissions/{submission.id}/status.json?wait={WAIT}&since=queued")
    thread.join()
    assert response.status_code == 200 and response.get_json()["status"] == "running"


def test_a_timeout_answers_with_the_current_state(app: Flask, factory: Factory) -> None:
    submission, headers = _submission(factory)
    response = app.test_client().get(f"/api/v1/submissions/{submission.id}?wait=1",
                                     headers=headers)
    assert response.status_code == 200 and response.get_json()["status"] == "queued"


def test_a_status_other_than_since_or_final_answers_at_once(app: Flask,
                                                            factory: Factory) -> None:
    submission, headers = _submission(factory)
    client = app.test_client()
    response = client.get(f"/api/v1/submissions/{submission.id}?wait={WAIT}&since=running",
                          headers=headers)
    assert response.get_json()["status"] == "queued"
    response = client.get(f"/api/v1/submissions/{submission.id}?wait=5&since=done",
                          headers=headers)
    assert response.status_code == 400 and "since" in response.get_json()["detail"]


def test_another_student_s_submission_is_not_found_even_waiting(app: Flask,
                                                                factory: Factory) -> None:
    submission, _ = _submission(factory)
    stranger = factory.user(course=factory.courses["ml101"])
    client = app.test_client()
    for path in (f"/api/v1/submissions/{submission.id}?wait={WAIT}",
                 f"/api/v1/submissions/{submission.id}"):
        response = client.get(path, headers=factory.headers(stranger))
        assert response.status_code == 404, path
    page = _signed_in(app, stranger.username).get(
        f"/submissions/{submission.id}/status.json?wait={WAIT}")
    assert page.status_code == 404


def test_waits_beyond_the_slots_are_answered_at_once(make_app: Callable[..., Flask],
                                                     sqlite_url: str) -> None:
    bounded = make_app(sqlite_url, STATUS_WAIT_SLOTS=1)
    with bounded.app_context():
        factory = Factory(bounded)
        submission, headers = _submission(factory)
        watch: StatusWatch = bounded.extensions["autograde.status_watch"]
        with watch.watching(submission.id) as held:
            assert held is not None
            with watch.watching(submission.id) as refused:
                assert refused is None
            asked = time.monotonic()
            response = bounded.test_client().get(
                f"/api/v1/submissions/{submission.id}?wait={WAIT}", headers=headers)
            assert response.get_json()["status"] == "queued"
            assert time.monotonic() - asked < WAIT  # answered, not waited
        with watch.watching(submission.id) as again:
            assert again is not None  # the slot is given back
