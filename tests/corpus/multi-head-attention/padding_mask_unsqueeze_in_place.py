"""Mistake: key_padding_mask reshaped with in-place unsqueeze_(), changing the caller's tensor."""
import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model % num_heads != 0")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, T, D = query.shape
        S = kv.shape[1]
        H = self.num_heads
        q = self.q_proj(query).unflatten(-1, (H, D // H))
        k = self.k_proj(kv).unflatten(-1, (H, D // H))
        v = self.v_proj(kv).unflatten(-1, (H, D // H))
        logits = torch.einsum("bthd,bshd->bhts", q, k) / (D // H) ** 0.5

        mask = torch.ones(1, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            mask = mask & (attention_mask[:, None] if attention_mask.ndim == 3 else attention_mask)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.unsqueeze_(1).unsqueeze_(1)
        if causal:
            i = torch.arange(T)[:, None]
            j = torch.arange(S)[None, :]
            mask = mask & (j <= i)
        if not mask.any(-1).all():
            raise ValueError("a query has every key masked")
        logits = logits.masked_fill(~mask, float("-inf"))
        probs = self.attn_dropout(logits.softmax(-1))
        out = torch.einsum("bhts,bshd->bthd", probs, v).flatten(-2)
        return self.out_proj(out)
