"""Two mistakes: no weight decay at all, and eps inside the square root."""

import torch


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError("invalid hyperparameters")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                s = self.state[p]
                if not s:
                    s["t"] = 0
                    s["m"] = torch.zeros_like(p)
                    s["v"] = torch.zeros_like(p)
                s["t"] += 1
                s["m"] = b1 * s["m"] + (1 - b1) * p.grad
                s["v"] = b2 * s["v"] + (1 - b2) * p.grad ** 2
                m_hat = s["m"] / (1 - b1 ** s["t"])
                v_hat = s["v"] / (1 - b2 ** s["t"])
                p.sub_(group["lr"] * m_hat / torch.sqrt(v_hat + group["eps"]))
