"""Mistake: the decay is applied after the Adam update, to the already-updated parameter."""

import torch


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if min(lr, eps, weight_decay) < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError("invalid AdamW hyperparameters")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay})

    def step(self):
        with torch.no_grad():
            for group in self.param_groups:
                lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["t"], state["m"], state["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                    state["t"] += 1
                    t = state["t"]
                    state["m"].mul_(b1).add_((1 - b1) * p.grad)
                    state["v"].mul_(b2).add_((1 - b2) * p.grad.square())
                    update = (state["m"] / (1 - b1 ** t)) / ((state["v"] / (1 - b2 ** t)).sqrt() + eps)
                    p.add_(-lr * update)
                    p.add_(-lr * wd * p)
