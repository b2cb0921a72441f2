"""Naming mistakes by behaviour: which known mistakes reproduce the student's outputs. Pure.

Forward values are explained by a search: the smallest set of known mistakes (none, one, or a
pair that can co-occur) whose variant, run on the same inputs, reproduces every usable call.
When no such set exists (three mistakes, or one we do not know), each scenario group of calls
is explained on its own, and what stays unexplained is ``wrong-output``. Facets that do not
change forward values are read directly: gradients (compared with the variant that explains
the forward, so a blocked gradient is told apart from a wrong forward), dtypes, mutated inputs,
forbidden APIs, and failures (time, memory, crashes, interface).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch

from assignments import KnownMistake, ProbeCall, ProbePlan
from grader.checks import dtype_changed, input_positions, structure_problem
from grader.compare import (
    EVIDENCE_MARGIN,
    calls_match,
    forwards_match,
    grads_equivalent,
    is_zero,
    mutated_inputs,
    tensors_close,
)
from grader.outcomes import CallOutcome

Hypothesis = frozenset[str]
VariantRunner = Callable[[Hypothesis, str, bool], CallOutcome]
"""Runs one call of the plan on the reference with the given mistakes switched on; the flag
says whether gradients are wanted (the search compares forward values only)."""


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
    explanation = _explain_values(data, usable)
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
        code, detail = _failure(student, reference)
        if code == "lost":
            code = data.lost_code
        if code:
            findings.append(Finding(code, (call.id,), detail,
                                    about_input=student.status != "missing"))
        else:
            usable.append(call.id)
    return usable


def _failure(student: CallOutcome, reference: CallOutcome) -> tuple[str, str]:
    if student.status == "lost":
        return "lost", ""
    if student.status == "timeout":
        return "time-limit", ""
    if student.status in {"missing", "interface", "invalid"}:
        return "interface-error", student.detail
    for got, want in zip(student.forwards, reference.forwards, strict=False):
        if got.status == "timeout":
            return "time-limit", ""
        if got.raised is not None and got.raised.memory_error:
            return "memory-limit", ""
        if got.raised is not None and got.raised.at_call_boundary:
            return "interface-error", f"the call failed: {got.raised.message}"
        problem = structure_problem(got, want)
        if problem:
            return "interface-error", problem
    return "", ""


@dataclass(frozen=True)
class _Explanation:
    """Which hypothesis explains which calls; calls no hypothesis explains."""

    by_call: Mapping[str, Hypothesis]
    unexplained: tuple[str, ...]
    attributed: Mapping[str, tuple[str, ...]]
    """Mistake id -> the departing calls it moves: a mistake's evidence is only those calls
    (with a pair, the calls only the other member moves are not this one's evidence)."""
    variants: Mapping[str, Hypothesis]
    """Per call, the switches the variant ran with to reproduce it (the hypothesis in the form
    that matched): what its gradients are compared with."""


def _explain_values(data: DiagnosisInput, usable: list[str]) -> _Explanation:
    searched = [m for m in data.mistakes if m.searched]
    cache: dict[tuple[Hypothesis, str], CallOutcome] = {}

    def outcome(hypothesis: Hypothesis, call_id: str) -> CallOutcome:
        if not hypothesis:
            return data.reference[call_id]
        key = (hypothesis, call_id)
        if key not in cache:
            cache[key] = data.variant(hypothesis, call_id, False)
        return cache[key]

    reproduced: dict[tuple[Hypothesis, str], Hypothesis | None] = {}
    forms = {m.id: m.forms for m in data.mistakes if m.forms}

    def reproducing_form(hypothesis: Hypothesis, call_id: str) -> Hypothesis | None:
        """The hypothesis, in the first of its members' forms that reproduces the call."""
        key = (hypothesis, call_id)
        if key not in reproduced:
            found = hypothesis if _reproduces(data, outcome, hypothesis, call_id) else None
            # Forms differ only where the variant is not finite (a fully blocked slice): only
            # then is another form worth running.
            if found is None and forms and _raised_or_nan(outcome(hypothesis, call_id)):
                found = next((form for form in _forms_of(hypothesis, forms)
                              if form != hypothesis
                              and _reproduces(data, outcome, form, call_id)), None)
            reproduced[key] = found
        return reproduced[key]

    def reproduces(hypothesis: Hypothesis, call_id: str) -> bool:
        # The global pass, the group passes and the pair pruning ask the same questions again.
        return reproducing_form(hypothesis, call_id) is not None

    affected: dict[tuple[str, str], bool] = {}

    def affects(mistake_id: str, call_id: str) -> bool:
        key = (mistake_id, call_id)
        if key not in affected:
            # Moved beyond the evidence margin: a call the mistake barely moves is no evidence.
            affected[key] = not calls_match(outcome(frozenset({mistake_id}), call_id),
                                            data.reference[call_id], margin=EVIDENCE_MARGIN)
        return affected[key]

    def explains(hypothesis: Hypothesis, call_ids: list[str]) -> bool:
        if hypothesis and not any(evidence(c) for c in call_ids):
            return False
        if len(hypothesis) > 1 and not plausible(hypothesis, call_ids):
            return False
        return (all(reproduces(hypothesis, call_id) for call_id in call_ids)
                and all(supported(m, call_ids) for m in hypothesis))

    value_calls = [c.id for c in data.plan.calls if not _reference_rejects(data.reference[c.id])]

    def supported(mistake_id: str, call_ids: list[str]) -> bool:
        """A mistake that changes returned values is named only on such evidence: a call that
        returned values where the student departs from the reference and the mistake moves the
        outputs. Not rejecting an empty row is no evidence of, say, an inverted mask (which
        would also not reject it): only mistakes that change nothing but the rejection
        (no row check, no validation) rest on rejections alone."""
        if any(c in value_calls and not _matches_reference(c) and affects(mistake_id, c)
               for c in call_ids):
            return True
        return not any(affects(mistake_id, c) for c in value_calls)

    def evidence(call_id: str) -> bool:
        """A departure from the reference a mistake can be named by: the student returned
        values, or did not reject what the contract rejects. A crash matching a variant's
        crash is consistent with the mistake but no evidence of it."""
        if _matches_reference(call_id):
            return False
        if _reference_rejects(data.reference[call_id]):
            return True  # anything but ValueError there is the evidence itself
        return not any(f.raised is not None and not f.raised.value_error
                       for f in data.student[call_id].forwards)

    def plausible(pair: Hypothesis, call_ids: list[str]) -> bool:
        """Cheap test from single-mistake outcomes alone, before the pair itself is run.

        Where the student departs from the reference, a pair can only reproduce it if a member
        moves that call; where exactly one member moves it, that member alone must already
        reproduce it, unless it and the student raised or produced NaN there (the other member
        may change that: a mask read backwards empties a row that a missing check then lets
        through).
        """
        for call_id in call_ids:
            if _matches_reference(call_id):
                continue
            if _raised_or_nan(data.reference[call_id]):
                continue  # a raise hides what the members do alone
            movers = [m for m in pair if affects(m, call_id)]
            if not movers:
                return False
            if len(movers) == 1:
                single = frozenset(movers)
                # The exception holds where the student's call too raised or has NaN: a
                # finite answer is not the garbage such a pair leaves.
                exempt = (_raised_or_nan(outcome(single, call_id))
                          and _raised_or_nan(data.student[call_id]))
                if not exempt and not reproduces(single, call_id):
                    return False
        return True

    def _matches_reference(call_id: str) -> bool:
        return reproduces(frozenset(), call_id)

    hypotheses = list(_hypotheses(searched))
    # Calls where the student differs from the reference go first: most hypotheses fail there.
    ordered = sorted(usable, key=_matches_reference)
    def attribution(by_call: Mapping[str, Hypothesis]) -> dict[str, tuple[str, ...]]:
        attributed: dict[str, list[str]] = {}
        for call_id, hypothesis in by_call.items():
            if _matches_reference(call_id):
                continue
            movers = [m for m in hypothesis if len(hypothesis) == 1 or affects(m, call_id)]
            for mistake_id in movers or hypothesis:
                attributed.setdefault(mistake_id, []).append(call_id)
        return {m: tuple(calls) for m, calls in attributed.items()}

    def in_forms(by_call: Mapping[str, Hypothesis]) -> dict[str, Hypothesis]:
        return {c: reproducing_form(h, c) or h for c, h in by_call.items()}

    for hypothesis in hypotheses:
        if explains(hypothesis, ordered):
            everywhere = {call_id: hypothesis for call_id in usable}
            return _Explanation(everywhere, (), attribution(everywhere), in_forms(everywhere))

    by_call: dict[str, Hypothesis] = {}
    unexplained: list[str] = []
    for group_calls in _groups(data.plan, ordered).values():
        best = _smallest_explanations(hypotheses, functools.partial(explains, call_ids=group_calls))
        common = frozenset.intersection(*best) if best else frozenset()
        if best and (len(best) == 1 or common):
            chosen = best[0] if len(best) == 1 else common
            by_call.update({call_id: chosen for call_id in group_calls})
            if len(best) == 1:
                continue
        # Ambiguous or unexplained: what the group's calls show beyond the reference.
        for call_id in group_calls:
            if not _matches_reference(call_id):
                unexplained.append(call_id)
    return _Explanation(by_call, tuple(unexplained), attribution(by_call), in_forms(by_call))


def _forms_of(hypothesis: Hypothesis, forms: Mapping[str, tuple[str, ...]]) -> Iterator[Hypothesis]:
    """The hypothesis as written, then with each form switch of its members."""
    yield hypothesis
    for mistake_id in sorted(hypothesis):
        for form in forms.get(mistake_id, ()):
            yield hypothesis | {form}


def _smallest_explanations(
    hypotheses: list[Hypothesis], explains: Callable[[Hypothesis], bool]
) -> list[Hypothesis]:
    found: list[Hypothesis] = []
    for hypothesis in hypotheses:
        if found and len(hypothesis) > len(found[0]):
            break
        if explains(hypothesis):
            found.append(hypothesis)
    return found


def _hypotheses(mistakes: list[KnownMistake]) -> Iterator[Hypothesis]:
    """No mistake, then each mistake, then each pair that can co-occur."""
    yield frozenset()
    for mistake in mistakes:
        yield frozenset({mistake.id})
    for first, second in itertools.combinations(mistakes, 2):
        if first.code == second.code:
            continue
        if second.id in first.excludes or first.id in second.excludes:
            continue
        yield frozenset({first.id, second.id})


def _groups(plan: ProbePlan, call_ids: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for call_id in call_ids:
        groups.setdefault(plan.call(call_id).group, []).append(call_id)
    return groups


def _reproduces(data: DiagnosisInput, outcome: Callable[[Hypothesis, str], CallOutcome],
                hypothesis: Hypothesis, call_id: str) -> bool:
    call = data.plan.call(call_id)
    student, variant = data.student[call_id], outcome(hypothesis, call_id)
    if _reference_rejects(data.reference[call_id]):
        # The contract's answer here is ValueError: whether each side gives it is all that
        # counts (NaN, zeros or an AssertionError all mean "not rejected").
        return _rejections(student) == _rejections(variant)
    if call.compare == "reference-only":
        # Random by design: a variant's numbers cannot be reproduced, only its determinism.
        student_fixed, variant_fixed = _deterministic(student), _deterministic(variant)
        if not (student_fixed and variant_fixed):
            return student_fixed == variant_fixed
    if calls_match(student, variant, nan_is_wildcard=True):
        return True
    # Where the variant stays within the evidence margin of the reference, this call cannot
    # tell them apart: a student near the reference is consistent with it (and no evidence).
    reference = data.reference[call_id]
    return bool(hypothesis) and calls_match(variant, reference, margin=EVIDENCE_MARGIN) and (
        calls_match(student, reference, margin=EVIDENCE_MARGIN))


def _reference_rejects(reference: CallOutcome) -> bool:
    return any(f.raised is not None and f.raised.value_error for f in reference.forwards)


def _rejections(outcome: CallOutcome) -> tuple[bool, ...]:
    """Per step of a call, whether it raised ValueError."""
    return tuple(f.raised is not None and f.raised.value_error for f in outcome.forwards) or (
        False,)


def _deterministic(outcome: CallOutcome) -> bool:
    """Whether the forwards of a call (same input, different seeds) returned the same values."""
    first = outcome.forwards[0] if outcome.forwards else None
    return first is not None and all(
        forwards_match(forward, first).same for forward in outcome.forwards[1:])


def _raised_or_nan(outcome: CallOutcome) -> bool:
    for forward in outcome.forwards:
        if forward.raised is not None:
            return True
        if any(o is not None and o.is_floating_point() and bool(o.isnan().any())
               for o in forward.outputs):
            return True
    return False


def _value_findings(data: DiagnosisInput, explanation: _Explanation) -> list[Finding]:
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
    if wrong:
        findings.append(Finding("wrong-output", tuple(wrong)))
    return findings


def _gradient_findings(data: DiagnosisInput, explanation: _Explanation) -> list[Finding]:
    blocked: list[str] = []
    wrong: list[str] = []
    detail = ""
    # An input changed in place changes what the gradients are taken of: that is the mutation's
    # effect, described under its own code, not a second mistake. Such a call's gradients are
    # judged against a variant that mutates its inputs the same way, or not at all.
    mutated = {call_id for finding in _mutation_findings(data) for call_id in finding.calls}
    mutations = [m.id for m in data.mistakes if m.code == "input-mutated"]
    for call_id, hypothesis in explanation.variants.items():
        student = data.student[call_id]
        if not any(forward.grads for forward in data.reference[call_id].forwards):
            continue
        expected = (data.reference[call_id] if not hypothesis
                    else data.variant(hypothesis, call_id, True))
        candidates = [expected]
        if call_id in mutated:
            alike = [data.variant(hypothesis | {m}, call_id, True) for m in mutations]
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


# Checks whose failure is by definition a mistake: SPEC's "causal-leak" *is* "with causal=True,
# an output depends on later positions", which the perturbation check observes by comparing
# the student only with themselves. It names the mistake even when no known variant
# reproduces the student's numbers.
DEFINING_CHECKS = {"causal-no-leak": "causal-leak"}


def with_defining_checks(findings: list[Finding], plan: ProbePlan,
                         failed: Sequence[tuple[str, tuple[str, ...]]]) -> list[Finding]:
    """Name what failed defining checks prove where no known mistake explained the outputs.

    ``failed`` is (check kind, failing calls). Only calls left as ``wrong-output`` count: where
    a known mistake reproduced the outputs (softmax over queries also mixes positions), the
    failed property is a consequence of that mistake. Unexplained outputs in the scenario
    groups of the proving calls are then put down to the proven mistake.
    """
    unexplained = {c for f in findings if f.code == "wrong-output" for c in f.calls}
    added = [Finding(DEFINING_CHECKS[kind], proving)
             for kind, calls in failed if kind in DEFINING_CHECKS
             if (proving := tuple(c for c in calls if c in unexplained))]
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
