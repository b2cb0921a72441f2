"""Naming mistakes by behaviour: which known mistakes reproduce the student's outputs. Pure.

Forward values are explained by the mistake search (``grader.mistake_search``): the smallest
set of known mistakes (none, one, or a pair that can co-occur) whose variant, run on the same
inputs, reproduces every usable call, or else each scenario group of calls on its own (where
variants of the same codes tie, those codes); what stays unexplained is ``wrong-output``.
Facets that do not change forward values are read directly: gradients (compared with the
variant that explains the forward, so a blocked gradient is told apart from a wrong forward),
dtypes, mutated inputs, forbidden APIs, and failures (time, memory, crashes, interface).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from assignments import KnownMistake, ProbeCall, ProbePlan
from grader.checks import dtype_changed, input_positions, shape_problem, structure_problem
from grader.compare import grads_equivalent, is_zero, mutated_inputs, tensors_close
from grader.findings import Finding
from grader.mistake_search import Explanation, MistakeSearch, VariantRunner
from grader.outcomes import CallOutcome


@dataclass(frozen=True)
class DiagnosisInput:
    plan: ProbePlan
    student: Mapping[str, CallOutcome]
    reference: Mapping[str, CallOutcome]
    mistakes: Sequence[KnownMistake]
    variant: VariantRunner
    lost_code: str = "runtime-error"
    """The code for calls that never reported back (how the run ended)."""


def diagnose(data: DiagnosisInput) -> list[Finding]:
    """All findings for one submission, in a stable order."""
    findings: list[Finding] = []
    usable = _failure_findings(data, findings)
    # Calls judged only by their own check (``compare = "property"``) are no evidence for the
    # search: their values are random by design. One that raised is still a runtime error.
    searched = [c for c in usable if data.plan.call(c).compare != "property"]
    findings.extend(_property_crashes(data, [c for c in usable if c not in searched]))
    explanation = MistakeSearch(
        plan=data.plan, student=data.student, reference=data.reference, mistakes=data.mistakes,
        variant=data.variant,
    ).explain(searched)
    findings.extend(_value_findings(data, explanation))
    findings.extend(_gradient_findings(data, explanation))
    findings.extend(_dtype_findings(data, usable))
    findings.extend(_mutation_findings(data))
    findings.extend(_forbidden_findings(data))
    return _merge(findings)


def _failure_findings(data: DiagnosisInput, findings: list[Finding]) -> list[str]:
    """Findings for calls that cannot be judged by value; returns the calls that can."""
    usable = []
    for call in data.plan.calls:
        student, reference = data.student[call.id], data.reference[call.id]
        # Calls the search never sees keep every shape a matter of form.
        code, detail = _failure(student, reference, shapes=call.compare == "property")
        if code == "lost":
            code = data.lost_code
        if code:
            # A missing name or unregistered layers are the same on every input.
            about_input = student.status != "missing" and code != "parameters-not-registered"
            findings.append(Finding(code, (call.id,), detail, about_input=about_input))
        else:
            usable.append(call.id)
    return usable


def _property_crashes(data: DiagnosisInput, calls: list[str]) -> list[Finding]:
    """Property calls where the student raised and the reference did not."""
    findings = []
    for call_id in calls:
        raised = data.student[call_id].first_raised
        if raised is not None and data.reference[call_id].first_raised is None:
            findings.append(Finding("runtime-error", (call_id,), raised.summary()))
    return findings


def _failure(student: CallOutcome, reference: CallOutcome, *,
             shapes: bool = False) -> tuple[str, str]:
    if student.status == "lost":
        return "lost", ""
    if student.status == "timeout":
        return "time-limit", ""
    if student.unregistered:
        return "parameters-not-registered", student.detail
    if student.status in {"missing", "interface", "invalid"}:
        return "interface-error", student.detail
    for got, want in zip(student.forwards, reference.forwards, strict=False):
        if got.status == "timeout":
            return "time-limit", ""
        if got.raised is not None and got.raised.memory_error:
            return "memory-limit", ""
        if got.raised is not None and got.raised.at_call_boundary:
            return "interface-error", f"the call failed: {got.raised.message}"
        # A tensor of another shape is judged by the search (unless ``shapes``): a known
        # mistake may return it.
        problem = structure_problem(got, want, shapes=shapes)
        if problem:
            return "interface-error", problem
    return "", ""


def _shape_problem(student: CallOutcome, reference: CallOutcome) -> str | None:
    """How the shapes the student returned differ from the reference's, or None."""
    for got, want in zip(student.forwards, reference.forwards, strict=False):
        problem = shape_problem(got, want)
        if problem:
            return problem
    return None


