"""Webhooks in one process: the egress policy, signing, the outbox channel, attempts against a
real local receiver (500 then 200, giving up), the API, the dashboard page."""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select, update
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from devkit.corpora import corpus
from devkit.courses import PASSWORD, Factory
from devkit.webhooks import Receiver
from service.core import db
from service.grading.events import Announcer
from service.grading.exactly_once import GradingPolicy, claim, give_up, store_result
from service.models import (
    CourseRole,
    DeliveryStatus,
    Role,
    Submission,
    WebhookDelivery,
    WebhookEndpoint,
    utcnow,
)
from service.submissions.submitting import RateLimit, submit
from service.webhooks.delivery import (
    WebhookChannel,
    WebhookPolicy,
    deliver,
    signed_headers,
)
from service.webhooks.egress import EgressPolicy, RefusedTarget, resolve_target
from service.webhooks.endpoints import create_endpoint, redeliver, rotate_secret

LOOPBACK = {"WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32", "WEBHOOK_BACKOFF_SECONDS": 1,
            "WEBHOOK_BACKOFF_MAX_SECONDS": 4, "WEBHOOK_MAX_ATTEMPTS": 3,
            "WEBHOOK_TIMEOUT_SECONDS": 5}
GRADING = GradingPolicy(lease_seconds=60, max_attempts=3)
DOCUMENT = {"score": 6.0, "max_score": 10.0, "tests": [],
            "diagnoses": [{"code": "softmax-wrong-axis"}, {"code": "missing-scale"}]}
PUBLIC = EgressPolicy()


# --- the egress policy --------------------------------------------------------------------

@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
    "100.64.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1", "255.255.255.255", "192.0.2.1",
    "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1",
    "::ffff:10.1.2.3", "2001:db8::1", "64:ff9b:1::a00:1"])
def test_non_public_addresses_are_refused(address: str) -> None:
    assert PUBLIC.refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111",
                                     "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert PUBLIC.refusal(ipaddress.ip_address(address)) is None


def test_allowed_networks_exempt_only_themselves() -> None:
    policy = EgressPolicy.from_config({"WEBHOOK_ALLOWED_NETWORKS": " 127.0.0.1/32, fd00::/8"})
    assert policy.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert policy.refusal(ipaddress.ip_address("fd00::5")) is None
    assert policy.refusal(ipaddress.ip_address("127.0.0.2")) is not None
    assert policy.refusal(ipaddress.ip_address("10.0.0.1")) is not None
    with pytest.raises(ValueError, match="ALLOWED_NETWORKS"):
        EgressPolicy.from_config({"WEBHOOK_ALLOWED_NETWORKS": "localhost"})


def _resolver(*addresses: str) -> Callable[[str, int], list[str]]:
    return lambda _host, _port: list(addresses)


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://example.org/x", "https://"), ("javascript:alert(1)", "https://"),
    ("http://user:pw@example.org/", "user name or password"), ("https:///path", "no host"),
    ("https://exa mple.org/", "control characters"), ("https://[::1/", "not a valid URL"),
    ("https://example.org:99999/", "not a valid URL"), ("", "missing"),
    ("https://example.org/" + "a" * 2100, "at most 2048")])
def test_bad_urls_get_a_clear_refusal(url: str, message: str) -> None:
    with pytest.raises(RefusedTarget, match=re.escape(message)):
        resolve_target(url, PUBLIC, _resolver("8.8.8.8"))


def test_every_resolved_address_must_be_public() -> None:
    with pytest.raises(RefusedTarget, match=re.escape("10.0.0.7, a private address")):
        resolve_target("https://hooks.example.org/", PUBLIC, _resolver("8.8.8.8", "10.0.0.7"))

    def unknown(_host: str, _port: int) -> list[str]:
        raise OSError("Name or service not known")

    with pytest.raises(RefusedTarget, match="could not be resolved"):
        resolve_target("https://nowhere.invalid/", PUBLIC, unknown)


