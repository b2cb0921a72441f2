"""Check kinds: how a declared check judges the student's outcomes. Pure functions.

Each kind judges one probe call at a time and returns None when the call passes, or a sentence
saying what was observed. A check passes when every one of its calls passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from assignments import CheckSpec, ProbeCall, ProbePlan
from grader.compare import (
    forwards_match,
    grads_equivalent,
    is_zero,
    max_difference,
    mutated_inputs,
    tensors_close,
    tolerance,
)
from grader.learning import judge_learns
from grader.outcomes import CallOutcome, Forward
from sandbox.runner.witness import forward_specs, tensor_positions


@dataclass(frozen=True)
class CheckContext:
    """What a check may look at: the plan, and both sides' outcomes by call id."""

    plan: ProbePlan
    student: Mapping[str, CallOutcome]
    reference: Mapping[str, CallOutcome]
    training: Mapping[str, Any] = field(default_factory=dict)
    """What the host computed of each training call (``grader.learning.TrainingEvidence``)."""


@dataclass(frozen=True)
class CheckVerdict:
    passed: bool
    failing_calls: tuple[str, ...] = ()
    observation: str = ""
    """What was observed on the first failing call, on which input."""
    observations: tuple[tuple[str, str], ...] = ()
    """(call, what was observed there) for every failing call, without the input."""


CallJudge = Callable[[ProbeCall, CallOutcome, CallOutcome, CheckContext], "str | None"]


def judge(check: CheckSpec, context: CheckContext, kinds: Mapping[str, CallJudge]) -> CheckVerdict:
    """Run a check over its calls."""
    judge_call = kinds[check.kind]
    failing: list[str] = []
    observations: list[tuple[str, str]] = []
    first = ""
    judged = 0
    for call_id in check.calls:
        call = context.plan.call(call_id)
        student, reference = context.student[call_id], context.reference[call_id]
        if check.kind in _ONLY_RETURNED_CALLS and student.first_raised is not None:
            continue  # a call that raised hands back no inputs to compare
        judged += 1
        observation = _unusable(student, reference) or judge_call(call, student, reference, context)
        if observation is not None:
            failing.append(call_id)
            observations.append((call_id, observation))
            first = first or f"On {call.describe}: {observation}"
    if not judged:
        return CheckVerdict(False, tuple(check.calls),
                            "every call raised, so nothing could be checked.")
    return CheckVerdict(not failing, tuple(failing), first, tuple(observations))


# Kinds that can only judge calls that returned: the inputs-after of a call exist only then.
_ONLY_RETURNED_CALLS = frozenset({"inputs-unchanged"})


def check_kinds() -> dict[str, CallJudge]:
    """The registry of check kinds that ``assignment.toml`` files may name."""
    return {
        "matches-reference": _matches_reference,
        "raises-value-error": _raises_value_error,
        "weights-sum-to-one": _weights_sum_to_one,
        "blocked-keys-zero": _blocked_keys_zero,
        "dtype-preserved": _dtype_preserved,
        "gradients-flow": _gradients_flow,
        "gradients-match": _gradients_match,
        "inputs-unchanged": _inputs_unchanged,
        "causal-no-leak": _causal_no_leak,
        "deterministic-in-eval": _deterministic_in_eval,
        "dropout": _dropout,
        "decoding-matches-full": _decoding_matches_full,
        "forwards-agree": _forwards_agree,
        "learns": judge_learns,
    }


def _unusable(student: CallOutcome, reference: CallOutcome) -> str | None:
    """Why a call cannot be judged at all, or None."""
    if student.status == "lost":
        return "the run ended before this call reported back."
    if student.status == "timeout":
        return "the call did not finish within its time budget."
    if student.status in {"missing", "interface", "invalid"}:
        return f"{student.detail}."
    for got, want in zip(student.forwards, reference.forwards, strict=False):
        if got.raised is not None and not (got.raised.value_error and want.raised is not None):
            if want.raised is not None and want.raised.value_error:
                continue  # the raises-value-error kind words this case itself
            return f"it raised {got.raised.type}: {_short(got.raised.message)}"
        if got.status == "timeout":
            return "the call did not finish within its time budget."
        # A return value of the wrong form passes nothing, not even "inputs unchanged":
        # a submission that does nothing must not collect points.
        problem = structure_problem(got, want)
        if problem:
            return problem
    rejects = any(f.raised is not None and f.raised.value_error for f in reference.forwards)
    if len(student.forwards) < len(reference.forwards) and not rejects:
        return "the call stopped before all of its steps ran."
    return None


