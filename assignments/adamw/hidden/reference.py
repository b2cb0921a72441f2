"""Hidden: the reference ``AdamW`` and its known-mistake variants, switched on by id.

The reference is ``torch.optim.AdamW`` written out (``tests/unit/test_adamw_reference.py``
proves it equal, step by step): decoupled decay ``p *= 1 - lr * weight_decay`` first, then the
moments, their bias corrections and ``p -= lr * m̂ / (sqrt(v̂) + eps)``, with a step counter per
parameter that only counts the steps in which the parameter had a gradient. Variants compose:
``namespace({"no-bias-correction", "state-reset"})`` behaves like a student who made both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from assignments.model import KnownMistake

_CORRECTIONS = frozenset({"no-bias-correction", "first-moment-correction-only",
                          "eps-paper-form"})
_EPS = frozenset({"eps-inside-sqrt", "eps-paper-form"})
_DECAYS = frozenset({"l2-in-gradient", "decay-not-scaled-by-lr", "decay-after-update",
                     "decay-missing"})
_NO_GRAD = frozenset({"grad-none-crash", "grad-none-zero"})
# Mistakes of the update's numbers: a step whose result never reaches the caller's parameters
# (rebinds-parameter) hides every one of them.
_UPDATE = (_CORRECTIONS | _EPS | _DECAYS
           | {"shared-step-counter", "state-reset", "constructor-hyperparameters"})


def _others(group: frozenset[str], own: str) -> frozenset[str]:
    return group - {own}


MISTAKES: list[KnownMistake] = [
    KnownMistake("no-bias-correction", "no-bias-correction",
                 "m and v used as they are, without dividing by 1 - beta1**t and "
                 "1 - beta2**t", excludes=_others(_CORRECTIONS, "no-bias-correction")
                 | {"shared-step-counter"}),
    KnownMistake("first-moment-correction-only", "no-bias-correction",
                 "m divided by 1 - beta1**t but v used without its correction 1 - beta2**t",
                 excludes=_others(_CORRECTIONS, "first-moment-correction-only")),
    KnownMistake("l2-in-gradient", "coupled-weight-decay",
                 "weight_decay * p added to the gradient before the moments (Adam's L2 "
                 "penalty) instead of shrinking p itself",
                 excludes=_others(_DECAYS, "l2-in-gradient")),
    KnownMistake("decay-not-scaled-by-lr", "decay-not-scaled-by-lr",
                 "p multiplied by 1 - weight_decay instead of 1 - lr * weight_decay",
                 excludes=_others(_DECAYS, "decay-not-scaled-by-lr")),
    KnownMistake("decay-after-update", "decay-after-update",
                 "p shrunk by 1 - lr * weight_decay after the Adam update, so the update "
                 "is shrunk too", excludes=_others(_DECAYS, "decay-after-update")),
    KnownMistake("decay-missing", "weight-decay-missing",
                 "weight_decay never applied (Adam's update without its decay)",
                 excludes=_others(_DECAYS, "decay-missing")),
    KnownMistake("eps-inside-sqrt", "eps-misplaced",
                 "sqrt(v̂ + eps) in the denominator instead of sqrt(v̂) + eps",
                 excludes=_others(_EPS, "eps-inside-sqrt")),
    KnownMistake("eps-paper-form", "eps-misplaced",
                 "the corrections folded into the step size, lr * sqrt(1 - beta2**t) / "
                 "(1 - beta1**t), with eps added to the uncorrected sqrt(v): eps is then "
                 "scaled by the correction", excludes=_others(_EPS | _CORRECTIONS,
                                                              "eps-paper-form")),
    # The counter is read only by the bias corrections, and drifts from a parameter's own
    # count only when that parameter skips a step: without either it changes nothing.
    KnownMistake("shared-step-counter", "step-counter-shared",
                 "one step counter for the whole optimiser, so a parameter that skipped "
                 "steps is corrected as if it had taken them",
                 excludes=_NO_GRAD | {"no-bias-correction"}),
    KnownMistake("state-reset", "state-not-kept",
                 "m and v start from zero again in every step (new tensors, never stored "
                 "back), while the step count goes on"),
    KnownMistake("rebinds-parameter", "not-in-place",
                 "the new value is bound to a name (p = p - ...), a new tensor: the "
                 "parameter the optimiser was given never changes",
                 excludes=_UPDATE | {"data-assigned", "grad-none-zero"}),
    KnownMistake("data-assigned", "not-in-place",
                 "the new value is assigned to p.data, which gives the parameter new memory",
                 excludes=frozenset({"rebinds-parameter"})),
    KnownMistake("grad-none-crash", "grad-none-not-skipped",
                 "a parameter whose .grad is None is used anyway, and the step raises",
                 crashes=True,
                 excludes=_others(_NO_GRAD, "grad-none-crash") | {"shared-step-counter"}),
    KnownMistake("grad-none-zero", "grad-none-not-skipped",
                 "a parameter whose .grad is None is stepped as if its gradient were zero: "
                 "decay and momentum still move it",
                 excludes=_others(_NO_GRAD, "grad-none-zero")
                 | {"shared-step-counter", "rebinds-parameter"}),
    KnownMistake("constructor-hyperparameters", "group-hyperparameters-ignored",
                 "the constructor's lr, betas, eps and weight_decay used for every group, "
                 "whatever the group sets"),
    KnownMistake("not-validated", "misuse-accepted",
                 "hyperparameters out of range (a negative lr, a beta of 1) accepted"),
]


class AdamW:
    """``torch.optim.AdamW``'s update: ``params`` is an iterable of tensors or of parameter
    groups (dicts with ``params`` and any hyperparameter, the constructor's for the rest)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, *,
                 mistakes: frozenset[str] = frozenset()) -> None:
        self.mistakes = mistakes
        if "not-validated" not in mistakes:
            if lr < 0.0:
                raise ValueError(f"invalid learning rate: {lr}")
            if eps < 0.0:
                raise ValueError(f"invalid epsilon: {eps}")
            if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
                raise ValueError(f"invalid betas: {betas}")
            if weight_decay < 0.0:
                raise ValueError(f"invalid weight_decay: {weight_decay}")
        self.defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.param_groups = [{**self.defaults, **group, "params": list(group["params"])}
                             for group in groups]
        self.state: dict[torch.Tensor, dict[str, Any]] = {}
        self.steps_taken = 0

    def zero_grad(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.steps_taken += 1
        for group in self.param_groups:
            if "constructor-hyperparameters" in self.mistakes:
                group = {**group, **self.defaults}
            lr, (beta1, beta2) = group["lr"], group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    if "grad-none-zero" in self.mistakes:
                        grad = torch.zeros_like(p)
                    elif "grad-none-crash" not in self.mistakes:
                        continue
                if "rebinds-parameter" in self.mistakes:
                    p = p - 0.0
                self._update(p, grad, lr, beta1, beta2, eps, weight_decay)

    def _update(self, p: torch.Tensor, grad: torch.Tensor, lr: float, beta1: float,
                beta2: float, eps: float, weight_decay: float) -> None:
        state = self.state.get(p)
        if state is None:
            state = {"step": 0, "exp_avg": torch.zeros_like(p),
                     "exp_avg_sq": torch.zeros_like(p)}
            self.state[p] = state
        state["step"] += 1
        t = state["step"]
        if "shared-step-counter" in self.mistakes:
            t = self.steps_taken

        if "l2-in-gradient" in self.mistakes:
            grad = grad + weight_decay * p
        elif "decay-not-scaled-by-lr" in self.mistakes:
            p.mul_(1 - weight_decay)
        elif "decay-missing" in self.mistakes:
            pass
        elif "decay-after-update" not in self.mistakes:
            p.mul_(1 - lr * weight_decay)

        m, v = state["exp_avg"], state["exp_avg_sq"]
        if "state-reset" in self.mistakes:
            m, v = torch.zeros_like(p), torch.zeros_like(p)
        m.mul_(beta1).add_((1 - beta1) * grad)
        v.mul_(beta2).add_((1 - beta2) * grad * grad)
        correction1 = 1 - beta1 ** t
        correction2 = 1 - beta2 ** t
        if "no-bias-correction" in self.mistakes:
            correction1 = correction2 = 1.0
        elif "first-moment-correction-only" in self.mistakes:
            correction2 = 1.0

        if "eps-inside-sqrt" in self.mistakes:
            denominator = (v / correction2 + eps).sqrt()
        elif "eps-paper-form" in self.mistakes:
            denominator = (v.sqrt() + eps) / correction2 ** 0.5
        else:
            denominator = (v / correction2).sqrt() + eps
        update = (m / correction1) / denominator

        if "data-assigned" in self.mistakes:
            p.data = p.data - lr * update
        else:
            p.sub_(lr * update)
        if "decay-after-update" in self.mistakes:
            p.mul_(1 - lr * weight_decay)


def namespace(mistakes: frozenset[str]) -> dict[str, Any]:
    """What a submission with exactly these mistakes would export."""

    class WithMistakes(AdamW):
        def __init__(self, params: Iterable[Any], *args: Any, **kwargs: Any) -> None:
            super().__init__(params, *args, mistakes=mistakes, **kwargs)

    return {"AdamW": WithMistakes}
