"""Two grading hosts, each in a network namespace of its own reaching PostgreSQL and the broker
over a virtual link, under a rush of real submissions: one host's workers killed, the other's
link cut mid-grading and restored, the broker restarted. Every submission is graded exactly
once and none fails, on Redis and on RabbitMQ (quorum queues); and its graded event, sent by the
hosts to a signed webhook receiver on the root namespace, reaches it as one event (one
``webhook-id``, the id the receivers deduplicate on), posted no more often than it was claimed.

The timings (when a lost host's work is picked up, and why) are written to the test's log folder
as ``timings.json``; docs/results/grading-hosts.md holds a run's figures.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from devkit.courses import PASSWORD
from devkit.faults import PrivateRedis
from devkit.hosts import (
    SERVICE_ADDRESS,
    GradingHost,
    PrivateRabbit,
    grading_hosts,
    namespaces_unavailable,
    rabbitmq_unavailable,
    wait_until,
)
from devkit.paths import CORPUS
from devkit.stack import Stack, unavailable
from devkit.webhooks import Received, Receiver, serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

METRICS_TOKEN = "hosts-test-metrics-token"
HEALTH_PORT = 9187
# Short enough for a test, in the order production keeps (config.py): the task's hard limit
# under the broker's visibility timeout; the claim's lease renewed every third of it while
# a grading runs, so that a lost host's work is picked up within a lease and a reaper interval.
TIMINGS = {"TASK_SOFT_TIME_LIMIT": 40, "TASK_TIME_LIMIT": 45, "LEASE_SECONDS": 10,
           "VISIBILITY_TIMEOUT": 90, "SANDBOX_RETRY_SECONDS": 1,
           "SANDBOX_RETRY_MAX_SECONDS": 10, "REAPER_INTERVAL_SECONDS": 5,
           "BROKER_HEARTBEAT_SECONDS": 5}
# The hosts post to a receiver at SERVICE_ADDRESS (a private address, allowed here); a failed
# attempt is retried after a second, and the sweep looks every 5 s and sends again a task not
# run within 30 s (one lost with a killed host or a restarted broker) instead of 5 minutes.
DELIVERIES = {"WEBHOOK_ALLOWED_NETWORKS": f"{SERVICE_ADDRESS}/32", "WEBHOOK_BACKOFF_SECONDS": 1,
              "WEBHOOK_TIMEOUT_SECONDS": 5, "DELIVERY_SWEEP_SECONDS": 5,
              "DELIVERY_REDISPATCH_SECONDS": 30}
# A correct submission that takes a few seconds in the sandbox, so a grading can be caught
# in flight.
SLOW_CORRECT = ("import time\ntime.sleep(3)\n\n"
                + (CORPUS / "attention" / "correct_matmul.py").read_text())


class Broker:
    """A private broker of the kind named: started, restarted, its URL."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.server: PrivateRedis | PrivateRabbit = (
            PrivateRedis(folder) if kind == "redis" else PrivateRabbit(folder))

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port

    def restart(self) -> None:
        self.server.stop()
        self.server.start()


