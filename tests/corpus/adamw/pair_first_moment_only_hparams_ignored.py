"""Two mistakes: only m is bias-corrected (v used as it is), and the constructor's
hyperparameters are used for every group."""

import torch


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError("invalid hyperparameters")
        self.hp = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        params = list(params)
        self.groups = [g["params"] for g in params] if isinstance(params[0], dict) else [params]
        self.state = {}

    def zero_grad(self):
        for group in self.groups:
            for p in group:
                p.grad = None

    @torch.no_grad()
    def step(self):
        lr, (b1, b2), eps, wd = self.hp["lr"], self.hp["betas"], self.hp["eps"], self.hp["weight_decay"]
        for group in self.groups:
            for p in group:
                if p.grad is None:
                    continue
                t, m, v = self.state.get(p, (0, torch.zeros_like(p), torch.zeros_like(p)))
                t += 1
                m = b1 * m + (1 - b1) * p.grad
                v = b2 * v + (1 - b2) * p.grad ** 2
                self.state[p] = (t, m, v)
                p.mul_(1 - lr * wd)
                p.sub_(lr * (m / (1 - b1 ** t)) / (v.sqrt() + eps))