def test_the_request_goes_to_the_checked_address() -> None:
    target = resolve_target("https://Hooks.Example.org:8443/in?x=1#frag", PUBLIC,
                            _resolver("2606:4700::1", "8.8.8.8"))
    assert target.pinned_url == "https://[2606:4700::1]:8443/in?x=1"
    assert target.host_header == "hooks.example.org:8443"
    assert resolve_target("http://example.org", PUBLIC,
                          _resolver("8.8.8.8")).host_header == "example.org"


# --- signing and backoff --------------------------------------------------------------------

def test_signature_verifies_with_standardwebhooks_also_across_a_rotation() -> None:
    endpoint = WebhookEndpoint(secret="whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", events=[])
    body = '{"type":"submission.graded","data":{"score":1.0}}'
    headers = signed_headers(endpoint, "msg_1", body)
    assert Webhook(endpoint.secret).verify(body, headers) == {
        "type": "submission.graded", "data": {"score": 1.0}}
    with pytest.raises(WebhookVerificationError):
        Webhook(endpoint.secret).verify(body.replace("1.0", "9.0"), headers)
    old = endpoint.secret
    rotate_secret(endpoint)
    headers = signed_headers(endpoint, "msg_1", body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(body, headers)
    Webhook(endpoint.secret).verify(body, headers)
    endpoint.previous_secret_until = utcnow() - timedelta(seconds=1)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(body, signed_headers(endpoint, "msg_1", body))


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = WebhookPolicy.from_config({**LOOPBACK, "VISIBILITY_TIMEOUT": 600,
                                        "DELIVERY_REDISPATCH_SECONDS": 300})
    assert [policy.backoff(n) for n in range(1, 6)] == [1, 2, 4, 4, 4]


# --- the channel and the attempts --------------------------------------------------------

@pytest.fixture
def hooked(make_app: Callable[..., Flask], sqlite_url: str) -> Iterator[Flask]:
    application = make_app(sqlite_url, **LOOPBACK)
    with application.app_context():
        yield application


@pytest.fixture
def hooked_factory(hooked: Flask) -> Factory:
    return Factory(hooked)


class Sent(list[int]):
    """A dispatch that remembers the delivery ids it was asked to send."""

    def __call__(self, delivery_id: int, countdown: float | None) -> None:
        self.append(delivery_id)


def _channel(app: Flask) -> tuple[WebhookChannel, Sent]:
    sent = Sent()
    return WebhookChannel(WebhookPolicy.from_config(app.config), dispatch=sent), sent


def _endpoint(factory: Factory, url: str, **options: Any) -> WebhookEndpoint:
    course = factory.courses.get("ml101") or factory.course()
    endpoint = create_endpoint(db.session(), course=course, url=url, created_by=None,
                               policy=EgressPolicy.from_config(factory.app.config), **options)
    db.session().commit()
    return endpoint


def _graded(factory: Factory, channel: WebhookChannel) -> Submission:
    course = factory.courses.get("ml101") or factory.course()
    student = factory.user("ada", course=course)
    submission = submit(db.session(), user=student, assignment=factory.assignment(course),
                        files=dict([corpus("attention", "syntax_missing_colon.py")]),
                        limit=RateLimit(100, 60))
    db.session().commit()
    claimed = claim(db.session(), submission.id, GRADING)
    assert claimed is not None
    assert store_result(db.session(), claimed, DOCUMENT, Announcer((channel,)))
    return submission


def _deliveries() -> list[WebhookDelivery]:
    return list(db.session().scalars(select(WebhookDelivery).order_by(WebhookDelivery.id),
                                     execution_options={"populate_existing": True}))


def _make_due(delivery: WebhookDelivery) -> None:
    db.session().execute(update(WebhookDelivery).where(WebhookDelivery.id == delivery.id)
                         .values(next_attempt_at=utcnow()))
    db.session().commit()


def test_waiting_requests_hear_of_a_result_before_its_deliveries_are_sent(
        hooked: Flask, hooked_factory: Factory, receiver: Receiver) -> None:
    """The long polls answer as soon as the result is committed, not after the webhooks."""
    channel, sent = _channel(hooked)
    _endpoint(hooked_factory, receiver.url)
    course = hooked_factory.courses["ml101"]
    submission = submit(db.session(), user=hooked_factory.user("ada", course=course),
                        assignment=hooked_factory.assignment(course),
                        files=dict([corpus("attention", "syntax_missing_colon.py")]),
                        limit=RateLimit(100, 60))
    db.session().commit()
    claimed = claim(db.session(), submission.id, GRADING)
    assert claimed is not None
    told: list[tuple[int, list[int], str]] = []

    def status_changed(submission_id: int) -> None:
        with db.database().engine.connect() as other:  # what a waiting request reads now
            status = other.scalar(select(Submission.status)
                                  .where(Submission.id == submission_id))
        told.append((submission_id, list(sent), status.value))

    assert store_result(db.session(), claimed, DOCUMENT, Announcer((channel,)),
                        status_changed=status_changed)
    (delivery,) = _deliveries()
    assert told == [(submission.id, [], "graded")]
    assert sent == [delivery.id]


def test_graded_event_is_recorded_with_the_result_and_sent_once(
        hooked: Flask, hooked_factory: Factory, receiver: Receiver) -> None:
    channel, sent = _channel(hooked)
    endpoint = _endpoint(hooked_factory, receiver.url)
    _endpoint(hooked_factory, receiver.url, events=["submission.failed"])
    disabled = _endpoint(hooked_factory, receiver.url)
    disabled.active = False
    db.session().commit()
    submission = _graded(hooked_factory, channel)
    (delivery,) = _deliveries()
    assert delivery.endpoint_id == endpoint.id and delivery.event == "submission.graded"
    assert sent == [delivery.id]
    assert channel.send_due(db.session()) == 0  # its task is queued: no duplicate
    db.session().execute(update(WebhookDelivery).values(
        dispatched_at=utcnow() - timedelta(hours=1)))
    db.session().commit()
    assert channel.send_due(db.session()) == 1 and sent == [delivery.id, delivery.id]
    data = delivery.payload["data"]
    assert delivery.payload["type"] == "submission.graded"
    assert data == {"submission_id": submission.id,
                    "student": {"id": submission.user_id, "username": "ada", "lms": None},
                    "course": "ml101", "assignment": "attention", "round": 1,
                    "status": "graded", "score": 6.0, "max_score": 10.0, "final_score": 6.0,
                    "codes": ["softmax-wrong-axis", "missing-scale"], "late": False,
                    "message": None}


def test_a_500_is_retried_with_the_same_webhook_id_then_delivered_once(
        hooked: Flask, hooked_factory: Factory, receiver: Receiver,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    channel, _ = _channel(hooked)
    endpoint = _endpoint(hooked_factory, receiver.url)
    receiver.secret, receiver.answers = endpoint.secret, [500]
    _graded(hooked_factory, channel)
    (delivery,) = _deliveries()

    first = deliver(db.session(), delivery.id, channel.policy)
    assert (first.status, first.retry_in) == ("retrying", 1.0)
    (delivery,) = _deliveries()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 1)
    assert (delivery.last_status_code, delivery.last_error) == (500, "HTTP 500")
    assert delivery.dispatched_at == delivery.next_attempt_at  # the countdown task's due time
    assert deliver(db.session(), delivery.id, channel.policy).status == "skipped"  # not due

    _make_due(delivery)
    assert deliver(db.session(), delivery.id, channel.policy).status == "delivered"
    assert deliver(db.session(), delivery.id, channel.policy).status == "skipped"
    (delivery,) = _deliveries()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == (
        DeliveryStatus.DELIVERED, 2, 200)
    requests_ = receiver.wait_for(2)
    assert len(requests_) == 2 and [r.answered for r in requests_] == [500, 200]
    assert {r.webhook_id for r in requests_} == {delivery.message_id}
    assert all(r.error is None for r in requests_), [r.error for r in requests_]
    assert requests_[1].payload == delivery.payload
    assert requests_[1].headers["host"] == receiver.url.split("/")[2]
    assert "webhook delivery" in caplog.text
    assert endpoint.secret not in caplog.text and "team=1" not in caplog.text


def test_gives_up_after_the_last_attempt_and_redelivers_on_request(
        hooked: Flask, hooked_factory: Factory, receiver: Receiver) -> None:
    channel, sent = _channel(hooked)
    endpoint = _endpoint(hooked_factory, receiver.url)
    receiver.secret, receiver.answers = endpoint.secret, [503, 500, 502]
    _graded(hooked_factory, channel)
    (delivery,) = _deliveries()
    outcomes = []
    for _ in range(3):
        outcomes.append(deliver(db.session(), delivery.id, channel.policy).status)
        _make_due(delivery)
    assert outcomes == ["retrying", "retrying", "failed"]
    (delivery,) = _deliveries()
    assert (delivery.status, delivery.attempts, delivery.last_error) == (
        DeliveryStatus.FAILED, 3, "HTTP 502")

    sent.clear()
    redeliver(db.session(), delivery, channel)
    assert sent == [delivery.id]
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 0)
    assert deliver(db.session(), delivery.id, channel.policy).status == "delivered"
    assert len({r.webhook_id for r in receiver.wait_for(4)}) == 1


