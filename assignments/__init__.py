"""Assignment packages: one folder per assignment, its declarative spec and its hidden parts.

A package holds ``assignment.toml`` (title, entry file, required names, forbidden APIs, limits,
checks), the student-facing ``README.md``, ``starter/`` and ``public_tests/``, and ``hidden/``:
the reference solution with its known-mistake variants and the probe plan. Hidden parts are
loaded here, by the grader, and are never copied into a sandbox or served.
"""

from __future__ import annotations

from assignments.loader import ASSIGNMENTS_ROOT, AssignmentError, list_assignments, load_assignment
from assignments.model import (
    Assignment,
    CheckSpec,
    KnownMistake,
    ProbeCall,
    ProbePlan,
    Visibility,
)

__all__ = [
    "ASSIGNMENTS_ROOT",
    "Assignment",
    "AssignmentError",
    "CheckSpec",
    "KnownMistake",
    "ProbeCall",
    "ProbePlan",
    "Visibility",
    "list_assignments",
    "load_assignment",
]
