"""What an idle sandbox costs: CPU seconds a minute of the warm containers and fork servers
while no job comes, with the runner's wait for its job looking every 50 ms (woken by inotify
when the job is moved in, the default under Docker's own runtime) and every 2 ms (as before).

Each row starts a backend whose containers count under a benchmark-only cgroup parent, waits
until its containers are ready and have settled, and reads the parent's CPU usage over the
measured interval. Rows alternate over the rounds, so load from elsewhere falls on all alike.

Usage (an engine and the sandbox image are needed: ``make sandbox-image``)::

    .venv/bin/python benchmarks/idle_cost.py [--seconds 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.docker_vs_peer import (  # noqa: E402
    CGROUP_PREFIX,
    containers_in_cgroup,
    remove_cgroups,
    sample_cpu,
)
from sandbox import docker_sandbox, fork_server  # noqa: E402
from sandbox.docker_backend import DockerBackend, DockerSettings, connect  # noqa: E402

SETTLE_SECONDS = 3.0
CONTAINERS = 2
MODES: dict[str, dict[str, Any]] = {
    "warm pool": {"pool_size": CONTAINERS},
    "fork servers": {"mode": "fork-server", "fork_servers": CONTAINERS, "pool_size": 0},
}
INTERVALS = {"50 ms + inotify": docker_sandbox.WOKEN_WAIT_POLL_SECONDS, "2 ms": 0.002}


def idle_cpu(client: Any, mode: str, interval: float, seconds: float, workdir: Path) -> float:
    """CPU seconds a minute of one idle container of ``mode`` looking every ``interval``."""
    cgroup = f"{CGROUP_PREFIX}idle-{uuid.uuid4().hex[:6]}"
    with ExitStack() as stack:
        stack.enter_context(containers_in_cgroup(cgroup))
        stack.enter_context(mock.patch.object(fork_server, "hardening_options",
                                              docker_sandbox.hardening_options))
        stack.enter_context(mock.patch.object(docker_sandbox, "WOKEN_WAIT_POLL_SECONDS",
                                              interval))
        stack.enter_context(mock.patch.object(fork_server, "WOKEN_WAIT_POLL_SECONDS", interval))
        backend = DockerBackend(client=client,
                                settings=DockerSettings(workdir=workdir, **MODES[mode]))
        stack.callback(backend.close)
        backend.pool.wait_until_full(120)
        backend.fork_servers.wait_until_full(120)
        time.sleep(SETTLE_SECONDS)  # the last warm-up's tail
        before = sample_cpu(cgroup).containers
        time.sleep(seconds)
        used = sample_cpu(cgroup).containers - before
    return used / CONTAINERS * 60 / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured idle interval")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    client = connect()
    results: dict[tuple[str, str], list[float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="idle-bench-") as workdir:
            for _ in range(args.rounds):
                for mode in MODES:
                    for name, interval in INTERVALS.items():
                        used = idle_cpu(client, mode, interval, args.seconds, Path(workdir))
                        results.setdefault((mode, name), []).append(used)
    finally:
        remove_cgroups()
    print(f"idle CPU per container, CPU-s a minute ({args.rounds} rounds of "
          f"{args.seconds:.0f} s, median)")
    print(f"{'':14} " + " ".join(f"{name:>16}" for name in INTERVALS) + f" {'ratio':>7}")
    for mode in MODES:
        figures = [statistics.median(results[mode, name]) for name in INTERVALS]
        ratio = figures[1] / figures[0] if figures[0] else float("inf")
        print(f"{mode:14} " + " ".join(f"{f:16.3f}" for f in figures) + f" {ratio:6.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
