"""Memory limit: builds a 100000 x 100000 float mask "big enough for any sequence" on each call."""
import math

import torch

MAX_LEN = 100_000


def attention(q, k, v, allowed):
    big = torch.ones(MAX_LEN, MAX_LEN)
    T, S = q.shape[-2], k.shape[-2]
    keep = big[:T, :S].bool() & allowed
    if not keep.any(dim=-1).all():
        raise ValueError("no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
