"""The class teaches the catalogue, in a real Chromium against the real service: three students
submit mistakes no known mistake explains (really graded); the instructor sees them as two
groups, opens the larger, reads its representative and the closest known mistakes; the author
names the mistake in the course's package and syncs the new version; the instructor regrades
the group, and its students read the new code and words, their earlier round kept.

A stack of its own (web server and worker) with a course package in a scratch
``AUTOGRADE_ASSIGNMENTS_DIR``, since naming a mistake changes the package the worker grades."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.browser import Live, audit, login, screenshot
from devkit.courses import PASSWORD
from devkit.named_mistake import CODE, write_class_package
from devkit.paths import UNEXPLAINED_CORPUS
from devkit.stack import Stack, free_port
from service.app import create_app
from service.cli.database import app_session
from service.core import db
from service.courses.accounts import create_user
from service.courses.enrolment import course_by_code, create_course, enrol, sync_assignments
from service.models import CourseRole, Role

pytestmark = pytest.mark.browser

COURSE = "ml102"
GRADING_TIMEOUT_MS = 180_000
STUDENTS = {"una": "plus_one_matmul.py", "vic": "plus_one_einsum.py", "wes": "cosine_norms.py"}


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The course's assignments folder, with its copy of ``attention`` as shipped."""
    root = tmp_path_factory.mktemp("packages")
    write_class_package(root, named=False)
    before = os.environ.get("AUTOGRADE_ASSIGNMENTS_DIR")
    os.environ["AUTOGRADE_ASSIGNMENTS_DIR"] = str(root)
    yield root
    if before is None:
        del os.environ["AUTOGRADE_ASSIGNMENTS_DIR"]
    else:
        os.environ["AUTOGRADE_ASSIGNMENTS_DIR"] = before


def _sync(live: Live) -> None:
    app = create_app({"DATABASE_URL": live.database_url, "BROKER_URL": "memory://",
                      "SECRET_KEY": "seed"})
    with app_session(app) as session:
        sync_assignments(session, course_by_code(session, COURSE))
    app.extensions["autograde.db"].engine.dispose()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, packages: Path) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("class-stack")
    database_url = f"sqlite:///{folder / 'autograde.db'}"
    db.upgrade(database_url)
    app = create_app({"DATABASE_URL": database_url, "BROKER_URL": "memory://",
                      "SECRET_KEY": "seed"})
    with app_session(app) as session:
        course = create_course(session, code=COURSE, title="Deep learning, the class")
        for username, role, course_role in [("prof", Role.INSTRUCTOR, CourseRole.INSTRUCTOR),
                                            *((name, Role.STUDENT, CourseRole.STUDENT)
                                              for name in STUDENTS)]:
            enrol(session, course=course, role=course_role, user=create_user(
                session, username=username, password=PASSWORD, role=role,
                display_name=username.title()))
    app.extensions["autograde.db"].engine.dispose()
    port = free_port()
    env = dict(os.environ)
    env.update({
        "AUTOGRADE_DATABASE_URL": database_url,
        "AUTOGRADE_BROKER_URL": f"sqla+sqlite:///{folder / 'broker.db'}",
        "AUTOGRADE_SANDBOX_BACKEND": "local",
        "AUTOGRADE_SECRET_KEY": "browser-tests-" + os.urandom(8).hex(),
        "AUTOGRADE_ASSIGNMENTS_DIR": str(packages),
        "PYTHONUNBUFFERED": "1",
    })
    running = Stack(env=env, url=f"http://127.0.0.1:{port}", logs=folder)
    live = Live(running.url, running, database_url)
    _sync(live)
    try:
        running.start_server()
        running.start_worker()
        yield live
    finally:
        running.stop_all()


def _assignment(slug: str) -> str:
    return f"/courses/{COURSE}/assignments/{slug}"


@pytest.fixture(scope="module")
def submitted(stack: Live, chromium: Any) -> dict[str, int]:
    """Each student uploads their file on the assignment's page and waits for its result."""
    ids = {}
    for username, name in STUDENTS.items():
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        login(page, stack, username)
        page.goto(stack.path(_assignment("attention-class")))
        page.set_input_files("#files", str(UNEXPLAINED_CORPUS / "attention" / name))
        page.click("#submit-button")
        page.wait_for_url(re.compile(r".*/submissions/\d+$"))
        ids[username] = int(page.url.rsplit("/", 1)[1])
        page.wait_for_selector("#live[data-finished=yes]", timeout=GRADING_TIMEOUT_MS)
        context.close()
    return ids


