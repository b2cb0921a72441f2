"""Benchmark of the whole service against the bare pipeline, in one run, on a mixed corpus.

Contenders, each grading the same mixed set of real submissions (correct and buggy, both
assignments, from ``tests/corpus-realworld`` and ``tests/corpus``, interleaved):

* **bare pipeline**: ``GradingPipeline`` on the Docker backend's warm pool in this process,
  two gradings at a time (as many as the service's worker processes);
* **service, PostgreSQL + Redis**: gunicorn (2 processes), a Celery worker (2 processes), the
  same sandbox; submissions posted over the API;
* **service, embedded default**: the same on SQLite and the SQLite queue (``--no-embedded``
  leaves it out);
* **peer pattern**: a fresh ``docker run`` per submission running pytest over the peer's tests
  (``benchmarks/peer``, the image built here when missing; ``--no-peer`` leaves it out), two
  at a time. Its suite checks ``attention()`` only, so it says less about a submission than
  ours: it is the cost of the pattern, not a like-for-like grading.

Measured for each: latency one at a time (submit -> result; over the API with the long poll,
``?wait=``; each submission after ``--latency-gap`` seconds of idle), then a rush of N posted
at once: throughput (N over first request to last result,
from the server's own timestamps), each submission's wait (requested -> graded), and CPU seconds
per submission by process, read from /proc: web (gunicorn tree), worker (Celery tree), the
sandbox containers (a benchmark-only cgroup parent, whose usage outlives the containers), the
Docker daemons, PostgreSQL and Redis. The last three are shared with anything else using them on
this machine, and are marked so. The benchmark watches the rush with one list request a second
(``GET /api/v1/submissions?limit=N``; waits come from the server's timestamps), not one request
per submission.

Usage (an engine and the sandbox image: ``make sandbox-image``)::

    .venv/bin/python benchmarks/service_rush.py [--n 20] [--latency-runs 8] [--latency-gap 3]
        [--no-embedded]
        [--backend docker|local] [--no-peer]
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import requests  # noqa: E402

from benchmarks.docker_vs_peer import (  # noqa: E402
    CGROUP_PREFIX,
    CGROUP_ROOT,
    PEER_NAME_PREFIX,
    PYTEST_COMMAND,
    containers_in_cgroup,
    engine_pids,
    peer_docker_options,
    peer_image,
    process_cpu,
    submission_dir,
)
from devkit.courses import PASSWORD  # noqa: E402
from devkit.cputime import machine_cpu_seconds  # noqa: E402
from devkit.stack import PG_ADMIN, REDIS_URL, Stack, free_port  # noqa: E402

SLUGS = {"attention": "attention.py", "multi-head-attention": "mha.py"}
CORPORA = (ROOT / "tests" / "corpus-realworld", ROOT / "tests" / "corpus")
POLL_SECONDS = 1.0
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Item:
    slug: str
    path: Path

    @property
    def files(self) -> dict[str, bytes]:
        return {SLUGS[self.slug]: self.path.read_bytes()}


def mixed(count: int) -> list[Item]:
    """``count`` submissions taken in turn from each corpus and assignment (a fixed order, so
    every contender grades the same set)."""
    lanes = [[Item(slug, path) for path in sorted((corpus / slug).glob("*.py"))]
             for corpus in CORPORA for slug in SLUGS]
    items: list[Item] = []
    index = 0
    while len(items) < count:
        lane = lanes[index % len(lanes)]
        items.append(lane[(index // len(lanes)) % len(lane)])
        index += 1
    return items


# -- CPU by process -------------------------------------------------------------------------

def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            table[int(entry.name)] = (int(stat.rpartition(")")[2].split()[1]), name)
    return table


def tree_cpu(root: int, table: dict[int, tuple[int, str]]) -> float:
    """CPU seconds of a process and its descendants (living, and reaped by them)."""
    members, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in table.items():
            if ppid == parent and pid not in members:
                members.add(pid)
                frontier.append(pid)
    return sum(process_cpu(pid) for pid in members)


def named_cpu(names: set[str], table: dict[int, tuple[int, str]]) -> float:
    return sum(process_cpu(pid) for pid, (_, name) in table.items() if name in names)


OWN_CGROUPS: list[str] = []


def new_cgroup(kind: str) -> str:
    name = f"{CGROUP_PREFIX}rush-{kind}-{uuid.uuid4().hex[:6]}"
    OWN_CGROUPS.append(name)
    return name


def remove_own_cgroups() -> None:
    """Remove this run's (by now empty) cgroup parents, and only those."""
    for hierarchy in CGROUP_ROOT.iterdir():
        for name in OWN_CGROUPS:
            for _ in range(50):
                try:
                    (hierarchy / name).rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def cgroup_cpu(parent: str | None) -> float:
    if parent is None:
        return 0.0
    usage = CGROUP_ROOT / "cpuacct" / parent / "cpuacct.usage"
    return int(usage.read_text()) / 1e9 if usage.exists() else 0.0


