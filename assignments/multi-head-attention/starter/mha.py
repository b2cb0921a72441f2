"""Multi-head attention built by hand (lab: implement multi-head attention).

Fill in `ManualMultiHeadAttention` and submit this file as `mha.py`. You may add helpers (for
example your attention function). Do not call torch.nn.functional.scaled_dot_product_attention
or torch.nn.MultiheadAttention.
"""

import torch  # noqa: F401 - you will need it
from torch import Tensor, nn


class ManualMultiHeadAttention(nn.Module):
    """Multi-head attention; every boolean mask means True = may attend (or: a real token)."""

    def __init__(self, d_model: int, num_heads: int, *, dropout: float = 0.0,
                 bias: bool = True) -> None:
        """Build the module.

        Args:
            d_model: model width; must be divisible by num_heads.
            num_heads: number of heads; each head has d_model // num_heads features.
            dropout: probability of dropping attention weights, in training mode only.
            bias: whether the four projections have a bias.

        Must create the attributes q_proj, k_proj, v_proj and out_proj, each
        nn.Linear(d_model, d_model, bias=bias) (the grader loads weights by these names).

        Raises:
            ValueError: if d_model % num_heads != 0.
        """
        super().__init__()
        raise NotImplementedError("implement ManualMultiHeadAttention.__init__")

    def forward(self, query: Tensor, key_value: Tensor | None = None, *,
                attention_mask: Tensor | None = None,
                key_padding_mask: Tensor | None = None,
                causal: bool = False) -> Tensor:
        """Attend from query to key_value (or to query itself when key_value is None).

        Args:
            query: (B, Tq, d_model).
            key_value: (B, Tk, d_model) for cross-attention, or None for self-attention.
            attention_mask: bool, (Tq, Tk), (B, Tq, Tk) or (B or 1, H or 1, Tq, Tk);
                True = the query may attend to that key.
            key_padding_mask: bool, (B, Tk); True = a real token, False = padding.
            causal: if True, query i may only attend to keys 0..i.

        All given masks combine with logical AND.

        Returns:
            (B, Tq, d_model), the dtype of the module and input.

        Raises:
            ValueError: if some query has no allowed key after combining the masks.
        """
        raise NotImplementedError("implement ManualMultiHeadAttention.forward")
