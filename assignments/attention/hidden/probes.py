"""Hidden: the probe plan of ``attention``: which calls the sandbox makes, on which inputs."""

from __future__ import annotations

from typing import Any

import torch

from assignments.model import ProbeCall
from assignments.probing import InputBank, shape_of, tensor

B, H, T, S, D, DV = 2, 3, 5, 7, 8, 6
# Larger than unit scores make softmax sharp enough that each known mistake moves the
# outputs far beyond the comparison tolerance.
SCALE = 1.5
# Coordinate 0 of q and k in the large-scores probe: scores of about 280, past float32's exp
# overflow (88) even under the smallest wrong scale (1 / D).
OFFSET = 28.3
ARGUMENT_NAMES = {"arg0": "q", "arg1": "k", "arg2": "v", "arg3": "allowed"}


def build_calls(seed: int) -> tuple[list[ProbeCall], dict[str, torch.Tensor]]:
    bank = InputBank(seed)
    calls: list[ProbeCall] = []

    def qkv(name: str, lead: tuple[int, ...], t: int, s: int, dtype: torch.dtype) -> list[str]:
        return [
            bank.randn(f"{name}.q", *lead, t, D, dtype=dtype, scale=SCALE),
            bank.randn(f"{name}.k", *lead, s, D, dtype=dtype, scale=SCALE),
            bank.randn(f"{name}.v", *lead, s, DV, dtype=dtype),
        ]

    def add(name: str, group: str, lead: tuple[int, ...], mask: str, *, t: int = T, s: int = S,
            dtype: torch.dtype = torch.float32, grad: bool = False, what: str = "") -> None:
        q, k, v = qkv(name, lead, t, s, dtype)
        spec: dict[str, Any] = {
            "target": "attention",
            "args": [tensor(q, grad=grad), tensor(k, grad=grad), tensor(v, grad=grad),
                     tensor(mask)],
        }
        if grad:
            spec["backward"] = {"output": 0, "grad": bank.randn(f"{name}.grad", *lead, t, DV,
                                                                dtype=dtype)}
        dtype_name = "float64" if dtype is torch.float64 else "float32"
        describe = (f"q {shape_of(bank, q)}, k {shape_of(bank, k)}, v {shape_of(bank, v)} "
                    f"({dtype_name}) with {what} `allowed` {shape_of(bank, mask)}")
        calls.append(ProbeCall(name, spec, group, describe,
                               meta={"mask": mask, "argument_names": ARGUMENT_NAMES}))

    add("plain", "plain", (B,), bank.add("plain.allowed", torch.ones(T, S, dtype=torch.bool)),
        what="an all-True")
    add("heads", "plain", (B, H),
        bank.add("heads.allowed", torch.ones(T, S, dtype=torch.bool)), what="an all-True")
    add("masked-2d", "masked", (B,), bank.mixed_mask("masked-2d.allowed", T, S), what="a mixed")
    add("masked-batched", "masked", (B, H), bank.mixed_mask("masked-batched.allowed", B, 1, T, S),
        what="a per-batch mixed")
    add("causal-mask", "masked", (B,),
        bank.add("causal-mask.allowed", torch.ones(T + 1, T + 1, dtype=torch.bool).tril()),
        t=T + 1, s=T + 1, what="a lower-triangular (causal)")

    bank.value(bank.mixed_mask("all-masked.allowed", T, S))[2] = False
    add("all-masked", "all-masked", (B,), "all-masked.allowed",
        what="a mixed (query row 2 has no allowed key)")
    bank.value(bank.mixed_mask("all-masked-batched.allowed", B, 1, T, S))[1, 0, T - 1] = False
    add("all-masked-batched", "all-masked", (B, H), "all-masked-batched.allowed",
        what=f"a per-batch mixed (batch 1, query row {T - 1} has no allowed key)")

    add("grad-plain", "float64", (B,),
        bank.add("grad-plain.allowed", torch.ones(T, S, dtype=torch.bool)),
        dtype=torch.float64, grad=True, what="an all-True")
    add("grad-masked", "float64", (B,), bank.mixed_mask("grad-masked.allowed", T, S),
        dtype=torch.float64, grad=True, what="a mixed")

    # Large scores, as a trained model's logits are: coordinate 0 of every q and k row is
    # OFFSET, the others as in the other probes, so every score is OFFSET**2 / sqrt(D) (about
    # 280) plus an ordinary one. Softmax ignores a shift shared by a row (or a column), so each
    # variant moves these outputs as it does ordinary ones; but the scores stay above 88, where
    # float32 exp overflows, under every wrong scale. torch.softmax subtracts the row maximum
    # and is exact here; exp(scores) / sum is inf / inf = NaN.
    q, k, v = qkv("large-scores", (B,), T, S, torch.float32)
    for key in (q, k):
        bank.value(key)[..., 0] = OFFSET
    mask = bank.mixed_mask("large-scores.allowed", T, S)
    calls.append(ProbeCall(
        "large-scores", {"target": "attention",
                         "args": [tensor(q), tensor(k), tensor(v), tensor(mask)]},
        "masked",  # not a group of its own, where a saturated softmax could pass for a pair
        f"q {shape_of(bank, q)}, k {shape_of(bank, k)}, v {shape_of(bank, v)} (float32) whose "
        f"scores are all about {OFFSET ** 2 / D ** 0.5:.0f} (as a trained model's get), with a "
        f"mixed `allowed` {shape_of(bank, mask)}",
        meta={"mask": mask, "argument_names": ARGUMENT_NAMES}))
    return calls, bank.tensors
