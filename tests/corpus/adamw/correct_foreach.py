"""Correct: torch._foreach_* ops over each group's parameters that have a gradient, step counts
kept as floats in self.state."""

import torch


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if not lr >= 0.0 or not eps >= 0.0 or not weight_decay >= 0.0:
            raise ValueError("lr, eps and weight_decay must be non-negative")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError("betas must be in [0, 1)")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            for p in params:
                if not self.state[p]:
                    self.state[p].update(step=0.0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                self.state[p]["step"] += 1
            ms = [self.state[p]["m"] for p in params]
            vs = [self.state[p]["v"] for p in params]
            beta1, beta2 = group["betas"]
            torch._foreach_mul_(params, 1 - group["lr"] * group["weight_decay"])
            torch._foreach_mul_(ms, beta1)
            torch._foreach_add_(ms, grads, alpha=1 - beta1)
            torch._foreach_mul_(vs, beta2)
            torch._foreach_addcmul_(vs, grads, grads, value=1 - beta2)
            for p, m, v in zip(params, ms, vs):
                t = self.state[p]["step"]
                denom = (v / (1 - beta2 ** t)).sqrt().add_(group["eps"])
                p.addcdiv_(m, denom, value=-group["lr"] / (1 - beta1 ** t))
