"""AdamW, step by step: fill in `AdamW` (see the README for the contract)."""

import torch


class AdamW:
    """AdamW: Adam's adaptive steps with decoupled weight decay, as torch.optim.AdamW.

    params: an iterable of tensors, or of parameter groups (dicts with "params" and any of
    lr, betas, eps, weight_decay; the constructor's values fill in the rest).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        raise NotImplementedError

    @torch.no_grad()
    def step(self):
        """Update every parameter that has a gradient, in place, with its group's
        hyperparameters; leave the others (and their state) as they are."""
        raise NotImplementedError

    def zero_grad(self):
        """Set every parameter's .grad to None."""
        raise NotImplementedError
