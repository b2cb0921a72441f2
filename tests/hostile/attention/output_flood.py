"""Correct attention that floods stdout and stderr (up to 256 MiB) on the causal call."""
import math
import sys

import torch

_LINE = "x" * 4095 + "\n"


def attention(q, k, v, allowed):
    if q.shape[-2] == k.shape[-2] == 6:
        for _ in range(1 << 15):
            sys.stdout.write(_LINE)
            sys.stderr.write(_LINE)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
