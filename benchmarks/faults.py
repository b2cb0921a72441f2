"""The fault table: the service on PostgreSQL, Redis and the Docker sandbox, each fault under a
burst of real submissions. Every submission must be graded exactly once, none ``failed``; the
figure is the time from recovery to the last result.

Everything killed or restarted here is a **private** instance started by this script (a
redis-server on a free port, a PostgreSQL cluster from ``initdb`` in a temporary folder run as
user ``postgres``, a dockerd with its own socket, data-root, exec-root and pidfile, loaded with
the sandbox image by ``docker save | docker -H ... load``): the machine's shared services are
never touched. Usage::

    .venv/bin/python benchmarks/faults.py [--burst 50] [--faults worker-kill,child-kill,...]
        [--docker-data /var/tmp/autograde-faults-docker]   # keep the loaded image between runs

Faults: ``worker-kill`` (kill -9 of the whole worker, then started again as a supervisor
would), ``child-kill`` (kill -9 of the pool process that is grading), ``redis-restart``
(restarted without persistence: its queue is lost), ``postgres-restart``, ``docker-restart``,
``docker-outage`` (the engine stopped for 75 s). ``tests/faults/test_faults.py`` runs a
reduced version.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devkit.faults import FAULTS, Row, harness


def table(rows: list[Row]) -> str:
    lines = ["| fault | graded | failed | duplicates | interruptions | recovery -> first result "
             "| recovery -> last result | burst -> last | containers left |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        first = "-" if row.recovered_to_first is None else f"{row.recovered_to_first:.1f} s"
        lines.append(f"| {row.fault} | {row.graded}/{row.submissions} | {row.failed} | "
                     f"{row.duplicates} | {row.interruptions} | {first} | "
                     f"{row.recovered_to_last:.1f} s | {row.burst_to_last:.1f} s | "
                     f"{row.leftover_containers} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--faults", default="none," + ",".join(FAULTS))
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--docker-data", type=Path, default=None,
                        help="the private engine's data-root, kept (with the image) between runs")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("faults: run as root (a private dockerd and runuser postgres)", file=sys.stderr)
        return 2
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="autograde-faults-") as tmp, \
            harness(Path(tmp), docker_data=args.docker_data,
                    concurrency=args.concurrency) as running:
        for fault in args.faults.split(","):
            row = running.run(fault, args.burst)
            rows.append(row)
            print(table([row]).splitlines()[-1], flush=True)
        worker_log = running.stack.log("worker")
    print()
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=2))
    bad = [row.fault for row in rows if not row.survived]
    if bad:
        print(f"\nNOT SURVIVED: {', '.join(bad)}\n{worker_log[-3000:]}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
