"""Benchmark of ours against the peer pattern and the no-isolation floor, side by side in one run.

Contenders, each grading the same correct ``attention`` submission end to end:

* the peer pattern: a fresh ``docker run`` per submission (the sandbox image plus pytest, built
  by ``benchmarks/peer/build.sh``; no network, limits like ours) running pytest over the six
  tests of ``benchmarks/peer/test_attention.py``;
* the no-isolation floor: the same pytest run in a plain local process (fresh interpreter,
  torch import, the six tests);
* ours: ``GradingPipeline`` (sandbox run, host comparison, diagnosis) on the Docker backend,
  with every container cold (pool 0) and from a warm pool.

Measured: latency of one grading (runs interleaved across contenders, so load from elsewhere
on the machine falls on all alike), sustained throughput with two client threads, CPU seconds
per submission, and memory at rest. CPU is attributed exactly where it can be: this process
and its children (``getrusage``) and the containers, which run under a benchmark-only cgroup
parent per contender whose ``cpuacct.usage`` keeps counting after they are removed. The engine
daemons (dockerd, containerd) are reported apart: they are shared with anyone else using the
engine. Machine-wide busy time is printed as a cross-check of how quiet the machine was.

Usage (an engine and the sandbox image are needed: ``scripts/ensure-docker.sh``,
``make sandbox-image``; the peer image is built here when missing)::

    .venv/bin/python benchmarks/docker_vs_peer.py [--runs 20] [--n 100] [--pool-size 2]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.docker_latency import docker_backend, memory_at_rest  # noqa: E402
from devkit.cputime import machine_cpu_seconds  # noqa: E402
from grader.loader import load_assignment  # noqa: E402
from grader.pipeline import GradingPipeline  # noqa: E402
from sandbox import docker_sandbox  # noqa: E402
from sandbox.base import Limits  # noqa: E402

PEER_DIR = Path(__file__).resolve().parent / "peer"
PEER_TESTS = PEER_DIR / "test_attention.py"
SUBMISSION = ROOT / "tests" / "corpus" / "attention" / "correct_matmul.py"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "autograde-bench-"
PEER_NAME_PREFIX = "peer-bench-"
# The same for the peer's container and the local floor: no plugins from the environment, no
# cache or byte-code writes (the peer's root file system is read-only), one torch thread.
PYTEST_COMMAND = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]
PYTEST_ENV = {
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
TICKS = os.sysconf("SC_CLK_TCK")
# The pipeline's phases; ``sandbox.*`` are the runner's own inside the container.
PROFILED_PHASES = ("prepare", "sandbox", "sandbox.imports", "sandbox.warm_up",
                   "sandbox.submission_import", "sandbox.probes", "compare")


@dataclass
class Contender:
    """One way to grade a submission end to end."""

    name: str
    grade: Callable[[int], None]
    """Grades submission number ``i``; raises unless it was graded as fully correct."""
    cgroup: str | None = None
    """The cgroup parent of its containers, if it runs any."""
    settle: Callable[[], None] = lambda: None
    """Waits (untimed) until it is at rest again, e.g. its warm pool refilled."""
    phases: list[dict[str, float]] = field(default_factory=list)
    """Phase seconds reported by each grading (ours only)."""
    warm: bool = False
    """Whether its containers come from a warm pool."""


Setup = Callable[[ExitStack], Contender]


def contenders(*, pool_size: int, peer_image: str) -> list[tuple[str, Setup]]:
    """Each contender by key; its resources live as long as the stack it is set up with."""
    limits = Limits()
    source = SUBMISSION.read_bytes()

    def peer(stack: ExitStack) -> Contender:
        cgroup = CGROUP_PREFIX + "peer"
        options = ["--rm", "--cgroup-parent", cgroup, *peer_docker_options(limits)]

        def grade(index: int) -> None:
            with submission_dir(source) as directory:
                name = f"{PEER_NAME_PREFIX}{uuid.uuid4().hex[:12]}"
                run_pytest(["docker", "run", *options, "--name", name,
                            "-v", f"{directory}:/submission:ro", peer_image,
                            "python3", *PYTEST_COMMAND, "/submission"], env=os.environ)

        return Contender("peer: docker run + pytest", grade, cgroup=cgroup)

    def local(stack: ExitStack) -> Contender:
        def grade(index: int) -> None:
            with submission_dir(source) as directory:
                run_pytest([sys.executable, *PYTEST_COMMAND, str(directory)],
                           env={**os.environ, **PYTEST_ENV}, cwd=directory)

        return Contender("floor: local pytest, no isolation", grade)

    def ours(size: int) -> Setup:
        def setup(stack: ExitStack) -> Contender:
            cgroup = f"{CGROUP_PREFIX}ours-pool{size}"
            stack.enter_context(containers_in_cgroup(cgroup))
            backend = stack.enter_context(docker_backend(size))
            pipeline = GradingPipeline(backend=backend)
            assignment = load_assignment("attention")
            name = f"ours: pipeline, docker {f'warm pool ({size})' if size else 'cold'}"
            phases: list[dict[str, float]] = []

            def grade(index: int) -> None:
                document = pipeline.grade(assignment, {"attention.py": source}, seed=index,
                                          label=f"bench-{index}")
                if document["score"] != document["max_score"]:
                    raise RuntimeError(f"{name}: graded {document['output']!r}")
                phases.append(document["autograde"]["phases"])

            def settle() -> None:
                if size and not backend.pool.wait_until_full(300):
                    raise RuntimeError("the warm pool did not fill")

            settle()
            return Contender(name, grade, cgroup=cgroup, settle=settle, phases=phases,
                             warm=size > 0)

        return setup

    return [("peer", peer), ("local", local), ("cold", ours(0)), ("warm", ours(pool_size))]


def peer_docker_options(limits: Limits) -> list[str]:
    """``docker run`` options of the peer: deny by default, with our limits."""
    env = [option for name, value in PYTEST_ENV.items() for option in ("-e", f"{name}={value}")]
    return [
        "--network", "none", "--read-only", "--init", "--user", "65534:65534",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--memory", str(limits.memory_bytes), "--memory-swap", str(limits.memory_bytes),
        "--cpus", str(limits.cpus), "--pids-limit", str(limits.max_processes),
        "--tmpfs", f"/tmp:size={limits.tmpfs_bytes}", "--log-opt", "max-size=1m", *env,
    ]


@contextmanager
def submission_dir(source: bytes) -> Iterator[Path]:
    """A fresh directory with the six tests and the submission, readable by the sandbox user."""
    directory = Path(tempfile.mkdtemp(prefix="peer-bench-"))
    try:
        shutil.copy(PEER_TESTS, directory / PEER_TESTS.name)
        (directory / "attention.py").write_bytes(source)
        for path in (directory, *directory.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_pytest(command: list[str], *, env: Any, cwd: Path | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    if done.returncode != 0 or "6 passed" not in done.stdout:
        raise RuntimeError(f"{command[0]} pytest failed: {done.stdout[-500:]}{done.stderr[-500:]}")


@contextmanager
def containers_in_cgroup(parent: str) -> Iterator[None]:
    """Start our sandbox containers under ``parent`` (benchmark-only, for CPU accounting).

    Nothing else of the hardening changes; the cgroup parent only adds a level above the
    container's own cgroup, whose usage the parent keeps after the container is removed.
    """
    original = docker_sandbox.hardening_options

    def with_parent(limits: Limits, *, runtime: str | None) -> dict[str, Any]:
        return {**original(limits, runtime=runtime), "cgroup_parent": parent}

    with mock.patch.object(docker_sandbox, "hardening_options", with_parent):
        yield


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU seconds, by who spent them."""

    worker: float
    """This process (client, grader comparison and diagnosis, the SDK's threads)."""
    children: float
    """Waited-for child processes (docker CLI, local pytest)."""
    containers: float
    """The contender's containers (its cgroup parent)."""
    engine: float
    """dockerd and containerd (shared with other users of the engine)."""
    machine: float
    """All CPUs busy, whoever ran (a cross-check of how quiet the machine was)."""

    def __sub__(self, other: CpuSample) -> CpuSample:
        return CpuSample(*(a - b for a, b in zip(self.values(), other.values(), strict=True)))

    def values(self) -> tuple[float, ...]:
        return (self.worker, self.children, self.containers, self.engine, self.machine)

    @property
    def attributed(self) -> float:
        return self.worker + self.children + self.containers


