"""Feedback: codes put into the student's words. Pure.

The grader owns the lab-neutral codes (``NEUTRAL``); each assignment declares its own
(``assignments.codes``), and ``catalogue_of`` joins them. Messages say what was observed on
which small input; hints point at the idea of the lab to revisit, never at the solution's code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from assignments.codes import CodeText
from assignments.spec import AssignmentSpec, Visibility

if TYPE_CHECKING:  # types only: the catalogue is read by the web process, which has no torch
    from assignments import CheckSpec, ProbePlan
    from grader.checks import CheckVerdict
    from grader.findings import Finding


NEUTRAL: Mapping[str, CodeText] = {
    "syntax-error": CodeText(
        "the file does not parse",
        "{detail}",
        "Fix the syntax error at the line and column given; run the file locally first."),
    "runtime-error": CodeText(
        "your code raised an error",
        "On {input}, your code raised {detail}.",
        "Read the traceback from the bottom line of your own file; reproduce the call "
        "locally with the same shapes."),
    "time-limit": CodeText(
        "time limit reached",
        "On {input}, your code did not finish within its time budget.",
        "Look for a loop that never ends or work that grows too fast; the inputs are tiny."),
    "memory-limit": CodeText(
        "memory limit reached",
        "On {input}, your code ran out of memory.",
        "The probe inputs are tiny: look for a tensor whose size you did not intend."),
    "output-limit": CodeText(
        "output limit reached",
        "Your submission printed or returned more than the limit allows ({detail}).",
        "Remove debugging prints from loops, and return only what the contract asks for."),
    "interface-error": CodeText(
        "interface does not match the assignment",
        "On {input}: {detail}",
        "Compare your names, signature and return value with the contract in the "
        "assignment's README."),
    "forbidden-api": CodeText(
        "forbidden API used",
        "Your submission calls {detail}, which this assignment forbids: the checks of those "
        "calls score 0, the others keep their points. First seen on {input}.",
        "The lab asks you to build this part yourself: write it from the operations the "
        "statement allows instead of calling a library's ready-made version."),
    "wrong-output": CodeText(
        "wrong output",
        "On {input}, your outputs differ from the expected values, and no mistake we know "
        "explains the difference.",
        "Test your code on a tiny input you can work out by hand, and compare each "
        "intermediate value with what the statement says it should be, one step at a time."),
    "input-mutated": CodeText(
        "an input was modified",
        "On {input}, your function changed {detail} in place: the caller's tensor no longer "
        "holds what they passed in.",
        "Callers do not expect their tensors to change, and an in-place change also changes "
        "what gradients are taken of. Use out-of-place operations (x = x * s, x.clamp(...)) "
        "instead of in-place ones (x *= s, x.clamp_(...), x[i] = ...).",
        evidence="inputs-unchanged"),
    "dtype-changed": CodeText(
        "output dtype differs from the input dtype",
        "On {input}, {detail}: the output dtype must be the input's.",
        "Avoid hard-coded dtypes: create helper tensors with dtype=x.dtype (or torch.*_like) "
        "and do not cast the result.", evidence="dtype-preserved"),
    "gradient-blocked": CodeText(
        "gradients do not arrive",
        "On {input}, {detail}.",
        "Something cut the autograd graph: .detach(), .data, torch.no_grad(), .item() or a "
        "round trip through NumPy or Python numbers. Keep every step in torch operations.",
        evidence="gradients-flow"),
    "gradient-wrong": CodeText(
        "gradients are wrong",
        "On {input}, the forward values are as expected but {detail}",
        "If you wrote a custom autograd Function, check its backward against "
        "torch.autograd.gradcheck in float64; otherwise let autograd differentiate your "
        "forward.", evidence="gradients-match"),
    "parameters-not-registered": CodeText(
        "layers not registered as submodules",
        "{detail}",
        "A module owns only the layers and parameters it registers: those assigned to "
        "attributes in __init__ (self.linear = nn.Linear(...), self.weight = nn.Parameter(...)) "
        "or held in nn.ModuleList / nn.ModuleDict. A plain list or dict hides them from "
        "parameters(), state_dict() and .to(), so an optimiser never trains them; a layer made "
        "inside forward is new and random on every call. Create each one once, in __init__."),
    "misuse-accepted": CodeText(
        "a misuse accepted without ValueError",
        "{input}: {detail}",
        "The statement lists the arguments and combinations that make no sense: check for "
        "each before computing anything and raise ValueError with a message that says what "
        "is wrong.",
        evidence="raises-value-error"),
}
"""The lab-neutral codes: what the grader itself can conclude of any lab (the file does not
parse, the code raised, ran too long, broke the interface, used a forbidden API, changed its
inputs or their dtype, cut or bent the gradients, kept its layers unregistered, accepted a misuse
the statement forbids) and ``wrong-output``, the last resort. Their words name no lab; a package
may replace their hints (``assignments.codes``). Every other code is the package's own."""