def _wait_regraded(page: Any, live: Live, dashboard: str) -> None:
    """Until the latest regrade's report says every submission of it is done."""
    deadline = time.monotonic() + GRADING_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        report = page.request.get(live.path(dashboard + "/regrade.json")).json()
        if report["regrade"]["finished"]:
            assert report["regrade"]["done"] == 2, report
            return
        page.wait_for_timeout(500)
    raise AssertionError("the group's regrade did not finish")


def _groups(page: Any) -> dict[str, tuple[int, set[str]]]:
    rows = page.locator("#groups-table tbody tr")
    found = {}
    for index in range(rows.count()):
        row = rows.nth(index)
        members = {m.strip() for m in row.locator(".members").inner_text().split(",")}
        found[row.get_attribute("data-group")] = (int(row.locator(".size").inner_text()),
                                                  members)
    return found


def test_an_instructor_names_a_group_once_and_its_students_get_the_new_words(
        stack: Live, browser: Any, submitted: dict[str, int], packages: Path) -> None:
    dashboard = "/dashboard" + _assignment("attention-class")
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    login(page, stack, "prof")
    page.goto(stack.path(dashboard))
    page.click("nav.tabs a:has-text('Unexplained')")
    page.wait_for_url(stack.path(dashboard + "/unexplained"))
    # The two plus-one submissions, in two styles, are one group, the larger; the cosine one
    # is its own.
    groups = _groups(page)
    assert sorted((size, sorted(members)) for size, members in groups.values()) == [
        (1, ["wes"]), (2, ["una", "vic"])]
    assert page.locator("#groups-table tbody tr").first.get_attribute("data-group") == next(
        key for key, (size, _) in groups.items() if size == 2)
    assert audit(page) == []
    screenshot(page, "instructor-unexplained")

    page.click("#groups-table tbody tr >> nth=0 >> a")
    page.wait_for_url(re.compile(r".*/unexplained/[0-9a-f]+$"))
    assert page.locator("#nearest-table tbody tr").count() == 3
    assert page.locator("#behaviour-table tbody tr").count() >= 1
    assert page.locator("#group-members li").count() == 2
    representative = page.inner_text("#result")
    assert "wrong-output" in representative
    assert "exp(-top)" in representative or "padded" in representative  # its own code
    assert audit(page) == []
    screenshot(page, "instructor-unexplained-group")

    # The author names it in the course's package (a variant, its code and words) and syncs
    # the new version; `assignments check --explains` proves such a package offline
    # (docs/results/unexplained-groups.md).
    write_class_package(packages, named=True)
    _sync(stack)
    assert page.is_checked("#scores-keep"), "new feedback only unless the instructor says"
    page.click("#group-regrade")
    page.wait_for_url(re.compile(r".*/regrade$"))
    assert "Regrading the group's 2 submission(s)" in page.inner_text("main")
    _wait_regraded(page, stack, dashboard)
    page.reload()
    assert page.locator("#kept-table tbody tr").count() == 2, "the report names the kept scores"

    page.goto(stack.path(dashboard + "/unexplained"))
    assert [members for _, members in _groups(page).values()] == [{"wes"}]
    page.goto(stack.path(f"/dashboard/submissions/{submitted['una']}"))
    rounds = page.locator("table.compact").first.inner_text()
    assert re.search(r"1\s.*wrong-output", rounds) and re.search(rf"2\s.*{CODE}", rounds), rounds
    assert "score kept by the instructor" in page.inner_text("#audit-trail")
    assert errors == []

    student = browser.new_page()
    login(student, stack, "vic")
    student.goto(stack.path(f"/submissions/{submitted['vic']}"))
    named = student.locator(f"#diagnosis-{CODE}")
    named.wait_for()
    assert "sum to less than 1" in named.locator(".message").inner_text()
    assert "sum to exactly 1" in named.locator(".hint").inner_text()
    assert student.locator("#diagnosis-wrong-output").count() == 0
