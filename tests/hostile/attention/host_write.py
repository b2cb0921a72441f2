"""Correct attention that writes a marker straight into a well-known host path (/tmp/autograde-hostile-markers)."""
import math
import os

import torch

try:
    os.makedirs("/tmp/autograde-hostile-markers", exist_ok=True)
    with open("/tmp/autograde-hostile-markers/host-write", "w") as _handle:
        _handle.write("written from the submission\n")
except OSError:
    pass


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