def structure_problem(got: Forward, want: Forward, *, shapes: bool = True) -> str | None:
    """How the returned value's form differs from the reference's, or None.

    With ``shapes=False`` a returned tensor of another shape is not a difference of form: the
    mistake search judges it as a value, which a known mistake may reproduce (a loss that
    ignores ``reduction="none"`` returns a 0-d tensor), and ``shape_problem`` words it.
    """
    if want.status != "ok" or got.status != "ok":
        return None
    if got.structure != want.structure:
        wanted = {"tensor": "a tensor", "tuple[2]": "a tuple (output, weights)"}.get(
            want.structure) or _describe_structure(want.structure)
        return f"it returned {_describe_structure(got.structure)}, expected {wanted}."
    if _swapped(got.outputs, want.outputs):
        return ("it returned the two items the other way round: the contract is "
                "(output, weights).")
    paths = leaf_paths(want.structure, len(want.outputs))
    for index, (g, w) in enumerate(zip(got.outputs, want.outputs, strict=True)):
        if w is None:
            continue
        if g is None:
            return f"returned item {paths[index]} is not a plain torch.Tensor."
        # The items of a nested value (the state handed to the next call, such as a cache)
        # are values: another shape there is a wrong value, judged as one.
        if shapes and g.shape != w.shape and "][" not in paths[index]:
            return (f"returned item {paths[index]} has shape {tuple(g.shape)}, "
                    f"expected {tuple(w.shape)}.")
    return None


def shape_problem(got: Forward, want: Forward) -> str | None:
    """How a returned tensor's shape differs from the reference's where the form is the same
    (what ``structure_problem`` leaves out with ``shapes=False``), or None."""
    if structure_problem(got, want, shapes=False) is not None:
        return None
    return structure_problem(got, want)


def leaf_paths(structure: str, count: int) -> list[str]:
    """How each of a forward's ``count`` outputs is named to the student: ``0`` and ``1`` for
    the items of a flat tuple, ``[1][0]`` for item 0 of the tuple returned as item 1."""
    if "(" not in structure:
        return [str(index) for index in range(count)]
    paths: list[str] = []
    inner = structure[structure.index("(") + 1:-1]
    depth, item, start = 0, 0, 0
    for position, char in enumerate(inner + ","):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            form = inner[start:position].strip()
            if "(" in form:
                paths.extend(f"[{item}]{path}" for path in leaf_paths(form, _leaves(form)))
            else:
                paths.append(f"[{item}]")
            item, start = item + 1, position + 1
    return paths + [str(index) for index in range(len(paths), count)]


def _leaves(form: str) -> int:
    """How many outputs a nested item's form stands for (its items, each one output)."""
    depth, count = 0, 1
    for char in form[form.index("(") + 1:-1]:
        depth += {"(": 1, ")": -1}.get(char, 0)
        count += char == "," and depth == 0
    return count


def _swapped(got: tuple[torch.Tensor | None, ...], want: tuple[torch.Tensor | None, ...]) -> bool:
    """Whether a pair came back in the opposite order (recognised by shape, or by value where
    both items have the same shape)."""
    if len(got) != 2 or len(want) != 2 or any(t is None for t in (*got, *want)):
        return False
    g0, g1, w0, w1 = (t for t in (*got, *want) if t is not None)
    if g0.shape == w0.shape and g1.shape == w1.shape:
        return (w0.shape == w1.shape and not tensors_close(g0, w0)
                and tensors_close(g0, w1) and tensors_close(g1, w0))
    return g0.shape == w1.shape and g1.shape == w0.shape


def _describe_structure(structure: str) -> str:
    if structure == "tensor":
        return "a single tensor"
    if structure.startswith(("tuple", "list")) and "(" in structure:
        return f"a {structure}"  # nested: each item's form spelled out
    if structure.startswith(("tuple", "list")):
        return f"a {structure.replace('[', ' of ').replace(']', ' items')}"
    return f"a value of type {structure}"


