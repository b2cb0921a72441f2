"""Attention maps, training curves and dashboard charts in a real Chromium, audited with axe-core.

Three students' mistakes are graded through the pages and their result pages must draw the
maps (a wrong softmax axis, a causal leak, ignored padding) and the loss curves of the
``learns`` check, the student's against the reference's; a seeded 300-student course's
dashboard must answer with its charts and tables. Every page audited has no axe violation
(WCAG 2.1 A and AA rules). axe-core is a test-only npm package (``package.json``, installed by
``scripts/ensure-browser.sh``), evaluated in the page by the test, never served by the app.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from devkit.browser import COURSE, SCREENSHOTS, Live, audit, login, screenshot
from devkit.courses import PASSWORD, seed_course
from service.app import create_app
from service.cli.database import app_session
from service.courses.accounts import create_user
from service.courses.enrolment import course_by_code, enrol
from service.models import CourseRole, Role

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus"
GRADING_TIMEOUT_MS = 180_000
CASES = {
    # code: (assignment, corpus file, what the caption must say, screenshot)
    "softmax-wrong-axis": ("attention", "attention/softmax_dim_minus2.py", "sum to 1",
                           "student-map-wrong-axis"),
    "causal-leak": ("multi-head-attention", "multi-head-attention/causal_ignored.py",
                    "diagonal", "student-map-causal-leak"),
    "padding-ignored": ("multi-head-attention", "multi-head-attention/padding_never_used.py",
                        "padding", "student-map-padding-ignored"),
}


@pytest.fixture(scope="module")
def graded(live: Live, chromium: Any) -> dict[str, int]:
    """One student submits each mistake through the pages; submission ids by code."""
    app = create_app({"DATABASE_URL": live.database_url, "BROKER_URL": "memory://",
                      "SECRET_KEY": "seed"})
    with app_session(app) as session:
        user = create_user(session, username="pia", password=PASSWORD, role=Role.STUDENT,
                           display_name="Pia Picture")
        enrol(session, course=course_by_code(session, COURSE), user=user,
              role=CourseRole.STUDENT)
    app.extensions["autograde.db"].engine.dispose()
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    login(page, live, "pia")
    ids = {}
    for code, (slug, path, _, _) in CASES.items():
        page.goto(live.path(f"/courses/{COURSE}/assignments/{slug}"))
        page.set_input_files("#files", str(CORPUS / path))
        page.click("#submit-button")
        page.wait_for_url(re.compile(r".*/submissions/\d+$"))
        ids[code] = int(page.url.rsplit("/", 1)[1])
    for submission_id in ids.values():
        page.goto(live.path(f"/submissions/{submission_id}"))
        page.wait_for_selector("#live[data-finished=yes]", timeout=GRADING_TIMEOUT_MS)
    context.close()
    return ids


@pytest.mark.parametrize("code", list(CASES))
def test_the_result_page_draws_the_map_of_the_diagnosis(
        live: Live, browser: Any, graded: dict[str, int], code: str) -> None:
    _, _, caption, shot = CASES[code]
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    login(page, live, "pia")
    page.goto(live.path(f"/submissions/{graded[code]}"))
    figure = page.locator(f"#map-{code}")
    figure.wait_for()
    assert figure.locator("svg.heatmap").count() >= 2   # the student's and the expected
    assert figure.locator("svg.heatmap title").count() >= 2
    text = figure.locator("figcaption").inner_text()
    assert caption in text and "one query per row" in text
    if code != "softmax-wrong-axis":
        assert "reproduce your outputs" in figure.inner_text()
        assert figure.locator("svg.heatmap circle").count() >= 1   # blocked keys marked
    outlined = figure.locator("svg.heatmap rect[fill=none]").count()
    assert outlined >= 1                                        # differing cells outlined
    figure.locator("details.map-numbers summary").first.click()
    assert figure.locator("details.map-numbers table td").count() > 4
    assert errors == []
    assert audit(page) == []
    screenshot(page, shot)
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


# A wrong-axis model learns but computes something else; whether its held-out answers also
# fall short (then it "fits its training sequences") depends on the training seed the random
# grading seed draws and on the CPU's kernels (seen on an AVX-512 AMD machine): both fail.
@pytest.mark.parametrize(("code", "captions"), [
    ("causal-leak", ("fits its training sequences, not the task",)),
    ("softmax-wrong-axis", ("Your model learned", "fits its training sequences, not the task")),
])
def test_the_result_page_draws_the_loss_curve_against_the_reference(
        live: Live, browser: Any, graded: dict[str, int], code: str,
        captions: tuple[str, ...]) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    login(page, live, "pia")
    page.goto(live.path(f"/submissions/{graded[code]}"))
    figure = page.locator("#curve-training")
    figure.wait_for()
    chart = figure.locator("svg.curves[role=img]")
    assert chart.count() == 1
    assert chart.locator("polyline").count() == 2              # yours and the reference's
    assert chart.locator("title").count() == 1 and chart.locator("desc").count() == 1
    legend = chart.locator("text").all_text_contents()   # SVG text has no innerText
    assert "your model" in legend and "the reference, same seed" in legend
    assert "training step" in legend and "loss (log scale)" in legend
    text = figure.locator("figcaption").inner_text()
    assert any(caption in text for caption in captions), text
    assert "held-out answers right" in text
    assert figure.get_attribute("data-passed") == "no"
    figure.locator("details.map-numbers summary").click()
    assert figure.locator("details.map-numbers table tbody tr").count() >= 2
    assert errors == []
    assert audit(page) == []
    if code == "causal-leak":
        figure.screenshot(path=str(SCREENSHOTS / "student-training-curve.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_dashboard_of_a_300_student_course_answers_at_a_glance(
        live: Live, browser: Any) -> None:
    app = create_app({"DATABASE_URL": live.database_url, "BROKER_URL": "memory://",
                      "SECRET_KEY": "seed"})
    with app_session(app) as session:
        seeded = seed_course(session, code="pic300")
    app.extensions["autograde.db"].engine.dispose()
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(live.path("/login"))
    page.fill("#username", "pic300-prof")
    page.fill("#password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_load_state("load")
    page.goto(live.path(f"/dashboard/courses/{seeded.course_code}/assignments/{seeded.slug}"))
    page.wait_for_load_state("load")
    codes = page.evaluate("""() => {
        const c = document.getElementById('codes-chart').chart;
        return {labels: c.data.labels, shares: c.data.datasets[0].data,
                max: c.scales.x.max};
    }""")
    assert codes["max"] == 100 and all(0 < s <= 100 for s in codes["shares"])
    assert codes["shares"] == sorted(codes["shares"], reverse=True)
    assert max(codes["shares"]) < 100        # bars are shares of the class, not full width
    summary = page.inner_text("#score-summary")
    assert "mean" in summary and "median" in summary and "at 0" in summary
    timeline = page.evaluate("document.getElementById('timeline-chart').chart.data.labels")
    assert 5 <= len(timeline) <= 36
    legend = page.evaluate("document.getElementById('checks-chart').chart"
                           ".legend.legendItems.map((i) => i.text)")
    assert len(legend) == 2
    for table in ("#codes-table", "#histogram-table", "#checks-table", "#timeline-table"):
        assert page.locator(f"{table} tbody tr").count() >= 1
    assert page.locator("#stuck-h").count() == 1
    assert errors == []
    assert audit(page) == []
    screenshot(page, "instructor-dashboard-300")


def _every_page(graded: dict[str, int]) -> dict[str, list[str]]:
    """The pages a student and an instructor reach from the navigation, by who opens them."""
    submission = graded["causal-leak"]
    dashboard = f"/dashboard/courses/{COURSE}"
    assignment = f"{dashboard}/assignments/multi-head-attention"
    return {
        "pia": ["/", "/assignments", f"/courses/{COURSE}/assignments/attention",
                f"/submissions/{submission}", "/account/tokens", "/account/sessions"],
        "prof": ["/dashboard/", assignment, f"{assignment}/submissions", f"{assignment}/gradebook",
                 f"{assignment}/settings", f"{assignment}/extensions", f"{assignment}/regrade",
                 f"{assignment}/similarity",
                 f"{dashboard}/people", f"{dashboard}/webhooks",
                 f"/dashboard/submissions/{submission}", "/dashboard/lti/platforms",
                 f"/dashboard/lti/courses/{COURSE}/roster",
                 f"/dashboard/lti/courses/{COURSE}/assignments/multi-head-attention/passbacks",
                 "/account/tokens"],
    }


def test_the_similarity_report_is_computed_by_the_worker_while_the_page_follows_it(
        live: Live, browser: Any, graded: dict[str, int]) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    login(page, live, "prof")
    url = live.path(f"/dashboard/courses/{COURSE}/assignments/multi-head-attention/similarity")
    page.goto(url)
    if page.locator("#similarity-compute").count():  # not computed yet for these submissions
        page.click("#similarity-compute")
        page.wait_for_url(url)
    # The page reloads itself once the worker has finished: the report, with its figures.
    page.wait_for_selector("#similarity-table, #similarity-none", timeout=GRADING_TIMEOUT_MS)
    assert page.locator("#similarity-failed").count() == 0
    assert "pairs compared" in page.inner_text("main")
    assert page.locator("#similarity-compute").count() == 0  # current: nothing to redo
    assert errors == []
    assert audit(page) == []
    page.close()


@pytest.mark.parametrize("who", ["pia", "prof"])
def test_every_page_has_the_frame_fits_a_phone_and_passes_axe(
        live: Live, chromium: Any, graded: dict[str, int], who: str) -> None:
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    login(page, live, who)
    found: dict[str, Any] = {}
    for path in _every_page(graded)[who]:
        response = page.goto(live.path(path))
        page.wait_for_load_state("load")
        problems = []
        if response is None or response.status != 200:
            problems.append(f"status {response.status if response else None}")
        if page.locator("header nav[aria-label=Main]").count() != 1:
            problems.append("no navigation bar")
        if page.locator("header form.logout button").count() != 1:
            problems.append("no log-out")
        if (width := page.evaluate("document.documentElement.scrollWidth")) > 390:
            problems.append(f"{width} px wide at 390")
        if violations := audit(page):
            problems.append(f"axe: {violations}")
        if problems:
            found[path] = problems
    context.close()
    assert found == {}
