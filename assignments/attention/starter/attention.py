"""Scaled dot-product attention with a boolean mask (lab: implement multi-head attention).

Fill in `attention` and submit this file as `attention.py`. Do not call
torch.nn.functional.scaled_dot_product_attention or torch.nn.MultiheadAttention.
"""

import torch  # noqa: F401 - you will need it
from torch import Tensor


def attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention.

    Args:
        q: queries, shape (..., T, D).
        k: keys, shape (..., S, D).
        v: values, shape (..., S, Dv).
        allowed: bool tensor broadcastable to (..., T, S); True = the query may attend to
            that key.

    Returns:
        (output, weights): weights = softmax(q @ k^T / sqrt(D)) over the key axis, shape
        (..., T, S), with exactly 0 weight on every forbidden key; output = weights @ v,
        shape (..., T, Dv). Both have the dtype of the inputs.

    Raises:
        ValueError: if some query row has no allowed key.

    Gradients must flow to q, k and v, and the inputs must not be modified.
    """
    raise NotImplementedError("implement attention(q, k, v, allowed)")
