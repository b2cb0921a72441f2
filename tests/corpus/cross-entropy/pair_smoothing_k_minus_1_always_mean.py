"""Two mistakes: smoothing spread as eps / (K - 1) over the other classes, and the mean
returned whatever reduction asks for."""

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction)
    k = logits.size(1)
    top = logits.max(1, keepdim=True)[0]
    log_probs = logits - top - torch.log(torch.exp(logits - top).sum(1, keepdim=True))
    keep = target != ignore_index
    target_lp = log_probs.gather(1, target.masked_fill(~keep, 0).unsqueeze(1)).squeeze(1)
    others_lp = log_probs.sum(1) - target_lp
    loss = -(1 - label_smoothing) * target_lp - label_smoothing / (k - 1) * others_lp
    return (loss * keep).sum() / keep.sum()
