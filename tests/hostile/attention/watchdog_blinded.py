"""Correct attention; ignores signals, freezes time.monotonic (blinding an in-process watchdog) and hangs on grad-masked."""
import math
import signal
import time

import torch

for _name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGALRM", "SIGXCPU"):
    try:
        signal.signal(getattr(signal, _name), signal.SIG_IGN)
    except (OSError, ValueError, AttributeError):
        pass

_frozen = time.monotonic()
time.monotonic = lambda: _frozen
time.perf_counter = lambda: _frozen
time.time = lambda: _frozen


def attention(q, k, v, allowed):
    if q.dtype == torch.float64 and not bool(allowed.all()):
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
