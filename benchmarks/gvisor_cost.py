"""What gVisor (``runsc``) costs beside Docker's default runtime (runc), measured in one run.

Three measurements, each under both runtimes with the sandbox's own hardening options, the
runtimes taking turns in every round so that both see the same load:

* torch import: a fresh container's ``import torch`` (what a cold start pays);
* small-tensor compute: attention forward and backward on probe-sized tensors, 200 times,
  inside one container (what each probe call pays);
* warm-pool run: one attention job end to end through the backend, from a warm container
  (what a submission waits for when the pool is ready).

Each round runs every measurement under both runtimes, the runtime that goes first swapping
from round to round.

The machines this runs on are shared and noisy: absolute figures move from run to run, the
ratios of one run are what to read. Usage (``scripts/ensure-docker.sh`` registers ``runsc``;
``make sandbox-image``)::

    .venv/bin/python benchmarks/gvisor_cost.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from docker_latency import attention_job

from sandbox.base import Limits, Termination
from sandbox.docker_backend import DockerBackend, DockerSettings, connect
from sandbox.docker_sandbox import hardening_options

RUNTIMES = ("runc", "runsc")
IMPORT = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
COMPUTE = """
import time, torch
torch.set_num_threads(1)
q, k, v = (torch.randn(2, 4, 8, 16, requires_grad=True) for _ in range(3))
for _ in range(20):
    (torch.softmax(q @ k.transpose(-2, -1) / 4, -1) @ v).sum().backward()
t = time.perf_counter()
for _ in range(200):
    (torch.softmax(q @ k.transpose(-2, -1) / 4, -1) @ v).sum().backward()
print(time.perf_counter() - t)
"""


def in_container(client: object, runtime: str, code: str) -> float:
    """Seconds the snippet reports for itself, in a fresh hardened container."""
    options = hardening_options(Limits(), runtime=None if runtime == "runc" else runtime)
    output = client.containers.run(  # type: ignore[attr-defined]
        DockerSettings().image, ["python3", "-c", code], remove=True, **options)
    return float(output.decode().strip().splitlines()[-1])


def warm_run(backend: DockerBackend) -> float:
    """Seconds of one job through the backend, from a ready warm container."""
    backend.pool.wait_until_full(300)
    started = time.monotonic()
    result = backend.run(attention_job(), Limits())
    assert result.termination is Termination.EXITED, result.detail
    return time.monotonic() - started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args(argv).rounds
    client = connect()
    backends = {runtime: DockerBackend(client=client, settings=DockerSettings(
        pool_size=1, runtime=None if runtime == "runc" else runtime)) for runtime in RUNTIMES}
    measures: dict[str, Callable[[str], float]] = {
        "torch import (s)": lambda runtime: in_container(client, runtime, IMPORT),
        "200 small attention fwd+bwd (s)": lambda runtime: in_container(client, runtime,
                                                                        COMPUTE),
        "warm-pool job end to end (s)": lambda runtime: warm_run(backends[runtime]),
    }
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        for round_number in range(rounds):
            # Each runtime goes first in every other round, so neither always meets a warmer
            # page cache or a quieter machine.
            order = RUNTIMES if round_number % 2 == 0 else RUNTIMES[::-1]
            for name, measure in measures.items():
                for runtime in order:
                    samples.setdefault((name, runtime), []).append(measure(runtime))
    finally:
        for backend in backends.values():
            backend.close()
    print(f"| measurement ({rounds} rounds, median) | runc | runsc | runsc / runc |")
    print("| --- | ---: | ---: | ---: |")
    for name in measures:
        runc, runsc = (statistics.median(samples[(name, r)]) for r in RUNTIMES)
        print(f"| {name} | {runc:.3f} | {runsc:.3f} | {runsc / runc:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
