"""Hidden: the probe plan of ``multi-head-attention``: modules, weights, inputs, masks."""

from __future__ import annotations

from typing import Any

import torch

from assignments.model import ProbeCall
from assignments.probing import InputBank, shape_of, tensor

B, T, TK, D, H = 2, 5, 7, 12, 3
T_CAUSAL, CAUSAL_PREFIX = 6, 3
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
ARGUMENT_NAMES = {"arg0": "query", "kw.key_value": "key_value",
                  "kw.attention_mask": "attention_mask", "kw.key_padding_mask": "key_padding_mask"}
# Projection weights scaled so that per-head scores spread over a few units: softmax is sharp
# enough that every known mistake moves the outputs far beyond the comparison tolerance.
WEIGHT_SCALE = 0.45
# The constant coordinate of each head's queries and keys in the large-scores probe: scores of
# about 300, past float32's exp overflow (88) even under the smallest wrong scale (1 / head_dim).
LARGE_BIAS = 24.5
# The dropout probes: p, and for each head the slot of each of the DROPOUT_KEYS tokens. Each
# row is a permutation (one token per slot in a head); read as a plain reshape of (T, D) into
# (H, T, head_dim), every block of 4 also has distinct slots (checked in test_assignments).
DROPOUT_P = 0.4
DROPOUT_KEYS = 4
DROPOUT_SLOTS = ((0, 1, 2, 3), (2, 1, 3, 0), (3, 0, 1, 2))


