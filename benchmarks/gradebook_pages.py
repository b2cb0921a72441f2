"""Benchmark of the dashboard's pages on a large course: 300 students x 10 submissions seeded on
a fresh PostgreSQL database, each page timed through the app (no network, no browser).

Usage::

    .venv/bin/python benchmarks/gradebook_pages.py [--students 300] [--submissions 10]
        [--repeat 7]

Prints the median and the maximum of each page, in milliseconds (target: under 300 ms each),
and the median CPU time of the app's process (PostgreSQL's own time not included): on a loaded
machine wall-clock times swell with the load, CPU times much less.
The database is dropped afterwards. Figures on a shared machine are noisy: compare medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devkit.courses import seed_course, signed_in
from devkit.stack import PG_ADMIN
from service.app import create_app
from service.core import db

TARGET_MS = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    name = f"autograde_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    try:
        return _run(url, args)
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _run(url: str, args: argparse.Namespace) -> int:
    db.upgrade(url)
    app = create_app({"DATABASE_URL": url, "BROKER_URL": "memory://", "SECRET_KEY": "bench"})
    started = time.perf_counter()
    with app.app_context():
        seeded = seed_course(db.session(), students=args.students,
                             submissions=args.submissions, missing=10)
        db.session().close()
    print(f"seeded {args.students} students x {args.submissions} submissions in "
          f"{time.perf_counter() - started:.1f} s")
    base = f"/dashboard/courses/{seeded.course_code}/assignments/{seeded.slug}"
    pages = {
        "overview": base,
        "queue.json (polled)": base + "/queue.json",
        "gradebook, page 1": base + "/gradebook",
        "gradebook, page 6": base + "/gradebook?page=6",
        "submissions, page 1": base + "/submissions",
        "submissions, late + code": base + "/submissions?late=yes&code=missing-scale",
        "submissions, page 40": base + "/submissions?page=40",
        "regrade confirmation": base + "/regrade",
        "settings": base + "/settings",
        "extensions": base + "/extensions",
        "people": f"/dashboard/courses/{seeded.course_code}/people",
        "scores.csv": base + "/scores.csv",
        "scores.csv, every submission": base + "/scores.csv?all=true",
        "gradescope.json": base + "/gradescope.json",
    }
    client = signed_in(app, seeded.instructor_id)
    student = signed_in(app, seeded.student_ids[0])
    clients = {page: client for page in pages}
    pages["student: assignment page"] = f"/courses/{seeded.course_code}/assignments/{seeded.slug}"
    clients["student: assignment page"] = student
    failures = 0
    print(f"{'page':<32} {'median ms':>10} {'max ms':>8} {'app CPU ms':>11}")
    for label, path in pages.items():
        times, cpu = [], []
        for _ in range(args.repeat + 1):
            begin, begin_cpu = time.perf_counter(), time.process_time()
            response = clients[label].get(path)
            times.append((time.perf_counter() - begin) * 1000)
            cpu.append((time.process_time() - begin_cpu) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{label}: HTTP {response.status_code}")
        times, cpu = times[1:], cpu[1:]  # the first request warms caches (templates, package)
        median = statistics.median(times)
        failures += median > TARGET_MS
        print(f"{label:<32} {median:>10.0f} {max(times):>8.0f} {statistics.median(cpu):>11.0f}"
              + ("  over target" if median > TARGET_MS else ""))
    app.extensions["autograde.db"].engine.dispose()
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
