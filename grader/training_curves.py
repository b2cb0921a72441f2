"""A results document's training curves read back, for the result page and the terminal. Pure.

A stored or foreign document is not trusted to be well formed or small: an entry this code
cannot read is left out, never drawn half. No torch: the web process and the CLI read with it.
The format is ``grader.document``'s ``training`` section.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grader.pictures import Curve, curves_svg

MAX_POINTS = 1024
"""Refuse longer curves (a document keeps at most 201 points)."""


@dataclass(frozen=True)
class TrainingCurves:
    """One training call's losses, the student's and the reference's on the same seed."""

    call: str
    tests: tuple[str, ...]
    """The checks that look at it, e.g. ``("1.11",)``."""
    passed: bool
    outcome: str
    """What the curve shows (``grader.document``): ``learned``, ``diverged``, ..."""
    steps: tuple[int, ...]
    curve: tuple[float | None, ...]
    """The student's loss at each of ``steps``; None where it was not a number."""
    reference_curve: tuple[float | None, ...]
    accuracy: float | None
    """Share of the held-out answers the student's model got right."""
    reference_accuracy: float | None
    chance: float | None

    @property
    def start(self) -> float | None:
        return self.curve[0]

    @property
    def end(self) -> float | None:
        return self.curve[-1]

    @property
    def reference_end(self) -> float | None:
        return self.reference_curve[-1]

    @property
    def checks(self) -> str:
        return ", ".join(self.tests)

    def caption(self) -> str:
        """What the picture says, in one sentence: the model learned, or where it stopped."""
        fell = (f"its loss fell from {_loss(self.start)} to {_loss(self.end)}, the "
                f"reference's to {_loss(self.reference_end)} on the same seed")
        stopped = (f"its loss stopped at {_loss(self.end)} while the reference reached "
                   f"{_loss(self.reference_end)} on the same seed")
        held_out = (f"{_percent(self.accuracy)} of the held-out answers right (the reference "
                    f"{_percent(self.reference_accuracy)}, chance {_percent(self.chance)})")
        if self.passed:
            return f"Your model learned: {fell}, and it got {held_out}."
        if self.outcome == "diverged" or self.end is None:
            return ("Your model's training diverged: its loss became NaN or infinite, while "
                    f"the reference's reached {_loss(self.reference_end)} on the same seed.")
        if self.outcome == "untrained-weights":
            return (f"Parts of your model never trained (no gradient reached them): {stopped}, "
                    f"and it got {held_out}.")
        if self.outcome == "leaks-the-future":
            return (f"Your model fits its training sequences, not the task: {fell}, yet it got "
                    f"only {held_out}.")
        if self.outcome == "inconsistent":
            return (f"Your model learned, {fell}, and it got {held_out}, but check "
                    f"{self.checks} did not pass: its output says why.")
        learned = _LEARNED.get(self.outcome, "did not learn enough")
        return f"Your model {learned}: {stopped}, and it got {held_out}."

    def svg(self) -> str:
        """The student's loss curve against the reference's, on a log scale, captioned."""
        steps = [float(step) for step in self.steps]

        def points(losses: Sequence[float | None]) -> list[tuple[float, float]]:
            return [(x, y) for x, y in zip(steps, losses, strict=True) if y is not None]

        return curves_svg(
            [Curve("your model", points(self.curve)),
             Curve("the reference, same seed", points(self.reference_curve))],
            title=self.title(), x_label="training step", y_label="loss (log scale)",
            description=self.caption(), log_y=True, width=560, height=300)

    def title(self) -> str:
        return f"Training loss of check {self.checks}: your model and the reference"

    def summary_line(self) -> str:
        """Start, end, the reference's end and the held-out accuracies, on one line."""
        return (f"Training (check {self.checks}): loss {_loss(self.start)} -> "
                f"{_loss(self.end)}, reference -> {_loss(self.reference_end)}; held-out "
                f"accuracy {_percent(self.accuracy)}, reference "
                f"{_percent(self.reference_accuracy)}: "
                f"{_VERDICTS.get(self.outcome, 'passed' if self.passed else 'failed')}")


_LEARNED = {"learned-nothing": "learned nothing", "learned-part": "learned only part of the task"}
_VERDICTS = {"learned": "learned", "diverged": "diverged",
             "untrained-weights": "parts of it never trained",
             "leaks-the-future": "fits its training data only",
             "learned-nothing": "learned nothing", "learned-part": "learned part of the task",
             "inconsistent": "learned, but computes something else"}


def read_section(section: Any) -> list[TrainingCurves]:
    """The readable entries of a document's ``training`` section (none when it has none)."""
    if not isinstance(section, list):
        return []
    return [curves for curves in map(read_entry, section) if curves is not None]


def read_entry(entry: Any) -> TrainingCurves | None:
    """One entry (``version`` 1), or None when it is not one this code can read."""
    if not isinstance(entry, dict) or entry.get("version") != 1:
        return None
    steps, tests = entry.get("steps"), entry.get("tests")
    curve, reference = _series(entry.get("curve")), _series(entry.get("reference_curve"))
    if (curve is None or reference is None or not isinstance(steps, list)
            or not len(steps) == len(curve) == len(reference)
            or not all(_is_int(step) for step in steps)
            or not isinstance(tests, list) or not all(isinstance(t, str) for t in tests)):
        return None
    numbers = [entry.get(key) for key in ("accuracy", "reference_accuracy", "chance")]
    if not all(n is None or _is_number(n) for n in numbers):
        return None
    accuracy, reference_accuracy, chance = (_finite(n) for n in numbers)
    return TrainingCurves(call=str(entry.get("call", "")), tests=tuple(tests),
                          passed=entry.get("passed") is True,
                          outcome=str(entry.get("outcome", "")), steps=tuple(steps),
                          curve=curve, reference_curve=reference, accuracy=accuracy,
                          reference_accuracy=reference_accuracy, chance=chance)


def _series(value: Any) -> tuple[float | None, ...] | None:
    if not isinstance(value, list) or not 0 < len(value) <= MAX_POINTS:
        return None
    if not all(v is None or _is_number(v) for v in value):
        return None
    return tuple(_finite(v) for v in value)


def _finite(value: float | None) -> float | None:
    """A number as a float; None for one that is not finite (JSON readers may give NaN, or an
    integer too large for a float)."""
    if value is None:
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _loss(value: float | None) -> str:
    return "not a number" if value is None else f"{value:.3g}"


def _percent(share: float | None) -> str:
    return "?" if share is None else f"{100 * share:.0f}%"


def sampled(length: int, most: int) -> Sequence[int]:
    """At most ``most`` indices of ``length``, evenly spread, the first and the last kept."""
    if length <= most:
        return range(length)
    last = length - 1
    return sorted({round(n * last / (most - 1)) for n in range(most)})