@pytest.fixture(params=["redis", "rabbitmq"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    reason = namespaces_unavailable() or (rabbitmq_unavailable()
                                          if request.param == "rabbitmq" else None)
    if reason:
        unavailable(reason)
    folder = tmp_path / request.param
    folder.mkdir()
    made = Broker(request.param, folder)
    made.server.start()
    yield made
    made.server.stop()


class Fleet:
    """The web server and beat on the root namespace, the hosts on theirs, one database."""

    def __init__(self, stack: Stack, hosts: list[GradingHost], pg_url: str,
                 broker: Broker, receiver: Receiver) -> None:
        self.stack, self.hosts, self.pg_url, self.broker = stack, hosts, pg_url, broker
        self.receiver = receiver
        self.headers: dict[str, str] = {}
        self.events: dict[str, Any] = {"broker": broker.kind}

    def host_env(self, host: GradingHost) -> dict[str, str]:
        pg_port = host.reach(5432)
        broker_port = host.reach(self.broker.port)
        env = dict(self.stack.env)
        env["AUTOGRADE_DATABASE_URL"] = self.pg_url.replace("127.0.0.1:5432",
                                                            f"{host.gateway}:{pg_port}")
        env["AUTOGRADE_BROKER_URL"] = self.broker.url.replace(
            f"127.0.0.1:{self.broker.port}", f"{host.gateway}:{broker_port}")
        env["AUTOGRADE_WORKER_HEALTH_ADDRESS"] = host.address
        return env

    def start_host(self, host: GradingHost, env: dict[str, str]) -> None:
        host.start_worker(env)
        wait_until(lambda: self.healthy(host), 240, f"{host.name} answering healthy")

    def healthy(self, host: GradingHost) -> bool:
        try:
            return requests.get(f"http://{host.address}:{HEALTH_PORT}/healthz",
                                timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def submit(self, count: int) -> list[int]:
        def post(_: int) -> int:
            response = requests.post(
                f"{self.stack.url}/api/v1/assignments/attention/submissions",
                headers=self.headers, timeout=60,
                files=[("files", ("attention.py", SLOW_CORRECT.encode()))])
            response.raise_for_status()
            return int(response.json()["id"])

        with ThreadPoolExecutor(count) as pool:
            return list(pool.map(post, range(count)))

    def rows(self) -> dict[int, tuple[str, str | None, Any]]:
        url = self.pg_url.replace("postgresql+psycopg", "postgresql")
        with psycopg.connect(url, connect_timeout=5) as connection:
            found = connection.execute(
                "SELECT id, status, claimed_by, graded_at FROM submissions").fetchall()
        return {row[0]: (row[1], row[2], row[3]) for row in found}

    def deliveries(self) -> dict[int, list[tuple[str, str, str, int]]]:
        """The webhook deliveries of each submission: (event, webhook id, status, attempts)."""
        url = self.pg_url.replace("postgresql+psycopg", "postgresql")
        with psycopg.connect(url, connect_timeout=5) as connection:
            found = connection.execute(
                "SELECT submission_id, event, message_id, status::text, attempts"
                " FROM webhook_deliveries ORDER BY id").fetchall()
        rows: dict[int, list[tuple[str, str, str, int]]] = {}
        for submission_id, event, webhook_id, status, attempts in found:
            rows.setdefault(submission_id, []).append((event, webhook_id, status, attempts))
        return rows

    def running_on(self, host: GradingHost) -> int | None:
        for submission_id, (status, claimed_by, _) in sorted(self.rows().items()):
            if status == "running" and (claimed_by or "").startswith(host.name + ":"):
                return submission_id
        return None

    def graded_by(self, submission_id: int) -> str | None:
        status, claimed_by, _ = self.rows()[submission_id]
        return (claimed_by or "").rpartition(":")[0] if status == "graded" else None

    def wait_graded(self, ids: list[int], timeout: float) -> None:
        def done() -> bool:
            try:
                rows = self.rows()
            except psycopg.OperationalError:
                return False
            return all(rows[i][0] in ("graded", "failed") for i in ids)

        try:
            wait_until(done, timeout, f"submissions {ids} finished")
        except AssertionError:
            raise AssertionError(self.diagnosis()) from None

    def diagnosis(self) -> str:
        logs = "\n".join(f"--- {host.name}\n{host.log()}" for host in self.hosts)
        return f"{self.rows()}\n{logs}\n--- web\n{self.stack.log('web')}"

    def catch_running(self, host: GradingHost, timeout: float = 120) -> int:
        found: list[int] = []

        def caught() -> bool:
            submission_id = self.running_on(host)
            if submission_id is not None:
                found.append(submission_id)
            return bool(found)

        wait_until(caught, timeout, f"{host.name} grading a submission")
        return found[0]


@pytest.fixture
def fleet(make_stack: Callable[..., Stack], pg_url: str, broker: Broker,
          tmp_path: Path) -> Iterator[Fleet]:
    stack = make_stack(pg_url, broker.url, METRICS_TOKEN=METRICS_TOKEN,
                       WORKER_HEALTH_PORT=HEALTH_PORT, **TIMINGS, **DELIVERIES)
    for args in (["admin", "create-course", "ml101"], ["admin", "sync-assignments", "ml101"],
                 ["admin", "assignment", "ml101", "attention", "--rate-limit", "100/60"]):
        done = stack.autograde(*args)
        assert done.returncode == 0, done.stderr
    done = stack.autograde("admin", "create-user", "student", "--password-stdin",
                           stdin=PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    assert stack.autograde("admin", "enrol", "ml101", "student").returncode == 0
    stack.start_server()
    stack.start("beat", "beat", "--schedule", str(tmp_path / "beat-schedule"))
    with grading_hosts(2, tmp_path) as hosts:
        receiver = Receiver()
        server = serve(receiver, SERVICE_ADDRESS)  # one URL for every host
        done = stack.autograde("admin", "webhook", "add", "ml101", receiver.url,
                               "--event", "submission.graded")
        assert done.returncode == 0, done.stderr
        receiver.secret = done.stdout.rpartition("Signing secret (shown once): ")[2].split()[0]
        made = Fleet(stack, hosts, pg_url, broker, receiver)
        made.headers = stack.login("student")
        envs = {host.name: made.host_env(host) for host in hosts}
        for host in hosts:  # booted side by side, as a fleet's machines are
            host.start_worker(envs[host.name])
        for host in hosts:
            wait_until(lambda host=host: made.healthy(host), 240, f"{host.name} healthy")
        made.events["envs"] = envs
        try:
            yield made
        finally:
            server.shutdown()
            server.server_close()
        (tmp_path / "timings.json").write_text(json.dumps(
            {k: v for k, v in made.events.items() if k != "envs"}, indent=2, default=str))
        print(json.dumps({k: v for k, v in made.events.items() if k != "envs"}, default=str))


def test_hosts_lose_nothing_to_a_dead_host_a_cut_link_or_a_broker_restart(
        fleet: Fleet) -> None:
    first, second = fleet.hosts
    envs = fleet.events["envs"]
    ids: list[int] = []

    # (a) A rush; the first host's workers die mid-grading (kill -9 of every process).
    ids += fleet.submit(6)
    victim = fleet.catch_running(first)
    killed_at = time.monotonic()
    first.kill_worker()
    fleet.wait_graded([victim], 240)
    fleet.events["host_killed"] = {"submission": victim, "graded_by": fleet.graded_by(victim),
                                   "picked_up_after_s": round(time.monotonic() - killed_at, 1)}
    assert fleet.graded_by(victim) == second.name
    fleet.start_host(first, envs[first.name])

    # (b) The second host's link cut while it grades; restored once its work was redone.
    ids += fleet.submit(3)
    victim = fleet.catch_running(second)
    cut_at = time.monotonic()
    second.cut()
    try:
        fleet.wait_graded([victim], 240)
        fleet.events["link_cut"] = {"submission": victim, "graded_by": fleet.graded_by(victim),
                                    "picked_up_after_s": round(time.monotonic() - cut_at, 1)}
        assert fleet.graded_by(victim) == first.name
    finally:
        second.restore()
    restored_at = time.monotonic()
    wait_until(lambda: fleet.healthy(second), 240, "the cut host healthy again")
    fleet.events["link_cut"]["healthy_after_restore_s"] = round(time.monotonic() - restored_at, 1)

    # (c) The broker restarted while gradings are in flight and waiting.
    ids += fleet.submit(3)
    wait_until(lambda: any(status == "running" for status, _, _ in fleet.rows().values()),
               120, "a grading in flight")
    restarted_at = time.monotonic()
    fleet.broker.restart()
    fleet.wait_graded(ids, 300)
    fleet.events["broker_restart"] = {
        "all_graded_after_s": round(time.monotonic() - restarted_at, 1)}

    rows = fleet.rows()
    assert [rows[i][0] for i in ids] == ["graded"] * len(ids), fleet.diagnosis()
    url = fleet.pg_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(url) as connection:
        stored = dict(connection.execute(
            "SELECT submission_id, count(*) FROM results GROUP BY submission_id").fetchall())
        scores = {row[0] for row in connection.execute("SELECT score = max_score FROM results")}
    assert stored == dict.fromkeys(ids, 1)  # one result each: none stored twice
    assert scores == {True}  # each graded in full, by the version it was submitted against
    fleet.events["graded_per_host"] = {
        host.name: sum(1 for i in ids if fleet.graded_by(i) == host.name)
        for host in fleet.hosts}

    # Deliveries sent once: each graded event recorded once, with its result, and delivered;
    # the receiver got it as one event (every post of it verified and under the one webhook-id
    # receivers deduplicate on), posted no more often than a sender claimed it, and posted by
    # the hosts (the workers send deliveries; the root namespace runs only the web and beat).
    def delivered() -> bool:
        rows = fleet.deliveries()
        return all([row[2] for row in rows.get(i, [])] == ["delivered"] for i in ids)

    waited_from = time.monotonic()
    try:
        wait_until(delivered, 120, "every graded event delivered")
    except AssertionError:
        raise AssertionError(f"{fleet.deliveries()}\n{fleet.diagnosis()}") from None
    deliveries = fleet.deliveries()
    assert sorted(deliveries) == sorted(ids)
    posts: dict[int, list[Received]] = {}
    for received in fleet.receiver.received:
        assert received.error is None, received.error
        assert received.payload["type"] == "submission.graded"
        posts.setdefault(received.payload["data"]["submission_id"], []).append(received)
    assert sorted(posts) == sorted(ids)
    senders = {host.address: host.name for host in fleet.hosts}
    assert {received.sender for received in fleet.receiver.received} <= set(senders)
    for i in ids:
        [(event, webhook_id, _, attempts)] = deliveries[i]
        assert event == "submission.graded"
        assert {post.webhook_id for post in posts[i]} == {webhook_id}
        assert {post.payload["data"]["status"] for post in posts[i]} == {"graded"}
        assert len(posts[i]) <= attempts
    fleet.events["deliveries"] = {
        "all_delivered_after_checks_s": round(time.monotonic() - waited_from, 1),
        "events": len(ids), "posts": sum(len(posts[i]) for i in ids),
        "attempts": sum(deliveries[i][0][3] for i in ids),
        "posted_more_than_once": {i: len(posts[i]) for i in ids if len(posts[i]) > 1},
        "posts_per_host": {name: sum(1 for received in fleet.receiver.received
                                     if received.sender == address)
                           for address, name in senders.items()}}

    # What the operator's Prometheus reads: the fleet from the web, each host from itself.
    refused = requests.get(f"{fleet.stack.url}/metrics", timeout=10)
    assert refused.status_code == 401
    metrics = requests.get(f"{fleet.stack.url}/metrics", timeout=10,
                           headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).text
    assert f'autograde_gradings_total{{outcome="graded"}} {float(len(ids))}' in metrics
    assert 'autograde_gradings_total{outcome="failed"} 0.0' in metrics
    assert f"autograde_submission_to_result_seconds_count {float(len(ids))}" in metrics
    assert "autograde_broker_up 1.0" in metrics
    assert 'autograde_submissions{status="queued"} 0.0' in metrics
    for state in ("pending", "failing", "failed"):
        assert f'autograde_deliveries{{channel="webhook",state="{state}"}} 0.0' in metrics
    for host in fleet.hosts:
        assert f'autograde_host_graded_total{{host="{host.name}"}}' in metrics
        own = requests.get(f"http://{host.address}:{HEALTH_PORT}/metrics", timeout=10).text
        assert f'autograde_host_broker_up{{host="{host.name}"}} 1.0' in own
        assert f'autograde_host_assignment_version{{assignment="attention",host="{host.name}"' \
            in own
