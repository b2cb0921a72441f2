"""Hidden: the probe plan of ``attention-kv-cache``: modules, weights, sequences, caches, misuse.

A call with a cache is several forwards of one module: each later forward is handed the cache
the one before it returned (``earlier(N, 1)``), so the cache travels as the
student's code returned it, and every step's output and returned cache are compared.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from assignments.model import ProbeCall
from assignments.probing import EarlierOutput, InputBank, earlier, shape_of, tensor

B, D, H = 2, 16, 2
T, TK = 6, 7
PREFILL = 4
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
ARGUMENT_NAMES = {"arg0": "query", "kw.key_value": "key_value",
                  "kw.key_padding_mask": "key_padding_mask",
                  "kw.query_padding_mask": "query_padding_mask"}
# Weights scaled so that per-head scores spread over a few units: the softmax is sharp enough
# for every known mistake to move the outputs far beyond the comparison tolerance.
WEIGHT_SCALE = 0.5
# A small rotary base: every pair of a head of width 8 turns by a visible angle per position,
# so a pairing or an offset mistake shows in all features, not only in the fastest pair.
ROPE_BASE = 100.0
# Far beyond the tables of a fixed maximum length (2048 to 8192 positions) that code written
# for one model builds.
FAR = 10000
# How far the outputs at FAR may be from those at 0: angles rounded to float32 there are off by
# up to 1e-3 radians, which moves these outputs by up to about 4e-3; a table that stops short
# of FAR raises, or moves them by 0.1 or more.
FAR_AGREEMENT = 3e-2


def build_calls(seed: int) -> tuple[list[ProbeCall], dict[str, torch.Tensor]]:
    bank = InputBank(seed)
    calls: list[ProbeCall] = []
    weights = _weights(bank)

    def module_call(name: str, group: str, describe: str, forwards: list[dict[str, Any]], *,
                    use_rope: bool = True, init: dict[str, Any] | None = None,
                    train: bool = False, **extra: Any) -> None:
        kwargs = {"dropout": 0.0, "bias": True, "use_rope": use_rope, "rope_base": ROPE_BASE,
                  **(init or {})}
        spec: dict[str, Any] = {
            "target": "ManualMultiHeadAttention",
            "init": {"args": [D, H], "kwargs": {name: value for name, value in kwargs.items()
                                                if value is not None}},
            "parameters": weights,
            "train": train,
            "forward": forwards,
        }
        meta = {"argument_names": ARGUMENT_NAMES, **extra.pop("meta", {})}
        calls.append(ProbeCall(name, spec, group, describe, meta=meta, **extra))

    def forward(query: str, *, grad: bool = False, **kwargs: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {"args": [tensor(query, grad=grad)], "kwargs": kwargs}
        if grad:
            shape = bank.value(query).shape
            spec["backward"] = {"output": 0, "grad": bank.randn(f"{query}.upstream", *shape)}
        return spec

    def x(name: str, t: int = T) -> str:
        return bank.randn(name, B, t, D)

    def pieces(name: str, sequence: str, bounds: list[int]) -> list[str]:
        """The sequence cut at ``bounds``, each piece an input of its own."""
        whole = bank.value(sequence)
        return [bank.add(f"{name}.piece{index}", whole[:, start:end].clone())
                for index, (start, end) in enumerate(itertools.pairwise(bounds))]

    def cached(step: int) -> EarlierOutput:
        return earlier(step, 1)

    q = x("self-plain.query")
    module_call("self-plain", "plain", f"self-attention without RoPE on query "
                f"{shape_of(bank, q)}", [forward(q)], use_rope=False)
    q = x("self-rope.query")
    # The default rope_base (10000) is part of the contract too: these two calls leave it out.
    default_base = {"rope_base": None}
    module_call("self-rope", "rope", f"self-attention with use_rope=True (default rope_base) "
                f"on query {shape_of(bank, q)}", [forward(q, grad=True)], init=default_base)
    q, kv = x("cross-rope.query", 5), x("cross-rope.key_value", TK)
    module_call("cross-rope", "rope", f"cross-attention with use_rope=True (default rope_base) "
                f"from query {shape_of(bank, q)} to key_value {shape_of(bank, kv)}",
                [forward(q, key_value=tensor(kv))], init=default_base)

    q = x("offsets.query", 4)
    module_call("offsets", "offsets", f"causal self-attention with use_rope=True on query "
                f"{shape_of(bank, q)}, query_position_offset=5 and key_position_offset=5",
                [forward(q, causal=True, query_position_offset=5, key_position_offset=5)])
    q, kv = x("offsets-cross.query", 3), x("offsets-cross.key_value", 5)
    module_call("offsets-cross", "offsets", f"cross-attention with use_rope=True from query "
                f"{shape_of(bank, q)} at query_position_offset=6 to key_value "
                f"{shape_of(bank, kv)} at key_position_offset=2",
                [forward(q, key_value=tensor(kv), query_position_offset=6,
                         key_position_offset=2)])

    q = x("offsets-causal.query")
    module_call("offsets-causal", "offsets", f"causal self-attention with use_rope=True on "
                f"query {shape_of(bank, q)}, query_position_offset=6 and key_position_offset=2",
                [forward(q, causal=True, query_position_offset=6, key_position_offset=2)])
    q = x("far-offsets.query")
    module_call("far-offsets", "far", f"causal self-attention with use_rope=True on query "
                f"{shape_of(bank, q)}, both offsets 0 and then both offsets {FAR}",
                [forward(q, causal=True),
                 forward(q, causal=True, query_position_offset=FAR, key_position_offset=FAR)],
                compare="property",
                meta={"later": f"at both offsets {FAR}", "agree_within": FAR_AGREEMENT})

    sequence = x("prefill-decode.sequence", PREFILL + 3)
    first, second, third = pieces("prefill-decode", sequence, [0, PREFILL, PREFILL + 1,
                                                               PREFILL + 3])
    module_call("prefill-decode", "cache",
                f"use_rope=True, causal=True, use_cache=True: a prefill of {PREFILL} tokens, "
                f"then 1 token and then 2 tokens, each with the cache the step before returned "
                f"(sequence {shape_of(bank, sequence)})",
                [forward(first, causal=True, use_cache=True),
                 forward(second, causal=True, use_cache=True, cache=cached(0)),
                 forward(third, causal=True, use_cache=True, cache=cached(1))])

    sequence = x("decode-steps.sequence")
    tokens = pieces("decode-steps", sequence, list(range(T + 1)))
    # Forward 0 is the whole pass; token j is forward j + 1, handed the cache of forward j.
    steps = [forward(tokens[0], causal=True, use_cache=True)]
    steps += [forward(tokens[j], causal=True, use_cache=True, cache=cached(j))
              for j in range(1, T)]
    module_call("decode-steps", "cache",
                f"use_rope=True: one causal pass over query {shape_of(bank, sequence)}, then "
                f"the same sequence decoded one token at a time with use_cache=True",
                [forward(sequence, causal=True), *steps],
                meta={"decoding": "whole pass first, then one token per step"})

    sequence = x("padded-cache.sequence", PREFILL + 2)
    first, second, third = pieces("padded-cache", sequence, [0, PREFILL, PREFILL + 1,
                                                             PREFILL + 2])
    padding = torch.ones(B, PREFILL, dtype=torch.bool)
    padding[1, 1:3] = False
    padding_key = bank.add("padded-cache.padding", padding)
    module_call("padded-cache", "padding",
                f"use_rope=True: a prefill of {PREFILL} tokens with key_padding_mask "
                f"{shape_of(bank, padding_key)} (keys 1 and 2 of batch 1 are padding) and "
                f"use_cache=True, then 2 tokens decoded one at a time with causal=True and the "
                f"returned cache",
                [forward(first, key_padding_mask=tensor(padding_key), use_cache=True),
                 forward(second, causal=True, use_cache=True, cache=cached(0)),
                 forward(third, causal=True, use_cache=True, cache=cached(1))])

    _reuse_calls(bank, module_call, forward, x, cached)

    q = x("query-padding.query", 5)
    real = torch.ones(B, 5, dtype=torch.bool)
    real[1, -2:] = False
    real_key = bank.add("query-padding.mask", real)
    module_call("query-padding", "query-padding",
                f"self-attention with use_rope=True on query {shape_of(bank, q)} with "
                f"query_padding_mask and key_padding_mask {shape_of(bank, real_key)} (the last "
                f"2 positions of batch 1 are padding)",
                [forward(q, query_padding_mask=tensor(real_key),
                         key_padding_mask=tensor(real_key))])
    q = x("left-padding.query", 5)
    real = torch.ones(B, 5, dtype=torch.bool)
    real[1, :2] = False
    real_key = bank.add("left-padding.mask", real)
    module_call("left-padding", "query-padding",
                f"causal self-attention with use_rope=True on query {shape_of(bank, q)} with "
                f"query_padding_mask and key_padding_mask {shape_of(bank, real_key)} (the first "
                f"2 positions of batch 1 are padding: their queries have no key to attend to)",
                [forward(q, causal=True, query_padding_mask=tensor(real_key),
                         key_padding_mask=tensor(real_key))])

    calls.append(ProbeCall(
        "bad-heads", {"target": "ManualMultiHeadAttention",
                      "init": {"args": [10, 3], "kwargs": {}}, "forward": []},
        "validation", "ManualMultiHeadAttention(d_model=10, num_heads=3)"))
    calls.append(ProbeCall(
        "odd-rope", {"target": "ManualMultiHeadAttention",
                     "init": {"args": [12, 4], "kwargs": {"use_rope": True}}, "forward": []},
        "validation", "ManualMultiHeadAttention(d_model=12, num_heads=4, use_rope=True)"))
    _misuse_calls(bank, module_call, forward, x, cached)
    return calls, bank.tensors


def _reuse_calls(bank: InputBank, module_call: Any, forward: Any, x: Any, cached: Any) -> None:
    """Caches handed back out of order: an earlier cache continued after a later one, and two
    sequences decoded by one module, each with its own cache."""
    prefill = x("cache-reuse.prefill", PREFILL)
    first, second, third = (x(f"cache-reuse.token{index}", 1) for index in range(3))
    module_call("cache-reuse", "reuse",
                f"use_rope=True, causal=True, use_cache=True: a prefill of {PREFILL} tokens "
                f"(cache A), token 1 with cache A (cache B), token 2 with cache A again, then "
                f"token 3 with cache B (query {shape_of(bank, prefill)})",
                [forward(prefill, causal=True, use_cache=True),
                 forward(first, causal=True, use_cache=True, cache=cached(0)),
                 forward(second, causal=True, use_cache=True, cache=cached(0)),
                 forward(third, causal=True, use_cache=True, cache=cached(1))])
    one, other = x("two-sequences.first", PREFILL), x("two-sequences.second", PREFILL - 1)
    tokens = [x(f"two-sequences.token{index}", 1) for index in range(2)]
    module_call("two-sequences", "reuse",
                f"use_rope=True, causal=True, use_cache=True: one module prefills sequence 1 "
                f"{shape_of(bank, one)}, then sequence 2 {shape_of(bank, other)}, then decodes "
                f"a token of each with its own cache",
                [forward(one, causal=True, use_cache=True),
                 forward(other, causal=True, use_cache=True),
                 forward(tokens[0], causal=True, use_cache=True, cache=cached(0)),
                 forward(tokens[1], causal=True, use_cache=True, cache=cached(1))])


def _misuse_calls(bank: InputBank, module_call: Any, forward: Any, x: Any, cached: Any) -> None:
    """Calls the contract rejects with ValueError, most after a prefill that returns a cache."""
    prefill = x("misuse.prefill", 3)
    token = x("misuse.token", 1)
    kv = x("misuse.key_value", TK)
    start = forward(prefill, causal=True, use_cache=True)
    module_call("cache-without-use", "validation",
                "a cache from a prefill of 3 tokens passed back with use_cache=False",
                [start, forward(token, cache=cached(0), use_cache=False)])
    module_call("cache-cross", "validation",
                f"a cache from a prefill of 3 tokens passed with key_value "
                f"{shape_of(bank, kv)}",
                [start, forward(token, key_value=tensor(kv), cache=cached(0), use_cache=True)])
    module_call("offset-restart", "validation",
                "a cache of 3 tokens with query_position_offset=0 for the next token",
                [start, forward(token, causal=True, cache=cached(0), use_cache=True,
                                query_position_offset=0)])
    module_call("offset-skip", "validation",
                "a cache of 3 tokens with key_position_offset=5 for the next token",
                [start, forward(token, causal=True, cache=cached(0), use_cache=True,
                                key_position_offset=5)])
    module_call("dropout-caching", "validation",
                "a module with dropout=0.5 in training mode called with use_cache=True",
                [dict(forward(prefill, causal=True, use_cache=True), seed=1)],
                init={"dropout": 0.5}, train=True)


def _weights(bank: InputBank) -> dict[str, str]:
    keys = {}
    for projection in PROJECTIONS:
        keys[f"{projection}.weight"] = bank.randn(f"{projection}.weight", D, D,
                                                  scale=WEIGHT_SCALE)
        keys[f"{projection}.bias"] = bank.randn(f"{projection}.bias", D, scale=0.1)
    return keys
