"""Throughput of the Docker backend's fork-server mode against its per-container warm pool.

Both modes grade the same mixed corpus (correct and buggy files of both assignments, from
``tests/corpus-realworld`` and ``tests/corpus``, in ``benchmarks/service_rush.mixed`` order)
through ``GradingPipeline`` with two client threads (the machine's cores), in one run and in
alternating rounds, so load from elsewhere falls on both alike:

* per container: ``DockerSettings(pool_size=2)``, the default mode, a fresh container per run
  from a warm pool (whose refills are part of what a grading costs);
* fork server: ``DockerSettings(mode="fork-server", fork_servers=2)``.

Printed per mode: submissions per second (median of the rounds); CPU seconds per submission
of this process (the grader's comparison and diagnosis, the SDK), of the mode's containers
(counted under a benchmark-only cgroup parent, the warm pool's refills included), of the
engine's daemons (dockerd, containerd: shared with anyone using the engine) and of the whole
machine (``/proc/stat``, whoever ran); the throughput those attributed seconds allow on the
machine's cores, which is what a quiet machine would show; and whether every grading got the
same score and codes in both modes.

Usage (an engine and the sandbox image are needed: ``make sandbox-image``)::

    .venv/bin/python benchmarks/fork_server.py [--n 60] [--rounds 2] [--only fork-server]

``--only`` measures one mode (to profile it; no ratio then).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.docker_vs_peer import (  # noqa: E402
    CGROUP_PREFIX,
    CpuSample,
    containers_in_cgroup,
    remove_cgroups,
    sample_cpu,
)
from benchmarks.service_rush import SLUGS, Item, mixed  # noqa: E402
from grader import learning  # noqa: E402
from grader.loader import load_assignment  # noqa: E402
from grader.pipeline import GradingPipeline  # noqa: E402
from sandbox import docker_sandbox, fork_server  # noqa: E402
from sandbox.docker_backend import DockerBackend, DockerSettings, connect  # noqa: E402

SEED = 20240611
SETTLE_SECONDS = 3.0
MODES = {
    "per container": {"pool_size": 2},
    "fork server": {"mode": "fork-server", "fork_servers": 2},
}


def _verdict(document: dict[str, Any]) -> tuple[Any, ...]:
    return (document["score"], tuple(sorted(d["code"] for d in document["diagnoses"])))


def measure(backend: DockerBackend, items: list[Item], cgroup: str | None
            ) -> tuple[float, CpuSample, list[Any]]:
    """Seconds and CPU to grade ``items`` with two threads (refills after them included);
    the verdicts."""
    pipeline = GradingPipeline(backend=backend)
    packages = {slug: load_assignment(slug) for slug in SLUGS}

    def grade(item: Item) -> Any:
        return _verdict(pipeline.grade(packages[item.slug], item.files, seed=SEED, label="bench"))

    before, started = sample_cpu(cgroup), time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        verdicts = list(pool.map(grade, items))
    seconds = time.perf_counter() - started
    backend.pool.wait_until_full(120)  # the refills the batch caused are its cost
    return seconds, sample_cpu(cgroup) - before, verdicts


def started_backend(client: Any, name: str, workdir: Path, stack: ExitStack) -> tuple[
        DockerBackend, str]:
    """A backend of mode ``name`` whose containers count under a cgroup parent of their own."""
    cgroup = f"{CGROUP_PREFIX}fork-{uuid.uuid4().hex[:6]}"
    stack.enter_context(containers_in_cgroup(cgroup))
    stack.enter_context(mock.patch.object(fork_server, "hardening_options",
                                          docker_sandbox.hardening_options))
    backend = DockerBackend(client=client, settings=DockerSettings(workdir=workdir, **MODES[name]))
    stack.callback(backend.close)
    backend.pool.wait_until_full(120)
    backend.fork_servers.wait_until_full(120)
    return backend, cgroup


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=60, help="submissions per round and mode")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=[name.replace(" ", "-") for name in MODES],
                        help="measure this mode alone")
    args = parser.parse_args()
    modes = [name for name in MODES if args.only in (None, name.replace(" ", "-"))]
    items = mixed(args.n)
    for slug in SLUGS:  # as a service worker does when it starts; either mode would pay them
        learning.REFERENCE_TRAININGS.prepare(load_assignment(slug))
    client = connect()
    results: dict[str, list[tuple[float, CpuSample]]] = {name: [] for name in modes}
    verdicts: dict[str, list[Any]] = {}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="fork-bench-") as workdir:
        try:
            for round_number in range(args.rounds):
                order = modes if round_number % 2 == 0 else modes[::-1]
                for name in order:
                    with ExitStack() as stack:
                        backend, cgroup = started_backend(
                            client, name, Path(workdir) / f"{round_number}-{name}", stack)
                        measure(backend, items[:4], None)  # untimed: imports, plans
                        time.sleep(SETTLE_SECONDS)
                        seconds, cpu, got = measure(backend, items, cgroup)
                    results[name].append((seconds, cpu))
                    verdicts.setdefault(name, got)
                    load.append(os.getloadavg()[0])
                    print(f"round {round_number + 1} {name}: {args.n / seconds:.2f}/s, "
                          f"{cpu.machine / args.n:.2f} machine CPU-s per submission", flush=True)
                    time.sleep(SETTLE_SECONDS)
        finally:
            remove_cgroups()
    same = len({tuple(got) for got in verdicts.values()}) <= 1
    for item, *each in zip(items, *verdicts.values(), strict=True):
        if len(set(each)) > 1:
            print(f"differs: {item.slug} {item.path.relative_to(ROOT)}: "
                  + ", ".join(f"{name} {got}" for name, got in zip(verdicts, each, strict=True)))
    print(f"\n{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
          f"{platform.platform()}; {args.n} mixed submissions x {args.rounds} rounds per mode; "
          f"load average {min(load):.1f}-{max(load):.1f}")
    print("| mode | submissions/s | CPU-s per submission: this process | containers | "
          "engine | machine | CPU-bound throughput |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rates, bounds = {}, {}
    for name, runs in results.items():
        rates[name] = statistics.median(args.n / seconds for seconds, _ in runs)
        part = {field: statistics.median(getattr(cpu, field) / args.n for _, cpu in runs)
                for field in ("worker", "containers", "engine", "machine")}
        bounds[name] = (os.cpu_count() or 1) / (part["worker"] + part["containers"]
                                                + part["engine"])
        print(f"| {name} | {rates[name]:.2f}/s | {part['worker']:.3f} | "
              f"{part['containers']:.3f} | {part['engine']:.3f} | {part['machine']:.2f} | "
              f"{bounds[name]:.2f}/s |")
    if len(modes) == 2:
        print(f"\nfork server / per container: "
              f"{rates['fork server'] / rates['per container']:.1f}x measured, "
              f"{bounds['fork server'] / bounds['per container']:.1f}x by attributed CPU; "
              f"same score and codes for every submission: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
