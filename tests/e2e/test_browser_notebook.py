"""A notebook submitted through the page in a real Chromium: graded, diagnosed at its cell."""

from __future__ import annotations

import re
from typing import Any

import pytest

from devkit.browser import COURSE, Live, audit, login, screenshot
from devkit.courses import PASSWORD
from devkit.notebooks import LEAK_CLASS_CELL, causal_leak_notebook
from service.app import create_app
from service.cli.database import app_session
from service.courses.accounts import create_user
from service.courses.enrolment import course_by_code, enrol
from service.models import CourseRole, Role

pytestmark = pytest.mark.browser

GRADING_TIMEOUT_MS = 180_000


def test_a_notebook_with_a_causal_leak_is_diagnosed_at_the_right_cell(
        live: Live, browser: Any) -> None:
    app = create_app({"DATABASE_URL": live.database_url, "BROKER_URL": "memory://",
                      "SECRET_KEY": "seed"})
    with app_session(app) as session:
        user = create_user(session, username="nora", password=PASSWORD, role=Role.STUDENT,
                           display_name="Nora Notebook")
        enrol(session, course=course_by_code(session, COURSE), user=user,
              role=CourseRole.STUDENT)
    app.extensions["autograde.db"].engine.dispose()
    page = browser.new_page()
    login(page, live, "nora")
    page.goto(live.path(f"/courses/{COURSE}/assignments/multi-head-attention"))
    assert page.locator("a[href$='starter/mha.ipynb']").count() == 1  # the starter notebook
    page.set_input_files("#files", files=[{"name": "lab.ipynb", "mimeType":
                                           "application/x-ipynb+json",
                                           "buffer": causal_leak_notebook()}])
    page.click("#submit-button")
    page.wait_for_url(re.compile(r".*/submissions/\d+$"))
    page.wait_for_selector("#live[data-finished=yes]", timeout=GRADING_TIMEOUT_MS)

    diagnosis = page.locator("#diagnosis-causal-leak")
    diagnosis.wait_for()
    message = diagnosis.locator(".message").inner_text()
    assert "causal=True" in message
    assert f"`ManualMultiHeadAttention` is defined in cell {LEAK_CLASS_CELL}, line 1" in message
    go = diagnosis.get_by_role("link", name=f"Show lab.ipynb, cell {LEAK_CLASS_CELL}, line 1")
    go.click()
    target = page.locator(":target")
    assert "class ManualMultiHeadAttention" in target.inner_text()
    assert "causal-leak" in target.locator(".note").inner_text()
    # The page shows the notebook's cells as written, and what was left out of grading.
    captions = page.locator("figure.code-file figcaption code.file-name").all_inner_texts()
    assert captions == ["lab.ipynb, cell 2", f"lab.ipynb, cell {LEAK_CLASS_CELL}",
                        "lab.ipynb, cell 5"]
    notes = page.locator("#notebook-notes li").all_inner_texts()
    assert "Left out: cell 5, lines 3-4: a top-level loop or `with` block" in notes
    screenshot(page, "student-notebook-result")
    assert audit(page) == []
