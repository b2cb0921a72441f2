"""Memory of the bulk download against the size of the class: peak RSS while the submissions
zip streams, for several class sizes on fresh PostgreSQL databases.

Usage::

    .venv/bin/python benchmarks/bulk_download.py [--students 50,100,300] [--submissions 3]
        [--kib 64]

For each class size a child process seeds a course (``devkit.courses.seed_course``, each
submission given one file of ``--kib`` KiB of poorly compressible text), then another child
process creates the app, resets its peak RSS (``/proc/self/clear_refs``), downloads the counted
zip and the every-submission zip through the app, reading the stream chunk by chunk and
dropping it, and reports its peak RSS above the resting RSS. As a control the same child then
joins the every-submission stream into one bytes object (what a whole-archive buffer costs):
that figure must grow with the class, the streamed ones must not.
Each database is dropped afterwards. Not a timed test: a benchmark whose figures go on
docs/results/bulk-download.md.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import uuid
import zipfile
from io import BytesIO
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devkit.stack import PG_ADMIN


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def seed(url: str, students: int, submissions: int, kib: int) -> None:
    from sqlalchemy import insert, select

    from devkit.courses import seed_course
    from service.app import create_app
    from service.core import db
    from service.models import Submission, SubmissionFile

    app = create_app({"DATABASE_URL": url, "BROKER_URL": "memory://",
                      "SANDBOX_BACKEND": "local"})
    rng = random.Random(7)
    with app.app_context():
        session = db.session()
        seeded = seed_course(session, students=students, submissions=submissions, missing=0,
                             code="bulk101")
        print(json.dumps({"teacher": seeded.instructor_id, "code": seeded.course_code,
                          "slug": seeded.slug}))
        ids = list(session.scalars(select(Submission.id).order_by(Submission.id)))
        for start in range(0, len(ids), 50):
            session.execute(insert(SubmissionFile), [
                {"submission_id": sid, "name": "attention.py", "sha256": "0" * 64,
                 "size": kib * 1024, "content": _source(rng, kib)}
                for sid in ids[start:start + 50]])
            session.commit()


def _source(rng: random.Random, kib: int) -> bytes:
    lines, size = [], 0
    while size < kib * 1024:
        line = f"# {rng.getrandbits(256):064x}\n"
        lines.append(line)
        size += len(line)
    return "".join(lines).encode()[:kib * 1024]


def measure(url: str, teacher: int, code: str, slug: str) -> None:
    from devkit.courses import signed_in
    from service.app import create_app

    app = create_app({"DATABASE_URL": url, "BROKER_URL": "memory://",
                      "SANDBOX_BACKEND": "local"})
    client = signed_in(app, teacher)
    path = f"/dashboard/courses/{code}/assignments/{slug}/submissions.zip"
    client.get(path + "?all=true").close()  # warm: imports, connection pool, templates
    figures: dict[str, object] = {}
    for label, query in (("counted", ""), ("every", "?all=true")):
        rest = _rss_kib("VmRSS")
        _reset_peak()
        response = client.get(path + query)
        assert response.status_code == 200, response.status_code
        total = 0
        for chunk in response.iter_encoded():
            total += len(chunk)
        response.close()
        figures[label] = {"bytes": total, "peak_above_rest_kib": _rss_kib("VmHWM") - rest,
                          "rest_kib": rest}
    rest = _rss_kib("VmRSS")
    _reset_peak()
    response = client.get(path + "?all=true")
    whole = b"".join(response.iter_encoded())
    response.close()
    entries = len(zipfile.ZipFile(BytesIO(whole)).namelist())
    figures["buffered"] = {"bytes": len(whole), "entries": entries,
                           "peak_above_rest_kib": _rss_kib("VmHWM") - rest}
    print(json.dumps(figures))


def _child(*args: str) -> str:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return done.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", default="50,100,300")
    parser.add_argument("--submissions", type=int, default=3)
    parser.add_argument("--kib", type=int, default=64)
    parser.add_argument("--seed", nargs=4, metavar=("URL", "N", "SUBS", "KIB"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=4, metavar=("URL", "TEACHER", "CODE", "SLUG"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed:
        seed(args.seed[0], *(int(v) for v in args.seed[1:]))
        return 0
    if args.measure:
        measure(args.measure[0], int(args.measure[1]), args.measure[2], args.measure[3])
        return 0
    print(f"{args.submissions} submissions per student, one {args.kib} KiB file each\n")
    print("| students | counted zip MiB | peak RSS above rest, counted (MiB) "
          "| every-submission zip MiB | peak above rest, every (MiB) "
          "| control: whole archive in memory (MiB) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for students in (int(n) for n in args.students.split(",")):
        name = f"autograde_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        try:
            from service.core import db
            db.upgrade(url)
            seeded = json.loads(_child("--seed", url, str(students), str(args.submissions),
                                       str(args.kib)))
            got = json.loads(_child("--measure", url, str(seeded["teacher"]), seeded["code"],
                                    seeded["slug"]))
        finally:
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        mib = 1024 * 1024
        print(f"| {students} | {got['counted']['bytes'] / mib:.1f} "
              f"| {got['counted']['peak_above_rest_kib'] / 1024:.1f} "
              f"| {got['every']['bytes'] / mib:.1f} "
              f"| {got['every']['peak_above_rest_kib'] / 1024:.1f} "
              f"| {got['buffered']['peak_above_rest_kib'] / 1024:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
