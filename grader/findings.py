"""What the grader found: a feedback code with the calls that are its evidence."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """A feedback code with the calls that are its evidence."""

    code: str
    calls: tuple[str, ...]
    detail: str = ""
    """A specific observation (an exception, the mutated argument...) for the message."""
    mistake: str = ""
    """The known-mistake variant that reproduced it, when one did."""
    variant: str = ""
    """What that variant does, in words."""
    about_input: bool = True
    """False when the detail says it all whatever the input (a required name is missing)."""
