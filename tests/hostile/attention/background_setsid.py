"""Correct attention; at import a double-forked process in a new session waits for the run to end, then writes a marker."""
import math
import os
import sys
import time

import torch

_MARKERS = "/tmp/autograde-hostile-markers"


def _linger():
    watched = [arg for arg in sys.argv[1:] if os.path.isdir(arg)]
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline and all(os.path.isdir(path) for path in watched):
        time.sleep(0.1)
    time.sleep(0.5)
    os.makedirs(_MARKERS, exist_ok=True)
    with open(os.path.join(_MARKERS, "background"), "w") as handle:
        handle.write(f"pid {os.getpid()} outlived the run\n")


_child = os.fork()
if _child == 0:
    try:
        os.setsid()
        if os.fork() == 0:
            try:
                _linger()
            finally:
                os._exit(0)
    finally:
        os._exit(0)
os.waitpid(_child, 0)


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