def _value_findings(data: DiagnosisInput, explanation: Explanation) -> list[Finding]:
    by_mistake = explanation.attributed
    findings = []
    for mistake in data.mistakes:
        if mistake.id in by_mistake:
            # Illustrate with a call that returned values: the mistake shows best there.
            calls = sorted(by_mistake[mistake.id],
                           key=lambda c: data.student[c].first_raised is not None)
            findings.append(Finding(mistake.code, tuple(calls), mistake=mistake.id,
                                    variant=mistake.description))
    raised_unexpectedly = [
        call_id for call_id in explanation.unexplained
        if data.student[call_id].first_raised is not None
    ]
    if raised_unexpectedly:
        first = data.student[raised_unexpectedly[0]].first_raised
        assert first is not None
        findings.append(Finding("runtime-error", tuple(raised_unexpectedly), first.summary()))
    wrong = [c for c in explanation.unexplained if c not in raised_unexpectedly]
    # A shape that no known mistake returns is the contract not kept: an interface error.
    shapes = {c: problem for c in wrong
              if (problem := _shape_problem(data.student[c], data.reference[c]))}
    if shapes:
        findings.append(Finding("interface-error", tuple(shapes), next(iter(shapes.values()))))
    wrong = [c for c in wrong if c not in shapes]
    if wrong:
        findings.append(Finding("wrong-output", tuple(wrong)))
    return findings


def _gradient_findings(data: DiagnosisInput, explanation: Explanation) -> list[Finding]:
    blocked: list[str] = []
    wrong: list[str] = []
    detail = ""
    # An input changed in place changes what the gradients are taken of: that is the mutation's
    # effect, described under its own code, not a second mistake. Such a call's gradients are
    # judged against a variant that mutates its inputs the same way, or not at all.
    mutated = {call_id for finding in _mutation_findings(data) for call_id in finding.calls}
    mutations = [m.id for m in data.mistakes if m.code == "input-mutated"]
    for call_id, hypotheses in explanation.variants.items():
        student = data.student[call_id]
        if not any(forward.grads for forward in data.reference[call_id].forwards):
            continue
        # Variants that tie on the forward values may differ in their gradients: the student's
        # are as expected when they are those of any of them.
        candidates = [data.reference[call_id] if not hypothesis
                      else data.variant(hypothesis, call_id, True) for hypothesis in hypotheses]
        if call_id in mutated:
            alike = [data.variant(hypothesis | {m}, call_id, True)
                     for hypothesis in hypotheses for m in mutations]
            candidates = [v for v in alike if _same_after(student, v)]
            if not candidates:
                continue
        verdicts = [_gradient_verdict(data.plan.call(call_id), student, c) for c in candidates]
        first = verdicts[0]
        if first is None or any(verdict is None for verdict in verdicts):
            continue
        kind, text = first
        (blocked if kind == "blocked" else wrong).append(call_id)
        detail = detail or text
    findings = []
    if blocked:
        findings.append(Finding("gradient-blocked", tuple(blocked), detail))
    if wrong:
        findings.append(Finding("gradient-wrong", tuple(wrong)))
    return findings


def _gradient_verdict(call: ProbeCall, student: CallOutcome,
                      expected: CallOutcome) -> tuple[str, str] | None:
    """``("blocked", detail)``, ``("wrong", "")`` or None when the gradients are as expected."""
    for got, want in zip(student.forwards, expected.forwards, strict=False):
        if not want.grads:
            continue
        if got.backward == "no-graph":
            return "blocked", "the output is not connected to the inputs"
        missing = [p for p, g in want.grads.items()
                   if not is_zero(g) and is_zero(got.grads.get(p))]
        if missing:
            return "blocked", "no gradient reaches " + ", ".join(
                f"`{_readable(call, p)}`" for p in missing)
        # Gradients through a changed dtype carry that dtype's rounding.
        precision = torch.float32 if dtype_changed(got, want) else None
        if not all(grads_equivalent(got.grads.get(p), g, precision=precision)
                   for p, g in want.grads.items()):
            return "wrong", ""
    return None


