"""Benchmark of the Docker sandbox: one attention run end to end, cold vs warm, and memory at rest.

Each contender is a named way to run one job end to end; each measurement runs it ``--runs``
times and reports the median and spread. Another contender (such as the peer pattern of a
``docker run`` per submission) is one more entry in ``contenders()``.

Usage (an engine and the image are needed: ``scripts/ensure-docker.sh``, ``make sandbox-image``)::

    .venv/bin/python benchmarks/docker_latency.py [--runs 20] [--pool-size 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox.base import Job, Limits, RunResult, Termination
from sandbox.docker_backend import DockerBackend, DockerSettings, connect
from sandbox.docker_sandbox import LABEL_OWNER
from sandbox.local import LocalBackend

ATTENTION = b"""
import torch

def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1)
    return weights @ v, weights
"""
MIB = 1 << 20


def attention_job() -> Job:
    """One submission of ``attention`` and six probe calls with a backward pass each."""
    generator = torch.Generator().manual_seed(0)
    inputs = {
        "q": torch.randn(2, 4, 16, 32, generator=generator),
        "k": torch.randn(2, 4, 16, 32, generator=generator),
        "v": torch.randn(2, 4, 16, 32, generator=generator),
        "allowed": torch.ones(16, 16, dtype=torch.bool).tril(),
        "upstream": torch.randn(2, 4, 16, 32, generator=generator),
    }
    grad = {"grad": True}
    call = {
        "target": "attention",
        "args": [{"tensor": "q", **grad}, {"tensor": "k", **grad}, {"tensor": "v", **grad},
                 {"tensor": "allowed"}],
        "backward": {"output": 0, "grad": "upstream"},
    }
    plan = {
        "entry": "attention.py",
        "call_timeout": 5,
        "calls": [{"id": f"call{index}", **call} for index in range(6)],
    }
    return Job(
        files={"attention.py": ATTENTION},
        plan_json=json.dumps(plan).encode(),
        inputs_safetensors=save(inputs),
        label="benchmark",
    )


@dataclass(frozen=True)
class Latency:
    """End-to-end seconds of one contender over several runs."""

    name: str
    seconds: list[float]

    def row(self) -> str:
        runs = sorted(self.seconds)
        p90 = runs[min(len(runs) - 1, int(0.9 * len(runs)))]
        return (
            f"{self.name:<34} {statistics.median(runs):>8.3f} {runs[0]:>8.3f} {p90:>8.3f}"
            f" {len(runs):>5}"
        )


Contender = Callable[[], RunResult]
"""Runs the benchmark job once, end to end."""


def measure(name: str, run_once: Contender, runs: int, before_each: Callable[[], None]) -> Latency:
    """Median-ready latencies of ``run_once``; every run must have graded normally."""
    seconds = []
    for _ in range(runs):
        before_each()
        started = time.perf_counter()
        result = run_once()
        seconds.append(time.perf_counter() - started)
        if result.termination is not Termination.EXITED or result.exit_code != 0:
            raise RuntimeError(f"{name}: run ended {result.termination}: {result.detail}")
    return Latency(name, seconds)


@contextmanager
def docker_backend(pool_size: int) -> Iterator[DockerBackend]:
    backend = DockerBackend(client=connect(), settings=DockerSettings(pool_size=pool_size))
    try:
        yield backend
    finally:
        backend.close()


Setup = Callable[[ExitStack], tuple[Contender, Callable[[], None]]]
"""Prepares a contender (its resources closed with the stack): one run, and what to do (not
timed) before each run."""


def contenders(pool_size: int) -> list[tuple[str, Setup]]:
    """Each contender by name, set up only while it is measured so it loads nothing else."""
    job, limits = attention_job(), Limits()

    def local(stack: ExitStack) -> tuple[Contender, Callable[[], None]]:
        backend = LocalBackend()
        return lambda: backend.run(job, limits), lambda: None

    def cold(stack: ExitStack) -> tuple[Contender, Callable[[], None]]:
        backend = stack.enter_context(docker_backend(0))
        return lambda: backend.run(job, limits), lambda: None

    def warm(stack: ExitStack) -> tuple[Contender, Callable[[], None]]:
        backend = stack.enter_context(docker_backend(pool_size))

        def pool_full() -> None:
            if not backend.pool.wait_until_full(300):
                raise RuntimeError("the warm pool did not fill")

        return lambda: backend.run(job, limits), pool_full

    return [
        ("local process, no isolation", local),
        ("docker, cold container", cold),
        (f"docker, warm pool ({pool_size})", warm),
    ]


def memory_at_rest(backend: DockerBackend, settle_seconds: float) -> list[tuple[str, float]]:
    """Memory of each idle pooled container (cgroup usage and RSS) and of this worker, in MiB."""
    backend.pool.wait_until_full(300)
    time.sleep(settle_seconds)
    client = connect()
    rows = []
    selector = {"label": f"{LABEL_OWNER}={backend.owner}"}
    for index, container in enumerate(client.api.containers(filters=selector)):
        memory = client.api.stats(container["Id"], stream=False, one_shot=True)["memory_stats"]
        detail = memory.get("stats", {})
        rows.append((f"pooled container {index}: cgroup usage", memory.get("usage", 0) / MIB))
        rows.append((f"pooled container {index}: rss", detail.get("rss", 0) / MIB))
    with open("/proc/self/status", encoding="ascii") as status:
        rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    rows.append(("this worker process: rss", rss_kib / 1024))
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--pool-size", type=int, default=2)
    args = parser.parse_args(argv)
    measured = []
    for name, setup in contenders(args.pool_size):
        with ExitStack() as stack:
            run_once, before_each = setup(stack)
            measured.append(measure(name, run_once, args.runs, before_each))
    with docker_backend(args.pool_size) as warm:
        memory = memory_at_rest(warm, settle_seconds=5)
    print(f"\nOne attention job (6 calls with backward) end to end, {args.runs} runs each")
    print(f"{'contender':<34} {'median':>8} {'min':>8} {'p90':>8} {'runs':>5}  (seconds)")
    for latency in measured:
        print(latency.row())
    print("\nSpeed-ups (ratios of medians)")
    for latency in measured:
        for other in measured:
            ratio = statistics.median(other.seconds) / statistics.median(latency.seconds)
            if other is not latency and ratio >= 1:
                print(f"  {latency.name}: {ratio:.1f}x faster than {other.name}")
    print("\nMemory at rest (MiB)")
    for name, mib in memory:
        print(f"{name:<42} {mib:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
