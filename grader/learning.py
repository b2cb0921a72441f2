"""The ``learns`` check: did a model built on the student's code learn? Judged on the host.

The sandbox trains a tiny transformer with the student's attention and hands back data only:
its loss curve, its logits on held-out inputs and its final weights. None of it is taken on
trust. The grader rebuilds the same model with the reference attention and the returned weights,
and from those alone computes the held-out logits and the losses (where training started, where
it ended). The held-out answers never left the grader, so accuracy is scored here.
A submission passes when the logits it returned are what its weights give with the reference
attention (float32's tolerance: the student's attention computes what the reference's does on
the trained model), and it is nearly as accurate as the reference trained the same way on the
same seed, without its predictions changing with the future. The reported curve is shown, never
judged: the verdict reads the recomputed losses. Forged logits disagree with the weights;
skipping training leaves weights that predict nothing. Every judged quantity is either exact up
to rounding or far from its threshold, so a file gets the same verdict on every seed
(benchmarks/learns_stability.py).

The reference's own training is computed once per (assignment version, training seed) and
kept: a grading seed picks one of a few training seeds (``assignments.training_task``), so the
grader trains the reference a few times per assignment version, not once per submission.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from assignments import Assignment, ProbeCall, ProbePlan
from assignments.training_task import training_seed_count
from grader.compare import tensors_close
from grader.findings import Finding
from grader.in_process import run_call_in_process
from grader.outcomes import CallOutcome
from sandbox import training

# Held-out accuracy must close this share of the reference's margin over chance.
SHARE_OF_REFERENCE_MARGIN = 0.9
# The held-out logits the training returned must be those its weights give with the reference
# attention, within this multiple of float32's tolerance: an attention that computes the same
# thing differently is within 1e-5, one that computes something else (a missing scale, a wrong
# axis, a leak) trains weights whose logits move by 1e-1 or more. The gap is what makes the
# verdict the same on every seed; a threshold on a share of agreeing argmax predictions is not
# (a missing scale agrees on most of them, by a share that varies with the seed).
LOGITS_MARGIN = 10.0
# A model whose loss ends above this share of where it started learned nothing.
LEARNED_NOTHING_RATIO = 0.8
# A training loss within this of the reference's end: the model fits its training sequences.
FITS_TRAINING_MARGIN = 0.15
# Held-out pairs whose prediction may change with the future (argmax ties aside: none).
MAX_FUTURE_SENSITIVITY = 0.02
LEAK_CODE = "causal-leak"
"""The code of a model that fits its training data but not inputs whose future is random."""
TRAINING_CODES = (LEAK_CODE,)
"""The codes a training report gives besides the lab-neutral ones: a lab with ``[training]``
declares them."""
_CACHE_SIZE = 128  # 8 training seeds: 16 assignments with a training each


def is_training(call: ProbeCall) -> bool:
    return "learn" in call.spec


def without_training(plan: ProbePlan) -> ProbePlan:
    """The plan's probe calls alone: what the value search of the diagnosis looks at."""
    return dataclasses.replace(plan, calls=tuple(c for c in plan.calls if not is_training(c)))