def _matches_reference(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                       context: CheckContext) -> str | None:
    for index, (got, want) in enumerate(zip(student.forwards, reference.forwards, strict=True)):
        if want.raised is not None:
            continue  # judged by raises-value-error
        if got.raised is not None:
            return f"it raised {got.raised.type}: {_short(got.raised.message)}"
        problem = structure_problem(got, want)
        if problem:
            return problem
        match = forwards_match(got, want)
        if not match.same:
            difference = _value_difference(got, want, call.meta.get("output_names"))
            forward_name = call.meta.get("forward_name")
            if forward_name:
                return f"after {forward_name} {index + 1}, {difference}"
            return difference
    return None


MAX_LISTED_FLAGS = 8
"""A boolean output this small is quoted whole when it differs."""
DEFAULT_OUTPUT_NAMES = ("the output", "the weights")
"""How a forward's outputs are named in feedback unless its call's ``meta["output_names"]``
names them (the attention labs' convention: (output, weights))."""


def _value_difference(got: Forward, want: Forward,
                      output_names: Sequence[str] | None = None) -> str:
    names = list(output_names or DEFAULT_OUTPUT_NAMES)
    paths = leaf_paths(want.structure, len(want.outputs))
    for index, (g, w) in enumerate(zip(got.outputs, want.outputs, strict=True)):
        if g is None or w is None or tensors_close(g, w):
            continue
        if "][" in paths[index]:  # an item of the state handed on (a cache)
            if g.shape != w.shape:
                return (f"returned item {paths[index]} has shape {tuple(g.shape)}, "
                        f"expected {tuple(w.shape)}.")
            name = f"returned item {paths[index]}"
        else:
            named = bool(output_names) or len(got.outputs) > 1
            name = names[index] if index < len(names) and named else "the output"
        if torch.isnan(g.double()).any():
            return f"{name} contains NaN."
        if g.dtype == torch.bool and w.dtype == torch.bool and w.numel() <= MAX_LISTED_FLAGS:
            return f"{name} is {g.tolist()}, expected {w.tolist()}."
        return f"{name} differs from the expected values by up to {max_difference(g, w):.3g}."
    return "the outputs differ from the expected values."


def _raises_value_error(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                        context: CheckContext) -> str | None:
    for got in student.forwards:
        if got.raised is not None and got.raised.value_error:
            return _raised_on_valid_input_too(student, context)
        if got.raised is not None:
            return f"it raised {got.raised.type} instead of ValueError."
    if student.forwards and student.forwards[0].status == "ok":
        outputs = student.forwards[0].outputs
        if any(o is not None and torch.isnan(o.double()).any() for o in outputs):
            return "it returned NaN values instead of raising ValueError."
    return "it returned normally instead of raising ValueError."


def _raised_on_valid_input_too(student: CallOutcome, context: CheckContext) -> str | None:
    """Why the call's ValueError is no rejection of its input, or None: the code raises it,
    from the same lines, on input the contract accepts, and returns on no such input (a check
    that rejects everything). Code that rejects some valid input for another mistake (a causal
    mask that leaves row 0 no key) still tells invalid input from the rest."""
    site = student.raise_site
    same_site = None
    for other in context.plan.calls:
        got, want = context.student.get(other.id), context.reference.get(other.id)
        if got is None or want is None or want.rejected or not got.usable:
            continue
        if got.first_raised is None:
            return None  # it returns on valid input
        if same_site is None and got.raise_site == site:
            same_site = other
    if same_site is None:
        return None
    return (f"it raises this ValueError on valid input too ({same_site.describe}), and on every "
            "valid input, so it does not tell invalid input from valid.")


def _weights(forward: Forward) -> torch.Tensor | None:
    return forward.outputs[1] if len(forward.outputs) > 1 else None