def test_a_target_turned_private_is_refused_at_delivery_time(
        hooked: Flask, hooked_factory: Factory, receiver: Receiver) -> None:
    channel, _ = _channel(hooked)
    endpoint = _endpoint(hooked_factory, receiver.url)
    _graded(hooked_factory, channel)
    # As if DNS now pointed the name elsewhere: the URL is no longer an allowed address.
    endpoint.url = receiver.url.replace("127.0.0.1", "127.0.0.2")
    db.session().commit()
    (delivery,) = _deliveries()
    assert deliver(db.session(), delivery.id, channel.policy).status == "retrying"
    (delivery,) = _deliveries()
    assert delivery.last_error is not None
    assert delivery.last_error.startswith("refused: ") and "loopback" in delivery.last_error
    assert receiver.received == []


def test_failed_event_carries_the_message(hooked: Flask, hooked_factory: Factory) -> None:
    channel, sent = _channel(hooked)
    _endpoint(hooked_factory, "http://127.0.0.1:9/", events=["submission.failed"])
    course = hooked_factory.courses["ml101"]
    student = hooked_factory.user(course=course)
    submission = submit(db.session(), user=student, assignment=hooked_factory.assignment(course),
                        files=dict([corpus("attention", "syntax_missing_colon.py")]),
                        limit=RateLimit(100, 60))
    db.session().commit()
    give_up(db.session(), submission, Announcer((channel,)))
    (delivery,) = _deliveries()
    assert sent == [delivery.id]
    data = delivery.payload["data"]
    assert delivery.payload["type"] == "submission.failed" and data["status"] == "failed"
    assert data["score"] is None and data["codes"] == []
    assert "could not grade this submission" in data["message"]