@dataclass(frozen=True)
class TrainingEvidence:
    """What the host computed of one training run, and of the reference's on the same seed."""

    curve: tuple[float, ...]
    """The student's loss before each step, then the final loss on all training sequences."""
    reference_curve: tuple[float, ...]
    accuracy: float
    """Share of the held-out answers the student's predictions got right."""
    reference_accuracy: float
    chance: float
    agreement: float
    """Share of the student's held-out predictions equal to what the returned weights give with
    the reference attention (for the feedback)."""
    recomputed_loss: float
    """The final training loss of the returned weights with the reference attention."""
    recomputed_start: float = math.nan
    """The first step's loss from the initial weights with the reference attention (NaN: the
    curve's start is not checked)."""
    future_sensitivity: float = 0.0
    """Share of held-out pairs (the same past, different futures) on which the student's
    prediction changes: a model that respects the causal mask gives 0."""
    diverged: bool = False
    """The curve or the weights are not finite."""
    logits_match: bool = True
    """The returned held-out logits are those of the returned weights with the reference
    attention (within float32's tolerance)."""
    untrained: tuple[str, ...] = ()
    """Weights the reference's training changes that the student's left exactly at their
    initial values: no gradient reached them (a projection under ``torch.no_grad()``, say).
    Whether the rest of the model makes up for them depends on the seed; that they never
    train does not."""

    @property
    def reported_loss(self) -> float:
        return self.curve[-1]

    @property
    def needed_accuracy(self) -> float:
        return self.chance + SHARE_OF_REFERENCE_MARGIN * (self.reference_accuracy - self.chance)

    @property
    def learned(self) -> bool:
        return self.accuracy >= self.needed_accuracy

    @property
    def consistent(self) -> bool:
        """Its held-out logits are those of its weights with the reference attention.

        The reported losses are not part of it: they are never trusted (the verdict reads the
        losses recomputed from the weights), and an attention that differs from the reference by
        a constant (a scale, say) legitimately ends at another loss than its weights give with
        the reference's attention, by an amount that depends on the seed's data.
        """
        return self.logits_match

    @property
    def trusted_start(self) -> float:
        """Where the training started: recomputed from the initial weights when known."""
        return self.curve[0] if math.isnan(self.recomputed_start) else self.recomputed_start

    @property
    def learned_nothing(self) -> bool:
        return self.recomputed_loss > LEARNED_NOTHING_RATIO * self.trusted_start

    @property
    def leaks_the_future(self) -> bool:
        """Its predictions change with the future, or it fits the training sequences but fails
        where the future is hidden: it read the answers from later positions."""
        # The reported loss only names a failure here (a model that did not learn fails
        # whatever it reported): its own model fitting the training data is what a leak does.
        return self.future_sensitivity > MAX_FUTURE_SENSITIVITY or (not self.learned and (
            self.reported_loss <= self.reference_curve[-1] + FITS_TRAINING_MARGIN))

    @property
    def passed(self) -> bool:
        return (not self.diverged and not self.untrained and self.learned and self.consistent
                and not self.leaks_the_future)

    def observation(self) -> str | None:
        """None when it passes; else what was observed, in the student's terms."""
        if self.diverged:
            return ("training diverged: the loss or the weights became NaN or infinite "
                    f"(the loss started at {self.curve[0]:.3g}).")
        losses = (f"the loss went from {self.curve[0]:.3g} to {self.reported_loss:.3g}, the "
                  f"reference's from {self.reference_curve[0]:.3g} to "
                  f"{self.reference_curve[-1]:.3g}")
        accuracy = (f"{_percent(self.accuracy)} of the held-out answers right (the reference "
                    f"{_percent(self.reference_accuracy)}, chance {_percent(self.chance)})")
        if self.untrained:
            named = ", ".join(f"`{name}`" for name in self.untrained)
            return (f"parts of the model never trained: {named} stayed exactly at their "
                    "initial values, so no gradient reached them (the reference's training "
                    f"changes every weight); {losses}, and it gets {accuracy}.")
        if self.leaks_the_future:
            changed = (f"; on {_percent(self.future_sensitivity)} of the held-out pairs that "
                       "share their past, its prediction changes with the future"
                       if self.future_sensitivity > MAX_FUTURE_SENSITIVITY else "")
            return (f"it learns but leaks the future: {losses}, yet on held-out sequences whose "
                    f"later tokens are random it gets {accuracy}{changed}. The model reads "
                    "each next token from a later position instead of recalling it from the past.")
        if not self.learned and self.learned_nothing:
            return f"it learns nothing: {losses}; it gets {accuracy}."
        if not self.learned:
            return f"it learns only part of the task: {losses}; it gets {accuracy}."
        if not self.consistent:
            return (f"it gets {accuracy}, but it does not compute what it trained: with "
                    "correct attention, its trained weights give other outputs on the held-out "
                    f"inputs (other predictions on {_percent(1 - self.agreement)} of them). "
                    "Its attention computes something else than the reference's.")
        return None

    @property
    def outcome(self) -> str:
        """What the curve shows, named in the order ``observation`` reports it: ``learned``
        (it passed), ``diverged``, ``untrained-weights``, ``leaks-the-future``,
        ``learned-nothing``, ``learned-part`` or ``inconsistent`` (accurate, but its weights
        compute something else)."""
        if self.passed:
            return "learned"
        if self.diverged:
            return "diverged"
        if self.untrained:
            return "untrained-weights"
        if self.leaks_the_future:
            return "leaks-the-future"
        if not self.learned:
            return "learned-nothing" if self.learned_nothing else "learned-part"
        return "inconsistent"


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%"