def _same_after(student: CallOutcome, variant: CallOutcome) -> bool:
    """Whether both left the call's input tensors in the same state."""
    pairs = list(zip(student.forwards, variant.forwards, strict=False))
    return bool(pairs) and all(
        got.after.keys() == want.after.keys()
        and all(tensors_close(got.after[p], want.after[p]) for p in got.after)
        for got, want in pairs)


def _dtype_findings(data: DiagnosisInput, usable: list[str]) -> list[Finding]:
    changed = []
    for call_id in usable:
        for got, want in zip(data.student[call_id].forwards, data.reference[call_id].forwards,
                             strict=False):
            if dtype_changed(got, want):
                changed.append(call_id)
                break
    return [Finding("dtype-changed", tuple(changed))] if changed else []


def _mutation_findings(data: DiagnosisInput) -> list[Finding]:
    mutated: list[str] = []
    names: list[str] = []
    for call in data.plan.calls:
        for index, forward in enumerate(data.student[call.id].forwards):
            changed = mutated_inputs(forward, data.plan.inputs, input_positions(call, index))
            if changed:
                mutated.append(call.id)
                names.extend(_readable(call, p) for p in changed if _readable(call, p) not in names)
                break
    if not mutated:
        return []
    return [Finding("input-mutated", tuple(mutated), ", ".join(f"`{n}`" for n in names))]


def _forbidden_findings(data: DiagnosisInput) -> list[Finding]:
    """The calls in which the run-time trap saw a forbidden API: only those are its evidence.

    A reference in the text that no call reached (a dead branch, a CUDA-only path) costs
    nothing; neither does a name the submission defines itself.
    """
    calls = tuple(call.id for call in data.plan.calls if data.student[call.id].forbidden)
    if not calls:
        return []
    names = sorted({_api(name) for call_id in calls for name in data.student[call_id].forbidden})
    apis = ", ".join(f"`{n}`" for n in names)
    total = len(data.plan.calls)
    reached = "every probe call" if len(calls) == total else (
        f"{len(calls)} of the {total} probe calls")
    return [Finding("forbidden-api", calls, f"{apis} (reached on {reached})")]


def _api(dotted: str) -> str:
    return dotted.removesuffix(".forward").replace("torch._C._nn.", "torch.nn.functional.")


def _readable(call: ProbeCall, position: str) -> str:
    names: Mapping[str, str] = call.meta.get("argument_names", {})
    return names.get(position, position.removeprefix("kw.").removeprefix("param."))


# Checks whose failure is by definition a mistake: the code "causal-leak" *is* "with causal=True,
# an output depends on later positions", which the perturbation check observes by comparing
# the student only with themselves. It names the mistake even when no known variant
# reproduces the student's numbers.
DEFINING_CHECKS = {"causal-no-leak": "causal-leak"}
# Checks that alone judge the calls the search never sees (``compare = "property"``: random by
# design, judged against the student's own other calls): their failure there is the mistake,
# unless the call already failed otherwise (it raised, or the interface did not match).
PROPERTY_CHECKS = {"dropout": "dropout-wrong"}
# A validation check can fail on a call that matched the reference, which raised ValueError
# there too: the student's code raises it on valid input as well (``grader.checks``). That is
# its own error, told where the code raised on valid input: ``runtime-error``.
REJECTING_EVERYTHING = ("raises-value-error", "runtime-error")