# --- the API and the page ---------------------------------------------------------------------

@pytest.fixture
def people(hooked: Flask, hooked_factory: Factory) -> dict[str, dict[str, str]]:
    course = hooked_factory.course()
    other = hooked_factory.course("cs202")
    teacher = hooked_factory.user("teacher", role=Role.INSTRUCTOR, course=course,
                                  course_role=CourseRole.INSTRUCTOR)
    stranger = hooked_factory.user("stranger", role=Role.INSTRUCTOR, course=other,
                                   course_role=CourseRole.INSTRUCTOR)
    student = hooked_factory.user("student", course=course)
    return {name: hooked_factory.headers(user) for name, user in
            (("teacher", teacher), ("stranger", stranger), ("student", student))}


HOOKS = "/api/v1/instructor/courses/ml101/webhooks"


def test_api_registers_lists_changes_and_removes(hooked: Flask, receiver: Receiver,
                                                  people: dict[str, dict[str, str]]) -> None:
    client = hooked.test_client()
    created = client.post(HOOKS, json={"url": receiver.url, "events": ["submission.graded"]},
                          headers=people["teacher"])
    assert created.status_code == 201, created.json
    body = created.json
    assert body["secret"].startswith("whsec_") and body["events"] == ["submission.graded"]
    listing = client.get(HOOKS, headers=people["teacher"]).json["webhooks"]
    assert [w["id"] for w in listing] == [body["id"]] and "secret" not in listing[0]
    assert body["secret"] not in client.get(HOOKS, headers=people["teacher"]).get_data(True)

    one = f"/api/v1/instructor/webhooks/{body['id']}"
    changed = client.patch(one, json={"active": False, "events": ["submission.failed"]},
                           headers=people["teacher"])
    assert changed.status_code == 200 and changed.json["active"] is False
    rotated = client.post(one + "/rotate-secret", headers=people["teacher"]).json
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != body["secret"]
    assert client.get(one + "/deliveries", headers=people["teacher"]).json == {"deliveries": []}
    for who in ("stranger", "student"):
        assert client.get(HOOKS, headers=people[who]).status_code == 404
        assert client.delete(one, headers=people[who]).status_code == 404
        assert client.get(one + "/deliveries", headers=people[who]).status_code == 404
    assert client.delete(one, headers=people["teacher"]).status_code == 204
    assert client.get(HOOKS, headers=people["teacher"]).json == {"webhooks": []}


