"""The browser tests' kit: the seeded course and accounts of the live service, logging in and
screenshots in Chromium, axe-core audits, and skipping (failing in CI) where Chromium is missing."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devkit.courses import PASSWORD
from devkit.paths import REPO
from devkit.stack import Stack

# The documentation shows the screenshots in docs/screenshots: a test run refreshes them there only
# when asked (AUTOGRADE_UPDATE_SCREENSHOTS=1, as AUTOGRADE_UPDATE_GOLDEN for the goldens), and
# otherwise leaves the work tree as it was.
SCREENSHOTS = (REPO / "docs" / "screenshots" if os.environ.get("AUTOGRADE_UPDATE_SCREENSHOTS")
               else Path(tempfile.gettempdir()) / "autograde-screenshots")
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
COURSE = "ml101"
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'

def browser_unavailable(reason: str) -> None:
    """Skip the test, or fail it in CI, where every browser test must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser test cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class Live:
    """The running service and the accounts made for the browser tests."""

    url: str
    stack: Stack
    database_url: str

    def path(self, path: str) -> str:
        return self.url + path


def login(page: Any, live: Live, username: str) -> None:
    page.goto(live.path("/login"))
    page.fill("#username", username)
    page.fill("#password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(live.path("/assignments"))


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def audit(page: Any) -> list[dict[str, Any]]:
    """axe-core's violations of the page as it is now (WCAG 2.0/2.1, levels A and AA)."""
    if not AXE.is_file():
        browser_unavailable(f"axe-core is not installed at {AXE} (npm ci)")
    # Evaluated through the DevTools protocol, which the page's CSP does not govern; the app
    # itself still serves no script but its own.
    page.evaluate(AXE.read_text() + "\n;0")
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {runOnly: {type: 'tag',
            values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
        return r.violations.map((v) => ({id: v.id, help: v.help,
            nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' '))}));
    }""")
    return list(result)
