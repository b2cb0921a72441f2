"""Mistake: a softmax helper that multiplies exp by the mask; exp of raw scores overflows."""
import torch


def my_softmax(x, mask):
    # masked entries contribute nothing to the sum
    e = x.exp() * mask
    return e / e.sum(-1, keepdim=True)


def attention(q, k, v, allowed):
    rows_ok = allowed.sum(-1) > 0
    if not bool(rows_ok.all()):
        raise ValueError("row without allowed keys")
    d = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-1, -2)) / d ** 0.5
    weights = my_softmax(scores, allowed.to(scores.dtype))
    out = torch.matmul(weights, v)
    return out, weights