def build_calls(seed: int) -> tuple[list[ProbeCall], dict[str, torch.Tensor]]:
    bank = InputBank(seed)
    calls: list[ProbeCall] = []
    weights = {dtype: _weights(bank, dtype) for dtype in (torch.float32, torch.float64)}
    no_bias = {name: key for name, key in weights[torch.float32].items() if name.endswith("weight")}

    def module_call(name: str, group: str, describe: str, forwards: list[dict[str, Any]], *,
                    dtype: torch.dtype = torch.float32, init_kwargs: dict[str, Any] | None = None,
                    parameters: dict[str, str] | None = None, train: bool = False,
                    **extra: Any) -> None:
        spec: dict[str, Any] = {
            "target": "ManualMultiHeadAttention",
            "init": {"args": [D, H], "kwargs": {"dropout": 0.0, "bias": True,
                                                **(init_kwargs or {})}},
            "parameters": weights[dtype] if parameters is None else parameters,
            "train": train,
            "forward": forwards,
        }
        if dtype is torch.float64:
            spec["dtype"] = "float64"
        meta = {"argument_names": ARGUMENT_NAMES, **extra.pop("meta", {})}
        calls.append(ProbeCall(name, spec, group, describe, meta=meta, **extra))

    def forward(query: str, *, grad: bool = False, **kwargs: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {"args": [tensor(query, grad=grad)], "kwargs": kwargs}
        if grad:
            shape = bank.value(query).shape
            spec["backward"] = {"output": 0, "grad": bank.randn(
                f"{query}.upstream", *shape, dtype=bank.value(query).dtype)}
        return spec

    def x(name: str, t: int = T, dtype: torch.dtype = torch.float32) -> str:
        return bank.randn(name, B, t, D, dtype=dtype)

    q = x("self.query")
    module_call("self", "self", f"self-attention on query {shape_of(bank, q)}, no mask",
                [forward(q, grad=True)])
    q = x("no-bias.query")
    module_call("no-bias", "self", f"self-attention with bias=False on query "
                f"{shape_of(bank, q)}", [forward(q)], init_kwargs={"bias": False},
                parameters=no_bias)
    q = x("self-f64.query", dtype=torch.float64)
    module_call("self-f64", "float64", f"float64 self-attention on query {shape_of(bank, q)}",
                [forward(q, grad=True)], dtype=torch.float64)

    q, kv = x("cross.query"), x("cross.key_value", TK)
    module_call("cross", "cross", f"cross-attention from query {shape_of(bank, q)} to "
                f"key_value {shape_of(bank, kv)}",
                [forward(q, grad=True, key_value=tensor(kv, grad=True))])

    for suffix, shape in (("2d", (T, T)), ("3d", (B, T, T)), ("4d", (1, H, T, T))):
        q = x(f"attn-mask-{suffix}.query")
        mask = bank.mixed_mask(f"attn-mask-{suffix}.mask", *shape)
        module_call(f"attn-mask-{suffix}", "attention-mask",
                    f"self-attention on query {shape_of(bank, q)} with a mixed attention_mask "
                    f"{shape_of(bank, mask)}", [forward(q, attention_mask=tensor(mask))])

    q, kv = x("padding.query"), x("padding.key_value", TK)
    padding = bank.add("padding.mask", torch.tensor(
        [[True] * (TK - 2) + [False] * 2, [True] * (TK - 4) + [False] * 4]))
    module_call("padding", "padding", f"cross-attention from query {shape_of(bank, q)} to "
                f"key_value {shape_of(bank, kv)} with key_padding_mask {shape_of(bank, padding)} "
                "(the last 2 and 4 keys are padding)",
                [forward(q, key_value=tensor(kv), key_padding_mask=tensor(padding))])

    q = x("causal.query", T_CAUSAL)
    perturbed = bank.value(q).clone()
    perturbed[:, CAUSAL_PREFIX:] = torch.randn(B, T_CAUSAL - CAUSAL_PREFIX, D,
                                               generator=bank.generator)
    q2 = bank.add("causal-perturbed.query", perturbed)
    describe = f"self-attention on query {shape_of(bank, q)} with causal=True"
    module_call("causal", "causal", describe, [forward(q, causal=True)])
    module_call("causal-perturbed", "causal",
                describe + f", positions {CAUSAL_PREFIX} and later changed",
                [forward(q2, causal=True)],
                meta={"perturbs": "causal", "prefix": CAUSAL_PREFIX})

    q = x("combined.query", T_CAUSAL)
    pad = torch.ones(B, T_CAUSAL, dtype=torch.bool)
    pad[1, -2:] = False
    padding_key = bank.add("combined.padding", pad)
    combined = bank.value(bank.mixed_mask("combined.mask", T_CAUSAL, T_CAUSAL))
    combined[:, 0] = True  # every query keeps key 0: the AND of all masks leaves each row a key
    module_call("combined", "causal",
                f"self-attention on query {shape_of(bank, q)} with causal=True, an "
                f"attention_mask {tuple(combined.shape)} and a key_padding_mask "
                f"{tuple(pad.shape)} together",
                [forward(q, causal=True, attention_mask=tensor("combined.mask"),
                         key_padding_mask=tensor(padding_key))])

    q, kv = x("all-masked.query"), x("all-masked.key_value", TK)
    blocked = torch.ones(B, TK, dtype=torch.bool)
    blocked[1] = False
    blocked_key = bank.add("all-masked.padding", blocked)
    module_call("all-masked", "all-masked",
                f"cross-attention from query {shape_of(bank, q)} with a key_padding_mask "
                f"{tuple(blocked.shape)} that blocks every key of batch 1",
                [forward(q, key_value=tensor(kv), key_padding_mask=tensor(blocked_key))])

    q = x("all-masked-attn.query")
    rows = bank.value(bank.mixed_mask("all-masked-attn.mask", T, T))
    rows[1] = False
    module_call("all-masked-attn", "all-masked",
                f"self-attention on query {shape_of(bank, q)} with an attention_mask "
                f"{tuple(rows.shape)} whose query row 1 allows no key",
                [forward(q, attention_mask=tensor("all-masked-attn.mask"))])

    calls.append(ProbeCall(
        "bad-heads", {"target": "ManualMultiHeadAttention",
                      "init": {"args": [10, 3], "kwargs": {}}, "forward": []},
        "validation", "ManualMultiHeadAttention(d_model=10, num_heads=3)"))

    q = x("eval-dropout.query")
    module_call("eval-dropout", "dropout",
                f"a module built with dropout=0.5, put in eval(), called twice on query "
                f"{shape_of(bank, q)}",
                [dict(forward(q), seed=1), dict(forward(q), seed=2)],
                init_kwargs={"dropout": 0.5}, compare="reference-only")

    # Large scores, as a trained model's are: in every head, q_proj and k_proj give coordinate
    # 0 the constant LARGE_BIAS (its weight row zeroed, its bias LARGE_BIAS), the others as in
    # the other probes, so every score is LARGE_BIAS**2 / sqrt(head_dim) (about 300) plus an
    # ordinary one. Softmax ignores a shift shared by a row (or a column), so each variant
    # moves these outputs as it does ordinary ones; but the scores stay above 88, where
    # float32 exp overflows, under every wrong scale. torch.softmax subtracts the row maximum
    # and is exact here; exp(scores) / sum is inf / inf = NaN.
    large = dict(weights[torch.float32])
    for projection in ("q_proj", "k_proj"):
        weight = bank.value(large[f"{projection}.weight"]).clone()
        bias = bank.value(large[f"{projection}.bias"]).clone()
        weight[::D // H] = 0.0
        bias[::D // H] = LARGE_BIAS
        large[f"{projection}.weight"] = bank.add(f"large-scores.{projection}.weight", weight)
        large[f"{projection}.bias"] = bank.add(f"large-scores.{projection}.bias", bias)
    q = x("large-scores.query")
    # In the "self" group: alone, a saturated sigmoid (all weights 1) would pass for a pair.
    module_call("large-scores", "self",
                f"self-attention on query {shape_of(bank, q)} with projections whose scores are "
                f"all about {LARGE_BIAS ** 2 / (D // H) ** 0.5:.0f} (as a trained model's get)",
                [forward(q)], parameters=large)

    # Dropout in train(), told from the outputs alone, whatever the random draws: self-attention
    # on DROPOUT_KEYS one-hot tokens (token j's slice of head h is the unit vector
    # DROPOUT_SLOTS[h][j]), k_proj = v_proj = identity and out_proj an orthogonal matrix, all
    # without bias. Every input of out_proj (output @ out_proj.weight) is then exactly one
    # attention weight, so dropout on the weights zeroes some of them and scales the others by
    # 1 / (1 - p) with respect to the eval() output of the same module; dropout on the output,
    # unscaled dropout or none at all leave other traces. The slots also keep one weight per
    # entry when the heads are split by a plain reshape (every head reads one slot per token).
    tokens = torch.zeros(B, DROPOUT_KEYS, D)
    for h, slots in enumerate(DROPOUT_SLOTS):
        for j, slot in enumerate(slots):
            tokens[:, j, h * (D // H) + slot] = 1.0
    q = bank.add("dropout.query", tokens)
    identity = bank.add("dropout.identity", torch.eye(D))
    zero = bank.add("dropout.zero", torch.zeros(D))
    mixing = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(16),
                                         dtype=torch.float64)).Q
    out_weight = bank.add("dropout.out_proj.weight", mixing.float())
    dropout_weights = {**weights[torch.float32],
                       "k_proj.weight": identity, "k_proj.bias": zero,
                       "v_proj.weight": identity, "v_proj.bias": zero,
                       "out_proj.weight": out_weight, "out_proj.bias": zero}
    describe = (f"self-attention on query {shape_of(bank, q)} of one-hot tokens, k_proj and "
                f"v_proj the identity, a module built with dropout={DROPOUT_P:g}")
    module_call("dropout-eval", "dropout", describe + ", put in eval(), called twice",
                [dict(forward(q), seed=5), dict(forward(q), seed=6)],
                init_kwargs={"dropout": DROPOUT_P}, parameters=dropout_weights,
                compare="reference-only")
    module_call("dropout-train", "dropout", describe + ", in train(), called with seeds 3 and 4",
                [dict(forward(q), seed=3), dict(forward(q), seed=4)],
                init_kwargs={"dropout": DROPOUT_P}, parameters=dropout_weights, train=True,
                compare="property",
                meta={"dropout_train": {"eval": "dropout-eval", "p": DROPOUT_P,
                                        "out_proj": out_weight}})
    return calls, bank.tensors


def _weights(bank: InputBank, dtype: torch.dtype) -> dict[str, str]:
    keys = {}
    suffix = "f64" if dtype is torch.float64 else "f32"
    for projection in PROJECTIONS:
        keys[f"{projection}.weight"] = bank.randn(f"{suffix}.{projection}.weight", D, D,
                                                  dtype=dtype, scale=WEIGHT_SCALE)
        keys[f"{projection}.bias"] = bank.randn(f"{suffix}.{projection}.bias", D, dtype=dtype,
                                                scale=0.1)
    return keys
