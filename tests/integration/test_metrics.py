"""The fleet's Prometheus endpoint: off without a token, refused without the right one, and
figures read from the database as each host left it (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from devkit.corpora import corpus
from devkit.courses import Factory
from service.core import db
from service.grading.host_health import HostCollector, HostProbe
from service.grading.metrics import exposition
from service.grading.waiting import VERSION_WAITING_MESSAGE
from service.models import SubmissionStatus
from service.submissions.submitting import RateLimit, submit

TOKEN = "a-metrics-token-for-tests"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_metrics_read_the_fleet_from_the_database(
        database: str, make_app: Callable[..., Flask], sqlite_url: str,
        request: pytest.FixtureRequest) -> None:
    url = sqlite_url if database == "sqlite" else request.getfixturevalue("pg_url")
    app = make_app(url, METRICS_TOKEN=TOKEN)
    with app.app_context():
        factory = Factory(app)
        course = factory.course()
        user = factory.user(course=course)
        made = [submit(db.session(), user=user, assignment=factory.assignment(course),
                       files=dict([corpus("attention", "syntax_missing_colon.py")]),
                       limit=RateLimit(100, 60)) for _ in range(3)]
        db.session().commit()
        graded, running, waiting = made
        graded.status, graded.claimed_by = SubmissionStatus.GRADED, "grader-7:123"
        graded.graded_at = graded.requested_at + timedelta(seconds=12)
        running.status, running.claimed_by = SubmissionStatus.RUNNING, "grader-8:5"
        waiting.message = VERSION_WAITING_MESSAGE
        waiting.requested_at -= timedelta(seconds=90)
        db.session().commit()

        client = app.test_client()
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code \
            == 401
        response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200
        samples = _samples(response.get_data(as_text=True))
    histogram = "autograde_submission_to_result_seconds"
    assert samples[(histogram + "_bucket", (("le", "10.0"),))] == 0
    assert samples[(histogram + "_bucket", (("le", "15.0"),))] == 1
    assert samples[(histogram + "_count", ())] == 1
    assert samples[(histogram + "_sum", ())] == pytest.approx(12, abs=0.01)
    assert samples[("autograde_gradings_in_progress", (("host", "grader-8"),))] == 1
    assert samples[("autograde_host_graded_total", (("host", "grader-7"),))] == 1
    assert samples[("autograde_waiting_submissions", (("reason", "version"),))] == 1
    assert samples[("autograde_waiting_submissions", (("reason", "sandbox"),))] == 0
    assert samples[("autograde_submissions", (("status", "queued"),))] == 1
    assert samples[("autograde_queue_oldest_age_seconds", ())] >= 90
    assert samples[("autograde_deliveries", (("channel", "webhook"), ("state", "pending")))] == 0


def test_without_a_token_the_endpoint_does_not_exist(client: FlaskClient) -> None:
    response = client.get("/metrics", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 404
    assert response.content_type.startswith("application/problem+json")


def _host_probe(containers: int | None) -> HostProbe:
    return HostProbe(host="grader-9", processes=2, packages={"attention": "abc123"},
                     database_up=lambda: True, broker_up=lambda: False,
                     running_here=lambda: 1, sandbox_containers=lambda: containers)


def test_a_hosts_metrics_say_its_links_gradings_and_sandbox_containers() -> None:
    samples = _samples(exposition(HostCollector(_host_probe(3))).decode())
    host = (("host", "grader-9"),)
    assert samples[("autograde_host_database_up", host)] == 1.0
    assert samples[("autograde_host_broker_up", host)] == 0.0
    assert samples[("autograde_host_gradings_in_progress", host)] == 1.0
    assert samples[("autograde_host_sandbox_containers", host)] == 3.0
    assert samples[("autograde_host_assignment_version",
                    (("assignment", "attention"), ("host", "grader-9"),
                     ("version", "abc123")))] == 1.0
    # Not on the Docker sandbox (or its engine silent): no container figure at all, never 0.
    quiet = _samples(exposition(HostCollector(_host_probe(None))).decode())
    assert not any(name == "autograde_host_sandbox_containers" for name, _ in quiet)
