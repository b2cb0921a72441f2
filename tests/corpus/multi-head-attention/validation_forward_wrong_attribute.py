"""Runtime error: forward checks the query's width against head_dim, not d_model, so it always raises ValueError."""
import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.p = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _heads(self, x):
        batch, length, _ = x.shape
        return x.reshape(batch, length, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        if query.shape[-1] != self.head_dim:
            raise ValueError(f"expected query of width {self.head_dim}, got {query.shape[-1]}")
        kv = query if key_value is None else key_value
        batch, t_q, _ = query.shape
        t_k = kv.shape[1]
        q, k, v = self._heads(self.q_proj(query)), self._heads(self.k_proj(kv)), self._heads(self.v_proj(kv))

        mask = torch.ones(batch, 1, t_q, t_k, dtype=torch.bool, device=query.device)
        if attention_mask is not None:
            mask = mask & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3 else attention_mask)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.view(batch, 1, 1, t_k)
        if causal:
            mask = mask & torch.tril(torch.ones(t_q, t_k, dtype=torch.bool, device=query.device))
        if (~mask).all(dim=-1).any():
            raise ValueError("a query row is fully masked")

        scores = torch.matmul(q, k.transpose(-1, -2)) * self.head_dim ** -0.5
        weights = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        weights = F.dropout(weights, self.p, training=self.training)
        out = torch.matmul(weights, v).permute(0, 2, 1, 3).reshape(batch, t_q, self.d_model)
        return self.out_proj(out)
