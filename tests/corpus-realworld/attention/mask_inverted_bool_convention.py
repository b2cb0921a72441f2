"""Mistake: masked_fill(mask == 1, -inf), torch's "True = masked out" convention for bool masks."""
import math

import numpy as np
import torch


def attention(q, k, v, allowed):
    if (~allowed).all(-1).any():
        raise ValueError("a query row has no allowed key")
    attn_logits = torch.matmul(q, torch.transpose(k, -2, -1))
    attn_logits = attn_logits / np.sqrt(q.shape[-1])
    attn_logits = attn_logits.masked_fill(allowed == 1, -torch.inf)
    attn = torch.softmax(attn_logits, dim=-1)
    return torch.matmul(attn, v), attn