EMITTED_BY_CHECK_KIND: Mapping[str, str] = {"causal-no-leak": "causal-leak",
                                            "dropout": "dropout-wrong"}
"""Codes the grader gives when a check of that kind fails, whatever the known mistakes: a
package with such a check declares the code (its words are the lab's)."""

EMITTED_BY_TRAINING = ("causal-leak",)
"""Codes a ``[training]`` task's report can give besides the lab-neutral ones."""


def catalogue_of(assignment: AssignmentSpec) -> dict[str, CodeText]:
    """Every code this assignment can give, in its words: the lab-neutral codes (with the
    package's hints where it replaces them) and the package's own."""
    catalogue = dict(NEUTRAL)
    for code, declared in assignment.codes.items():
        if declared.text is not None:
            catalogue[code] = declared.text
        elif code in catalogue:
            catalogue[code] = replace(catalogue[code], hint=declared.hint)
    return catalogue


SUMMARY_ALL_PASSED = "All visible checks passed."


@dataclass(frozen=True)
class DiagnosisView:
    """A diagnosis as a student sees it while some checks are held back: only the released
    checks, and a message that cites only their evidence."""

    message: str
    tests: tuple[str, ...]


@dataclass(frozen=True)
class Diagnosis:
    code: str
    title: str
    """The code's title in the assignment's words, carried so no reader needs the catalogue."""
    message: str
    hint: str
    tests: tuple[str, ...]
    views: Mapping[str, DiagnosisView | None] = field(default_factory=dict)
    """By release tier (``visible``: only visible checks released; ``after_due_date``: those
    and the due-date ones), where the view differs from the full one; None: hidden there."""
    picture: Mapping[str, Any] | None = None
    """The attention map of the call the message cites (``grader.maps``), when the evidence
    is in the weights."""

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"code": self.code, "title": self.title,
                                    "message": self.message,
                                    "hint": self.hint, "tests": list(self.tests)}
        if self.views:
            document["views"] = {
                tier: None if view is None else {"message": view.message,
                                                 "tests": list(view.tests)}
                for tier, view in self.views.items()}
        if self.picture is not None:
            document["attention_map"] = dict(self.picture)
        return document


# What each release tier shows, from the most restricted up; everything is shown once results
# are published (service.submissions.visibility decides which tier a student is in).
RELEASE_TIERS: tuple[tuple[str, frozenset[Visibility]], ...] = (
    ("visible", frozenset({Visibility.VISIBLE})),
    ("after_due_date", frozenset({Visibility.VISIBLE, Visibility.AFTER_DUE_DATE})),
)


def diagnoses_from(findings: Sequence[Finding], plan: ProbePlan,
                   checks: Sequence[tuple[CheckSpec, CheckVerdict]],
                   catalogue: Mapping[str, CodeText]) -> list[Diagnosis]:
    """Put findings into words (``catalogue``: ``catalogue_of`` the assignment), each tied to
    the failed checks its evidence calls belong to.

    ``wrong-output`` is the last resort: it is not put on a check whose failing calls other
    findings already explain.
    """
    explained = {c for f in findings if f.code != "wrong-output" for c in f.calls}
    diagnoses = []
    for finding in findings:
        tests = _tests_of(finding, checks, explained)
        views: dict[str, DiagnosisView | None] = {}
        for tier, shown in RELEASE_TIERS:
            released = [(c, v) for c, v in checks if c.visibility in shown]
            view_tests = _tests_of(finding, released, explained)
            view = (_view(finding, plan, released, view_tests, catalogue)
                    if view_tests or not tests else None)
            if view is None or view != DiagnosisView(_render(finding, plan, checks, catalogue),
                                                     tests):
                views[tier] = view
        text = catalogue[finding.code]
        diagnoses.append(Diagnosis(finding.code, text.title,
                                   _render(finding, plan, checks, catalogue), text.hint, tests,
                                   views))
    return diagnoses


