"""Real service processes (web server, worker) on a test's database and queue, the addresses of
the shared PostgreSQL and Redis, and skipping (failing in CI) where one is missing."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from devkit.courses import PASSWORD
from devkit.paths import REPO

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = os.environ.get("AUTOGRADE_TEST_REDIS", "redis://127.0.0.1:6379/0")


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"service test cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def redis_or_skip(url: str = REDIS_URL) -> None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        unavailable(f"Redis is not reachable at {url}: {exc}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: be sent SIGTERM when pytest dies, however it dies (no stray servers)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


PR_SET_PDEATHSIG = 1


@dataclass
class Stack:
    """Real service processes (web server, worker) on a test's database and queue."""

    env: dict[str, str]
    url: str
    logs: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def autograde(self, *args: str, stdin: str | None = None,
                  timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "service.cli", *args], env=self.env,
                              input=stdin, capture_output=True, text=True, timeout=timeout,
                              cwd=REPO)

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen([sys.executable, "-m", "service.cli", *args], env=self.env,
                                   stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                   start_new_session=True, preexec_fn=_die_with_parent)
        self.processes[name] = process
        return process

    def start_server(self) -> None:
        self.start("web", "serve", "--port", self.url.rsplit(":", 1)[1], "--workers", "2")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/healthz", timeout=2).ok:
                    return
            except requests.RequestException:
                time.sleep(0.2)
        raise AssertionError("web server did not start:\n" + self.log("web"))

    def start_worker(self, concurrency: int = 1, *, beat: bool = False) -> None:
        args = ["worker", "--concurrency", str(concurrency)]
        if beat:
            args += ["--beat", "--schedule", str(self.logs / "beat-schedule")]
        self.start("worker", *args)

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def login(self, username: str, password: str = PASSWORD) -> dict[str, str]:
        response = requests.post(self.url + "/auth/login", json={"username": username,
                                                                 "password": password})
        response.raise_for_status()
        return {"Authorization": f"Bearer {response.json()['token']}"}

    def wait_for(self, headers: dict[str, str], submission_id: int,
                 timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body: dict[str, Any] = requests.get(
                f"{self.url}/api/v1/submissions/{submission_id}", headers=headers,
                timeout=10).json()
            if body["status"] in ("graded", "failed"):
                return body
            time.sleep(0.3)
        raise AssertionError(f"submission {submission_id} not graded in {timeout} s:\n"
                             + self.log("worker"))