SETTLED_CPU_SECONDS = 0.1
"""The containers' CPU-s in a second once none is starting (two idle pooled ones: 0.024)."""


def settle(cgroup: str | None, *, at_least: float = 3.0, at_most: float = 120.0) -> None:
    """Wait until the sandbox containers are idle: no warm container is still starting.

    The refills of the warm pools after a rush are part of what its gradings cost, and the
    service keeps more pools than the bare pipeline (one per grading process): a fixed pause
    cut off more of its refills, or fewer, by chance."""
    time.sleep(at_least)
    if cgroup is None:
        return
    until, previous = time.monotonic() + at_most, cgroup_cpu(cgroup)
    while time.monotonic() < until:
        time.sleep(1.0)
        current = cgroup_cpu(cgroup)
        if current - previous < SETTLED_CPU_SECONDS:
            return
        previous = current


PARTS = ("web", "worker / this process", "containers", "Docker daemons (shared)",
         "PostgreSQL (shared)", "Redis (shared)", "machine (everyone)")
STARTS = "containers started"
"""Counted beside the CPU parts: what a row's container CPU is made of."""


class ContainerStarts:
    """How many containers the engine has started since this was made, read off its event
    stream in a thread (the engine keeps too few past events to ask afterwards)."""

    def __init__(self) -> None:
        import docker

        self.count = 0
        self._client = docker.from_env()
        self._events = self._client.events(decode=True,
                                           filters={"type": "container", "event": "start"})
        threading.Thread(target=self._follow, daemon=True, name="container-starts").start()

    def _follow(self) -> None:
        for _ in self._events:
            self.count += 1

    def close(self) -> None:
        self._events.close()
        self._client.close()


CONTAINER_STARTS: ContainerStarts | None = None


def sample(roots: dict[str, int], cgroup: str | None) -> dict[str, float]:
    table = _processes()
    return {
        STARTS: float(CONTAINER_STARTS.count if CONTAINER_STARTS is not None else 0),
        "web": tree_cpu(roots["web"], table) if "web" in roots else 0.0,
        "worker / this process": tree_cpu(roots["worker"], table),
        "containers": cgroup_cpu(cgroup),
        "Docker daemons (shared)": sum(process_cpu(pid) for pid in engine_pids()),
        "PostgreSQL (shared)": named_cpu({"postgres", "postmaster"}, table),
        "Redis (shared)": named_cpu({"redis-server"}, table),
        "machine (everyone)": machine_cpu_seconds(),
    }


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What each part used between two samples."""
    return {part: after[part] - before[part] for part in (*PARTS, STARTS)}


# -- contenders -----------------------------------------------------------------------------

@dataclass
class Outcome:
    name: str
    latency: list[float]
    rush_seconds: float
    waits: list[float]
    cpu: dict[str, float]
    failed: int
    load: tuple[float, float]
    steps: dict[str, list[float]] | None = None
    """The one-at-a-time runs split by the server's timestamps (services only)."""
    retried: int | None = None
    """Gradings of the rush started again (a sandbox error, a lost worker): each costs one
    more container (services only)."""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


