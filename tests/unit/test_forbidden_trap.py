"""The run-time forbidden-API trap records each call that reaches a forbidden API, however it was
reached, and nothing else. Run in a child interpreter: the trap patches torch for good."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r'''
import json, math, torch
import torch.nn.functional as F
from sandbox.runner.guards import ForbiddenTrap

trap = ForbiddenTrap(["torch.nn.functional.scaled_dot_product_attention",
                       "torch._C._nn.scaled_dot_product_attention",
                       "torch.nn.MultiheadAttention.forward"])
trap.__enter__()
q = torch.randn(2, 3, 5, 8)

def own_helper(q):
    w = torch.softmax(q @ q.transpose(-2, -1) / math.sqrt(8), dim=-1)
    return w @ q

def behind_the_wrapper():
    wrapper = F.scaled_dot_product_attention
    original = next(c.cell_contents for c in wrapper.__closure__
                    if callable(c.cell_contents) and "scaled" in c.cell_contents.__name__)
    return original(q, q, q)

cases = {
    "own": lambda: own_helper(q),
    "alias": lambda: F.scaled_dot_product_attention(q, q, q),
    "closure": behind_the_wrapper,
    "aten": lambda: torch.ops.aten._scaled_dot_product_attention_math.default(q, q, q),
    "kernel": lambda: torch._scaled_dot_product_flash_attention_for_cpu(q, q, q),
    "module": lambda: torch.nn.MultiheadAttention(8, 2, batch_first=True)(q[0], q[0], q[0]),
    "functional-mha": lambda: F.multi_head_attention_forward,
}
seen = {}
for name, call in cases.items():
    call()
    seen[name] = trap.take()
print(json.dumps(seen))
'''


def test_each_way_of_reaching_a_forbidden_api_is_recorded_per_call() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["own"] == []
    assert seen["alias"] == ["torch.nn.functional.scaled_dot_product_attention"]
    assert seen["closure"] == ["torch._C._nn.scaled_dot_product_attention"]
    assert seen["aten"] == ["torch._scaled_dot_product_attention_math"]
    assert seen["kernel"] == ["torch._scaled_dot_product_flash_attention_for_cpu"]
    # One call, one name: what nn.MultiheadAttention does inside is not recorded again.
    assert seen["module"] == ["torch.nn.MultiheadAttention.forward"]
    assert seen["functional-mha"] == []  # a reference, not a call


LOSS_SCRIPT = r'''
import json, torch
from sandbox.runner.guards import ForbiddenTrap

trap = ForbiddenTrap(["torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss",
                      "torch.nn.functional.log_softmax", "torch.log_softmax",
                      "torch.special.log_softmax", "torch.logsumexp"])
trap.__enter__()
x, t = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
cases = {
    "own": lambda: (x - x.max(1, keepdim=True).values).exp().sum(1).log(),
    "softmax-then-log": lambda: torch.log(torch.softmax(x, 1)),
    "cross-entropy-kernel": lambda: torch._C._nn.cross_entropy_loss(x, t),
    "nll-kernel": lambda: torch._C._nn.nll_loss(x, t),
    "aten-log-softmax": lambda: torch.ops.aten._log_softmax(x, 1, False),
    "aten-log-softmax-int": lambda: torch.ops.aten.log_softmax.int(x, 1),
    "aten-logsumexp": lambda: torch.ops.aten.logsumexp(x, [1]),
}
seen = {}
for name, call in cases.items():
    call()
    seen[name] = trap.take()
print(json.dumps(seen))
'''


def test_a_loss_reached_through_its_kernels_is_recorded_and_its_parts_are_not() -> None:
    done = subprocess.run([sys.executable, "-c", LOSS_SCRIPT], capture_output=True, text=True,
                          timeout=120, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["own"] == seen["softmax-then-log"] == []
    assert seen["cross-entropy-kernel"] == ["torch.cross_entropy_loss"]
    assert seen["nll-kernel"] == ["torch.nn.functional.nll_loss"]
    assert seen["aten-log-softmax"] == ["torch._log_softmax"]
    assert seen["aten-log-softmax-int"] == ["torch.nn.functional.log_softmax"]
    assert seen["aten-logsumexp"] == ["torch.logsumexp"]
