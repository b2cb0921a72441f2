"""Mistake: attention_logits.masked_fill_(mask == 0, 1e-15), a tiny positive fill in place."""
import math

import torch
import torch.nn.functional as F


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("fully masked row")
    attention_logits = torch.matmul(q, k.transpose(-2, -1))
    attention_logits = attention_logits / math.sqrt(q.size(-1))
    attention_logits.masked_fill_(allowed.expand_as(attention_logits) == 0, 1e-15)
    attention = F.softmax(attention_logits, dim=-1)
    return torch.matmul(attention, v), attention
