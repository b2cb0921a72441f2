"""Where the whole suite's time goes: wall and machine CPU time by module and by test.

Reads the lines ``devkit.cputime`` wrote during a run and prints, by module and for the
slowest tests, the wall seconds, the machine's CPU seconds and their ratio (2.0 on this
two-core machine means both cores busy for the whole test), then the totals: a suite whose CPU
seconds come near twice its wall seconds cannot be made faster by more xdist workers, only by
less work. Usage::

    AUTOGRADE_CPU_LOG=/tmp/cost.jsonl .venv/bin/python -m pytest -m "" -n 0 -p devkit.cputime
    .venv/bin/python benchmarks/suite_cost.py /tmp/cost.jsonl [--top 30]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def _row(name: str, wall: float, cpu: float, count: int | None = None) -> str:
    tests = f"{count:5d}" if count is not None else "     "
    return f"{wall:8.1f} {cpu:8.1f} {cpu / wall if wall else 0:5.2f} {tests}  {name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    tests = [json.loads(line) for line in args.log.read_text().splitlines() if line.strip()]
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for test in tests:
        module = modules[test["nodeid"].split("::")[0]]
        module[0] += test["wall"]
        module[1] += test["cpu"]
        module[2] += 1
    header = "    wall      cpu ratio tests"
    print(f"by module, most CPU first\n{header}")
    for name, (wall, cpu, count) in sorted(modules.items(), key=lambda m: -m[1][1])[:args.top]:
        print(_row(name, wall, cpu, int(count)))
    print(f"\ntests, most CPU first\n{header}")
    for test in sorted(tests, key=lambda t: -t["cpu"])[:args.top]:
        print(_row(test["nodeid"], test["wall"], test["cpu"]))
    wall = sum(t["wall"] for t in tests)
    cpu = sum(t["cpu"] for t in tests)
    print(f"\n{_row('all', wall, cpu, len(tests))}")


if __name__ == "__main__":
    main()