def _weights_sum_to_one(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                        context: CheckContext) -> str | None:
    weights = _weights(student.forwards[0])
    if weights is None or weights.dtype == torch.bool:
        return "no weights tensor was returned."
    sums = weights.double().sum(dim=-1)
    atol, _ = tolerance(_expected_dtype(reference, weights.dtype))
    if torch.isnan(sums).any():
        return "some weights are NaN."
    if bool(((sums - 1).abs() <= max(atol, 1e-4)).all()):
        return None
    return (f"the weights of each query sum to between {float(sums.min()):.3g} and "
            f"{float(sums.max()):.3g} over the keys, not 1.")


def _expected_dtype(reference: CallOutcome, fallback: torch.dtype) -> torch.dtype:
    """The dtype the question asked for (the reference's weights): tolerances follow it."""
    expected = _weights(reference.forwards[0]) if reference.forwards else None
    return expected.dtype if expected is not None else fallback


def _blocked_keys_zero(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                       context: CheckContext) -> str | None:
    weights = _weights(student.forwards[0])
    if weights is None or weights.dtype == torch.bool:
        return "no weights tensor was returned."
    allowed = torch.broadcast_to(context.plan.inputs[call.meta["mask"]], weights.shape)
    leaked = weights.double()[~allowed]
    if leaked.numel() == 0 or bool((leaked == 0).all()):
        return None
    return (f"{int((leaked != 0).sum())} blocked (query, key) pairs got non-zero weight, "
            f"up to {float(leaked.abs().max()):.3g}.")


def _dtype_preserved(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                     context: CheckContext) -> str | None:
    for got, want in zip(student.forwards, reference.forwards, strict=True):
        for g, w in zip(got.outputs, want.outputs, strict=False):
            if g is not None and w is not None and g.dtype != w.dtype:
                return (f"the inputs were {_dtype(w.dtype)} but it returned "
                        f"{_dtype(g.dtype)}.")
    return None


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _gradients_flow(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                    context: CheckContext) -> str | None:
    for got, want in zip(student.forwards, reference.forwards, strict=True):
        if got.backward == "no-graph":
            return "the output is not connected to the inputs: no gradient reaches any of them."
        missing = [position for position, grad in want.grads.items()
                   if not is_zero(grad) and is_zero(got.grads.get(position))]
        if missing:
            return f"no gradient reaches {_positions(call, missing)}."
    return None


def _gradients_match(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                     context: CheckContext) -> str | None:
    for got, want in zip(student.forwards, reference.forwards, strict=True):
        # Gradients through a changed dtype carry that dtype's rounding (never looser than
        # float32's): the change itself is the dtype check's, charged once.
        precision = torch.float32 if dtype_changed(got, want) else None
        differing = [position for position in sorted(set(want.grads) | set(got.grads))
                     if not grads_equivalent(got.grads.get(position), want.grads.get(position),
                                             precision=precision)]
        if differing:
            return f"the gradients of {_positions(call, differing)} differ from the reference's."
    return None


def _inputs_unchanged(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                      context: CheckContext) -> str | None:
    for index, got in enumerate(student.forwards):
        changed = mutated_inputs(got, context.plan.inputs, input_positions(call, index))
        if changed:
            return f"{_positions(call, changed)} changed during the call."
    return None


def _causal_no_leak(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                    context: CheckContext) -> str | None:
    original_id = call.meta.get("perturbs")
    if original_id is None:
        return None
    original = context.student[original_id]
    prefix = int(call.meta["prefix"])
    if not original.usable or not student.usable:
        return "the causal calls did not both run."
    before, after = original.forwards[0].outputs[0], student.forwards[0].outputs[0]
    if before is None or after is None or before.shape != after.shape:
        return "the causal calls did not both return an output."
    if tensors_close(after[:, :prefix], before[:, :prefix]):
        return None
    moved = max_difference(after[:, :prefix], before[:, :prefix])
    return (f"changing positions {prefix} and later moved the outputs at positions "
            f"0..{prefix - 1} by up to {moved:.3g}: earlier positions see later ones.")


def _deterministic_in_eval(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                           context: CheckContext) -> str | None:
    outputs = [forward.outputs[0] for forward in student.forwards if forward.outputs]
    if len(outputs) < 2 or any(output is None for output in outputs):
        return "the eval-mode forwards did not return outputs."
    if not all(tensors_close(o, outputs[0]) for o in outputs[1:]):
        return "two eval-mode forwards on the same input gave different outputs."
    expected = reference.forwards[0].outputs[0]
    if not tensors_close(outputs[0], expected):
        return "eval-mode outputs differ from the expected values (dropout still applied?)."
    return None


