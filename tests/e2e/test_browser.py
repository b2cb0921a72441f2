"""The pages in a real Chromium against the real service: submit, watch, read, teach, attack."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from devkit.browser import COURSE, XSS, Live, login, screenshot

pytestmark = pytest.mark.browser

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "multi-head-attention"
ASSIGNMENT = f"/courses/{COURSE}/assignments/multi-head-attention"
GRADING_TIMEOUT_MS = 180_000


def _wait_graded(page: Any) -> None:
    page.wait_for_selector("#live[data-finished=yes]", timeout=GRADING_TIMEOUT_MS)


@pytest.fixture(scope="module")
def causal_leak(live: Live, chromium: Any) -> dict[str, Any]:
    """A student uploads a file with a causal leak and stays on the page while it is graded."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    login(page, live, "alice")
    page.goto(live.path(ASSIGNMENT))
    screenshot(page, "student-assignment")
    page.set_input_files("#files", str(CORPUS / "causal_upper_triangle.py"))
    page.click("#submit-button")
    page.wait_for_url(re.compile(r".*/submissions/\d+$"))
    submission_id = int(page.url.rsplit("/", 1)[1])
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    seen = [page.text_content("#status-text")]
    page.wait_for_selector("#status-text .status-running, #status-text .status-graded",
                           timeout=GRADING_TIMEOUT_MS)
    seen.append(page.text_content("#status-text"))
    _wait_graded(page)
    diagnosis = page.locator("#diagnosis-causal-leak")
    diagnosis.wait_for()
    result = {"id": submission_id, "statuses": [s.strip() for s in seen if s],
              "navigations": navigations, "message": diagnosis.locator(".message").inner_text(),
              "hint": diagnosis.locator(".hint").inner_text(),
              "score": page.inner_text("#score"),
              "failed_rows": page.locator(".checks-table tr.check-failed").count()}
    screenshot(page, "student-result")
    context.close()
    return result


def test_student_watches_a_causal_leak_being_graded(causal_leak: dict[str, Any]) -> None:
    assert causal_leak["statuses"][0] in {"queued", "running"}
    assert causal_leak["navigations"] == [], "the result arrived without a page load"
    assert "causal=True" in causal_leak["message"]
    assert "later" in causal_leak["message"]
    assert causal_leak["hint"].startswith("Hint:")
    assert re.fullmatch(r"[\d.]+ / [\d.]+", causal_leak["score"].strip())
    assert causal_leak["failed_rows"] >= 1


def test_instructor_sees_the_submission_in_the_code_chart(
        live: Live, browser: Any, causal_leak: dict[str, Any]) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    login(page, live, "prof")
    page.click("text=Dashboard")
    page.click("text=Multi-head attention module")
    page.wait_for_url(live.path("/dashboard" + ASSIGNMENT))
    page.wait_for_load_state("load")
    chart = page.evaluate("""() => {
        const chart = document.getElementById('codes-chart').chart;
        return {labels: chart.data.labels, counts: chart.data.datasets[0].data};
    }""")
    counts = dict(zip(chart["labels"], chart["counts"], strict=True))
    assert counts.get("causal-leak", 0) >= 1
    row = page.locator("#codes-table tr[data-code='causal-leak'] .count")
    assert int(row.inner_text()) >= 1
    assert page.evaluate("document.getElementById('histogram-chart').chart.data"
                         ".datasets[0].data.reduce((a, b) => a + b, 0)") >= 1
    assert errors == []

    page.click("#codes-table a:has-text('causal-leak')")
    page.wait_for_url(re.compile(r".*/submissions\?code=causal-leak$"))
    assert page.locator("#submissions-table tbody tr").count() >= 1
    page.goto(live.path(f"/dashboard/submissions/{causal_leak['id']}"))
    assert "causal-leak" in page.inner_text("#result")
    assert page.locator("#document-json").count() == 1
    screenshot(page, "submission-detail")


