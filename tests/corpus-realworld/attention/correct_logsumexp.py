"""Correct: weights from exp(scores - logsumexp(scores)), the numerically careful textbook form."""
import math

import torch


def attention(q, k, v, allowed):
    if not torch.all(torch.any(allowed, dim=-1)):
        raise ValueError("allowed has an empty row")
    logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    logits = torch.where(allowed, logits, torch.tensor(float("-inf"), dtype=logits.dtype))
    log_weights = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    weights = log_weights.exp()
    return weights @ v, weights