def _dropout(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
             context: CheckContext) -> str | None:
    """Dropout as the contract has it: none in eval() (calls judged as ``deterministic-in-eval``)
    and, on a call whose meta names ``dropout_train``, on the attention weights in train()."""
    if "dropout_train" in call.meta:
        return _dropout_on_weights(call, student, context)
    return _deterministic_in_eval(call, student, reference, context)


# How far a decoded attention weight may be from 0 or from its eval() value (scaled): float32
# rounding through two projections is about 1e-6; a known mistake moves them by 0.1 or more.
_DROPOUT_TOLERANCE = 1e-4


def _dropout_on_weights(call: ProbeCall, student: CallOutcome,
                        context: CheckContext) -> str | None:
    """Train-mode forwards against the eval-mode output of the same module on the same input.

    The probe makes each input of out_proj exactly one attention weight (one-hot values) and
    out_proj orthogonal, so ``output @ out_proj.weight`` reads the weights back. Dropout on the
    weights leaves each of them 0 or its eval() value times 1 / (1 - p), whatever the random
    draws; the student is compared with themself, never with the reference's random numbers.
    Where the student's own eval() output is not weights of this form (another mistake changed
    the values or the projections), only what shows on the output itself is judged.
    """
    facts = call.meta["dropout_train"]
    p = float(facts["p"])
    keep = 1.0 / (1.0 - p)
    evaluated = context.student.get(str(facts["eval"]))
    if evaluated is None or not evaluated.usable or not evaluated.forwards:
        return "the eval() call of the same module did not run."
    eval_outputs = [f.outputs[0] if f.outputs else None for f in evaluated.forwards]
    first = eval_outputs[0]
    if first is None or any(o is None or not tensors_close(o, first) for o in eval_outputs[1:]):
        return None  # eval() itself is random: the deterministic-in-eval call says so
    expected = first.double()
    mixing = context.plan.inputs[str(facts["out_proj"])].double()
    decoder = next((d for d in (mixing, torch.eye(mixing.shape[0], dtype=torch.float64))
                    if _weights_like(expected @ d)), None)
    tol = _DROPOUT_TOLERANCE
    for forward in student.forwards:
        trained = forward.outputs[0] if forward.outputs else None
        if trained is None or trained.shape != expected.shape:
            return "the train() forwards did not return outputs of the eval() output's shape."
        got = trained.double()
        if bool(((got - expected).abs() <= tol).all()):
            return (f"in train() with dropout={p:g}, the output equals the eval() output: "
                    "no dropout was applied.")
        if decoder is not None:
            weights, eval_weights = got @ decoder, expected @ decoder
            dropped = weights.abs() <= tol
            if bool((dropped | ((weights - keep * eval_weights).abs() <= tol * keep)).all()):
                continue
            if bool((dropped | ((weights - eval_weights).abs() <= tol)).all()):
                return (f"in train() with dropout={p:g}, some attention weights are zeroed but "
                        f"the kept ones are not scaled by 1 / (1 - p) = {keep:.3g}: they equal "
                        "their eval() values.")
        zeroed = got.abs() <= tol
        if bool((zeroed | ((got - keep * expected).abs() <= tol * keep)).all()) or bool(
                (zeroed | ((got - expected).abs() <= tol)).all()):
            return (f"in train() with dropout={p:g}, each output entry is either 0 or its "
                    "eval() value (scaled): dropout was applied to the output, not to the "
                    "attention weights.")
        if decoder is not None:
            return (f"in train() with dropout={p:g}, the output is not the eval() attention "
                    "with some weights zeroed and the others scaled by 1 / (1 - p): dropout "
                    "went somewhere other than the attention weights after softmax.")
    return None


def _weights_like(values: torch.Tensor) -> bool:
    """Whether every entry could be an attention weight (within [0, 1], up to rounding)."""
    return bool(((values >= -_DROPOUT_TOLERANCE) & (values <= 1 + _DROPOUT_TOLERANCE)).all())


