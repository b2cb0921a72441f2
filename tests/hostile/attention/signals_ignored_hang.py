"""Correct attention; ignores SIGTERM/SIGINT/SIGHUP/SIGALRM/SIGPROF and hangs, swallowing everything, on grad-masked."""
import math
import signal

import torch

for _name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGALRM", "SIGPROF", "SIGXCPU", "SIGUSR1",
              "SIGQUIT"):
    try:
        signal.signal(getattr(signal, _name), signal.SIG_IGN)
    except (OSError, ValueError, AttributeError):
        pass


def attention(q, k, v, allowed):
    if q.dtype == torch.float64 and not bool(allowed.all()):
        while True:
            try:
                while True:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    signal.setitimer(signal.ITIMER_PROF, 0)
            except BaseException:
                pass
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
