"""Mistake: the constructor's hyperparameters are kept on self and used for every group; the
groups' own lr, betas, eps and weight_decay are ignored."""

import torch


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError("invalid hyperparameters")
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        params = list(params)
        if isinstance(params[0], dict):
            self.params = [p for group in params for p in group["params"]]
        else:
            self.params = params
        self.state = {id(p): {"step": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)}
                      for p in self.params}

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        beta1, beta2 = self.betas
        for p in self.params:
            if p.grad is None:
                continue
            s = self.state[id(p)]
            s["step"] += 1
            s["m"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
            s["v"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            m_hat = s["m"] / (1 - beta1 ** s["step"])
            v_hat = s["v"] / (1 - beta2 ** s["step"])
            p.mul_(1 - self.lr * self.weight_decay)
            p.addcdiv_(m_hat, v_hat.sqrt().add(self.eps), value=-self.lr)
