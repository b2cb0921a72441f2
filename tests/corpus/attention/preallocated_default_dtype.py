"""Mistake: results written into torch.zeros buffers of the default dtype (float32)."""
import math

import torch


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = allowed.expand(scores.shape) if allowed.dim() <= scores.dim() else allowed
    scores, mask = torch.broadcast_tensors(scores, mask)
    weights = torch.zeros(scores.shape)
    flat_scores = scores.reshape(-1, scores.shape[-1])
    flat_mask = mask.reshape(-1, mask.shape[-1])
    flat_weights = weights.view(-1, weights.shape[-1])
    for row in range(flat_scores.shape[0]):
        if not flat_mask[row].any():
            raise ValueError(f"row {row} has no allowed key")
        flat_weights[row] = torch.softmax(flat_scores[row].masked_fill(~flat_mask[row], -math.inf), 0)
    out = torch.zeros(*weights.shape[:-1], v.shape[-1])
    out[...] = weights.to(v.dtype) @ v
    return out, weights
