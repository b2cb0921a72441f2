"""What one grading costs the shared database and broker, and one host's throughput: the
service on the machine's PostgreSQL (a database of its own) and a private broker (Redis or
RabbitMQ), one worker, a rush of real submissions, the database's and Redis's own counters read
before and after. The inputs of the capacity plan (docs/operators/hosts.md). Usage::

    .venv/bin/python benchmarks/host_costs.py [--n 30] [--concurrency 2]
        [--broker redis|rabbitmq] [--backend local|docker]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg
import requests

from devkit.courses import PASSWORD
from devkit.faults import SUBMISSIONS, PrivateRedis
from devkit.hosts import PrivateRabbit
from devkit.paths import CORPUS
from devkit.stack import PG_ADMIN, Stack, free_port
from service.core import db

PG_COUNTERS = ("xact_commit", "xact_rollback", "tup_returned", "tup_fetched", "tup_inserted",
               "tup_updated", "tup_deleted", "blks_hit", "blks_read")


def pg_counters(name: str) -> dict[str, int]:
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute("SELECT pg_stat_clear_snapshot()")
        row = admin.execute(f"SELECT {', '.join(PG_COUNTERS)} FROM pg_stat_database "
                            "WHERE datname = %s", (name,)).fetchone()
    assert row is not None
    return dict(zip(PG_COUNTERS, (int(value) for value in row), strict=True))


def redis_counters(url: str) -> dict[str, int]:
    import redis

    info: dict[str, Any] = redis.Redis.from_url(url).info("stats")
    return {name: int(info[name]) for name in ("total_commands_processed",
                                               "total_net_input_bytes",
                                               "total_net_output_bytes")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--broker", choices=("redis", "rabbitmq"), default="redis")
    parser.add_argument("--backend", choices=("local", "docker"), default="local")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="autograde-host-costs-"))
    name = f"autograde_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    broker: PrivateRedis | PrivateRabbit = (PrivateRedis(folder) if args.broker == "redis"
                                            else PrivateRabbit(folder))
    broker.start()
    port = free_port()
    env = dict(os.environ, AUTOGRADE_DATABASE_URL=url, AUTOGRADE_BROKER_URL=broker.url,
               AUTOGRADE_SANDBOX_BACKEND=args.backend, AUTOGRADE_QUEUE="grading",
               AUTOGRADE_CONFIG_DIR=str(folder / "client"), PYTHONUNBUFFERED="1",
               AUTOGRADE_URL=f"http://127.0.0.1:{port}")
    stack = Stack(env=env, url=f"http://127.0.0.1:{port}", logs=folder)
    try:
        db.upgrade(url)
        for command in (["admin", "create-course", "ml101"],
                        ["admin", "sync-assignments", "ml101"],
                        ["admin", "assignment", "ml101", "attention", "--rate-limit",
                         "1000/60"]):
            assert stack.autograde(*command).returncode == 0
        assert stack.autograde("admin", "create-user", "student", "--password-stdin",
                               stdin=PASSWORD + "\n").returncode == 0
        assert stack.autograde("admin", "enrol", "ml101", "student").returncode == 0
        stack.start_server()
        stack.start_worker(args.concurrency)
        headers = stack.login("student")
        files = [(CORPUS / "attention" / file).read_bytes() for file in SUBMISSIONS]

        def post(index: int) -> int:
            response = requests.post(f"{stack.url}/api/v1/assignments/attention/submissions",
                                     headers=headers, timeout=60,
                                     files=[("files", ("attention.py",
                                                       files[index % len(files)]))])
            response.raise_for_status()
            return int(response.json()["id"])

        post(0)  # the worker's first grading (its warm runner starting) is not the rush's
        plain = url.replace("postgresql+psycopg", "postgresql")

        def finished() -> int:
            with psycopg.connect(plain) as connection:
                row = connection.execute("SELECT count(*) FROM submissions WHERE status IN "
                                         "('graded', 'failed')").fetchone()
            return int(row[0]) if row else 0

        while finished() < 1:
            time.sleep(0.5)
        time.sleep(2)
        before_pg = pg_counters(name)
        before_redis = redis_counters(broker.url) if args.broker == "redis" else None
        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(post, range(args.n)))
        while finished() < args.n + 1:
            time.sleep(1)
        after_pg = pg_counters(name)
        after_redis = redis_counters(broker.url) if args.broker == "redis" else None
        with psycopg.connect(plain) as connection:
            rows = connection.execute(
                "SELECT extract(epoch FROM requested_at), extract(epoch FROM graded_at), status "
                "FROM submissions WHERE id = ANY(%s)", (ids,)).fetchall()
        start = min(float(r[0]) for r in rows)
        end = max(float(r[1]) for r in rows if r[1] is not None)
        waits = sorted(float(r[1]) - float(r[0]) for r in rows if r[1] is not None)
        print(f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
              f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
        print(f"Command: benchmarks/host_costs.py --n {args.n} --concurrency "
              f"{args.concurrency} --broker {args.broker} --backend {args.backend}")
        print(f"graded {sum(r[2] == 'graded' for r in rows)}/{args.n}; throughput "
              f"{args.n / (end - start):.2f} submissions/s; wait p50 "
              f"{statistics.median(waits):.1f} s, p95 {waits[int(0.95 * (len(waits) - 1))]:.1f} s")
        print("PostgreSQL per submission (the rush's deltas / n; no beat ran):")
        for counter in PG_COUNTERS:
            print(f"  {counter}: {(after_pg[counter] - before_pg[counter]) / args.n:.1f}")
        if before_redis is not None and after_redis is not None:
            print("Redis per submission:")
            for counter, value in after_redis.items():
                print(f"  {counter}: {(value - before_redis[counter]) / args.n:.1f}")
    finally:
        stack.stop_all()
        broker.stop()
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
