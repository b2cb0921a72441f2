"""Skipped tests told loudly: the reasons the tests of one marker were skipped for."""

from __future__ import annotations

from typing import Any


def skip_reasons(terminalreporter: Any, marker: str) -> list[str]:
    """Each distinct reason a test marked ``marker`` was skipped for in this session, from the
    reports themselves, so that it holds however the tests were spread over processes."""
    reasons: list[str] = []
    for report in terminalreporter.stats.get("skipped", []):
        if marker not in getattr(report, "keywords", {}):
            continue
        longrepr = report.longrepr
        reason = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason not in reasons:
            reasons.append(reason)
    return reasons
