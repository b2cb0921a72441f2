"""Softmax cross-entropy over class logits (lab: softmax cross-entropy).

Fill in `cross_entropy` and submit this file as `cross_entropy.py`. Do not call
torch.nn.functional.cross_entropy, nll_loss, log_softmax or torch.logsumexp.
"""

import torch  # noqa: F401 - you will need it
from torch import Tensor


def cross_entropy(logits: Tensor, target: Tensor, *, ignore_index: int = -100,
                  label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
    """Cross-entropy between softmax(logits) over the classes and the target classes.

    Args:
        logits: class scores, shape (N, K) or (N, K, d): the classes are on dim 1.
        target: class indices (int64), shape (N,) or (N, d); an entry equal to ignore_index
            contributes nothing.
        ignore_index: the target value to ignore (default -100).
        label_smoothing: ε in [0, 1]: the target distribution is (1 - ε) one_hot + ε / K.
        reduction: "none" (one loss per target, 0 where ignored), "sum", or "mean" (the sum
            over the number of targets that are not ignored).

    Returns:
        The loss, in the dtype of logits: shape (N,) or (N, d) for "none", 0-d otherwise.

    Raises:
        ValueError: if reduction is not "mean", "sum" or "none".

    Finite and exact on extreme logits; gradients must flow to logits, and the inputs must
    not be modified.
    """
    raise NotImplementedError("implement cross_entropy(logits, target, ...)")
