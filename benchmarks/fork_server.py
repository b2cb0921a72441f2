"""Throughput of the Docker backend's fork-server mode against its per-container warm pool.

Both modes grade the same mixed corpus (correct and buggy files of both assignments, from
``tests/corpus-realworld`` and ``tests/corpus``, in ``benchmarks/service_rush.mixed`` order)
through ``GradingPipeline`` with two client threads (the machine's cores), in one run and in
alternating rounds, so load from elsewhere falls on both alike:

* per container: ``DockerSettings(pool_size=2)``, the default mode, a fresh container per run
  from a warm pool (whose refills are part of what a grading costs);
* fork server: ``DockerSettings(mode="fork-server", fork_servers=2)``.

Printed per mode: submissions per second (median of the rounds), machine CPU seconds per
submission (``/proc/stat``, everything on the machine, the engine and the pool's refills
included), and whether every grading got the same document in both modes.

Usage (an engine and the sandbox image are needed: ``make sandbox-image``)::

    .venv/bin/python benchmarks/fork_server.py [--n 60] [--rounds 2]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assignments.loader import load_assignment  # noqa: E402
from benchmarks.docker_vs_peer import machine_busy  # noqa: E402
from benchmarks.service_rush import SLUGS, Item, mixed  # noqa: E402
from grader.pipeline import GradingPipeline  # noqa: E402
from sandbox.docker_backend import DockerBackend, DockerSettings, connect  # noqa: E402

SEED = 20240611
SETTLE_SECONDS = 3.0
MODES = {
    "per container": {"pool_size": 2},
    "fork server": {"mode": "fork-server", "fork_servers": 2},
}


def _verdict(document: dict[str, Any]) -> tuple[Any, ...]:
    return (document["score"], sorted(d["code"] for d in document["diagnoses"]))


def measure(backend: DockerBackend, items: list[Item]) -> tuple[float, float, list[Any]]:
    """Seconds and machine CPU seconds to grade ``items`` with two threads; the verdicts."""
    pipeline = GradingPipeline(backend=backend)
    packages = {slug: load_assignment(slug) for slug in SLUGS}

    def grade(item: Item) -> Any:
        return _verdict(pipeline.grade(packages[item.slug], item.files, seed=SEED, label="bench"))

    busy, started = machine_busy(), time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        verdicts = list(pool.map(grade, items))
    return time.perf_counter() - started, machine_busy() - busy, verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=60, help="submissions per round and mode")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    items = mixed(args.n)
    client = connect()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in MODES}
    verdicts: dict[str, list[Any]] = {}
    with tempfile.TemporaryDirectory(prefix="fork-bench-") as workdir:
        for round_number in range(args.rounds):
            order = list(MODES) if round_number % 2 == 0 else list(MODES)[::-1]
            for name in order:
                backend = DockerBackend(client=client, settings=DockerSettings(
                    workdir=Path(workdir) / f"{round_number}-{len(verdicts)}", **MODES[name]))
                try:
                    backend.pool.wait_until_full(120)
                    backend.fork_servers.wait_until_full(120)
                    measure(backend, items[:4])  # untimed: imports and plans of both slugs
                    time.sleep(SETTLE_SECONDS)
                    seconds, cpu, got = measure(backend, items)
                finally:
                    backend.close()
                results[name].append((seconds, cpu))
                verdicts.setdefault(name, got)
                print(f"round {round_number + 1} {name}: {args.n / seconds:.2f}/s, "
                      f"{cpu / args.n:.2f} machine CPU-s per submission", flush=True)
                time.sleep(SETTLE_SECONDS)
    rates = {name: statistics.median(args.n / s for s, _ in runs) for name, runs in results.items()}
    cpus = {name: statistics.median(c / args.n for _, c in runs) for name, runs in results.items()}
    same = verdicts["per container"] == verdicts["fork server"]
    print(f"\n{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
          f"{platform.platform()}; {args.n} mixed submissions x {args.rounds} rounds per mode")
    print("| mode | submissions/s | machine CPU-s per submission |")
    print("|---|---|---|")
    for name in MODES:
        print(f"| {name} | {rates[name]:.2f} | {cpus[name]:.2f} |")
    ratio = rates["fork server"] / rates["per container"]
    print(f"\nfork server / per container: {ratio:.1f}x throughput; "
          f"same score and codes for every submission: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
