"""The notebook client: check your work with the public tests, then submit the notebook.

In a cell of a Jupyter notebook::

    import autograde
    autograde.check("attention")        # the public tests, on the `attention` defined above
    autograde.submit("lab.ipynb", assignment="attention")

Importing this module is cheap: torch, pytest and the HTTP client are imported by the call
that needs them. When a notebook is graded, ``import autograde`` cells are left out of the
module (the grader has no use for the client).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CheckReport", "check", "submit"]


@dataclass
class CheckReport:
    """The public tests' outcome, shown as a short table in the notebook."""

    assignment: str
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Failed test -> the first lines of why."""

    @property
    def ok(self) -> bool:
        return not self.failed and bool(self.passed)

    def __str__(self) -> str:
        total = len(self.passed) + len(self.failed)
        lines = [f"{self.assignment}: {len(self.passed)} of {total} public tests passed."]
        lines += [f"  FAIL {name}\n       {why}" for name, why in self.failed.items()]
        if self.ok:
            lines.append("All public tests pass; the graded checks go further: submit to see "
                         "them.")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's display hook
        printer.text(str(self))


def check(assignment: str, *, namespace: Mapping[str, Any] | None = None) -> CheckReport:
    """Run ``assignment``'s public tests on what the notebook defines.

    ``namespace``: where to find the graded names (default: the calling kernel's ``__main__``,
    where a notebook's cells define them). Raises ``NameError`` when one is not defined yet.
    """
    from assignments.spec import load_spec

    spec = load_spec(assignment)
    names = namespace if namespace is not None else vars(sys.modules["__main__"])
    missing = [name for name in spec.required_names if name not in names]
    if missing:
        raise NameError(f"define {', '.join(f'`{n}`' for n in missing)} in a cell (and run "
                        f"it) before checking {assignment}")
    return _run_public_tests(assignment, spec.root / "public_tests", names)


def _run_public_tests(assignment: str, folder: Path, names: Mapping[str, Any]) -> CheckReport:
    import pytest

    collector = _Collector(names, CheckReport(assignment))
    with tempfile.TemporaryDirectory() as scratch:
        # An empty configuration of our own, not the pytest settings of wherever the notebook
        # happens to be.
        ini = Path(scratch) / "pytest.ini"
        ini.write_text("[pytest]\n")
        pytest.main([str(folder), "-c", str(ini), "--rootdir", scratch, "-q",
                     "-p", "no:cacheprovider", "--no-header", "-W", "ignore"],
                    plugins=[collector])
    return collector.outcome


class _Collector:
    """A pytest plugin: hands the kernel's names to the tests' fixtures (which look for
    ``autograde_namespace`` on the configuration) and notes each test's outcome."""

    def __init__(self, names: Mapping[str, Any], outcome: CheckReport) -> None:
        self.names = names
        self.outcome = outcome

    def pytest_configure(self, config: Any) -> None:
        config.autograde_namespace = self.names

    def pytest_runtest_logreport(self, report: Any) -> None:
        name = report.nodeid.rpartition("::")[2]
        if report.failed:
            why = str(report.longrepr).strip().splitlines()
            self.outcome.failed[name] = next(
                (line[1:].strip() for line in why if line.startswith("E ")),
                why[-1] if why else "")
        elif report.when == "call" and report.passed:
            self.outcome.passed.append(name)


def submit(path: str | Path, *, assignment: str, server: str | None = None,
           token: str | None = None, course: str | None = None, wait: bool = True,
           timeout: float = 600.0) -> dict[str, Any]:
    """Submit the notebook file (save it first) with the student's token and, unless ``wait``
    is False, wait for the grading; returns the submission as the API gives it.

    ``server`` and ``token`` default to the command line's login (``autograde login``) or the
    ``AUTOGRADE_URL`` and ``AUTOGRADE_TOKEN`` environment variables.
    """
    from service.cli.client import Client, Credentials, print_outcome

    stored = Credentials.load(server)
    client = Client(Credentials(stored.url, token or stored.token, stored.from_environment))
    body: dict[str, Any] = client.submit(assignment, [Path(path)], course)
    if wait:
        body = client.wait(body["id"], progress=sys.stdout, timeout=timeout)
        print_outcome(body, as_json=False, plots=False)
    else:
        print(f"submitted as {body['id']} ({body['status']})")
    return body
