"""The embedded default: SQLite, a kombu queue on SQLite, a real worker, demo users; one command.

Set ``AUTOGRADE_DATABASE_URL`` and ``AUTOGRADE_BROKER_URL`` to run the same on PostgreSQL and
Redis. The web server and the worker (with beat inside it) run as child processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests
from sqlalchemy import select
from sqlalchemy.orm import Session

from sandbox.selection import choose_backend
from service import db
from service.admin import app_session, create_user, enrol
from service.app import create_app
from service.config import ENV_PREFIX, data_dir_settings
from service.courses import course_by_code, create_course, sync_assignments
from service.errors import NotFound
from service.instructor import update_settings
from service.models import Course, CourseAssignment

DEMO_COURSE = "demo"
DEMO_USERS = (("instructor", "instructor"), ("student", "student"))


def embedded_environment(data_dir: Path, environ: dict[str, str]) -> dict[str, str]:
    """The environment of the child processes: embedded defaults unless already set."""
    env = dict(environ)
    for name, value in data_dir_settings(data_dir).items():
        env.setdefault(f"{ENV_PREFIX}_{name}", value)
    if env.get("AUTOGRADE_SANDBOX_BACKEND", "auto") == "auto":
        env["AUTOGRADE_SANDBOX_BACKEND"] = choose_backend(warn=sys.stderr)
    return env


def prepare(data_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """Migrate, sync assignments into the demo course, create demo users; their passwords."""
    db.upgrade(env["AUTOGRADE_DATABASE_URL"])
    app = create_app({"DATABASE_URL": env["AUTOGRADE_DATABASE_URL"],
                      "BROKER_URL": env["AUTOGRADE_BROKER_URL"]})
    secrets_file = data_dir / "demo-credentials.json"
    passwords: dict[str, str] = (json.loads(secrets_file.read_text())
                                 if secrets_file.is_file() else {})
    with app_session(app) as session:
        try:
            course = course_by_code(session, DEMO_COURSE)
            new = False
        except NotFound:
            course = create_course(session, code=DEMO_COURSE, title="Demo course")
            new = True
        sync_assignments(session, course)
        if new:
            release_demo_results(session, course)
        for username, role in DEMO_USERS:
            if username not in passwords:
                passwords[username] = create_user(session, username=username, role=role,
                                                  password=None).password
                enrol(session, course=DEMO_COURSE, username=username, role=role)
    descriptor = os.open(secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(passwords, handle)
    return passwords


def release_demo_results(session: Session, course: Course) -> None:
    """The demo has no deadline, so checks shown "after the due date" would never be shown:
    its results are released, so a student sees every check and a final score at once."""
    for assignment in session.scalars(select(CourseAssignment).where(
            CourseAssignment.course_id == course.id)):
        update_settings(session, assignment, {"results_published": True})


def run(*, data_dir: Path, host: str, port: int, concurrency: int) -> int:
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = embedded_environment(data_dir, dict(os.environ))
    passwords = prepare(data_dir, env)
    url = f"http://{host}:{port}"
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on_signal)
    children = [
        _spawn([*_autograde(), "worker", "--concurrency", str(concurrency), "--beat",
                "--schedule", str(data_dir / "beat-schedule")], env),
        _spawn([*_autograde(), "serve", "--host", host, "--port", str(port)], env),
    ]
    try:
        _wait_until_up(url, children)
        _banner(url, passwords, env)
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        print("autograde: a service process stopped; shutting down", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(children)


def _exit_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def _autograde() -> list[str]:
    return [sys.executable, "-m", "service.cli"]


def _spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env, start_new_session=True)


def _wait_until_up(url: str, children: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(child.poll() is not None for child in children):
            raise SystemExit("autograde: a service process failed to start")
        try:
            if requests.get(url + "/healthz", timeout=2).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise SystemExit(f"autograde: the web server did not answer at {url} within 60 s")


def _banner(url: str, passwords: dict[str, Any], env: dict[str, str]) -> None:
    lines = [
        "",
        f"autograde is running at {url}  (database {env['AUTOGRADE_DATABASE_URL']}, "
        f"sandbox {env['AUTOGRADE_SANDBOX_BACKEND']})",
        "Demo accounts (course 'demo', both assignments):",
        *[f"  {name:<11} password {passwords[name]}" for name, _ in DEMO_USERS],
        "Try:",
        f"  autograde login --url {url} --username student",
        "  autograde submit attention.py --assignment attention",
        "Stop with Ctrl-C.",
        "",
    ]
    print("\n".join(lines), flush=True)


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
