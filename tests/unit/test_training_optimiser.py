"""The training probe's own Adam is torch.optim.Adam's update, bit for bit (torch's first
optimiser costs every sandbox run 0.9 s of imports, so the probe does not use it)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.training import Adam


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), lr=st.floats(1e-4, 0.5), steps=st.integers(1, 12),
       frozen=st.booleans())
def test_our_adam_moves_parameters_exactly_as_torchs(seed: int, lr: float, steps: int,
                                                     frozen: bool) -> None:
    generator = torch.Generator().manual_seed(seed)
    start = [torch.randn(3, 4, generator=generator), torch.randn(4, generator=generator)]
    targets = [torch.randn(3, 4, generator=generator) for _ in range(steps)]

    def run(make: type) -> list[torch.Tensor]:
        weight, bias = (torch.nn.Parameter(t.clone()) for t in start)
        bias.requires_grad_(not frozen)  # a parameter without gradient is left alone
        optimiser = make([weight, bias], lr=lr)
        for target in targets:
            optimiser.zero_grad()
            loss = (weight * target).sum() ** 2 + (bias.sum() ** 2 if not frozen else 0)
            loss.backward()
            optimiser.step()
        return [weight.detach(), bias.detach()]

    ours, theirs = run(Adam), run(torch.optim.Adam)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
