"""Mistake: hand-written autograd Function for the scaled scores forgets the scale in backward."""
import math

import torch


class ScaledScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k):
        ctx.save_for_backward(q, k)
        return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        q, k = ctx.saved_tensors
        grad_q = grad @ k
        grad_k = grad.transpose(-2, -1) @ q
        return grad_q, grad_k


def attention(q, k, v, allowed):
    mask = torch.broadcast_to(allowed, allowed.shape[:-2] + (q.shape[-2], k.shape[-2]))
    if not mask.any(-1).all():
        raise ValueError("a query cannot see any key")
    scores = ScaledScores.apply(q, k)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