def sample_cpu(cgroup: str | None) -> CpuSample:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    containers = 0.0
    if cgroup is not None:
        usage = CGROUP_ROOT / "cpuacct" / cgroup / "cpuacct.usage"
        containers = int(usage.read_text()) / 1e9 if usage.exists() else 0.0
    return CpuSample(
        worker=own.ru_utime + own.ru_stime,
        children=kids.ru_utime + kids.ru_stime,
        containers=containers,
        engine=sum(process_cpu(pid) for pid in engine_pids()),
        machine=machine_cpu_seconds(),
    )


def engine_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in {"dockerd", "containerd"}:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def process_cpu(pid: int) -> float:
    """User and system seconds of a process and its reaped children."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / TICKS


@dataclass
class Throughput:
    name: str
    submissions: int
    seconds: float
    cpu: CpuSample
    load: tuple[float, float]
    failed: int
    """Gradings that did not come back fully correct (e.g. a cold start past the deadline)."""

    @property
    def rate(self) -> float:
        return self.submissions / self.seconds

    def per_submission(self, value: float) -> float:
        return value / self.submissions


def attempt(contender: Contender, index: int) -> bool:
    """Grade once; whether it graded right (a wrong grading is counted, not fatal: under heavy
    load a cold start can reach the wall-clock limit)."""
    try:
        contender.grade(index)
    except RuntimeError as exc:
        print(f"  {contender.name}: {str(exc)[:200]}", file=sys.stderr)
        return False
    return True


def measure_latency(active: list[Contender], runs: int,
                    failures: dict[str, int]) -> dict[str, list[float]]:
    """Seconds of each grading, the contenders taking turns run by run."""
    seconds: dict[str, list[float]] = {contender.name: [] for contender in active}
    for contender in active:  # one untimed grading each: caches, lazy imports
        contender.settle()
        attempt(contender, runs)
    for index in range(runs):
        for contender in active:
            contender.settle()
            started = time.perf_counter()
            if not attempt(contender, index):
                failures[contender.name] = failures.get(contender.name, 0) + 1
            seconds[contender.name].append(time.perf_counter() - started)
        print(f"  latency run {index + 1}/{runs}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    for contender in active:
        del contender.phases[: max(0, len(contender.phases) - runs)]
        runs_seconds = seconds[contender.name]
        print(f"  {contender.name}: median {statistics.median(runs_seconds):.3f} s, "
              f"p90 {percentile(runs_seconds, 0.9):.3f} s", file=sys.stderr)
    return seconds


def measure_throughput(contender: Contender, submissions: int, clients: int) -> Throughput:
    """Submissions per second with ``clients`` at a time; CPU until it is at rest again."""
    contender.settle()
    load_before = os.getloadavg()[0]
    before = sample_cpu(contender.cgroup)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        graded = list(pool.map(lambda index: attempt(contender, index), range(submissions)))
    elapsed = time.perf_counter() - started
    contender.settle()  # a refilled pool: each submission has paid for one container start
    after = sample_cpu(contender.cgroup)
    rate = Throughput(contender.name, submissions, elapsed, after - before,
                      (load_before, os.getloadavg()[0]), graded.count(False))
    print(f"  {rate.name}: {rate.rate:.3f}/s, {rate.per_submission(rate.cpu.attributed):.2f} "
          f"CPU s/sub, {rate.failed} failed, {rate.cpu}", file=sys.stderr)
    return rate


def resting_cpu(backend_cgroup: str, seconds: float) -> float:
    """CPU share the idle pooled containers use at rest (their waiting runners)."""
    before = sample_cpu(backend_cgroup).containers
    time.sleep(seconds)
    return (sample_cpu(backend_cgroup).containers - before) / seconds


def remove_cgroups() -> None:
    """Remove the benchmark's (by now empty) cgroup parents from every hierarchy."""
    for hierarchy in CGROUP_ROOT.iterdir():
        for parent in hierarchy.glob(CGROUP_PREFIX + "*"):
            for _ in range(50):
                try:
                    parent.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def peer_image() -> str:
    built = subprocess.run(["bash", str(PEER_DIR / "build.sh")], check=True,
                           capture_output=True, text=True)
    return built.stdout.strip().splitlines()[-1]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(args: argparse.Namespace, latency: dict[str, list[float]], failures: dict[str, int],
           rates: list[Throughput],
           profile: dict[str, tuple[bool, dict[str, float]]], memory: list[tuple[str, float]],
           idle_share: float, image: str, started: datetime.datetime) -> str:
    names = list(latency)
    peer, floor = names[0], names[1]
    peer_median = statistics.median(latency[peer])
    by_name = {rate.name: rate for rate in rates}
    floor_cpu = by_name[floor].per_submission(by_name[floor].cpu.attributed)
    lines = [
        f"Date: {started:%Y-%m-%d %H:%M} UTC; machine: {platform.node()}, {os.cpu_count()} CPUs, "
        f"{platform.machine()}, Linux {platform.release()}, "
        f"{os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB",
        f"Command: .venv/bin/python benchmarks/docker_vs_peer.py --runs {args.runs} "
        f"--n {args.n} --pool-size {args.pool_size}",
        f"Peer image: {image}; submission: {SUBMISSION.relative_to(ROOT)}",
        "",
        f"### Latency of one grading, end to end ({args.runs} runs each, interleaved)",
        "",
        "| contender | median s | p90 s | min s | peer / this (median) | failed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        runs = latency[name]
        lines.append(f"| {name} | {statistics.median(runs):.3f} | {percentile(runs, 0.9):.3f} "
                     f"| {min(runs):.3f} | {peer_median / statistics.median(runs):.2f}x "
                     f"| {failures.get(name, 0)} |")
    lines += [
        "",
        f"### Throughput, {args.n} submissions, {args.clients} client threads",
        "",
        "| contender | subs/s | this / peer | CPU s/sub (attributed) | / floor | of which "
        "containers | worker | children | + engine daemons s/sub | machine busy s/sub "
        "| load 1-min before/after | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    peer_rate = by_name[peer].rate
    for rate in rates:
        cpu, per = rate.cpu, rate.per_submission
        lines.append(
            f"| {rate.name} | {rate.rate:.3f} | {rate.rate / peer_rate:.2f}x "
            f"| {per(cpu.attributed):.2f} | {per(cpu.attributed) / floor_cpu:.2f}x "
            f"| {per(cpu.containers):.2f} | {per(cpu.worker):.2f} | {per(cpu.children):.2f} "
            f"| {per(cpu.attributed + cpu.engine):.2f} | {per(cpu.machine):.2f} "
            f"| {rate.load[0]:.1f} / {rate.load[1]:.1f} | {rate.failed} |")
    lines += ["", "### Where ours spends a grading (median seconds over the latency runs)", "",
              "`sandbox` runs from handing the job over to reading the results back. The runner's "
              "`imports` and `warm_up` are on the clock only for a cold container (a warm one paid "
              "them before its job); `docker + runner start` is the rest of `sandbox`: container "
              "start (cold), hand-over, polling and reading the results back.", "",
              "| contender | " + " | ".join(PROFILED_PHASES) + " | docker + runner start |",
              "|---|" + "---:|" * (len(PROFILED_PHASES) + 1)]
    for name, (warm, phases) in profile.items():
        on_clock = ("sandbox.submission_import", "sandbox.probes") + (
            () if warm else ("sandbox.imports", "sandbox.warm_up"))
        cells = " | ".join(f"{phases[p]:.3f}" for p in PROFILED_PHASES)
        rest = phases["sandbox"] - sum(phases[p] for p in on_clock)
        lines.append(f"| {name} | {cells} | {rest:.3f} |")
    lines += ["", f"### Memory at rest (warm pool of {args.pool_size})", "",
              "| what | MiB |", "|---|---:|"]
    lines += [f"| {name} | {mib:.1f} |" for name, mib in memory]
    lines.append(f"| idle pooled containers, CPU share (all together) | {idle_share:.1%} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="latency runs per contender")
    parser.add_argument("--n", type=int, default=100, help="submissions per throughput run")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--output", type=Path, help="also write the tables (markdown) here")
    args = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC)
    image = peer_image()
    registry = contenders(pool_size=args.pool_size, peer_image=image)
    try:
        print("latency", file=sys.stderr)
        with ExitStack() as stack:
            active = [setup(stack) for _, setup in registry]
            failures: dict[str, int] = {}
            latency = measure_latency(active, args.runs, failures)
            profile = {c.name: (c.warm, {phase: statistics.median(p.get(phase, 0.0)
                                                                  for p in c.phases)
                                         for phase in PROFILED_PHASES})
                       for c in active if c.phases}
        rates = []
        for key, setup in registry:
            print(f"throughput: {key}", file=sys.stderr)
            with ExitStack() as stack:
                rates.append(measure_throughput(setup(stack), args.n, args.clients))
        print("memory at rest", file=sys.stderr)
        with containers_in_cgroup(CGROUP_PREFIX + "rest"), docker_backend(args.pool_size) as warm:
            memory = memory_at_rest(warm, settle_seconds=5)
            idle_share = resting_cpu(CGROUP_PREFIX + "rest", 10)
    finally:
        remove_cgroups()
    text = report(args, latency, failures, rates, profile, memory, idle_share, image, started)
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
