"""Assignment packages: one folder per assignment, its declarative spec and its hidden parts.

A package holds ``assignment.toml`` (title, entry file, required names, forbidden APIs, limits,
checks), the student-facing ``README.md``, ``starter/`` and ``public_tests/``, and ``hidden/``:
the reference solution with its known-mistake variants and the probe plan. Hidden parts are
loaded by the grader only, and are never copied into a sandbox or served.

Two weights: ``assignments.spec`` (``load_spec``: the TOML, public files, version) imports no
torch and is what the web and the command line use; ``Assignment`` and the other types of
``assignments.model`` hold the hidden parts, and bring torch with them. Their names are
resolved here on first use, so that ``import assignments`` stays light. The grader loads the
hidden parts (``grader.loader.load_assignment``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from assignments.spec import (
    ASSIGNMENTS_ROOT,
    AssignmentError,
    AssignmentSpec,
    CheckSpec,
    Visibility,
    list_assignments,
    load_spec,
)

if TYPE_CHECKING:
    from assignments.model import Assignment, KnownMistake, ProbeCall, ProbePlan

_GRADER_SIDE = {
    "Assignment": "assignments.model",
    "KnownMistake": "assignments.model",
    "ProbeCall": "assignments.model",
    "ProbePlan": "assignments.model",
}


def __getattr__(name: str) -> Any:
    module = _GRADER_SIDE.get(name)
    if module is None:
        raise AttributeError(f"module 'assignments' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ASSIGNMENTS_ROOT",
    "Assignment",
    "AssignmentError",
    "AssignmentSpec",
    "CheckSpec",
    "KnownMistake",
    "ProbeCall",
    "ProbePlan",
    "Visibility",
    "list_assignments",
    "load_spec",
]