LATENCY_GAP_SECONDS = 3.0
"""Before each one-at-a-time submission (``--latency-gap``): it arrives at an idle system,
whose warm containers were replaced after the last one (a start takes 1-2 s). Submissions
back to back, faster than containers start, are the rush's to measure."""


def one_at_a_time(grade: Callable[[Item], float], item: Item) -> float:
    time.sleep(LATENCY_GAP_SECONDS)
    return grade(item)


def bare(items: list[Item], runs: int, backend_name: str, stack: ExitStack) -> Outcome:
    from grader import learning
    from grader.loader import load_assignment
    from grader.pipeline import GradingPipeline
    from sandbox import create_backend

    cgroup = None
    if backend_name == "docker":
        cgroup = new_cgroup("bare")
        stack.enter_context(containers_in_cgroup(cgroup))
    backend = create_backend(backend_name)
    stack.callback(backend.close)
    pipeline = GradingPipeline(backend=backend)
    packages = {slug: load_assignment(slug) for slug in SLUGS}

    def grade(item: Item) -> float:
        started = time.perf_counter()
        document = pipeline.grade(packages[item.slug], item.files, label="bench")
        assert "score" in document
        return time.perf_counter() - started

    for slug in SLUGS:  # untimed: imports, plans, a filled pool
        grade(next(item for item in items if item.slug == slug))
        # and the reference's trainings, as a service worker prepares them when it starts
        learning.REFERENCE_TRAININGS.prepare(packages[slug])
    settle(cgroup)
    latency = [one_at_a_time(grade, item) for item in items[:runs]]
    settle(cgroup)  # the pool refilled
    roots = {"worker": os.getpid()}
    before, load = sample(roots, cgroup), os.getloadavg()[0]
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        waits = list(pool.map(grade, items))  # each one's own grading; no queue here
    elapsed = time.perf_counter() - started
    settle(cgroup)  # the refill of the pool is part of what a grading costs
    after = sample(roots, cgroup)
    return Outcome("bare pipeline", latency, elapsed, waits,
                   spent(before, after), 0, (load, os.getloadavg()[0]))


def peer(items: list[Item], runs: int, image: str) -> Outcome:
    """The peer pattern on the same items: a fresh ``docker run`` with pytest for each."""
    from sandbox.base import Limits

    cgroup = new_cgroup("peer")
    options = ["--rm", "--cgroup-parent", cgroup, *peer_docker_options(Limits())]

    def grade(item: Item) -> float:
        started = time.perf_counter()
        with submission_dir(item.path.read_bytes()) as directory:
            name = f"{PEER_NAME_PREFIX}{uuid.uuid4().hex[:12]}"
            done = subprocess.run(["docker", "run", *options, "--name", name,
                                   "-v", f"{directory}:/submission:ro", image,
                                   "python3", *PYTEST_COMMAND, "/submission"],
                                  capture_output=True, text=True, timeout=300)
        # pytest's verdict is the peer's grade: 1, a test failed; 2, the tests could not import
        # the submission's ``attention`` (a file of the other assignment). Anything else is not
        if done.returncode not in (0, 1, 2):
            raise RuntimeError(f"peer run failed ({done.returncode}): {done.stderr[-300:]}")
        return time.perf_counter() - started

    grade(items[0])  # untimed: the image's layers in the page cache
    latency = [one_at_a_time(grade, item) for item in items[:runs]]
    roots = {"worker": os.getpid()}
    before, load = sample(roots, cgroup), os.getloadavg()[0]
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        waits = list(pool.map(grade, items))
    elapsed = time.perf_counter() - started
    after = sample(roots, cgroup)
    return Outcome("peer: docker run + pytest (2 at a time)", latency, elapsed, waits,
                   spent(before, after), 0, (load, os.getloadavg()[0]))


def _worker_argv(cgroup: str | None) -> list[str]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--as-worker", cgroup or "-", "--",
            "-A", "service.worker", "worker", "--loglevel", "WARNING", "--concurrency", "2",
            "--pool", "prefork", "--without-gossip", "--without-mingle", "-Q"]
    return argv


