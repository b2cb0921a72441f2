"""The training probe: a tiny fixed transformer trained with the student's attention.

The probe runner executes it in the sandbox on the student's code; the grader executes the same
code on the reference (the curve to compare with) and rebuilds the same model with the reference
attention and the student's returned weights (what those weights really compute). Everything it
needs comes from the call and the plan's inputs: data, held-out inputs and initial weights are
drawn by the grader from the grading seed; the held-out answers never come here.

It returns data only, as one tuple of plain tensors: the loss before each step followed by the
final loss on the whole training set (float64), the next-token logits on the held-out inputs
at every position (float32), and the final weights flattened in the call's order (float32).

Only the standard library and torch may be imported here (it runs next to student code).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn

FUNCTION_LAYER = "function"
"""The student's ``attention(q, k, v, allowed)`` inside our projections."""
MODULE_LAYER = "module"
"""The student's attention module, built as ``cls(d_model, num_heads)`` and called as
``module(x, causal=True)``."""


# Our layers skip their random initialisation: ``load_weights`` sets every weight from the
# call's initial weights, and a draw from the global generator here would move the dropout
# masks of the training (in the sandbox) or of another thread's seeded run (on the grader,
# which builds this model to recompute what the returned weights give). Not
# ``torch.nn.utils.skip_init``: it initialises on the meta device, whose first use imports
# torch's reference implementations, a cost every sandbox run would pay.


class _Linear(nn.Linear):
    def reset_parameters(self) -> None:
        """Left as allocated: every weight is loaded before use."""


class _Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        """Left as allocated: every weight is loaded before use."""


class _FunctionAttention(nn.Module):
    """Single-head causal self-attention around an attention function."""

    def __init__(self, attention: Callable[..., Any], d_model: int) -> None:
        super().__init__()
        self.attention = attention
        self.q = _Linear(d_model, d_model, bias=False)
        self.k = _Linear(d_model, d_model, bias=False)
        self.v = _Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-2]
        allowed = torch.ones(length, length, dtype=torch.bool).tril()
        returned = self.attention(self.q(x), self.k(x), self.v(x), allowed)
        output: torch.Tensor = returned[0] if isinstance(returned, tuple | list) else returned
        return output


class _ModuleAttention(nn.Module):
    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.layer = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        returned: torch.Tensor = self.layer(x, causal=True)
        return returned


class TinyTransformer(nn.Module):
    """Token and position embeddings, one causal attention layer with a residual, a readout."""

    def __init__(self, attend: nn.Module, *, vocab: int, length: int, d_model: int) -> None:
        super().__init__()
        self.token = _Embedding(vocab, d_model)
        self.position = _Embedding(length, d_model)
        self.attend = attend
        self.readout = _Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.token(tokens) + self.position(torch.arange(tokens.shape[-1]))
        logits: torch.Tensor = self.readout(x + self.attend(x))
        return logits


def build_model(namespace: Mapping[str, Any], call: Mapping[str, Any]) -> TinyTransformer:
    """The call's model around the namespace's attention (KeyError when it is missing)."""
    spec = call["learn"]
    d_model = int(spec["d_model"])
    target = namespace[call["target"]]
    attend: nn.Module
    if spec["layer"] == MODULE_LAYER:
        module = target(d_model, int(spec["num_heads"]))
        if not isinstance(module, nn.Module):
            raise TypeError(f"{call['target']}(...) did not build a torch.nn.Module")
        attend = _ModuleAttention(module)
    else:
        attend = _FunctionAttention(target, d_model)
    return TinyTransformer(attend, vocab=int(spec["vocab"]), length=int(spec["length"]),
                           d_model=d_model)


def load_weights(model: nn.Module, names: list[str], flat: torch.Tensor | None = None,
                 inputs: Mapping[str, torch.Tensor] | None = None, prefix: str = "") -> None:
    """Set the named parameters from one flat tensor, or from ``inputs[prefix + name]``.

    Every name counts, aliases too: a layer held in an nn.ModuleList and also assigned to its
    contract name is found under that name."""
    parameters = dict(model.named_parameters(remove_duplicate=False))
    offset = 0
    with torch.no_grad():
        for name in names:
            parameter = parameters.get(name)
            if parameter is None:
                raise TypeError(f"the model has no parameter {name!r} (is it an nn.Linear "
                                "attribute of the module?)")
            if flat is not None:
                value = flat[offset:offset + parameter.numel()].view(parameter.shape)
                offset += parameter.numel()
            else:
                assert inputs is not None
                value = inputs[prefix + name]
            if tuple(value.shape) != tuple(parameter.shape):
                raise TypeError(f"{name} has shape {tuple(parameter.shape)}, expected "
                                f"{tuple(value.shape)}")
            parameter.copy_(value.to(parameter.dtype))


def flat_weights(model: nn.Module, names: list[str]) -> torch.Tensor:
    parameters = dict(model.named_parameters(remove_duplicate=False))
    return torch.cat([parameters[name].detach().reshape(-1).float() for name in names])


def training_loss(model: nn.Module, tokens: torch.Tensor, first: int) -> torch.Tensor:
    """Mean cross-entropy of the next token, from position ``first`` on (the earlier tokens
    are random: nothing can predict them)."""
    logits = model(tokens[:, :-1])[:, first:]
    targets = tokens[:, first + 1:]
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def held_out_logits(model: nn.Module, held_out: torch.Tensor) -> torch.Tensor:
    """The model's next-token logits at every position of the held-out inputs (float32)."""
    with torch.no_grad():
        logits: torch.Tensor = model(held_out).float()
    return logits


class Adam:
    """Adam with torch.optim.Adam's defaults and update (its one-tensor-at-a-time form, the one
    it takes on the CPU), written here: constructing torch's first optimiser imports
    torch._dynamo, a cost every sandbox run and every one-off grading on the host would pay."""

    def __init__(self, parameters: Iterable[nn.Parameter], *, lr: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.parameters = [p for p in parameters if p.requires_grad]
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.steps = 0
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.parameters]

    def zero_grad(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        step_size = self.lr / (1 - self.beta1 ** self.steps)
        correction_sqrt = (1 - self.beta2 ** self.steps) ** 0.5
        for parameter, (mean, square) in zip(self.parameters, self.moments, strict=True):
            gradient = parameter.grad
            if gradient is None:
                continue
            mean.lerp_(gradient, 1 - self.beta1)
            square.mul_(self.beta2).addcmul_(gradient, gradient, value=1 - self.beta2)
            denominator = (square.sqrt() / correction_sqrt).add_(self.eps)
            parameter.addcdiv_(mean, denominator, value=-step_size)


def train(namespace: Mapping[str, Any], call: Mapping[str, Any],
          inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Train the call's model with the namespace's attention; (curve, logits, weights)."""
    spec = call["learn"]
    names = list(spec["weights"])
    model = build_model(namespace, call)
    load_weights(model, names, inputs=inputs, prefix=spec["init_prefix"])
    data, held_out = inputs[spec["data"]], inputs[spec["held_out"]]
    first, batch, steps = int(spec["first"]), int(spec["batch"]), int(spec["steps"])
    optimiser = Adam(model.parameters(), lr=float(spec["lr"]))
    model.train()
    curve = []
    for step in range(steps):
        start = (step * batch) % data.shape[0]
        loss = training_loss(model, data[start:start + batch], first)
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimiser.step()
        curve.append(float(loss.detach()))
    model.eval()
    with torch.no_grad():
        curve.append(float(training_loss(model, data, first)))
    return (torch.tensor(curve, dtype=torch.float64), held_out_logits(model, held_out),
            flat_weights(model, names))
