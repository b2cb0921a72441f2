"""Webhooks end to end on real processes: gunicorn, a Celery worker on Redis, PostgreSQL, the CLI,
and a real receiver that verifies every signature with the ``standardwebhooks`` library."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from devkit.courses import PASSWORD
from devkit.paths import CORPUS
from devkit.stack import Stack, redis_or_skip
from devkit.webhooks import Receiver

pytestmark = pytest.mark.slow


def _setup(stack: Stack) -> tuple[dict[str, str], dict[str, str]]:
    """A course with the attention assignment, a student and an instructor (over the CLI)."""
    commands = [["admin", "create-course", "ml101"], ["admin", "sync-assignments", "ml101"]]
    for args in commands:
        done = stack.autograde(*args)
        assert done.returncode == 0, done.stderr
    for name, role in (("student0", "student"), ("prof", "instructor")):
        done = stack.autograde("admin", "create-user", name, "--role", role,
                               "--password-stdin", stdin=PASSWORD + "\n")
        assert done.returncode == 0, done.stderr
        done = stack.autograde("admin", "enrol", "ml101", name, "--role",
                               "instructor" if role == "instructor" else "student")
        assert done.returncode == 0, done.stderr
    return stack.login("student0"), stack.login("prof")


def _deliveries(stack: Stack, headers: dict[str, str], endpoint_id: int) -> list[Any]:
    response = requests.get(f"{stack.url}/api/v1/instructor/webhooks/{endpoint_id}/deliveries",
                            headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    return list(response.json()["deliveries"])


def _wait_delivered(stack: Stack, headers: dict[str, str], endpoint_id: int,
                    attempts: int) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        rows = _deliveries(stack, headers, endpoint_id)
        if rows and rows[0]["status"] == "delivered" and rows[0]["attempts"] == attempts:
            return dict(rows[0])
        assert time.monotonic() < deadline, f"{rows}\n{stack.log('worker')}"
        time.sleep(0.2)


def test_graded_event_signed_retried_after_a_500_logged_and_redelivered(
        make_stack: Callable[..., Stack], pg_url: str, receiver: Receiver) -> None:
    redis_or_skip()
    stack = make_stack(pg_url, WEBHOOK_ALLOWED_NETWORKS="127.0.0.1/32",
                       WEBHOOK_BACKOFF_SECONDS=1, WEBHOOK_MAX_ATTEMPTS=3)
    stack.start_server()
    student, prof = _setup(stack)
    hooks = f"{stack.url}/api/v1/instructor/courses/ml101/webhooks"

    refused = requests.post(hooks, json={"url": "http://10.20.30.40/hook"}, headers=prof,
                            timeout=10)
    assert refused.status_code == 400 and "private address" in refused.json()["detail"]
    assert requests.post(hooks, json={"url": receiver.url}, headers=student,
                         timeout=10).status_code == 404
    created = requests.post(hooks, json={"url": receiver.url}, headers=prof, timeout=10)
    assert created.status_code == 201, created.text
    endpoint = created.json()
    receiver.secret, receiver.answers = endpoint["secret"], [500]

    cli = stack.autograde("admin", "webhook", "add", "ml101", "http://192.168.0.10/x")
    assert cli.returncode == 2 and "private address" in cli.stderr
    assert "Traceback" not in cli.stderr
    listed = stack.autograde("admin", "webhook", "list", "ml101")
    assert listed.returncode == 0 and receiver.url in listed.stdout
    assert endpoint["secret"] not in listed.stdout

    stack.start_worker()
    submitted = requests.post(
        f"{stack.url}/api/v1/assignments/attention/submissions", headers=student,
        files=[("files", ("attention.py",
                          (CORPUS / "attention" / "softmax_dim_minus2.py").read_bytes()))],
        timeout=30)
    assert submitted.status_code == 202, submitted.text
    submission_id = submitted.json()["id"]
    assert stack.wait_for(student, submission_id)["status"] == "graded"

    first, second = receiver.wait_for(2)
    assert [first.answered, second.answered] == [500, 200]
    assert first.webhook_id == second.webhook_id
    assert first.error is None and second.error is None, (first.error, second.error)
    assert int(second.headers["webhook-timestamp"]) >= int(first.headers["webhook-timestamp"])
    event = second.payload
    assert event["type"] == "submission.graded"
    data = event["data"]
    assert data["submission_id"] == submission_id and data["status"] == "graded"
    assert data["student"]["username"] == "student0" and data["course"] == "ml101"
    assert data["assignment"] == "attention" and data["codes"] == ["softmax-wrong-axis"]
    assert data["max_score"] > data["score"] >= 0 and data["final_score"] == data["score"]

    logged = _wait_delivered(stack, prof, endpoint["id"], attempts=2)
    assert logged["webhook_id"] == first.webhook_id and logged["last_status_code"] == 200
    assert logged["submission_id"] == submission_id

    again = requests.post(
        f"{stack.url}/api/v1/instructor/webhook-deliveries/{logged['id']}/redeliver",
        headers=prof, timeout=10)
    assert again.status_code == 202, again.text
    third = receiver.wait_for(3)[2]
    assert third.webhook_id == first.webhook_id and third.error is None
    assert third.payload == event
    _wait_delivered(stack, prof, endpoint["id"], attempts=1)
    assert len(receiver.received) == 3
    assert endpoint["secret"] not in stack.log("worker") + stack.log("web")
