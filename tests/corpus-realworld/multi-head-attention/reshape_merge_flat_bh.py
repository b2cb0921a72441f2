"""Mistake: q.view(B * H, -1, Dh) to split and context.view(B, -1, H * Dh) to merge, with no
transpose either way (the recommender-library bug): positions and heads are mixed."""
import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, T, _ = query.shape
        S = kv.shape[1]
        H, Dh = self.num_heads, self.head_dim
        q = self.q_proj(query).view(B * H, -1, Dh)
        k = self.k_proj(kv).view(B * H, -1, Dh)
        v = self.v_proj(kv).view(B * H, -1, Dh)
        allowed = torch.ones(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            allowed = allowed & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                                 else attention_mask)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        if causal:
            allowed = allowed & torch.ones(T, S, dtype=torch.bool).tril()
        if not allowed.any(-1).all():
            raise ValueError("a query has no key to attend to")
        scores = torch.bmm(q, k.transpose(1, 2)) * Dh ** -0.5
        scores = scores.view(B, H, T, S).masked_fill(~allowed, float("-inf")).view(B * H, T, S)
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = torch.bmm(weights, v)
        context = out.view(B, -1, H * Dh)
        return self.out_proj(context)