def with_defining_checks(findings: list[Finding], plan: ProbePlan,
                         failed: Sequence[tuple[str, tuple[str, ...]]], *,
                         declared: Sequence[tuple[str, tuple[str, ...]]] = ()) -> list[Finding]:
    """Name what failed defining checks prove where no known mistake explained the outputs.

    ``failed`` is (check kind, failing calls). Only calls left as ``wrong-output`` count: where
    a known mistake reproduced the outputs (softmax over queries also mixes positions), the
    failed property is a consequence of that mistake. Unexplained outputs in the scenario
    groups of the proving calls are then put down to the proven mistake.

    ``declared`` is (code, failing calls) of the checks that name the code their failure
    proves (``CheckSpec.code``): on property calls it is that code, also where the call raised
    (the crash is what the property rules out, not a ``runtime-error`` of its own).
    """
    unexplained = {c for f in findings if f.code == "wrong-output" for c in f.calls}
    added = [Finding(DEFINING_CHECKS[kind], proving)
             for kind, calls in failed if kind in DEFINING_CHECKS
             if (proving := tuple(c for c in calls if c in unexplained))]
    failed_otherwise = {c for f in findings if f.code != "forbidden-api" for c in f.calls}
    properties = [Finding(PROPERTY_CHECKS[kind], proving)
                  for kind, calls in failed if kind in PROPERTY_CHECKS
                  if (proving := tuple(c for c in calls if plan.call(c).compare == "property"
                                       and c not in failed_otherwise))]
    if declared:
        findings, proven = _declared_properties(findings, plan, declared, failed_otherwise)
        properties += proven
    if properties:
        findings = _merge([*findings, *properties])
    covered = {c for f in findings for c in f.calls}
    kind, code = REJECTING_EVERYTHING
    rejecting = tuple(c for failed_kind, calls in failed if failed_kind == kind
                      for c in calls if c not in covered)
    if rejecting:
        findings = _merge([*findings, Finding(code, rejecting)])
    if not added:
        return findings
    groups = {plan.call(call).group for finding in added for call in finding.calls}
    kept = []
    for finding in findings:
        if finding.code == "wrong-output":
            remaining = tuple(c for c in finding.calls if plan.call(c).group not in groups)
            if not remaining:
                continue
            finding = Finding(finding.code, remaining, finding.detail)
        kept.append(finding)
    return _merge(kept + added)


def _declared_properties(findings: list[Finding], plan: ProbePlan,
                         declared: Sequence[tuple[str, tuple[str, ...]]],
                         failed_otherwise: set[str]) -> tuple[list[Finding], list[Finding]]:
    """The findings with the property calls of checks that declare their code put down to a
    cause: a crash there is the declared code's evidence (not a ``runtime-error``); a property
    that returned other values is the consequence of the known mistakes found elsewhere (a
    rotation of the values also moves the outputs with the offset), else the declared code.

    A crash is no evidence where the code crashed on every other call too (a starter that
    raises ``NotImplementedError`` everywhere): nothing ran, and it stays a ``runtime-error``."""
    crashed = {c for f in findings if f.code == "runtime-error" for c in f.calls}
    properties = {c for _, calls in declared for c in calls
                  if plan.call(c).compare == "property"}
    others = {call.id for call in plan.calls} - properties
    crashes_say_nothing = bool(others) and others <= crashed
    known = [index for index, f in enumerate(findings) if f.mistake]
    proven: list[Finding] = []
    consequences: list[str] = []
    for code, calls in declared:
        proving = []
        for call_id in calls:
            if plan.call(call_id).compare != "property":
                continue
            if call_id in crashed:
                if not crashes_say_nothing:
                    proving.append(call_id)
            elif call_id not in failed_otherwise and not known:
                proving.append(call_id)
            elif call_id not in failed_otherwise:
                consequences.append(call_id)
        if proving:
            proven.append(Finding(code, tuple(proving)))
    taken = {c for finding in proven for c in finding.calls}
    kept = []
    for index, finding in enumerate(findings):
        if finding.code == "runtime-error":
            finding = replace(finding, calls=tuple(c for c in finding.calls if c not in taken))
            if not finding.calls:
                continue
        elif index in known:
            finding = replace(finding, calls=finding.calls + tuple(consequences))
        kept.append(finding)
    return kept, proven


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per code, evidence calls united, the first detail kept."""
    merged: dict[str, Finding] = {}
    for finding in findings:
        known = merged.get(finding.code)
        if known is None:
            merged[finding.code] = finding
            continue
        calls = known.calls + tuple(c for c in finding.calls if c not in known.calls)
        merged[finding.code] = Finding(finding.code, calls, known.detail or finding.detail,
                                       known.mistake or finding.mistake,
                                       known.variant or finding.variant,
                                       known.about_input and finding.about_input)
    return list(merged.values())
