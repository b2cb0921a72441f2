"""Jobs for the sandbox tests: an attention submission, its probe plan and inputs, and the Docker
mode and runtime names the tests run them under."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import torch
from safetensors.torch import save

from assignments.model import ProbeCall, ProbePlan
from assignments.probing import tensor
from sandbox.base import Job

GVISOR_RUNTIME = "runsc"
FORK_SERVER_MODE = "fork-server"

ATTENTION = """
import torch

def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, -1)
    print("hello from the student")
    return weights @ v, weights
"""


def attention_inputs() -> dict[str, torch.Tensor]:
    """Fixed inputs of the ``attention`` probes (seeded: the same in every run)."""
    generator = torch.Generator().manual_seed(0)
    return {
        "q": torch.randn(2, 5, 8, generator=generator),
        "k": torch.randn(2, 7, 8, generator=generator),
        "v": torch.randn(2, 7, 6, generator=generator),
        "allowed": torch.ones(5, 7, dtype=torch.bool).tril(),
        "upstream": torch.randn(2, 5, 6, generator=generator),
    }


def attention_call(call_id: str = "plain", target: str = "attention") -> dict[str, Any]:
    """One probe call of ``target`` on the attention inputs, with a backward pass."""
    tensor = {"tensor": "q", "grad": True}
    return {
        "id": call_id,
        "target": target,
        "args": [tensor, {**tensor, "tensor": "k"}, {**tensor, "tensor": "v"},
                 {"tensor": "allowed"}],
        "backward": {"output": 0, "grad": "upstream"},
    }


STOP_THE_SUPERVISOR = '''
import os, signal, time

def stop(*args):
    """Stops the runner's supervisor, then spins: only the host's own deadline ends this."""
    time.sleep(0.5)  # the supervisor forwards what came before meanwhile
    os.kill(os.getppid(), signal.SIGSTOP)
    while True:
        pass
'''


def make_job(
    source: str = ATTENTION,
    *,
    calls: list[dict[str, Any]] | None = None,
    call_timeout: float = 5,
    run_seconds: float = 20,
    inputs: Mapping[str, torch.Tensor] | None = None,
    label: str = "test",
) -> Job:
    """A job of one submission file ``attention.py`` and a plan of ``calls``."""
    plan = {
        "entry": "attention.py",
        "call_timeout": call_timeout,
        "run_seconds": run_seconds,
        "forbidden": ["torch.nn.functional.scaled_dot_product_attention"],
        "calls": calls if calls is not None else [attention_call()],
    }
    return Job(
        files={"attention.py": source.encode()},
        plan_json=json.dumps(plan).encode(),
        inputs_safetensors=save(dict(inputs if inputs is not None else attention_inputs())),
        label=label,
    )


def events_of(raw: bytes) -> list[dict[str, Any]]:
    """The runner's events as dicts."""
    events = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    # Timings differ from run to run (and warm-up is paid before a warm job): not compared.
    return [{k: v for k, v in e.items() if not k.endswith("seconds")} for e in events]


TYPED_ARGUMENTS = """
def reshape(x, shape, *, sizes, scale, fill, missing):
    if not (type(shape) is tuple and type(sizes) is dict and type(sizes["rows"]) is tuple
            and type(scale) is int and type(fill) is float and missing is None):
        raise TypeError(f"{type(shape)} {sizes!r} {type(scale)} {fill!r} {missing!r}")
    return x.reshape(shape) * scale
"""
"""A submission that raises unless each argument of ``typed_arguments_plan`` has its type."""


def typed_arguments_plan() -> ProbePlan:
    """One call, ``typed``, of ``reshape`` in ``shapes.py`` with a tuple, a dict holding a
    tuple, an int, an infinite float and None."""
    call = ProbeCall("typed", {"target": "reshape", "args": [tensor("x"), (2, 3)], "kwargs": {
        "sizes": {"rows": (2,)}, "scale": 2, "fill": -math.inf, "missing": None}},
        "plain", "x (6,) to (2, 3)")
    return ProbePlan(seed=0, entry="shapes.py", calls=(call,), inputs={"x": torch.arange(6.0)},
                     forbidden=(), call_timeout=5.0, run_seconds=20.0, memory_bytes=4 << 30)
