"""Browser fixtures: the real service (web server and grading worker) and Debian's Chromium.

The ``live`` stack runs once per session on SQLite in a temp dir with the embedded SQL queue and
the local sandbox, so submissions made through the pages are really graded. ``browser`` drives
``/usr/bin/chromium`` through Playwright. Without Chromium (or Playwright) browser tests are
skipped with one loud line in the summary, except in CI (``CI=true``), where that is a failure:
``make test`` installs Chromium first (``scripts/ensure-browser.sh``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from devkit.browser import COURSE, XSS, Live, browser_unavailable
from devkit.courses import PASSWORD
from devkit.skips import skip_reasons
from devkit.stack import Stack, free_port
from service.app import create_app
from service.cli.database import app_session
from service.core import db
from service.courses.accounts import create_user
from service.courses.enrolment import create_course, enrol, sync_assignments
from service.models import CourseAssignment, CourseRole, Role, utcnow

CHROMIUM = os.environ.get("AUTOGRADE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for reason in skip_reasons(terminalreporter, "browser"):
        terminalreporter.write_sep("!", f"BROWSER TESTS SKIPPED: {reason} "
                                        "(run `bash scripts/ensure-browser.sh`)",
                                   red=True, bold=True)


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("live")
    database_url = f"sqlite:///{folder / 'autograde.db'}"
    broker_url = f"sqla+sqlite:///{folder / 'broker.db'}"
    db.upgrade(database_url)
    _seed(database_url, broker_url)
    port = free_port()
    env = dict(os.environ)
    env.update({
        "AUTOGRADE_DATABASE_URL": database_url,
        "AUTOGRADE_BROKER_URL": broker_url,
        "AUTOGRADE_SANDBOX_BACKEND": "local",
        "AUTOGRADE_SECRET_KEY": "browser-tests-" + os.urandom(8).hex(),
        "PYTHONUNBUFFERED": "1",
    })
    stack = Stack(env=env, url=f"http://127.0.0.1:{port}", logs=folder)
    try:
        stack.start_server()
        stack.start_worker()
        yield Live(stack.url, stack, database_url)
    finally:
        stack.stop_all()


def course_assignments(session: Any, course: Any) -> list[CourseAssignment]:
    return list(session.scalars(select(CourseAssignment).where(
        CourseAssignment.course_id == course.id)))


def _seed(database_url: str, broker_url: str) -> None:
    app = create_app({"DATABASE_URL": database_url, "BROKER_URL": broker_url,
                      "SECRET_KEY": "seed"})
    with app_session(app) as session:
        course = create_course(session, code=COURSE, title="Deep learning")
        sync_assignments(session, course)
        for assignment in course_assignments(session, course):
            # Due in two hours: the pages show a deadline, and nothing is late yet.
            assignment.due_at = utcnow() + timedelta(hours=2)
        people = [("prof", "Prof. Ada Lovelace", Role.INSTRUCTOR, CourseRole.INSTRUCTOR),
                  ("alice", "Alice Martin", Role.STUDENT, CourseRole.STUDENT),
                  ("kbd", "Keyboard User", Role.STUDENT, CourseRole.STUDENT),
                  ("mallory", XSS, Role.STUDENT, CourseRole.STUDENT)]
        for username, display, role, course_role in people:
            user = create_user(session, username=username, password=PASSWORD, role=role,
                               display_name=display)
            enrol(session, course=course, user=user, role=course_role)
    app.extensions["autograde.db"].engine.dispose()


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).is_file():
        browser_unavailable(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        browser_unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                             headless=True)
        yield browser
        browser.close()


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """A fresh browser context (own cookies) per test; console errors are collected."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    yield context
    context.close()
