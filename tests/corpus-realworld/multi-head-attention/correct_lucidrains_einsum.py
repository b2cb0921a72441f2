"""Correct: a ViT-library style: scale = dim_head ** -0.5, einsum('b h i d, b h j d -> b h i j'),
mask_value = -finfo.max with masked_fill_, dots.softmax(dim=-1)."""
import torch
from torch import einsum, nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("dim must be divisible by heads")
        dim_head = d_model // num_heads
        self.heads = num_heads
        self.scale = dim_head ** -0.5
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attend = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        context = query if key_value is None else key_value
        h = self.heads
        split = lambda t: t.unflatten(-1, (h, -1)).transpose(1, 2)  # noqa: E731
        q, k, v = map(split, (self.q_proj(query), self.k_proj(context), self.v_proj(context)))
        dots = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale

        i, j = dots.shape[-2:]
        mask = torch.ones(i, j, dtype=torch.bool, device=dots.device)
        if attention_mask is not None:
            mask = mask & (attention_mask[:, None] if attention_mask.ndim == 3 else attention_mask)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        if causal:
            mask = mask & torch.ones(i, j, dtype=torch.bool, device=dots.device).tril()
        if not mask.any(-1).all():
            raise ValueError("attention row with every key masked")
        mask_value = -torch.finfo(dots.dtype).max
        dots.masked_fill_(~mask, mask_value)

        attn = self.dropout(self.attend(dots))
        out = einsum("b h i j, b h j d -> b h i d", attn, v)
        out = out.transpose(1, 2).flatten(2)
        return self.out_proj(out)
