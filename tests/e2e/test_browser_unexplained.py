"""The Unexplained page in a real Chromium against the real service: three students submit
mistakes no known mistake explains, really graded; the instructor sees them as two groups,
opens the larger, reads its representative and the closest known mistakes, and regrades it.

Runs on the ``attention`` assignment with its own students (after the gradebook's test)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from devkit.browser import COURSE, Live, login, screenshot
from devkit.courses import PASSWORD
from devkit.paths import UNEXPLAINED_CORPUS
from service.app import create_app
from service.cli.database import app_session
from service.courses.accounts import create_user
from service.courses.enrolment import course_by_code, enrol

pytestmark = pytest.mark.browser

ASSIGNMENT = f"/courses/{COURSE}/assignments/attention"
GRADING_TIMEOUT_MS = 180_000
STUDENTS = {"una": "plus_one_matmul.py", "vic": "plus_one_einsum.py", "wes": "cosine_norms.py"}


@pytest.fixture(scope="module")
def submitted(live: Live, chromium: Any) -> dict[str, int]:
    """Each student uploads their file on the assignment's page and waits for its result."""
    app = create_app({"DATABASE_URL": live.database_url, "BROKER_URL": "memory://",
                      "SECRET_KEY": "seed"})
    with app_session(app) as session:
        course = course_by_code(session, COURSE)
        for username in STUDENTS:
            enrol(session, course=course, user=create_user(
                session, username=username, password=PASSWORD, display_name=username.title()))
    app.extensions["autograde.db"].engine.dispose()
    ids = {}
    for username, name in STUDENTS.items():
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        login(page, live, username)
        page.goto(live.path(ASSIGNMENT))
        page.set_input_files("#files", str(UNEXPLAINED_CORPUS / "attention" / name))
        page.click("#submit-button")
        page.wait_for_url(re.compile(r".*/submissions/\d+$"))
        ids[username] = int(page.url.rsplit("/", 1)[1])
        page.wait_for_selector("#live[data-finished=yes]", timeout=GRADING_TIMEOUT_MS)
        context.close()
    return ids


def _wait_regraded(page: Any, live: Live) -> None:
    """Until the latest regrade's report says every submission of it is done."""
    deadline = time.monotonic() + GRADING_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        report = page.request.get(live.path("/dashboard" + ASSIGNMENT + "/regrade.json")).json()
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


def test_the_instructor_sees_the_unexplained_as_groups_and_regrades_one(
        live: Live, browser: Any, submitted: dict[str, int]) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    login(page, live, "prof")
    page.goto(live.path("/dashboard" + ASSIGNMENT))
    page.click("nav.tabs a:has-text('Unexplained')")
    page.wait_for_url(live.path("/dashboard" + ASSIGNMENT + "/unexplained"))
    groups = _groups(page)
    ours = {key: (size, members & set(STUDENTS)) for key, (size, members) in groups.items()
            if members & set(STUDENTS)}
    # The two plus-one submissions, in two styles, are one group; the cosine one is its own.
    assert sorted(members for _, members in ours.values()) == [{"una", "vic"}, {"wes"}]
    first = page.locator("#groups-table tbody tr").first
    assert first.locator(".members").inner_text().count(",") >= 1  # largest first
    screenshot(page, "instructor-unexplained")

    key = next(k for k, (_, members) in ours.items() if members == {"una", "vic"})
    page.click(f"#groups-table tr[data-group='{key}'] a")
    assert page.locator("#nearest-table tbody tr").count() == 3
    assert page.locator("#behaviour-table tbody tr").count() >= 1
    assert page.locator("#group-members li").count() == 2
    assert "torch.exp(-top)" in page.inner_text("#result") or \
        "padded" in page.inner_text("#result")  # the representative's own code
    assert "wrong-output" in page.inner_text("#result")
    screenshot(page, "instructor-unexplained-group")

    page.click("#group-regrade")
    page.wait_for_url(re.compile(r".*/regrade$"))
    assert "Regrading the group's 2 submission(s)" in page.inner_text("main")
    _wait_regraded(page, live)
    # Regraded with the same catalogue: still unexplained, still one group, with its history.
    page.goto(live.path("/dashboard" + ASSIGNMENT + "/unexplained"))
    assert {"una", "vic"} in [members & set(STUDENTS) for _, members in _groups(page).values()]
    page.goto(live.path(f"/dashboard/submissions/{submitted['una']}"))
    rounds = page.locator("table.compact").first.inner_text()
    assert page.locator("table.compact tbody tr:has-text('wrong-output')").count() == 2, rounds
    assert errors == []
