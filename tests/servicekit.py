"""Fixtures of the grading service: a database per test (SQLite or PostgreSQL), apps, factories,
running server and worker processes. Star-imported by ``tests/conftest.py``."""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from service import db
from service.app import create_app
from service.courses.accounts import create_user, issue_token
from service.courses.enrolment import create_course, enrol, sync_assignments
from service.models import Course, CourseAssignment, CourseRole, Role, User

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = os.environ.get("AUTOGRADE_TEST_REDIS", "redis://127.0.0.1:6379/0")
PASSWORD = "correct horse battery"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"service test cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'autograde.db'}"
    db.upgrade(url)
    return url


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database, migrated, dropped afterwards."""
    name = f"autograde_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        _unavailable(f"PostgreSQL is not reachable: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    try:
        db.upgrade(url)
        yield url
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def queue_name() -> str:
    """A queue of this test's own, so tests sharing one Redis never take each other's tasks."""
    return f"grading-test-{uuid.uuid4().hex[:10]}"


def redis_or_skip(url: str = REDIS_URL) -> None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        _unavailable(f"Redis is not reachable at {url}: {exc}")


@pytest.fixture
def make_app(tmp_path: Path) -> Callable[..., Flask]:
    def build(database_url: str, **overrides: Any) -> Flask:
        config = {"DATABASE_URL": database_url, "BROKER_URL": "memory://",
                  "SANDBOX_BACKEND": "local", **overrides}
        return create_app(config)

    return build


@pytest.fixture
def app(make_app: Callable[..., Flask], sqlite_url: str) -> Iterator[Flask]:
    """The app on its own SQLite database (quick tests); the broker is in memory."""
    application = make_app(sqlite_url)
    with application.app_context():
        yield application


@pytest.fixture
def pg_app(make_app: Callable[..., Flask], pg_url: str) -> Iterator[Flask]:
    application = make_app(pg_url)
    with application.app_context():
        yield application
    application.extensions["autograde.db"].engine.dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@dataclass
class Factory:
    """Builds users, courses and assignments in the current app's database."""

    app: Flask
    courses: dict[str, Course] = field(default_factory=dict)

    def course(self, code: str = "ml101", *, slugs: tuple[str, ...] = ("attention",)) -> Course:
        session = db.session()
        course = create_course(session, code=code)
        sync_assignments(session, course, list(slugs))
        session.commit()
        self.courses[code] = course
        return course

    def user(self, username: str | None = None, *, role: Role = Role.STUDENT,
             course: Course | None = None,
             course_role: CourseRole = CourseRole.STUDENT) -> User:
        session = db.session()
        user = create_user(session, username=username or f"u{secrets.token_hex(4)}",
                           password=PASSWORD, role=role)
        if course is not None:
            enrol(session, course=course, user=user, role=course_role)
        session.commit()
        return user

    def headers(self, user: User) -> dict[str, str]:
        issued = issue_token(db.session(), user)
        db.session().commit()
        return {"Authorization": f"Bearer {issued.token}"}

    def assignment(self, course: Course, slug: str = "attention") -> CourseAssignment:
        return next(a for a in db.session().query(CourseAssignment).filter_by(course_id=course.id)
                    if a.slug == slug)


@pytest.fixture
def factory(app: Flask) -> Factory:
    return Factory(app)


@pytest.fixture
def pg_factory(pg_app: Flask) -> Factory:
    return Factory(pg_app)


def corpus(slug: str, name: str) -> tuple[str, bytes]:
    """A corpus file as (the entry file name, its bytes)."""
    entry = {"attention": "attention.py", "multi-head-attention": "mha.py",
             "attention-kv-cache": "attention_kv_cache.py"}[slug]
    return entry, (CORPUS / slug / name).read_bytes()


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


@pytest.fixture
def make_stack(tmp_path: Path, queue_name: str) -> Iterator[Callable[..., Stack]]:
    stacks: list[Stack] = []

    def build(database_url: str, broker_url: str = REDIS_URL, **config: Any) -> Stack:
        env = dict(os.environ)
        env.update({f"AUTOGRADE_{key}": str(value) for key, value in config.items()})
        env.update({
            "AUTOGRADE_DATABASE_URL": database_url,
            "AUTOGRADE_BROKER_URL": broker_url,
            "AUTOGRADE_QUEUE": queue_name,
            "AUTOGRADE_SANDBOX_BACKEND": "local",
            "AUTOGRADE_CONFIG_DIR": str(tmp_path / "client"),
            "PYTHONUNBUFFERED": "1",
        })
        port = free_port()
        env["AUTOGRADE_URL"] = f"http://127.0.0.1:{port}"
        stack = Stack(env=env, url=f"http://127.0.0.1:{port}", logs=tmp_path)
        stacks.append(stack)
        return stack

    yield build
    for stack in stacks:
        stack.stop_all()