class ReferenceTrainings:
    """The reference's training outcome per (assignment, version, training seed, call),
    computed once."""

    def __init__(self, capacity: int = _CACHE_SIZE) -> None:
        self.capacity = capacity
        self._outcomes: OrderedDict[tuple[str, str, int, str], CallOutcome] = OrderedDict()
        self.computed = 0
        """How many trainings this cache ran (the rest were found)."""
        # The grader grades several submissions at once in threads. One lock for lookups and
        # trainings alike: a training holds the global generator's lock throughout anyway,
        # and two threads missing the same seed train it once.
        self._lock = threading.Lock()

    def outcomes(self, assignment: Assignment, plan: ProbePlan) -> dict[str, CallOutcome]:
        found = {}
        for call in plan.calls:
            if not is_training(call):
                continue
            key = (assignment.slug, assignment.version, int(call.meta["training_seed"]), call.id)
            with self._lock:
                if key not in self._outcomes:
                    self._outcomes[key] = run_call_in_process(
                        assignment.reference(frozenset()), plan, call.id)
                    self.computed += 1
                    while len(self._outcomes) > self.capacity:
                        self._outcomes.popitem(last=False)
                self._outcomes.move_to_end(key)
                found[call.id] = self._outcomes[key]
        return found

    def prepare(self, assignment: Assignment) -> int:
        """Train the reference on each of ``assignment``'s training seeds now rather than on
        the first submissions that pick them; how many it trained. A grading worker does this
        before it forks its processes, which then all find them (``service.tasks``)."""
        if not assignment.training:
            return 0
        before = self.computed
        for seed in range(training_seed_count(assignment.training)):  # seed s picks seed s
            self.outcomes(assignment, assignment.build_plan(seed))
        return self.computed - before


REFERENCE_TRAININGS = ReferenceTrainings()
"""The grader process's cache: the reference's curve is computed once per training seed, never
per submission."""


def assess(assignment: Assignment, plan: ProbePlan, student: Mapping[str, CallOutcome],
           reference: Mapping[str, CallOutcome]) -> dict[str, TrainingEvidence]:
    """Evidence for each training call whose outcome has the expected form."""
    evidence = {}
    for call in plan.calls:
        if is_training(call) and call.id in student and call.id in reference:
            found = _assess(assignment, plan, call, student[call.id], reference[call.id])
            if found is not None:
                evidence[call.id] = found
    return evidence


def _returned(outcome: CallOutcome) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    if not outcome.usable or outcome.first_raised is not None or len(outcome.forwards) != 1:
        return None
    outputs = outcome.forwards[0].outputs
    if len(outputs) != 3 or any(t is None for t in outputs):
        return None
    curve, logits, weights = (t for t in outputs if t is not None)
    if (curve.dim() != 1 or curve.numel() < 2 or not logits.is_floating_point()
            or logits.dim() != 3 or not weights.is_floating_point() or weights.dim() != 1):
        return None
    return curve.double(), logits.float(), weights.float()


def _assess(assignment: Assignment, plan: ProbePlan, call: ProbeCall, student: CallOutcome,
            reference: CallOutcome) -> TrainingEvidence | None:
    got, want = _returned(student), _returned(reference)
    if got is None or want is None:
        return None
    curve, logits, weights = got
    if curve.shape != want[0].shape or logits.shape != want[1].shape or (
            weights.shape != want[2].shape):
        return None
    predictions = logits.argmax(dim=-1)
    answers, asked = call.meta["answers"], call.meta["asked"]
    rows = torch.arange(answers.shape[0])
    student_answers = predictions[rows, asked]
    reference_answers = want[1].argmax(dim=-1)[rows, asked]
    chance = float(call.meta["chance"])
    pairs = answers.shape[0] // 2
    curve_values = tuple(float(x) for x in curve)
    reference_curve = tuple(float(x) for x in want[0])
    common = functools.partial(
        TrainingEvidence, curve=curve_values, reference_curve=reference_curve,
        accuracy=_share(student_answers == answers),
        reference_accuracy=_share(reference_answers == answers), chance=chance,
        future_sensitivity=_share(student_answers[:pairs] != student_answers[pairs:]))
    if not (all(math.isfinite(x) for x in curve_values) and bool(weights.isfinite().all())
            and bool(logits.isfinite().all())):
        return common(agreement=0.0, recomputed_loss=math.inf, diverged=True,
                      logits_match=False)
    spec = call.spec["learn"]
    names, data, first = list(spec["weights"]), plan.inputs[spec["data"]], int(spec["first"])
    model = training.build_model(assignment.reference(frozenset()), call.spec)
    with torch.no_grad():
        training.load_weights(model, names, inputs=plan.inputs, prefix=spec["init_prefix"])
        start = float(training.training_loss(model, data[:int(spec["batch"])], first))
        training.load_weights(model, names, flat=weights)
        model.eval()
        loss = float(training.training_loss(model, data, first))
    recomputed = training.held_out_logits(model, plan.inputs[spec["held_out"]])
    initial = torch.cat([plan.inputs[spec["init_prefix"] + name].reshape(-1).float()
                         for name in names])
    return common(agreement=_share(recomputed.argmax(dim=-1)[rows, asked] == student_answers),
                  recomputed_loss=loss, recomputed_start=start,
                  logits_match=tensors_close(logits, recomputed, margin=LOGITS_MARGIN),
                  untrained=_untrained(names, call.meta["shapes"], initial, weights, want[2]))


