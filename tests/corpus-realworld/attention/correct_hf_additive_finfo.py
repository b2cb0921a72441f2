"""Correct: transformers-style additive mask, (1 - mask) * finfo(dtype).min added to the scores."""
import math

import torch
import torch.nn.functional as F


def attention(q, k, v, allowed):
    if (~allowed).all(dim=-1).any():
        raise ValueError("attention mask leaves a query with no key")
    attention_scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    extended_mask = (1.0 - allowed.to(attention_scores.dtype)) * torch.finfo(attention_scores.dtype).min
    attention_scores = attention_scores + extended_mask
    attention_probs = F.softmax(attention_scores, dim=-1)
    context = torch.matmul(attention_probs, v)
    return context, attention_probs
