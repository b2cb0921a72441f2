"""Forbidden: delegates to nn.MultiheadAttention, fed the contract's four projections; else correct."""
import torch
from torch import nn
from torch.func import functional_call


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.mha = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, bias=bias,
                                         batch_first=True)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, Tq, _ = query.shape
        Tk = kv.shape[1]
        H = self.num_heads
        allowed = torch.ones(B, H, Tq, Tk, dtype=torch.bool)
        if attention_mask is not None:
            allowed = allowed & (attention_mask[:, None] if attention_mask.dim() == 3
                                 else attention_mask)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        if causal:
            allowed = allowed & torch.ones(Tq, Tk, dtype=torch.bool).tril()
        if not allowed.any(-1).all():
            raise ValueError("a query has no key to attend to")

        params = {
            "in_proj_weight": torch.cat([self.q_proj.weight, self.k_proj.weight,
                                         self.v_proj.weight]),
            "out_proj.weight": self.out_proj.weight,
        }
        if self.q_proj.bias is not None:
            params["in_proj_bias"] = torch.cat([self.q_proj.bias, self.k_proj.bias,
                                                self.v_proj.bias])
            params["out_proj.bias"] = self.out_proj.bias
        # PyTorch's attn_mask uses True = blocked, the opposite of this course
        blocked = ~allowed.reshape(B * H, Tq, Tk)
        out, _ = functional_call(self.mha, params, (query, kv, kv),
                                 {"attn_mask": blocked, "need_weights": False})
        return out
