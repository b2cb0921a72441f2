"""Running a service: ``serve`` (gunicorn), ``worker`` and ``beat`` (Celery), and
``run-embedded``, the embedded default in one command.

The embedded default is SQLite, a kombu queue on SQLite, a real worker and demo users; set
``AUTOGRADE_DATABASE_URL`` and ``AUTOGRADE_BROKER_URL`` to run the same on PostgreSQL and
Redis. Its web server and worker (with beat inside it) run as child processes. This module's
top imports stay light: the service's are made by ``run-embedded`` when it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.cli.common import Commands

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from service.models import Course

DEMO_COURSE = "demo"
DEMO_USERS = (("instructor", "instructor"), ("student", "student"))


def register(commands: Commands) -> None:
    serve = commands.add("admin", "serve", "run the web server (gunicorn)")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="the port to listen on")
    serve.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    serve.set_defaults(handler=_serve)

    worker = commands.add("admin", "worker", "run a Celery grading worker")
    worker.add_argument("--concurrency", type=int, default=1,
                        help="submissions graded at once")
    worker.add_argument("--beat", action="store_true", help="also run the reaper schedule "
                                                            "(one such process at most)")
    worker.add_argument("--schedule", default="celerybeat-schedule",
                        help="beat's schedule file")
    worker.add_argument("--loglevel", default="INFO", help="Celery's log level")
    worker.set_defaults(handler=_worker)

    beat = commands.add("admin", "beat", "run Celery beat (the stuck-submission reaper)")
    beat.add_argument("--schedule", default="celerybeat-schedule", help="beat's schedule file")
    beat.add_argument("--loglevel", default="INFO", help="Celery's log level")
    beat.set_defaults(handler=_beat)

    embedded = commands.add(
        "admin", "run-embedded", "start everything here: SQLite, an embedded queue, a worker, "
                                 "demo users")
    embedded.add_argument("--data-dir", type=Path, default=Path(".autograde"),
                          help="where the database, the queue and the demo passwords are kept")
    embedded.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    embedded.add_argument("--port", type=int, default=8000, help="the port to listen on")
    embedded.add_argument("--concurrency", type=int, default=1,
                          help="submissions graded at once")
    embedded.set_defaults(handler=_embedded)


def _exec(argv: list[str]) -> int:
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 0  # not reached


KEEP_ALIVE_SECONDS = 75
"""How long the web server keeps an idle connection open for its client's next request.

gunicorn's default, 2 s, is shorter than a client's pause between two requests of a script,
and a request sent just as the server closes the connection fails ("connection reset", "remote
end closed"; a POST is not retried). Longer than a proxy's usual 60 s: the proxy, not the
server, closes first. An idle connection waits in the server's poller, not in a thread."""


def _serve(args: argparse.Namespace) -> int:
    return _exec([sys.executable, "-m", "gunicorn", "--bind", f"{args.host}:{args.port}",
                  "--workers", str(args.workers), "--threads", "4", "--timeout", "60",
                  "--worker-class", "service.server.ProblemWorker",
                  "--keep-alive", str(KEEP_ALIVE_SECONDS),
                  "--access-logfile", "-", "service.app:create_app()"])


def _worker(args: argparse.Namespace) -> int:
    argv = [sys.executable, "-m", "celery", "-A", "service.worker", "worker",
            "--loglevel", args.loglevel, "--concurrency", str(args.concurrency),
            "--pool", "prefork", "--without-gossip", "--without-mingle",
            "-Q", os.environ.get("AUTOGRADE_QUEUE", "grading")]
    if args.beat:
        argv += ["--beat", "--schedule", args.schedule]
    return _exec(argv)


def _beat(args: argparse.Namespace) -> int:
    return _exec([sys.executable, "-m", "celery", "-A", "service.worker", "beat",
                  "--loglevel", args.loglevel, "--schedule", args.schedule])


def _embedded(args: argparse.Namespace) -> int:
    return run(data_dir=args.data_dir, host=args.host, port=args.port,
               concurrency=args.concurrency)


def embedded_environment(data_dir: Path, environ: dict[str, str]) -> dict[str, str]:
    """The environment of the child processes: embedded defaults unless already set."""
    from sandbox.selection import choose_backend
    from service.config import ENV_PREFIX, data_dir_settings

    env = dict(environ)
    for name, value in data_dir_settings(data_dir).items():
        env.setdefault(f"{ENV_PREFIX}_{name}", value)
    if env.get("AUTOGRADE_SANDBOX_BACKEND", "auto") == "auto":
        env["AUTOGRADE_SANDBOX_BACKEND"] = choose_backend(warn=sys.stderr)
    return env


def prepare(data_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """Migrate, sync assignments into the demo course, create demo users; their passwords."""
    from service.app import create_app
    from service.cli.database import app_session, create_user, enrol
    from service.core import db
    from service.core.errors import NotFound
    from service.courses.enrolment import course_by_code, create_course, sync_assignments

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
    from sqlalchemy import select

    from service.models import CourseAssignment
    from service.submissions.instructor import update_settings

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
    import requests

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
        "Demo accounts (course 'demo', every shipped assignment):",
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