def _untrained(names: Sequence[str], shapes: Mapping[str, tuple[int, ...]],
               initial: torch.Tensor, student: torch.Tensor,
               reference: torch.Tensor) -> tuple[str, ...]:
    """The weights the reference's training moved and the student's left bit for bit at their
    initial values (flat vectors in the order of ``names``)."""
    untrained, offset = [], 0
    for name in names:
        size = math.prod(shapes[name])
        part = slice(offset, offset + size)
        offset += size
        if (not torch.equal(reference[part], initial[part])
                and torch.equal(student[part], initial[part])):
            untrained.append(name)
    return tuple(untrained)


def _share(hits: torch.Tensor) -> float:
    return float(hits.double().mean()) if hits.numel() else 0.0


def judge_learns(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                 context: object) -> str | None:
    """The ``learns`` check kind (see ``grader.checks``)."""
    evidence: Mapping[str, TrainingEvidence] = getattr(context, "training", {})
    found = evidence.get(call.id)
    if found is None:
        return "the training returned data of the wrong form (a curve, held-out logits, weights)."
    return found.observation()


def training_findings(findings: Sequence[Finding], plan: ProbePlan,
                      student: Mapping[str, CallOutcome],
                      evidence: Mapping[str, TrainingEvidence], *,
                      lost_code: str) -> list[Finding]:
    """The findings with each training call's failure put down to its cause.

    Where the probe calls already got codes, a training run that fails is their consequence:
    it joins their evidence, and no code is added. Otherwise the training's own
    behaviour names it: a model that fits its training data but not the hidden-future held-out
    inputs leaks the future (``causal-leak``); what else fails is left to ``wrong-output``.
    """
    result = list(findings)
    # Whatever explains the probe calls (a mistake, an interface or runtime error) explains
    # the training too; a forbidden API only costs the calls that reached it.
    mistakes = [f.code for f in findings if f.code != "forbidden-api"]
    for call in plan.calls:
        if not is_training(call):
            continue
        outcome = student[call.id]
        if outcome.forbidden:
            result = _joined(result, Finding("forbidden-api", (call.id,),
                                             ", ".join(f"`{n}`" for n in outcome.forbidden)))
        found = evidence.get(call.id)
        if found is not None and found.passed:
            continue
        if mistakes:
            for code in mistakes:
                result = _joined(result, Finding(code, (call.id,)))
            continue
        code = _failure_code(outcome, lost_code)
        if code:
            result = _joined(result, Finding(code, (call.id,)))
        elif found is not None and found.untrained:
            result = _joined(result, Finding("gradient-blocked", (call.id,)))
        elif found is not None and found.leaks_the_future:
            result = _joined(result, Finding(LEAK_CODE, (call.id,)))
    return result


def _failure_code(outcome: CallOutcome, lost_code: str) -> str:
    if outcome.status == "lost":
        return lost_code
    if outcome.status == "timeout" or any(f.status == "timeout" for f in outcome.forwards):
        return "time-limit"
    if outcome.status in {"missing", "interface", "invalid"}:
        return "interface-error"
    raised = outcome.first_raised
    if raised is not None:
        return "memory-limit" if raised.memory_error else "runtime-error"
    return ""


def _joined(findings: list[Finding], new: Finding) -> list[Finding]:
    """``new`` merged into the finding of its code, or appended."""
    for index, known in enumerate(findings):
        if known.code == new.code:
            calls = known.calls + tuple(c for c in new.calls if c not in known.calls)
            findings = list(findings)
            findings[index] = dataclasses.replace(known, calls=calls,
                                                  detail=known.detail or new.detail)
            return findings
    return [*findings, new]