def with_fallback(diagnoses: list[Diagnosis],
                  verdicts: Sequence[tuple[CheckSpec, CheckVerdict]],
                  catalogue: Mapping[str, CodeText]) -> list[Diagnosis]:
    """Every failed check carries at least one code: wrong-output when nothing else explains it."""
    untagged = [(check, verdict) for check, verdict in verdicts
                if not verdict.passed and not any(check.number in d.tests for d in diagnoses)]
    if not untagged:
        return diagnoses
    text = catalogue["wrong-output"]

    def told(checks: Sequence[tuple[CheckSpec, CheckVerdict]], known: Diagnosis | None,
             known_tests: tuple[str, ...]) -> DiagnosisView | None:
        tests = known_tests + tuple(c.number for c, _ in checks if c.number not in known_tests)
        if not tests:
            return None
        if known is not None:
            return DiagnosisView(known.message, tests)
        observation = checks[0][1].observation
        return DiagnosisView(observation or text.message.format(input="the probe inputs"),
                             tests)

    index = next((i for i, d in enumerate(diagnoses) if d.code == "wrong-output"), None)
    known = diagnoses[index] if index is not None else None
    full = told(untagged, known, known.tests if known else ())
    assert full is not None
    views: dict[str, DiagnosisView | None] = {}
    for tier, shown in RELEASE_TIERS:
        released = [(c, v) for c, v in untagged if c.visibility in shown]
        base = known.views.get(tier, DiagnosisView(known.message, known.tests)) if known else None
        view = told(released, known if base is not None else None,
                    base.tests if base is not None else ())
        if base is not None and view is not None:
            view = DiagnosisView(base.message, view.tests)
        if view != full:
            views[tier] = view
    fallback = Diagnosis("wrong-output", text.title, full.message, text.hint, full.tests, views)
    if index is None:
        return [*diagnoses, fallback]
    return [*diagnoses[:index], fallback, *diagnoses[index + 1:]]


def _tests_of(finding: Finding, checks: Sequence[tuple[CheckSpec, CheckVerdict]],
              explained: set[str]) -> tuple[str, ...]:
    tests = []
    for check, verdict in checks:
        failing = set(verdict.failing_calls)
        if finding.code == "forbidden-api":
            if set(finding.calls) & set(check.calls):
                tests.append(check.number)
        elif set(finding.calls) & failing:
            if finding.code == "wrong-output" and failing <= explained:
                continue
            tests.append(check.number)
    return tuple(tests)


def _view(finding: Finding, plan: ProbePlan, released: Sequence[tuple[CheckSpec, CheckVerdict]],
          tests: tuple[str, ...], catalogue: Mapping[str, CodeText]) -> DiagnosisView:
    """The finding told from the evidence of the released checks only."""
    numbers = set(tests)
    shown_calls = {c for check, verdict in released if check.number in numbers
                   for c in (check.calls if finding.code == "forbidden-api"
                             else verdict.failing_calls)}
    calls = tuple(c for c in finding.calls if c in shown_calls) or finding.calls
    detail = finding.detail if calls[:1] == finding.calls[:1] else ""
    restricted = replace(finding, calls=calls, detail=detail)
    return DiagnosisView(_render(restricted, plan, released, catalogue), tests)


def _render(finding: Finding, plan: ProbePlan, checks: Sequence[tuple[CheckSpec, CheckVerdict]],
            catalogue: Mapping[str, CodeText]) -> str:
    text = catalogue[finding.code]
    first = finding.calls[0] if finding.calls else None
    detail = finding.detail
    if not detail and "{detail}" in text.message:
        # A check's observation, told on the call it was made on: one of this finding's own.
        first, detail = _detail_from_checks(finding, checks, text.evidence) or (first, "")
    if not finding.about_input:
        return _sentence(detail)
    described = plan.call(first).describe if first is not None else "your submission"
    message = text.message.format(input=described, detail=detail, variant=finding.variant)
    return message if message.endswith((".", "?")) else message + "."


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else text


def _detail_from_checks(finding: Finding, checks: Sequence[tuple[CheckSpec, CheckVerdict]],
                        kind: str) -> tuple[str, str] | None:
    """(call, observation) of a failed check on one of the finding's own calls, preferring
    checks of ``kind`` and the finding's first calls."""
    for _check, verdict in sorted(checks, key=lambda pair: pair[0].kind != kind):
        seen = dict(verdict.observations)
        for call_id in finding.calls:
            if call_id in seen:
                return call_id, seen[call_id].rstrip(".")
    return None
