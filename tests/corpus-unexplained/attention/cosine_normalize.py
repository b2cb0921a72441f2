"""Cosine attention: q and k normalised to unit length before the scaled dot product."""
import math

import torch
import torch.nn.functional as F


def attention(q, k, v, allowed):
    qn, kn = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    scores = qn @ kn.transpose(-2, -1) / math.sqrt(q.shape[-1])
    full = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not full.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~full, float("-inf")), dim=-1)
    return weights @ v, weights