def _decoding_matches_full(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                           context: CheckContext) -> str | None:
    """The call's first forward is one pass over a whole sequence, the next ones decode it
    piece by piece (each handed the state the previous one returned): the pieces' first outputs,
    joined along the sequence axis (dim 1), must equal the whole pass's first output. The
    student is compared with themself: a property of their own code, not of the reference."""
    if not student.forwards or len(student.forwards) < len(reference.forwards):
        return "the call stopped before all of its steps ran."
    first_outputs = [forward.outputs[0] if forward.outputs else None
                     for forward in student.forwards]
    if any(output is None or output.dim() < 2 for output in first_outputs):
        return "a step did not return an output tensor."
    whole, pieces = first_outputs[0], first_outputs[1:]
    assert whole is not None
    if any(piece.shape[0] != whole.shape[0] or piece.shape[2:] != whole.shape[2:]
           for piece in pieces if piece is not None):
        return "the decoding steps returned outputs of another shape than the whole pass."
    joined = torch.cat([piece for piece in pieces if piece is not None], dim=1)
    expected = reference.forwards[0].outputs[0] if reference.forwards[0].outputs else None
    precision = expected.dtype if expected is not None else None
    if tensors_close(joined, whole, precision=precision):
        return None
    if joined.shape != whole.shape:
        return (f"the decoding steps returned {joined.shape[1]} positions in all, the whole "
                f"pass {whole.shape[1]}.")
    atol, _ = tolerance(precision or whole.dtype)
    per_position = (joined.double() - whole.double()).abs().transpose(0, 1).reshape(
        joined.shape[1], -1).amax(dim=1)
    departing = torch.nonzero(~(per_position <= atol)).flatten()  # NaN departs too
    first = int(departing[0]) if departing.numel() else 0
    return (f"decoding step by step with the cache gave other outputs than one causal pass "
            f"over the whole sequence, by up to {max_difference(joined, whole):.3g}, from "
            f"position {first} on.")


def _forwards_agree(call: ProbeCall, student: CallOutcome, reference: CallOutcome,
                    context: CheckContext) -> str | None:
    """Every forward of the call returns the first output its first forward returned, within
    ``meta["agree_within"]`` (absolute; the dtype's tolerance without it). The forwards differ
    only in what the contract says the output does not depend on (rotary attention at equal
    query and key offsets, far from 0), so the student is compared with themself: float32
    rounding at far positions keeps a comparison with the reference from being exact.
    ``meta["later"]`` says in a few words what the later forwards changed."""
    outputs = [forward.outputs[0] if forward.outputs else None for forward in student.forwards]
    first = outputs[0] if outputs else None
    if first is None or len(outputs) < 2 or any(output is None for output in outputs):
        return "a forward did not return an output tensor."
    within = float(call.meta.get("agree_within", tolerance(first.dtype)[0]))
    later = str(call.meta.get("later", "of the later forwards"))
    for output in outputs[1:]:
        assert output is not None
        moved = max_difference(output, first)
        if not moved <= within:
            return (f"the outputs {later} differ from those of the first forward by up to "
                    f"{moved:.3g}, where they should be the same.")
    return None


def input_positions(call: ProbeCall, forward_index: int) -> dict[str, str]:
    """Argument position -> input tensor key, for one forward of a call (the positions the
    sandbox's supervisor watches: ``sandbox.runner.witness.tensor_positions``)."""
    forwards = forward_specs(call.spec)
    if forward_index >= len(forwards):
        return {}
    return dict(tensor_positions(forwards[forward_index][1]))


def _positions(call: ProbeCall, positions: list[str]) -> str:
    names = call.meta.get("argument_names", {})
    readable = [f"`{names.get(p, p.removeprefix('kw.').removeprefix('param.'))}`"
                for p in positions]
    return ", ".join(readable)


def _short(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else ""
    return first[:160]


def dtype_changed(got: Forward, want: Forward) -> bool:
    """Whether an output came back in another dtype than the reference's."""
    return any(g is not None and w is not None and g.dtype != w.dtype
               for g, w in zip(got.outputs, want.outputs, strict=False))