@pytest.mark.parametrize(("body", "status", "says"), [
    ({"url": "http://10.0.0.1/hook"}, 400, "private address"),
    ({"url": "http://169.254.169.254/latest/meta-data"}, 400, "link-local address"),
    ({"url": "http://127.0.0.2:8080/"}, 400, "loopback address"),
    ({"url": "http://[::1]/"}, 400, "loopback address"),
    ({"url": "file:///etc/passwd"}, 400, "https://"),
    ({"url": 12}, 400, "Missing or empty"),
    ({"url": "https://8.8.8.8/", "events": ["submission.deleted"]}, 400, "Unknown event"),
    ({"url": "https://8.8.8.8/", "events": []}, 400, "non-empty list"),
])
def test_api_refuses_bad_targets_clearly(hooked: Flask, people: dict[str, dict[str, str]],
                                         body: dict[str, Any], status: int, says: str) -> None:
    answer = hooked.test_client().post(HOOKS, json=body, headers=people["teacher"])
    assert answer.status_code == status
    assert answer.mimetype == "application/problem+json" and says in answer.json["detail"]
    assert "Traceback" not in answer.get_data(True)


def test_api_redelivers(hooked: Flask, hooked_factory: Factory, receiver: Receiver,
                        people: dict[str, dict[str, str]]) -> None:
    client = hooked.test_client()
    body = client.post(HOOKS, json={"url": receiver.url}, headers=people["teacher"]).json
    channel, _ = _channel(hooked)
    _graded(hooked_factory, channel)
    (delivery,) = _deliveries()
    deliver(db.session(), delivery.id, channel.policy)
    log = client.get(f"/api/v1/instructor/webhooks/{body['id']}/deliveries?status=delivered",
                     headers=people["teacher"]).json["deliveries"]
    assert [(d["id"], d["attempts"], d["last_status_code"]) for d in log] == [
        (delivery.id, 1, 200)]
    assert log[0]["webhook_id"] == delivery.message_id
    path = f"/api/v1/instructor/webhook-deliveries/{delivery.id}/redeliver"
    assert client.post(path, headers=people["stranger"]).status_code == 404
    again = client.post(path, headers=people["teacher"])
    assert again.status_code == 202 and again.json["status"] == "pending"
    assert again.json["attempts"] == 0


def _csrf(client: FlaskClient, path: str) -> str:
    found = re.search(r'name="(?:[\w-]+-)?csrf_token" type="hidden" value="([^"]+)"',
                      client.get(path).get_data(as_text=True))
    assert found
    return found.group(1)


