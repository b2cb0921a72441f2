"""Mistake: no check for p.grad is None, so a parameter without a gradient makes the step raise
(TypeError: (1 - beta1) * None)."""

import torch


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError("invalid hyperparameters")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["step"] += 1
                p.mul_(1 - lr * wd)
                g = p.grad
                state["m"].mul_(beta1).add_((1 - beta1) * g)
                state["v"].mul_(beta2).add_((1 - beta2) * g * g)
                m_hat = state["m"] / (1 - beta1 ** state["step"])
                v_hat = state["v"] / (1 - beta2 ** state["step"])
                p.sub_(lr * m_hat / (v_hat.sqrt() + group["eps"]))