def _xss_source() -> str:
    return (
        f"# {XSS}\n"
        f"print({XSS!r})\n"
        "import sys\n"
        f"print({XSS!r}, file=sys.stderr)\n"
        "class ManualMultiHeadAttention:\n"
        "    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):\n"
        f"        raise RuntimeError({XSS!r})\n"
    )


def test_xss_submission_executes_nothing_for_the_instructor(live: Live, browser: Any,
                                                            chromium: Any) -> None:
    student = browser.new_page()
    login(student, live, "mallory")
    student.goto(live.path(ASSIGNMENT))
    student.set_input_files("#files", files=[{
        "name": "<img src=x onerror=window.__xss=4>.py", "mimeType": "text/x-python",
        "buffer": _xss_source().encode()}])
    student.click("#submit-button")
    student.wait_for_url(re.compile(r".*/submissions/\d+$"))
    submission_id = int(student.url.rsplit("/", 1)[1])
    _wait_graded(student)
    assert student.evaluate("window.__xss") is None

    # The Content-Security-Policy would stop inline scripts anyway: bypass it, so this test
    # proves that escaping alone keeps the payloads inert.
    instructor = chromium.new_context(bypass_csp=True)
    page = instructor.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    login(page, live, "prof")
    for path in (f"/dashboard/submissions/{submission_id}", f"/submissions/{submission_id}",
                 f"{'/dashboard' + ASSIGNMENT}/submissions", f"/dashboard/courses/{COURSE}/people",
                 "/dashboard" + ASSIGNMENT):
        page.goto(live.path(path))
        page.wait_for_load_state("load")
        assert page.evaluate("window.__xss") is None, path
        assert page.locator("img[src=x]").count() == 0, path
    page.goto(live.path(f"/dashboard/submissions/{submission_id}"))
    assert page.inner_text("#student-name") == XSS
    assert XSS in page.inner_text("#sandbox-stdout")
    assert "<img src=x onerror=window.__xss=4>.py" in page.inner_text(".file-name")
    assert XSS in page.inner_text("ol.code")
    assert dialogs == []
    assert page.evaluate("window.__xss") is None
    response = page.goto(live.path(f"/dashboard/submissions/{submission_id}"))
    assert "script-src 'self'" in response.headers["content-security-policy"]
    instructor.close()


def test_submit_form_works_with_the_keyboard_alone(live: Live, browser: Any) -> None:
    page = browser.new_page()
    page.goto(live.path("/login"))
    # The user name field takes the focus on load. Chromium applies `autofocus` at its next
    # rendering step, which can come after the load event on a busy machine: wait for it.
    page.wait_for_function("document.activeElement && document.activeElement.id === 'username'")
    page.keyboard.type("kbd")
    page.keyboard.press("Tab")
    page.keyboard.type("correct horse battery")
    page.keyboard.press("Enter")
    page.wait_for_url(live.path("/assignments"))
    page.goto(live.path(ASSIGNMENT))

    order: list[str] = []
    for _ in range(60):
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement.id || document.activeElement.tagName")
        order.append(focused)
        if focused == "code":
            break
    assert order[-1] == "code", order
    assert "files" in order and order.index("files") < order.index("code")
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"

    page.keyboard.insert_text((CORPUS / "runtime_missing_attr.py").read_text())
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "filename"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "submit-button"
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/submissions/\d+$"))
    _wait_graded(page)
    page.locator("#diagnosis-runtime-error").wait_for()
    pointed = page.locator("ol.code li.pointed")
    assert pointed.count() >= 1
    assert "runtime-error" in pointed.first.inner_text()
    screenshot(page, "student-result-runtime-error")


def test_dashboard_after_the_class_submitted(live: Live, browser: Any) -> None:
    """Last: the dashboard with every submission the tests above made (the README picture)."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    login(page, live, "prof")
    page.goto(live.path("/dashboard" + ASSIGNMENT))
    page.wait_for_load_state("load")
    labels = page.evaluate("document.getElementById('codes-chart').chart.data.labels")
    assert "causal-leak" in labels
    assert page.locator("#timeline-chart").count() == 1
    assert errors == []
    screenshot(page, "instructor-dashboard")
