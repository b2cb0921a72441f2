"""Correct: softmax first, then multiply by the mask and renormalise (the sequence-to-sequence
pointer-network habit). The renormalisation makes it equal to the masked softmax."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("nothing to attend to")
    e = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    attn_dist = torch.softmax(e, dim=-1)
    attn_dist = attn_dist * allowed
    masked_sums = attn_dist.sum(dim=-1, keepdim=True)
    attn_dist = attn_dist / masked_sums
    return attn_dist @ v, attn_dist
