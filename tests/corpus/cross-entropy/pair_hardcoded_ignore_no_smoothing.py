"""Two mistakes: masks -100 whatever ignore_index is, and never applies label_smoothing."""

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction)
    m = logits.amax(dim=1, keepdim=True)
    log_probs = logits - m - (logits - m).exp().sum(dim=1, keepdim=True).log()
    ok = target != -100
    loss = -log_probs.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
    loss = torch.where(ok, loss, 0.0)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / ok.sum()
