"""Benchmark of how heavy the service's processes are to start: time and peak memory.

Each contender is a fresh process, timed from spawn to exit, its peak RSS read from the kernel
(``wait4``): the web process (``create_app()`` and its first requests), ``autograde --help``,
``autograde submit --no-wait`` against a running server (gunicorn on an embedded SQLite
database and queue), and two references measured in the same run, since this machine is shared
and noisy: an empty interpreter and ``python -c 'import torch'`` (what each of these processes
paid before the import graph was made light). Runs are interleaved, so a burst of load hits
every contender alike. Usage::

    .venv/bin/python benchmarks/process_weight.py [--runs 10] [--repo PATH]

``--repo`` measures another checkout of the code with this venv (e.g. an older commit unpacked
with ``git archive``), for a before/after on the same machine.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
SUBMISSION = REPO / "tests" / "corpus" / "attention" / "correct_matmul.py"
PASSWORD = "bench password 1"

WEB_START = """
from service.app import create_app
client = create_app().test_client()
assert client.get("/healthz").status_code == 200
assert client.get("/login").status_code == 200
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Bench:
    def __init__(self, repo: Path, data: Path) -> None:
        self.repo = repo
        self.env = {key: value for key, value in os.environ.items()
                    if not key.startswith("AUTOGRADE_")}
        self.env.update(AUTOGRADE_DATABASE_URL=f"sqlite:///{data / 'autograde.db'}",
                        AUTOGRADE_BROKER_URL=f"sqla+sqlite:///{data / 'broker.db'}",
                        AUTOGRADE_SECRET_KEY="bench", AUTOGRADE_SANDBOX_BACKEND="local",
                        AUTOGRADE_CONFIG_DIR=str(data / "client"))
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.server: subprocess.Popen[bytes] | None = None

    def run(self, argv: list[str], stdin: str | None = None) -> tuple[float, float]:
        """Wall seconds from spawn to exit, and peak RSS in MiB, of one fresh process."""
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as output:
            given.write(stdin.encode() if stdin else b"")
            given.seek(0)
            started = time.perf_counter()
            process = subprocess.Popen(argv, cwd=self.repo, env=self.env, stdin=given,
                                       stdout=output, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)  # its own peak RSS, not the children's
            elapsed = time.perf_counter() - started
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode != 0:
                output.seek(0)
                raise SystemExit(f"{' '.join(argv)} failed ({process.returncode}):\n"
                                 f"{output.read().decode(errors='replace')}")
        return elapsed, usage.ru_maxrss / 1024

    def cli(self, *args: str, stdin: str | None = None) -> tuple[float, float]:
        return self.run([sys.executable, "-m", "service.cli", *args], stdin=stdin)

    def prepare(self) -> None:
        """A database with a course, the assignments, a student; a server; the CLI logged in."""
        self.cli("admin", "db", "upgrade")
        self.cli("admin", "create-course", "bench")
        self.cli("admin", "sync-assignments", "bench")
        self.cli("admin", "assignment", "bench", "attention", "--rate-limit", "100000/60")
        self.cli("admin", "create-user", "bench", "--password-stdin", stdin=PASSWORD + "\n")
        self.cli("admin", "enrol", "bench", "bench")
        port = self.url.rsplit(":", 1)[1]
        self.server = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", port, "--workers", "1"],
            cwd=self.repo, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(self.url + "/healthz", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or self.server.poll() is not None:
                raise SystemExit("the web server did not start")
            time.sleep(0.2)
        self.cli("login", "--url", self.url, "--username", "bench", "--password-stdin",
                 stdin=PASSWORD + "\n")

    def server_worker_rss(self) -> float:
        """Resident memory of the gunicorn worker that served the requests (MiB)."""
        assert self.server is not None
        children = Path(f"/proc/{self.server.pid}/task/{self.server.pid}/children")
        pids = children.read_text().split() if children.exists() else []
        sizes = []
        for pid in pids:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(int(line.split()[1]) / 1024)
        return max(sizes, default=float("nan"))

    def close(self) -> None:
        if self.server is not None and self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGTERM)
            self.server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="autograde-weight-") as tmp:
        bench = Bench(args.repo.resolve(), Path(tmp))
        try:
            bench.prepare()
            contenders: dict[str, Callable[[], tuple[float, float]]] = {
                "reference: `python -c pass`": lambda: bench.run([sys.executable, "-c", "pass"]),
                "reference: `python -c 'import torch'`":
                    lambda: bench.run([sys.executable, "-c", "import torch"]),
                "web process: create_app() + first requests":
                    lambda: bench.run([sys.executable, "-c", WEB_START]),
                "`autograde --help`": lambda: bench.cli("--help"),
                "`autograde submit --no-wait`":
                    lambda: bench.cli("submit", str(SUBMISSION), "--assignment", "attention",
                                      "--no-wait"),
            }
            load_before = os.getloadavg()
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
            for _ in range(args.runs):
                for name, contender in contenders.items():
                    samples[name].append(contender())
            load_after = os.getloadavg()
            served_rss = bench.server_worker_rss()
        finally:
            bench.close()
    print(f"code: {args.repo}; {args.runs} interleaved runs; load average "
          f"{load_before[0]:.1f} before, {load_after[0]:.1f} after ({os.cpu_count()} cores)\n")
    print("| process | median wall | fastest | slowest | peak RSS (median) |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in samples.items():
        times = [elapsed for elapsed, _ in runs]
        rss = statistics.median(size for _, size in runs)
        print(f"| {name} | {statistics.median(times):.2f} s | {min(times):.2f} s | "
              f"{max(times):.2f} s | {rss:.0f} MiB |")
    print(f"\ngunicorn worker after serving the submissions: {served_rss:.0f} MiB resident")
    return 0


if __name__ == "__main__":
    sys.exit(main())