def test_dashboard_page_registers_and_shows_the_log(make_app: Callable[..., Flask],
                                                    sqlite_url: str, receiver: Receiver) -> None:
    # No app context held open: each request gets its own, as in production (CSRF lives on g).
    site = make_app(sqlite_url, **LOOPBACK)
    factory = Factory(site)
    with site.app_context():
        course = factory.course()
        factory.user("teacher", role=Role.INSTRUCTOR, course=course,
                     course_role=CourseRole.INSTRUCTOR)
        factory.user("student", course=course)
    client = site.test_client()
    client.post("/login", data={"username": "teacher", "password": PASSWORD,
                                "csrf_token": _csrf(client, "/login")})
    page = "/dashboard/courses/ml101/webhooks"
    token = _csrf(client, page)
    refused = client.post(page, data={"webhook-new-url": "http://10.1.1.1/",
                                      "webhook-new-events": ["submission.graded"],
                                      "webhook-new-csrf_token": token})
    assert "private address" in refused.get_data(True)
    made = client.post(page, data={"webhook-new-url": receiver.url,
                                   "webhook-new-events": ["submission.graded"],
                                   "webhook-new-csrf_token": token})
    html = made.get_data(as_text=True)
    secret = re.search(r'id="new-secret">(whsec_[^<]+)<', html)
    assert made.status_code == 200 and secret
    assert client.post(page, data={"webhook-new-url": receiver.url}).status_code == 400  # CSRF

    with site.app_context():
        endpoint = db.session().scalar(select(WebhookEndpoint))
        assert endpoint is not None and endpoint.secret == secret.group(1)
        _graded(factory, _channel(site)[0])
        (delivery,) = _deliveries()
    listing = client.get(page).get_data(as_text=True)
    assert secret.group(1) not in listing and "status-pending" in listing
    button = client.post(f"/dashboard/webhook-deliveries/{delivery.id}/redeliver",
                         data={"webhook-csrf_token": _csrf(client, page)})
    assert button.status_code == 303
    receiver.secret = secret.group(1)
    tested = client.post(f"/dashboard/webhooks/{endpoint.id}/test", follow_redirects=True,
                         data={"webhook-csrf_token": _csrf(client, page)})
    assert "Test event sent to webhook" in tested.get_data(as_text=True)
    assert receiver.received[-1].payload["type"] == "webhook.test"

    student = site.test_client()
    student.post("/login", data={"username": "student", "password": PASSWORD,
                                 "csrf_token": _csrf(student, "/login")})
    assert student.get(page).status_code == 404


def test_a_test_event_reaches_the_receiver_signed_and_says_what_it_answered(
        hooked: Flask, receiver: Receiver, people: dict[str, dict[str, str]]) -> None:
    client = hooked.test_client()
    body = client.post(HOOKS, json={"url": receiver.url}, headers=people["teacher"]).json
    receiver.secret = body["secret"]
    path = f"/api/v1/instructor/webhooks/{body['id']}/test"
    assert client.post(path, headers=people["student"]).status_code == 404
    answer = client.post(path, headers=people["teacher"])
    assert answer.status_code == 200
    assert answer.json | {"webhook_id": None} == {"delivered": True, "status_code": 200,
                                                  "error": None, "webhook_id": None}
    (received,) = receiver.received
    assert received.error is None and received.webhook_id == answer.json["webhook_id"]
    assert received.payload["type"] == "webhook.test"
    assert received.payload["data"]["course"] == "ml101"

    receiver.answers = [500]
    failed = client.post(path, headers=people["teacher"]).json
    assert (failed["delivered"], failed["status_code"], failed["error"]) == (
        False, 500, "HTTP 500")
    # Nothing is logged or retried for a test event.
    log = client.get(f"/api/v1/instructor/webhooks/{body['id']}/deliveries",
                     headers=people["teacher"]).json
    assert log == {"deliveries": []} and len(receiver.received) == 2
