"""Mistake: einsum version that forgets the 1/sqrt(D) temperature."""
import torch
import torch.nn.functional as F


def attention(q, k, v, allowed):
    logits = torch.einsum("...qd,...kd->...qk", q, k)
    mask = allowed.expand(logits.shape) if allowed.dim() <= logits.dim() else allowed
    if (mask.sum(-1) == 0).any():
        raise ValueError("empty attention row")
    logits = torch.where(mask, logits, float("-inf"))
    probs = F.softmax(logits, dim=-1)
    return torch.einsum("...qk,...kd->...qd", probs, v), probs