def service(name: str, items: list[Item], runs: int, backend_name: str, database: str,
            broker: str, folder: Path, profile: Path | None = None) -> Outcome:
    env = dict(os.environ)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env.update({"AUTOGRADE_DATABASE_URL": database, "AUTOGRADE_BROKER_URL": broker,
                "AUTOGRADE_QUEUE": queue, "AUTOGRADE_SANDBOX_BACKEND": backend_name,
                "AUTOGRADE_CONFIG_DIR": str(folder), "PYTHONPATH": str(ROOT),
                "AUTOGRADE_URL": f"http://127.0.0.1:{port}"})
    stack = Stack(env=env, url=f"http://127.0.0.1:{port}", logs=folder)
    commands = [["admin", "db", "upgrade"], ["admin", "create-course", "bench"],
                ["admin", "sync-assignments", "bench"]]
    commands += [["admin", "assignment", "bench", slug, "--rate-limit", "100000/60"]
                 for slug in SLUGS]
    for args in commands:
        done = stack.autograde(*args, timeout=300)
        assert done.returncode == 0, done.stderr
    assert stack.autograde("admin", "create-user", "bench", "--password-stdin",
                           stdin=PASSWORD + "\n").returncode == 0
    assert stack.autograde("admin", "enrol", "bench", "bench").returncode == 0
    cgroup = new_cgroup("service") if backend_name == "docker" else None
    try:
        stack.start_server()
        log = open(folder / "worker.log", "ab")  # noqa: SIM115 - closed with the process
        stack.processes["worker"] = subprocess.Popen(
            [*_worker_argv(cgroup), queue], env=env, stdout=log, stderr=subprocess.STDOUT,
            cwd=ROOT, start_new_session=True)
        headers = stack.login("bench")
        http = requests.Session()
        http.headers.update(headers)

        def post(item: Item) -> int:
            entry, content = next(iter(item.files.items()))
            response = http.post(f"{stack.url}/api/v1/assignments/{item.slug}/submissions",
                                 files=[("files", (entry, content))], timeout=120)
            response.raise_for_status()
            return int(response.json()["id"])

        def follow(submission_id: int) -> dict[str, Any]:
            status = "queued"
            while True:
                body: dict[str, Any] = http.get(
                    f"{stack.url}/api/v1/submissions/{submission_id}",
                    params={"wait": 30, "since": status}, timeout=60).json()
                status = body["status"]
                if status in ("graded", "failed"):
                    return body

        for slug in SLUGS:  # untimed: the worker's imports, plans, a filled pool
            follow(post(next(item for item in items if item.slug == slug)))
        settle(cgroup)
        latency, seen = [], {}
        for item in items[:runs]:
            time.sleep(LATENCY_GAP_SECONDS)
            started = time.perf_counter()
            submission_id = post(item)
            follow(submission_id)
            latency.append(time.perf_counter() - started)
            seen[submission_id] = time.time()
        settle(cgroup)
        roots = {"web": stack.processes["web"].pid, "worker": stack.processes["worker"].pid}
        spies = [] if profile is None else [spy(pid, profile / f"{role}.txt")
                                            for role, pid in roots.items()]
        before, load = sample(roots, cgroup), os.getloadavg()[0]
        with ThreadPoolExecutor(8) as pool:
            ids = set(pool.map(post, items))
        bodies = watch_rush(http, stack.url, ids)
        for process in spies:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)
        settle(cgroup)  # the refills of the pools are part of what a grading costs
        after = sample(roots, cgroup)
        requested = [_at(b["requested_at"]) for b in bodies]
        finished = [_at(b["graded_at"]) if b["graded_at"] else None for b in bodies]
        done = [f for f in finished if f is not None]
        waits = [f - r for r, f in zip(requested, finished, strict=True) if f is not None]
        failed = sum(1 for b in bodies if b["status"] != "graded")
        return Outcome(name, latency, max(done) - min(requested), waits,
                       spent(before, after), failed,
                       (load, os.getloadavg()[0]), steps=latency_steps(database, seen),
                       retried=sum(b["attempts"] - 1 for b in bodies))
    finally:
        stack.stop_all()


