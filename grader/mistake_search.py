"""The mistake search: which known mistakes reproduce the student's forward values. Pure.

Hypotheses are tried smallest first: no mistake (the reference), each searched mistake, then
each pair that can co-occur, whatever their codes. The first that reproduces every usable call
explains them all. When none does (three mistakes, or one we do not know), each scenario group
of calls is explained on its own by its smallest explanations. Where several tie, what they
agree on is the diagnosis: the codes, not the variants, since feedback is per code. A group's
calls that no hypothesis explains, or whose tied explanations disagree on a code, are left
unexplained where they depart from the reference.

A call on which a variant stays within the evidence margin of the reference cannot tell them
apart, so a student near the reference there is consistent with the variant. Where that lets
several hypotheses of one size explain the calls, those the student's values match within the
tolerance itself come first: a mistake that moves a probe only a little (an epsilon) is still
named when the probe shows it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from assignments import KnownMistake, ProbePlan
from grader.compare import EVIDENCE_MARGIN, calls_match, forwards_match
from grader.outcomes import CallOutcome

Hypothesis = frozenset[str]
VariantRunner = Callable[[Hypothesis, str, bool], CallOutcome]
"""Runs one call of the plan on the reference with the given mistakes switched on; the flag
says whether gradients are wanted (the search compares forward values only)."""


@dataclass(frozen=True)
class Explanation:
    """Which hypothesis explains which calls; calls no hypothesis explains."""

    by_call: Mapping[str, Hypothesis]
    unexplained: tuple[str, ...]
    attributed: Mapping[str, tuple[str, ...]]
    """Mistake id -> the departing calls it moves: a mistake's evidence is only those calls
    (with a pair, the calls only the other member moves are not this one's evidence)."""
    variants: Mapping[str, tuple[Hypothesis, ...]]
    """Per call, the switches each variant ran with to reproduce it (the hypothesis in the form
    that matched): what its gradients are compared with. Several where variants of the same
    codes tie on the call's forward values (their gradients may still differ)."""


class MistakeSearch:
    """One search over one submission's outcomes.

    Variant runs are the cost: each (hypothesis, call) runs at most once, and the answers the
    global pass, the group passes and the pair pruning ask again are remembered.
    """

    def __init__(
        self,
        *,
        plan: ProbePlan,
        student: Mapping[str, CallOutcome],
        reference: Mapping[str, CallOutcome],
        mistakes: Sequence[KnownMistake],
        variant: VariantRunner,
    ) -> None:
        self._plan = plan
        self._student = student
        self._reference = reference
        self._variant = variant
        self._hypotheses = list(_hypotheses([m for m in mistakes if m.searched]))
        self._code = {m.id: m.code for m in mistakes}
        self._forms = {m.id: m.forms for m in mistakes if m.forms}
        self._crashing = frozenset(m.id for m in mistakes if m.crashes)
        # Calls whose reference returned values (it did not reject the input).
        self._value_calls = [c.id for c in plan.calls if not reference[c.id].rejected]
        # The student's crashes on inputs the contract accepts (type and message): where one of
        # these is also what a rejected input got, it is the code crashing, not a rejection.
        self._crashes_on_accepted = {crash[1:] for c in self._value_calls if c in student
                                     if (crash := _first_crash(student[c])) is not None}
        # Where the student's code raised on inputs the contract accepts, by raise site.
        self._raised_on_accepted = {c: site for c in self._value_calls if c in student
                                    if (site := student[c].raise_site) is not None}
        self._outcomes: dict[tuple[Hypothesis, str], CallOutcome] = {}
        self._forms_found: dict[tuple[Hypothesis, str], Hypothesis | None] = {}
        self._moved: dict[tuple[str, str], bool] = {}

    def explain(self, usable: list[str]) -> Explanation:
        """Explain the calls that can be judged by value."""
        # Calls where the student differs from the reference go first: most hypotheses fail there.
        ordered = sorted(usable, key=self._matches_reference)
        # The smallest hypothesis that explains every call at once, if there is one.
        for index, hypothesis in enumerate(self._hypotheses):
            if self._explains(hypothesis, ordered):
                hypothesis = self._closest(hypothesis, self._hypotheses[index + 1:], ordered)
                return self._explanation({call_id: (hypothesis,) for call_id in usable}, ())

        # Otherwise each scenario group on its own: its smallest explanations. Where several
        # tie with the same codes (two variants of one mistake), they are one diagnosis; where
        # they disagree, the codes they share, and the group's departures stay unexplained.
        by_call: dict[str, tuple[Hypothesis, ...]] = {}
        unexplained: list[str] = []
        for group_calls in _groups(self._plan, ordered).values():
            found = self._smallest_explanations(group_calls)
            best = [h for h in found if self._close(h, group_calls)] or found
            codes = [self._codes_of(hypothesis) for hypothesis in best]
            common = frozenset.intersection(*codes) if codes else frozenset()
            if best and all(c == common for c in codes):
                by_call.update({call_id: tuple(best) for call_id in group_calls})
                continue
            if common:
                agreed = tuple(dict.fromkeys(
                    frozenset(m for m in h if self._code[m] in common) for h in best))
                by_call.update({call_id: agreed for call_id in group_calls})
            # Ambiguous or unexplained: what the group's calls show beyond the reference.
            unexplained.extend(c for c in group_calls if not self._matches_reference(c))
        return self._explanation(by_call, tuple(unexplained))

    def _codes_of(self, hypothesis: Hypothesis) -> frozenset[str]:
        return frozenset(self._code[m] for m in hypothesis)

    def _smallest_explanations(self, call_ids: list[str]) -> list[Hypothesis]:
        """Every hypothesis of the smallest size that explains the calls."""
        found: list[Hypothesis] = []
        for hypothesis in self._hypotheses:
            if found and len(hypothesis) > len(found[0]):
                break
            if self._explains(hypothesis, call_ids):
                found.append(hypothesis)
        return found

    def _closest(self, found: Hypothesis, later: list[Hypothesis],
                 call_ids: list[str]) -> Hypothesis:
        """``found``, unless it reproduces a departing call only within the evidence margin
        and a later hypothesis of its size explains the calls within the tolerance itself:
        where the probe shows the student's values that precisely, they decide."""
        if self._close(found, call_ids):
            return found
        return next((h for h in later if len(h) == len(found)
                     and self._explains(h, call_ids) and self._close(h, call_ids)), found)

    def _close(self, hypothesis: Hypothesis, call_ids: list[str]) -> bool:
        """Whether the hypothesis reproduces every call where the student departs from the
        reference within the tolerance, not merely as a variant the call cannot tell from
        the reference."""
        return all(self._matches_reference(c) or self._reproduces_closely(hypothesis, c)
                   for c in call_ids)

    # Whether a hypothesis explains a set of calls, cheapest refusals first.

    def _explains(self, hypothesis: Hypothesis, call_ids: list[str]) -> bool:
        if hypothesis and not any(self._is_evidence(c) or self._same_crash(hypothesis, c)
                                  for c in call_ids):
            return False
        if len(hypothesis) > 1 and not self._plausible(hypothesis, call_ids):
            return False
        return (all(self._reproduces(hypothesis, call_id) for call_id in call_ids)
                and all(self._supported(m, call_ids) for m in hypothesis))

    def _is_evidence(self, call_id: str) -> bool:
        """A departure from the reference a mistake can be named by: the student returned
        values, or did not reject what the contract rejects. A crash matching a variant's
        crash is consistent with the mistake but no evidence of it."""
        if self._matches_reference(call_id):
            return False
        if self._reference[call_id].rejected:
            # Anything but ValueError there is the evidence itself, unless it is the crash the
            # code also has where the contract accepts the input (a constructor that always
            # raises did not forget the validation).
            crash = _first_crash(self._student[call_id])
            return crash is None or crash[1:] not in self._crashes_on_accepted
        return not any(f.raised is not None and not f.raised.value_error
                       for f in self._student[call_id].forwards)

    def _plausible(self, pair: Hypothesis, call_ids: list[str]) -> bool:
        """Cheap test from single-mistake outcomes alone, before the pair itself is run.

        Where the student departs from the reference, a pair can only reproduce it if a member
        moves that call; where exactly one member moves it, that member alone must already
        reproduce it (within the evidence margin: the other moves it less than that), unless
        the student raised or produced NaN or infinity there, or the member alone returns
        another shape than the reference: the other member may then act on what the first
        changed (a mask read backwards empties a row that a missing check
        then lets through; a softmax over the wrong axis makes probabilities tiny that a log
        then turns into -inf; a mean over every target, ignored ones included, shows behind
        an ignored ``reduction="none"``).
        """
        for call_id in call_ids:
            if self._near_reference(call_id):
                continue  # no evidence: a pair is held to it as a single mistake is
            if _raised_or_nan(self._reference[call_id]):
                continue  # a raise hides what the members do alone
            movers = [m for m in pair if self._moves(m, call_id)]
            if not movers:
                return False
            if len(movers) == 1:
                single = frozenset(movers)
                # A finite answer of the reference's shape is not what such a pair leaves.
                exempt = (_raised_or_not_finite(self._student[call_id])
                          or _reshaped(self._outcome(single, call_id), self._reference[call_id]))
                # The other member moves this call less than the margin alone, so it may
                # leave the pair that far from the first member.
                if not exempt and not self._reproduces(single, call_id) and not calls_match(
                        self._student[call_id], self._outcome(single, call_id),
                        margin=EVIDENCE_MARGIN):
                    return False
        return True

    def _supported(self, mistake_id: str, call_ids: list[str]) -> bool:
        """A mistake that changes returned values is named only on such evidence: a call that
        returned values where the student departs from the reference and the mistake moves the
        outputs. Not rejecting an empty row is no evidence of, say, an inverted mask (which
        would also not reject it): only mistakes that change nothing but the rejection
        (no row check, no validation) rest on rejections alone."""
        if any(c in self._value_calls and not self._matches_reference(c)
               and self._moves(mistake_id, c) for c in call_ids):
            return True
        if mistake_id in self._crashing and any(
                self._same_crash(frozenset({mistake_id}), c) for c in call_ids):
            return True
        return not any(self._moves(mistake_id, c) for c in self._value_calls)

    def _same_crash(self, hypothesis: Hypothesis, call_id: str) -> bool:
        """Whether a crashing mistake of the hypothesis shows in the call: the student raised,
        where the reference returns, exactly the variant's exception (type, message, step)."""
        if not hypothesis & self._crashing or self._reference[call_id].rejected:
            return False
        student = _first_crash(self._student[call_id])
        return student is not None and student == _first_crash(self._outcome(hypothesis, call_id))

    # What one call shows, each answer remembered.

    def _matches_reference(self, call_id: str) -> bool:
        return self._reproduces(frozenset(), call_id)

    def _near_reference(self, call_id: str) -> bool:
        """Whether the student's call is within the evidence margin of the reference's, where
        every variant that also is reproduces it (``_variant_matches``)."""
        return self._matches_reference(call_id) or calls_match(
            self._student[call_id], self._reference[call_id], margin=EVIDENCE_MARGIN)

    def _reproduces(self, hypothesis: Hypothesis, call_id: str) -> bool:
        return self._reproducing_form(hypothesis, call_id) is not None

    def _reproducing_form(self, hypothesis: Hypothesis, call_id: str) -> Hypothesis | None:
        """The hypothesis, in the first of its members' forms that reproduces the call."""
        key = (hypothesis, call_id)
        if key not in self._forms_found:
            found = hypothesis if self._variant_matches(hypothesis, call_id) else None
            # Forms differ only where the variant is not finite (a fully blocked slice): only
            # then is another form worth running.
            if (found is None and self._forms
                    and _raised_or_nan(self._outcome(hypothesis, call_id))):
                found = next((form for form in _forms_of(hypothesis, self._forms)
                              if form != hypothesis and self._variant_matches(form, call_id)),
                             None)
            self._forms_found[key] = found
        return self._forms_found[key]

    def _reproduces_closely(self, hypothesis: Hypothesis, call_id: str) -> bool:
        """Whether the hypothesis reproduces the call other than by the margin clause of
        ``_variant_matches`` (rejections and random calls have no closer reading)."""
        form = self._reproducing_form(hypothesis, call_id)
        if form is None:
            return False
        if self._reference[call_id].rejected or (
                self._plan.call(call_id).compare == "reference-only"):
            return True
        return calls_match(self._student[call_id], self._outcome(form, call_id),
                           nan_is_wildcard=True)

    def _moves(self, mistake_id: str, call_id: str) -> bool:
        """Whether the mistake alone moves the call beyond the evidence margin (a call it
        barely moves is no evidence)."""
        key = (mistake_id, call_id)
        if key not in self._moved:
            self._moved[key] = not calls_match(self._outcome(frozenset({mistake_id}), call_id),
                                               self._reference[call_id], margin=EVIDENCE_MARGIN)
        return self._moved[key]

    def _outcome(self, hypothesis: Hypothesis, call_id: str) -> CallOutcome:
        """The call run with the hypothesis's mistakes switched on, forward values only."""
        if not hypothesis:
            return self._reference[call_id]
        key = (hypothesis, call_id)
        if key not in self._outcomes:
            self._outcomes[key] = self._variant(hypothesis, call_id, False)
        return self._outcomes[key]

    def _variant_matches(self, hypothesis: Hypothesis, call_id: str) -> bool:
        """Whether the student's call is what the hypothesis's variant gives."""
        call = self._plan.call(call_id)
        student, variant = self._student[call_id], self._outcome(hypothesis, call_id)
        reference = self._reference[call_id]
        if reference.rejected:
            # The contract's answer here is ValueError: whether each side gives it is all that
            # counts (NaN, zeros or an AssertionError all mean "not rejected").
            return _rejections(student) == _rejections(variant)
        if call.compare == "reference-only":
            # Random by design: a variant's numbers cannot be reproduced, only its determinism.
            student_fixed, variant_fixed = _deterministic(student), _deterministic(variant)
            if not (student_fixed and variant_fixed):
                return student_fixed == variant_fixed
        if calls_match(student, variant, nan_is_wildcard=True):
            return not self._raises_regardless(hypothesis, call_id)
        # Where the variant stays within the evidence margin of the reference, this call cannot
        # tell them apart: a student near the reference is consistent with it (and no evidence).
        return bool(hypothesis) and calls_match(variant, reference, margin=EVIDENCE_MARGIN) and (
            calls_match(student, reference, margin=EVIDENCE_MARGIN))

    def _raises_regardless(self, hypothesis: Hypothesis, call_id: str) -> bool:
        """Whether the student's exception in the call is one its code also raises where the
        hypothesis's variant returns values: the code's own failure (a validation that always
        raises), which the variant raising here too, for its own reason, does not explain."""
        site = self._student[call_id].raise_site
        return site is not None and any(
            other != call_id and other_site == site
            and self._outcome(hypothesis, other).first_raised is None
            for other, other_site in self._raised_on_accepted.items())

    # The answer.

    def _explanation(self, explained: Mapping[str, tuple[Hypothesis, ...]],
                     unexplained: tuple[str, ...]) -> Explanation:
        # Tied hypotheses have the same codes: the first names the mistakes in feedback.
        by_call = {c: hypotheses[0] for c, hypotheses in explained.items()}
        attributed = self._attribution(by_call)
        variants = {c: tuple(self._reproducing_form(h, c) or h for h in hypotheses)
                    for c, hypotheses in explained.items()}
        return Explanation(by_call, unexplained, attributed, variants)

    def _attribution(self, by_call: Mapping[str, Hypothesis]) -> dict[str, tuple[str, ...]]:
        attributed: dict[str, list[str]] = {}
        for call_id, hypothesis in by_call.items():
            if self._matches_reference(call_id):
                continue
            movers = [m for m in hypothesis if len(hypothesis) == 1 or self._moves(m, call_id)]
            for mistake_id in movers or hypothesis:
                attributed.setdefault(mistake_id, []).append(call_id)
        return {m: tuple(calls) for m, calls in attributed.items()}


def co_occurring_pairs(
    mistakes: Sequence[KnownMistake],
) -> list[tuple[KnownMistake, KnownMistake]]:
    """Every pair neither of whose members excludes the other, whatever their codes: two
    variants of one code can be two slips in one file (an inverted mask and inverted padding)."""
    return [(first, second) for first, second in itertools.combinations(mistakes, 2)
            if second.id not in first.excludes and first.id not in second.excludes]


def _hypotheses(mistakes: list[KnownMistake]) -> Iterator[Hypothesis]:
    """No mistake, then each mistake, then each pair that can co-occur."""
    yield frozenset()
    for mistake in mistakes:
        yield frozenset({mistake.id})
    for first, second in co_occurring_pairs(mistakes):
        yield frozenset({first.id, second.id})


def _forms_of(hypothesis: Hypothesis, forms: Mapping[str, tuple[str, ...]]) -> Iterator[Hypothesis]:
    """The hypothesis as written, then with each form switch of its members."""
    yield hypothesis
    for mistake_id in sorted(hypothesis):
        for form in forms.get(mistake_id, ()):
            yield hypothesis | {form}


def _groups(plan: ProbePlan, call_ids: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for call_id in call_ids:
        groups.setdefault(plan.call(call_id).group, []).append(call_id)
    return groups


def _rejections(outcome: CallOutcome) -> tuple[bool, ...]:
    """Per step of a call, whether it raised ValueError."""
    return tuple(f.raised is not None and f.raised.value_error for f in outcome.forwards) or (
        False,)


def _deterministic(outcome: CallOutcome) -> bool:
    """Whether the forwards of a call (same input, different seeds) returned the same values."""
    first = outcome.forwards[0] if outcome.forwards else None
    return first is not None and all(
        forwards_match(forward, first).same for forward in outcome.forwards[1:])


def _first_crash(outcome: CallOutcome) -> tuple[int, str, str] | None:
    """(step, exception type, message) of the first step that raised other than ValueError."""
    for index, forward in enumerate(outcome.forwards):
        if forward.raised is not None:
            if forward.raised.value_error:
                return None
            return index, forward.raised.type, forward.raised.message
    return None


def _raised_or_not_finite(outcome: CallOutcome) -> bool:
    """Whether any step of the call raised or returned NaN or infinity."""
    for forward in outcome.forwards:
        if forward.raised is not None:
            return True
        if any(o is not None and o.is_floating_point() and not bool(o.isfinite().all())
               for o in forward.outputs):
            return True
    return False


def _reshaped(outcome: CallOutcome, reference: CallOutcome) -> bool:
    """Whether a step of the call returned a tensor of another shape than the reference's."""
    return any(
        got is not None and want is not None and got.shape != want.shape
        for mine, theirs in zip(outcome.forwards, reference.forwards, strict=False)
        for got, want in zip(mine.outputs, theirs.outputs, strict=False))


def _raised_or_nan(outcome: CallOutcome) -> bool:
    """Whether any step of the call raised or returned NaN."""
    for forward in outcome.forwards:
        if forward.raised is not None:
            return True
        if any(o is not None and o.is_floating_point() and bool(o.isnan().any())
               for o in forward.outputs):
            return True
    return False
