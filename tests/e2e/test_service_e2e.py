"""End to end on real processes: gunicorn, a Celery worker on Redis, PostgreSQL, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import create_engine, text

from devkit.courses import PASSWORD
from devkit.paths import CORPUS
from devkit.stack import REDIS_URL, Stack, free_port, redis_or_skip

pytestmark = pytest.mark.slow

SYNTAX = CORPUS / "attention" / "syntax_missing_colon.py"


def _setup(stack: Stack, students: int = 1) -> list[dict[str, str]]:
    """Users, course and enrolments created over the CLI, as an administrator would."""
    for args in (["admin", "create-course", "ml101"], ["admin", "sync-assignments", "ml101"],
                 ["admin", "assignment", "ml101", "attention", "--rate-limit", "100000/60"]):
        done = stack.autograde(*args)
        assert done.returncode == 0, done.stderr
    headers = []
    for index in range(students):
        name = f"student{index}"
        done = stack.autograde("admin", "create-user", name, "--password-stdin",
                               stdin=PASSWORD + "\n")
        assert done.returncode == 0, done.stderr
        assert stack.autograde("admin", "enrol", "ml101", name).returncode == 0
        headers.append(stack.login(name))
    return headers


def _post(stack: Stack, headers: dict[str, str], path: Path) -> int:
    response = requests.post(f"{stack.url}/api/v1/assignments/attention/submissions",
                             headers=headers, files=[("files", ("attention.py",
                                                                path.read_bytes()))], timeout=30)
    assert response.status_code == 202, response.text
    return int(response.json()["id"])


def _rows(url: str, query: str) -> list[Any]:
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = list(connection.execute(text(query)))
    engine.dispose()
    return rows


@pytest.fixture
def stack(make_stack: Callable[..., Stack], pg_url: str) -> Iterator[Stack]:
    redis_or_skip()
    built = make_stack(pg_url)
    built.start_server()
    yield built


def test_submit_over_api_and_cli_with_a_real_worker(stack: Stack, pg_url: str) -> None:
    (headers,) = _setup(stack)
    stack.start_worker()
    submission_id = _post(stack, headers, CORPUS / "attention" / "softmax_dim_minus2.py")
    body = stack.wait_for(headers, submission_id)
    assert body["status"] == "graded", body
    codes = [d["code"] for d in body["results"]["diagnoses"]]
    assert codes == ["softmax-wrong-axis"]
    assert _rows(pg_url, "SELECT codes FROM results")[0][0] == ["softmax-wrong-axis"]

    login = stack.autograde("login", "--username", "student0", "--password-stdin",
                            stdin=PASSWORD + "\n")
    assert login.returncode == 0, login.stderr
    credentials = Path(stack.env["AUTOGRADE_CONFIG_DIR"]) / "credentials.json"
    assert oct(credentials.stat().st_mode & 0o777) == "0o600"
    submit = stack.autograde("submit", str(CORPUS / "attention" / "mask_inverted_where.py"),
                             "--assignment", "attention")
    assert submit.returncode == 0, submit.stdout + submit.stderr
    assert "queued" in submit.stdout and "graded" in submit.stdout
    assert "[mask-inverted]" in submit.stdout and "Score:" in submit.stdout
    new_id = submit.stdout.split("Submission ", 1)[1].split(":", 1)[0]
    status = stack.autograde("status", new_id, "--json")
    assert "mask-inverted" in [d["code"] for d in json.loads(status.stdout)["diagnoses"]]
    no_wait = stack.autograde("submit", str(SYNTAX), "--assignment", "attention", "--no-wait",
                              "--json")
    assert json.loads(no_wait.stdout)["status"] == "queued"


def test_worker_killed_mid_grading_grades_exactly_once(make_stack: Callable[..., Stack],
                                                      pg_url: str) -> None:
    redis_or_skip()
    # The dead worker's message stays unacknowledged in Redis until the visibility timeout;
    # the reaper (beat, inside the new worker) sees the claim's process is gone and re-queues.
    stack = make_stack(pg_url, REAPER_INTERVAL_SECONDS=2, VISIBILITY_TIMEOUT=30)
    stack.start_server()
    (headers,) = _setup(stack)
    stack.start_worker(beat=True)
    submission_id = _post(stack, headers, CORPUS / "attention" / "correct_matmul.py")
    deadline = time.monotonic() + 60
    while _rows(pg_url, f"SELECT status FROM submissions WHERE id={submission_id}")[0][0] \
            != "running":
        assert time.monotonic() < deadline, stack.log("worker")
        time.sleep(0.05)
    stack.stop("worker", signal.SIGKILL)
    stack.start_worker(beat=True)
    body = stack.wait_for(headers, submission_id, timeout=180)
    assert body["status"] == "graded" and body["attempts"] == 2, body
    assert _rows(pg_url, f"SELECT count(*) FROM results WHERE submission_id={submission_id}") \
        == [(1,)]


def _burst(stack: Stack, headers: list[dict[str, str]], count: int) -> list[int]:
    return [_post(stack, headers[i % len(headers)], SYNTAX) for i in range(count)]


def _all_graded_once(stack: Stack, pg_url: str, ids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        statuses = dict(_rows(pg_url, "SELECT status, count(*) FROM submissions GROUP BY 1"))
        if statuses.get("graded", 0) == len(ids):
            break
        assert time.monotonic() < deadline, f"{statuses}\n{stack.log('worker')}"
        time.sleep(0.5)
    per_submission = _rows(pg_url, "SELECT submission_id, count(*) FROM results GROUP BY 1")
    assert sorted(s for s, _ in per_submission) == sorted(ids)
    assert {n for _, n in per_submission} == {1}


def test_burst_of_200_each_graded_once(stack: Stack, pg_url: str) -> None:
    headers = _setup(stack, students=4)
    stack.start_worker(concurrency=2)
    ids = _burst(stack, headers, 200)
    _all_graded_once(stack, pg_url, ids, timeout=300)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    """A redis-server of this test's own (no persistence, like production's default here)."""
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(tmp_path)]
    process = [subprocess.Popen(argv, stdout=subprocess.DEVNULL)]

    def restart() -> None:
        process[0].send_signal(signal.SIGTERM)
        process[0].wait(timeout=10)
        time.sleep(1.0)
        process[0] = subprocess.Popen(argv, stdout=subprocess.DEVNULL)

    url = f"redis://127.0.0.1:{port}/0"
    time.sleep(0.5)
    redis_or_skip(url)
    yield url, restart
    process[0].terminate()
    process[0].wait(timeout=10)


def test_redis_restart_during_a_burst_loses_nothing(
        make_stack: Callable[..., Stack], pg_url: str,
        private_redis: tuple[str, Callable[[], None]]) -> None:
    url, restart = private_redis
    stack = make_stack(pg_url, url, REAPER_INTERVAL_SECONDS=2, QUEUED_STALE_SECONDS=10,
                       LEASE_SECONDS=30)
    stack.start_server()
    headers = _setup(stack, students=2)
    stack.start_worker(concurrency=2, beat=True)
    ids = _burst(stack, headers, 40)
    restart()  # every queued message in Redis is gone now
    ids += _burst(stack, headers, 20)
    _all_graded_once(stack, pg_url, ids, timeout=240)
    assert os.environ.get("AUTOGRADE_TEST_REDIS", REDIS_URL) != url
