"""Benchmark of the grading service over its API: submit-to-result latency with one worker, and
a deadline rush (N submissions posted at once, time until all are graded).

Real processes on this machine: gunicorn, one Celery worker (prefork), PostgreSQL, Redis, the
local sandbox. Usage::

    .venv/bin/python benchmarks/service_latency.py [--latency-runs 20] [--rush 300]
        [--rush-file tests/corpus/attention/syntax_missing_colon.py] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import os

from devkit.courses import PASSWORD
from devkit.paths import CORPUS
from devkit.stack import PG_ADMIN, REDIS_URL, Stack, free_port


def _stack(tmp: Path, database: str, concurrency: int) -> Stack:
    env = dict(os.environ)
    port = free_port()
    env.update({"AUTOGRADE_DATABASE_URL": database, "AUTOGRADE_BROKER_URL": REDIS_URL,
                "AUTOGRADE_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
                "AUTOGRADE_SANDBOX_BACKEND": "local", "AUTOGRADE_CONFIG_DIR": str(tmp)})
    stack = Stack(env=env, url=f"http://127.0.0.1:{port}", logs=tmp)
    assert stack.autograde("admin", "db", "upgrade").returncode == 0
    for args in (["admin", "create-course", "bench"], ["admin", "sync-assignments", "bench"],
                 ["admin", "assignment", "bench", "attention", "--rate-limit", "100000/60"]):
        assert stack.autograde(*args).returncode == 0
    assert stack.autograde("admin", "create-user", "bench", "--password-stdin",
                           stdin=PASSWORD + "\n").returncode == 0
    assert stack.autograde("admin", "enrol", "bench", "bench").returncode == 0
    stack.start_server()
    stack.start_worker(concurrency)
    return stack


def _post(stack: Stack, headers: dict[str, str], content: bytes) -> int:
    response = requests.post(f"{stack.url}/api/v1/assignments/attention/submissions",
                             headers=headers, files=[("files", ("attention.py", content))],
                             timeout=60)
    response.raise_for_status()
    return int(response.json()["id"])


def latency(stack: Stack, headers: dict[str, str], content: bytes, runs: int) -> list[float]:
    _post(stack, headers, content)  # warm the worker (imports, first plan)
    stack.wait_for(headers, _post(stack, headers, content), timeout=300)
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        body = stack.wait_for(headers, _post(stack, headers, content), timeout=300)
        assert body["status"] == "graded"
        seconds.append(time.perf_counter() - started)
    return seconds


def rush(stack: Stack, headers: dict[str, str], content: bytes, count: int) -> tuple[float,
                                                                                    float]:
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        ids = list(pool.map(lambda _: _post(stack, headers, content), range(count)))
    posted = time.perf_counter() - started
    pending = set(ids)
    while pending:
        for submission_id in list(pending):
            body = requests.get(f"{stack.url}/api/v1/submissions/{submission_id}",
                                headers=headers, timeout=30).json()
            if body["status"] in ("graded", "failed"):
                pending.discard(submission_id)
        time.sleep(0.5)
    return posted, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-runs", type=int, default=20)
    parser.add_argument("--latency-file", type=Path,
                        default=CORPUS / "attention" / "softmax_dim_minus2.py")
    parser.add_argument("--rush", type=int, default=300)
    parser.add_argument("--rush-file", type=Path,
                        default=CORPUS / "attention" / "syntax_missing_colon.py")
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    name = f"autograde_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    stack = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stack = _stack(Path(tmp), f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}",
                           args.concurrency)
            headers = stack.login("bench")
            if args.latency_runs:
                seconds = sorted(latency(stack, headers, args.latency_file.read_bytes(),
                                         args.latency_runs))
                p95 = seconds[min(len(seconds) - 1, round(0.95 * len(seconds)) - 1)]
                print(f"latency ({args.latency_file.name}, {len(seconds)} runs, "
                      f"{args.concurrency} worker process): median "
                      f"{statistics.median(seconds):.2f} s, p95 {p95:.2f} s, "
                      f"min {seconds[0]:.2f} s, max {seconds[-1]:.2f} s")
            if args.rush:
                posted, total = rush(stack, headers, args.rush_file.read_bytes(), args.rush)
                print(f"deadline rush ({args.rush} x {args.rush_file.name}, "
                      f"{args.concurrency} worker process): all posted in {posted:.1f} s, all "
                      f"graded after {total:.1f} s ({args.rush / total:.1f} submissions/s)")
            stack.stop_all()
    finally:
        if stack is not None:
            stack.stop_all()
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