STEPS = ("requested -> enqueued", "enqueued -> started", "started -> graded",
         "graded -> client knew")


def latency_steps(database: str, seen: dict[int, float]) -> dict[str, list[float]]:
    """Where each one-at-a-time run spent its time, from the submissions' own timestamps
    (naive UTC in the database) and the moment the client had the result."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(database)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sqlalchemy.text(
                "SELECT id, requested_at, enqueued_at, started_at, graded_at FROM submissions"
            )).all()
    finally:
        engine.dispose()
    steps: dict[str, list[float]] = {step: [] for step in STEPS}
    for submission_id, *stamps in rows:
        if submission_id not in seen or any(stamp is None for stamp in stamps):
            continue
        moments = [_utc(stamp) for stamp in stamps] + [seen[submission_id]]
        for step, (a, b) in zip(STEPS, itertools.pairwise(moments), strict=True):
            steps[step].append(b - a)
    return steps


def _utc(stamp: Any) -> float:
    if isinstance(stamp, str):
        stamp = datetime.datetime.fromisoformat(stamp)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return float(stamp.timestamp())


def spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling a process tree (collapsed stacks; ``pip install py-spy``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([os.environ.get("PY_SPY", "py-spy"), "record", "--pid", str(pid),
                             "--subprocesses", "--rate", "50", "--format", "raw", "--output",
                             str(out), "--nonblocking"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def watch_rush(http: requests.Session, url: str, ids: set[int]) -> list[dict[str, Any]]:
    """Until every one is graded or failed, with one list request at a time."""
    while True:
        listing = http.get(f"{url}/api/v1/submissions", params={"limit": len(ids)},
                           timeout=60).json()["submissions"]
        mine = [b for b in listing if b["id"] in ids]
        if len(mine) == len(ids) and all(b["status"] in ("graded", "failed") for b in mine):
            return mine
        time.sleep(POLL_SECONDS)


def _at(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


@contextmanager
def postgres_database() -> Iterator[str]:
    name = f"autograde_rush_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- report ---------------------------------------------------------------------------------

def report(outcomes: list[Outcome], args: argparse.Namespace, items: list[Item],
           started: datetime.datetime, load: float) -> str:
    base = outcomes[0]
    base_rate = len(items) / base.rush_seconds
    base_cpu = sum(base.cpu[p] for p in PARTS[:3]) / len(items)
    kinds = sorted({f"{i.path.parent.parent.name}/{i.slug}" for i in items})
    lines = [
        f"Date: {started:%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs; sandbox {args.backend}; "
        f"load average (1 min) at start {load:.1f}, at end {os.getloadavg()[0]:.1f}",
        f"Command: .venv/bin/python benchmarks/service_rush.py --n {args.n} "
        f"--latency-runs {args.latency_runs} --latency-gap {args.latency_gap:g} "
        f"--backend {args.backend}"
        + (" --no-embedded" if args.no_embedded else "")
        + (" --no-peer" if args.no_peer else ""),
        f"Submissions: {len(items)} from {', '.join(kinds)}",
        "",
        "| contender | latency p50 | p95 | rush: subs/s | vs bare | wait p50 | wait p95 "
        "| CPU s/sub (web+worker+containers) | vs bare | failed | retried "
        "| load before/after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for outcome in outcomes:
        rate = len(items) / outcome.rush_seconds
        cpu = sum(outcome.cpu[p] for p in PARTS[:3]) / len(items)
        lines.append(
            f"| {outcome.name} | {statistics.median(outcome.latency):.2f} s "
            f"| {percentile(outcome.latency, 0.95):.2f} s | {rate:.2f} | {rate / base_rate:.2f}x "
            f"| {statistics.median(outcome.waits):.1f} s | {percentile(outcome.waits, 0.95):.1f} s "
            f"| {cpu:.2f} | {cpu / base_cpu:.2f}x | {outcome.failed} "
            f"| {'-' if outcome.retried is None else outcome.retried} "
            f"| {outcome.load[0]:.1f} / {outcome.load[1]:.1f} |")
    lines += ["", "CPU seconds per submission in the rush, by process (the shared ones count "
              "whatever else used them meanwhile), and the containers the engine started in "
              "the rush and its pools' refill after it:", "",
              "| contender | " + " | ".join(PARTS) + f" | {STARTS} |",
              "|---|" + "---:|" * (len(PARTS) + 1)]
    for outcome in outcomes:
        lines.append(f"| {outcome.name} | " + " | ".join(
            f"{outcome.cpu[p] / len(items):.2f}" for p in PARTS)
            + f" | {outcome.cpu.get(STARTS, 0):.0f} |")
    lines += ["", "The one-at-a-time runs of the services, by step (median seconds; the "
              "server's timestamps, the last step the client's clock):", "",
              "| contender | " + " | ".join(STEPS) + " |", "|---|" + "---:|" * len(STEPS)]
    for outcome in outcomes:
        if outcome.steps:
            lines.append(f"| {outcome.name} | " + " | ".join(
                f"{statistics.median(outcome.steps[step]):.3f}" if outcome.steps[step] else "-"
                for step in STEPS) + " |")
    lines += ["", "(bare pipeline and peer: their 'wait' is each grading's own time, there is "
              "no queue; the bare pipeline's latency is one grading in this process; the peer's "
              "'worker' is this process and the docker CLI it runs.)"]
    return "\n".join(lines)


def as_worker(argv: list[str]) -> None:
    """The Celery worker, with its sandbox containers under the benchmark's cgroup parent."""
    cgroup, celery_args = argv[0], argv[argv.index("--") + 1:]
    from celery.__main__ import main as celery_main

    with ExitStack() as stack:
        if cgroup != "-":
            stack.enter_context(containers_in_cgroup(cgroup))
        sys.argv = ["celery", *celery_args]
        celery_main()


