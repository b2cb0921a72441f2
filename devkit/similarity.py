"""A seeded class of distinct attention submissions, for the similarity report's tests: each
student's file is assembled from a random choice of ways to write each step, random helper
functions and random checks, so no two are alike beyond what the task forces."""

from __future__ import annotations

import random

_SCORES = [
    "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
    "scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / q.size(-1) ** 0.5)",
    "d = q.shape[-1]\n    scores = torch.einsum('...td,...sd->...ts', q, k) / d ** 0.5",
    "scale = q.size(-1) ** -0.5\n    scores = (q * scale) @ k.mT",
]
_MASK = [
    "scores = scores.masked_fill(~allowed, float('-inf'))",
    "scores = torch.where(allowed, scores, torch.full_like(scores, -torch.inf))",
    "neg = torch.finfo(scores.dtype).min\n"
    "    scores = scores.masked_fill(allowed.logical_not(), neg)",
    "blocked = allowed == False  # noqa: E712\n    scores[blocked.expand_as(scores)] = -1e30",
]
_CHECK = [
    "if not allowed.any(dim=-1).all():\n        raise ValueError('a query has no key')",
    "rows = allowed.sum(-1)\n    if (rows == 0).any():\n        raise ValueError('empty row')",
    "for row in allowed.reshape(-1, allowed.shape[-1]):\n        if not bool(row.any()):\n"
    "            raise ValueError('row without keys')",
    "if torch.count_nonzero(allowed, dim=-1).min() < 1:\n"
    "        raise ValueError('no key allowed')",
]
_SOFTMAX = [
    "weights = torch.softmax(scores, dim=-1)",
    "top = scores.max(dim=-1, keepdim=True).values\n    e = torch.exp(scores - top)\n"
    "    weights = e / e.sum(dim=-1, keepdim=True)",
    "weights = scores.softmax(-1)\n    weights = weights * allowed",
    "weights = torch.nn.functional.softmax(scores, dim=-1).to(q.dtype)",
]
_OUT = [
    "return weights @ v, weights",
    "out = torch.matmul(weights, v)\n    return out, weights",
    "output = torch.einsum('...ts,...sv->...tv', weights, v)\n    return output, weights",
    "result = (weights.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)\n    return result, weights",
]
_OPS = ["+", "-", "*", "//", "%", "<<", "|", "&", "^"]


def _expression(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(["n", "m", "acc", str(rng.randint(1, 99))])
    kind = rng.randint(0, 3)
    left, right = _expression(rng, depth - 1), _expression(rng, depth - 1)
    if kind == 0:
        return f"({left} {rng.choice(_OPS)} {right})"
    if kind == 1:
        return f"max({left}, {right})"
    if kind == 2:
        return f"({left} if {right} > {rng.randint(0, 50)} else {rng.randint(0, 9)})"
    return f"abs({left} {rng.choice(_OPS)} {right})"


def _helper(rng: random.Random, number: int) -> str:
    lines = [f"def helper_{number}(n, m):", "    acc = 0"]
    for _ in range(rng.randint(2, 4)):
        form = rng.randint(0, 2)
        if form == 0:
            lines.append(f"    for i in range({rng.randint(2, 9)}):")
            lines.append(f"        acc = {_expression(rng, 3)} + i")
        elif form == 1:
            lines.append(f"    if {_expression(rng, 2)} > {rng.randint(0, 40)}:")
            lines.append(f"        acc = {_expression(rng, 3)}")
            lines.append("    else:")
            lines.append(f"        m = {_expression(rng, 2)}")
        else:
            lines.append(f"    acc, n = {_expression(rng, 3)}, {_expression(rng, 2)}")
    lines.append(f"    return {_expression(rng, 2)}")
    return "\n".join(lines)


def distinct_submission(rng: random.Random) -> str:
    steps = [rng.choice(_CHECK), rng.choice(_SCORES), rng.choice(_MASK), rng.choice(_SOFTMAX),
             rng.choice(_OUT)]
    helpers = [_helper(rng, number) for number in range(rng.randint(2, 4))]
    body = "\n    ".join(steps)
    return ("import math\n\nimport torch\nfrom torch import Tensor\n\n\n"
            + "\n\n\n".join(helpers)
            + "\n\n\ndef attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor)"
            " -> tuple[Tensor, Tensor]:\n    " + body + "\n")


def near_copy(source: str) -> str:
    """What a student who copied does: rename things, add comments, reorder helpers a bit."""
    renamed = (source.replace("acc", "total").replace("weights", "attn")
               .replace("scores", "logits").replace("helper_", "util_"))
    return "# my solution\n" + renamed.replace("\n\n\ndef attention",
                                              "\n\n\n# main function\ndef attention")


def seeded_class(students: int = 100, seed: int = 19) -> dict[str, str]:
    """``students`` distinct submissions (s000...) with two planted copies: s090 copies s010
    and s091 copies s020."""
    rng = random.Random(seed)
    sources = {f"s{i:03d}": distinct_submission(rng) for i in range(students)}
    sources["s090"] = near_copy(sources["s010"])
    sources["s091"] = near_copy(sources["s020"])
    return sources
