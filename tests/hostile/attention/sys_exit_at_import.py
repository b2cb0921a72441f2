"""Correct attention, then sys.exit(0) at module level (SystemExit during the import)."""
import math
import sys

import torch


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights


sys.exit(0)
