"""Feedback: the catalogue of codes in the student's words, and the results document. Pure.

Messages say what was observed on which small input; hints point at the idea of the lab to
revisit, never at the solution's code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from assignments.spec import Visibility

if TYPE_CHECKING:  # types only: the catalogue is read by the web process, which has no torch
    from assignments import CheckSpec, ProbePlan
    from grader.checks import CheckVerdict
    from grader.findings import Finding


@dataclass(frozen=True)
class CodeText:
    title: str
    message: str
    """What we observed. ``{input}``: the input it was seen on; ``{detail}``: the observation
    (the finding's own, else that of a failed check of kind ``evidence``); ``{variant}``: what
    the known-mistake variant that reproduced the outputs does."""
    hint: str
    evidence: str = ""
    """The check kind whose observation best shows this mistake."""


CATALOGUE: Mapping[str, CodeText] = {
    "softmax-wrong-axis": CodeText(
        "softmax over the wrong axis",
        "On {input}, your outputs match a softmax over {variant}.",
        "Each query distributes its attention over the keys. Which axis of the score matrix "
        "(..., T, S) indexes the keys?", evidence="weights-sum-to-one"),
    "unstable-softmax": CodeText(
        "softmax overflows on large scores",
        "On {input}, your outputs are NaN where the expected ones are finite: they match a "
        "softmax written as exp(scores) / exp(scores).sum() without subtracting each row's "
        "maximum first.",
        "In float32, exp overflows to inf past about 88, and inf / inf is NaN; a trained "
        "model's scores get that large. softmax(x) equals softmax(x - c) for any c per row: "
        "subtract each row's maximum before exp (torch.softmax does it for you)."),
    "missing-scale": CodeText(
        "scores not scaled",
        "On {input}, your outputs match attention computed without dividing the scores by "
        "sqrt(D): the weights come out too peaked.",
        "Revisit why dot products are scaled: their variance grows with the dimension D of "
        "the query and key vectors."),
    "wrong-scale": CodeText(
        "scores scaled by the wrong factor",
        "On {input}, your outputs match attention whose {variant}.",
        "The scale comes from the dimension of the vectors in each dot product: the query/key "
        "size of one head, under a square root. Sequence lengths play no part."),
    "mask-inverted": CodeText(
        "mask read the wrong way round",
        "On {input}, your code lets queries attend to the keys marked False and blocks the "
        "ones marked True.",
        "In this course True means 'may attend'. Check which entries you fill before softmax."),
    "mask-ignored": CodeText(
        "mask has no effect",
        "On {input}, your outputs are the same as with no mask at all.",
        "Check that the mask actually reaches the scores before softmax, and that the result "
        "of a non in-place fill is kept."),
    "mask-after-softmax": CodeText(
        "mask applied after softmax",
        "On {input}, your outputs match attention with the mask applied after softmax: "
        "{variant}.",
        "Masking must happen to the scores, before softmax, so that the allowed keys share the "
        "whole probability mass.", evidence="weights-sum-to-one"),
    "mask-fill-zero": CodeText(
        "blocked scores set to 0",
        "On {input}, your outputs match attention whose blocked scores were set to 0 (or "
        "another ordinary value) instead of -inf, so blocked keys keep some weight.",
        "exp(0) = 1. Which score value makes softmax give a key exactly zero weight?",
        evidence="blocked-keys-zero"),
    "all-masked-row": CodeText(
        "no error for a query with no allowed key",
        "On {input}: {detail}",
        "Softmax over a row where every key is blocked is undefined. Detect such rows and "
        "raise ValueError with a clear message instead of returning NaN, zeros or a uniform "
        "row.", evidence="raises-value-error"),
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
    "input-mutated": CodeText(
        "an input was modified",
        "On {input}, your function changed {detail} in place: the caller's tensor no longer "
        "holds what they passed in.",
        "Callers do not expect their tensors to change, and an in-place change also changes "
        "what gradients are taken of. Use out-of-place operations (x = x * s, masked_fill) "
        "instead of in-place ones (x *= s, masked_fill_).",
        evidence="inputs-unchanged"),
    "dtype-changed": CodeText(
        "output dtype differs from the input dtype",
        "On {input}, {detail}: the output dtype must be the input's.",
        "Avoid hard-coded dtypes: create helper tensors with dtype=x.dtype (or torch.*_like) "
        "and do not cast the result.", evidence="dtype-preserved"),
    "reshape-without-transpose": CodeText(
        "heads split without a transpose",
        "On {input}, your outputs match splitting heads by reshaping (B, T, D) straight to "
        "(B, H, T, Dh), which mixes positions and heads.",
        "A reshape keeps memory order. Split the last dimension into (H, Dh) first, then move "
        "the head axis in front of the time axis."),
    "merge-without-transpose": CodeText(
        "heads merged without the reverse transpose",
        "On {input}, your outputs match merging heads by reshaping (B, H, T, Dh) straight to "
        "(B, T, D), which mixes positions and heads.",
        "Undo the split in reverse order: bring the time axis back next to the batch axis, "
        "then merge (H, Dh) into D."),
    "heads-not-split": CodeText(
        "attention not split into heads",
        "On {input}, your outputs match one attention over the full width d_model instead of "
        "num_heads attentions over head_dim each.",
        "Each head attends separately over its own slice of the projected features."),
    "causal-leak": CodeText(
        "causal mask leaks the future",
        "On {input}: {detail}",
        "With causal attention, query i may only see keys 0..i. Check the triangle you keep "
        "and that the causal mask is combined with the other masks.", evidence="causal-no-leak"),
    "causal-off-by-one": CodeText(
        "causal mask hides the current position",
        "On {input}, a query cannot attend to its own position: your outputs match a causal "
        "mask that hides the diagonal.",
        "Query i sees keys 0..i, including i itself: check the diagonal of your triangle."),
    "padding-ignored": CodeText(
        "key padding mask has no effect",
        "On {input}, your outputs are the same as without key_padding_mask.",
        "key_padding_mask (B, Tk) marks real tokens with True. It must block the padded keys "
        "for every query and every head."),
    "missing-out-proj": CodeText(
        "output projection not applied",
        "On {input}, your outputs match the merged heads without out_proj.",
        "After merging the heads, the result goes through the output projection."),
    "projection-mixup": CodeText(
        "a projection used for the wrong role",
        "On {input}, your outputs match an attention in which one projection was used in "
        "place of another ({variant}).",
        "Queries come from q_proj, keys from k_proj, values from v_proj: check each line."),
    "key-value-ignored": CodeText(
        "cross-attention ignores key_value",
        "On {input}, your keys or values come from query instead of key_value.",
        "In cross-attention the keys and values are projections of key_value; only the "
        "queries come from query."),
    "dropout-in-eval": CodeText(
        "dropout active in eval mode",
        "On {input}: {detail}",
        "Dropout belongs to training only: respect self.training (nn.Dropout does).",
        evidence="dropout"),
    "dropout-wrong": CodeText(
        "dropout not applied to the attention weights as it should be",
        "On {input}: {detail}",
        "In training, dropout zeroes each attention weight with probability p and multiplies "
        "the kept ones by 1 / (1 - p), so that each weight keeps its expected value. It "
        "belongs on the weights after softmax, before they multiply the values (nn.Dropout and "
        "F.dropout(..., training=self.training) do the zeroing and the scaling).",
        evidence="dropout"),
    "missing-validation": CodeText(
        "invalid head count accepted",
        "{input}: {detail}",
        "d_model must split evenly into num_heads heads; reject it in __init__ with "
        "ValueError.", evidence="raises-value-error"),
    "rope-on-values": CodeText(
        "rotary embedding applied to the values",
        "On {input}, your outputs match attention whose values were rotated too, not only the "
        "queries and keys.",
        "Rotary embeddings encode positions in the dot products of queries with keys; the "
        "values carry content only and are never rotated."),
    "rope-offset-not-continued": CodeText(
        "rotary positions restart at 0 after the cache",
        "On {input}, your outputs match rotating the new tokens as if they were at positions "
        "0, 1, ... instead of continuing after the cached ones.",
        "A token decoded after S cached tokens is at position S: its query and key are "
        "rotated by that position's angles, and offsets default to the cache length."),
    "rope-wrong-pairing": CodeText(
        "rotary pairs formed differently from the statement",
        "On {input}, your outputs match a rotation that pairs {variant}.",
        "Reread which features the statement rotates together: feature i with feature "
        "i + head_dim/2 of the same head (the two halves), each pair by its own frequency."),
    "cache-wrong-axis": CodeText(
        "cache concatenated on the wrong axis",
        "On {input}, your code fails the way joining the cached and the new keys along "
        "{variant} (instead of the sequence axis) fails: {detail}.",
        "The cache is (B, H, S, Dh): the tokens run along dim=2. Cached keys and values come "
        "first, this call's after them, on that axis.", evidence="matches-reference"),
    "cache-missing-new-keys": CodeText(
        "returned cache lacks this call's keys",
        "On {input}, your returned cache matches one that {variant}.",
        "The cache you return must hold every key and value the next call attends to: the "
        "cached ones followed by this call's, and the padding mask of both."),
    "cache-causal-not-shifted": CodeText(
        "causal mask not shifted by the cache length",
        "On {input}, your outputs match a causal mask drawn from the top-left corner of the "
        "(new queries, all keys) scores, as if there were no cached keys.",
        "With S cached keys, new query i is at position S + i and sees keys 0..S + i: the "
        "triangle is shifted right by the cache length."),
    "cache-padding-lost": CodeText(
        "padding of the cached keys lost",
        "On {input}, your outputs match attention in which {variant}.",
        "Padded keys stay padded after they enter the cache: keep their key_padding_mask in "
        "the cache and block them in every later call."),
    "query-padding-ignored": CodeText(
        "padded queries not zeroed",
        "On {input}, your outputs at the padded query positions are not zero: they match "
        "attention without query_padding_mask.",
        "query_padding_mask (B, Tq) marks real queries with True; the output rows of the "
        "padded ones must be exactly zero."),
    "misuse-accepted": CodeText(
        "a misuse accepted without ValueError",
        "{input}: {detail}",
        "The statement lists the combinations of arguments that make no sense (an odd head "
        "width with RoPE, a cache without use_cache or with key_value, dropout while caching "
        "in training, offsets that skip the cache): check for each and raise ValueError.",
        evidence="raises-value-error"),
    "forbidden-api": CodeText(
        "forbidden API used",
        "Your submission calls {detail}, which this assignment forbids: the checks of those "
        "calls score 0, the others keep their points. First seen on {input}.",
        "The lab is to build attention yourself from matrix products, a mask and softmax."),
    "wrong-output": CodeText(
        "wrong output",
        "On {input}, your outputs differ from the expected values, and no mistake we know "
        "explains the difference.",
        "Test your function on a tiny input you can compute by hand, step by step: scores, "
        "scale, mask, softmax, weighted sum."),
    "parameters-not-registered": CodeText(
        "projections not registered as submodules",
        "{detail}",
        "A module owns only the layers it registers: those assigned to attributes in __init__ "
        "(self.q_proj = nn.Linear(...)) or held in nn.ModuleList / nn.ModuleDict. A plain "
        "list or dict hides them from parameters(), state_dict() and .to(), so an optimiser "
        "never trains them; a layer made inside forward is new and random on every call. "
        "Create q_proj, k_proj, v_proj and out_proj once, in __init__, as attributes."),
    "interface-error": CodeText(
        "interface does not match the assignment",
        "On {input}: {detail}",
        "Compare your names, signature and return value with the contract in the "
        "assignment's README."),
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
}

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
        document: dict[str, Any] = {"code": self.code, "message": self.message,
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
                   checks: Sequence[tuple[CheckSpec, CheckVerdict]]) -> list[Diagnosis]:
    """Put findings into words, each tied to the failed checks its evidence calls belong to.

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
            view = (_view(finding, plan, released, view_tests)
                    if view_tests or not tests else None)
            if view is None or view != DiagnosisView(_render(finding, plan, checks), tests):
                views[tier] = view
        diagnoses.append(Diagnosis(finding.code, _render(finding, plan, checks),
                                   CATALOGUE[finding.code].hint, tests, views))
    return diagnoses


def with_fallback(diagnoses: list[Diagnosis],
                  verdicts: Sequence[tuple[CheckSpec, CheckVerdict]]) -> list[Diagnosis]:
    """Every failed check carries at least one code: wrong-output when nothing else explains it."""
    untagged = [(check, verdict) for check, verdict in verdicts
                if not verdict.passed and not any(check.number in d.tests for d in diagnoses)]
    if not untagged:
        return diagnoses
    text = CATALOGUE["wrong-output"]

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
    fallback = Diagnosis("wrong-output", full.message, text.hint, full.tests, views)
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
          tests: tuple[str, ...]) -> DiagnosisView:
    """The finding told from the evidence of the released checks only."""
    numbers = set(tests)
    shown_calls = {c for check, verdict in released if check.number in numbers
                   for c in (check.calls if finding.code == "forbidden-api"
                             else verdict.failing_calls)}
    calls = tuple(c for c in finding.calls if c in shown_calls) or finding.calls
    detail = finding.detail if calls[:1] == finding.calls[:1] else ""
    restricted = replace(finding, calls=calls, detail=detail)
    return DiagnosisView(_render(restricted, plan, released), tests)


def _render(finding: Finding, plan: ProbePlan,
            checks: Sequence[tuple[CheckSpec, CheckVerdict]]) -> str:
    text = CATALOGUE[finding.code]
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