def main() -> int:
    global LATENCY_GAP_SECONDS
    if len(sys.argv) > 1 and sys.argv[1] == "--as-worker":
        as_worker(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20, help="submissions in the rush")
    parser.add_argument("--latency-runs", type=int, default=8)
    parser.add_argument("--latency-gap", type=float, default=LATENCY_GAP_SECONDS,
                        help="seconds of idle before each one-at-a-time submission (default 3)")
    parser.add_argument("--backend", choices=("docker", "local"), default="docker")
    parser.add_argument("--no-embedded", action="store_true")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--profile", type=Path, help="py-spy the web and worker during the "
                        "PostgreSQL + Redis rush; collapsed stacks written to this folder")
    args = parser.parse_args()
    LATENCY_GAP_SECONDS = args.latency_gap
    global CONTAINER_STARTS
    started, load = datetime.datetime.now(datetime.UTC), os.getloadavg()[0]
    items = mixed(args.n)
    outcomes: list[Outcome] = []
    if args.backend == "docker":
        CONTAINER_STARTS = ContainerStarts()
    try:
        with ExitStack() as stack:
            outcomes.append(bare(items, args.latency_runs, args.backend, stack))
        print(f"  {outcomes[-1].name}: done", file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp, postgres_database() as database:
            outcomes.append(service("service, PostgreSQL + Redis", items, args.latency_runs,
                                    args.backend, database, REDIS_URL.rsplit("/", 1)[0] + "/6",
                                    Path(tmp), args.profile))
        print(f"  {outcomes[-1].name}: done", file=sys.stderr)
        if not args.no_embedded:
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                outcomes.append(service("service, embedded (SQLite)", items,
                                        args.latency_runs, args.backend,
                                        f"sqlite:///{folder / 'autograde.db'}",
                                        f"sqla+sqlite:///{folder / 'broker.db'}", folder))
            print(f"  {outcomes[-1].name}: done", file=sys.stderr)
        if not args.no_peer and args.backend == "docker":
            outcomes.append(peer(items, args.latency_runs, peer_image()))
    finally:
        remove_own_cgroups()
        if CONTAINER_STARTS is not None:
            CONTAINER_STARTS.close()
        if outcomes:  # what was measured is kept even when a later contender failed
            print(report(outcomes, args, items, started, load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
