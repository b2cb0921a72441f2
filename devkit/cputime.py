"""A pytest plugin that writes what each test cost the whole machine: wall time and CPU time.

``python -m pytest -p devkit.cputime`` (run from the project folder, so that ``devkit`` is
importable) with ``AUTOGRADE_CPU_LOG=path`` appends one JSON line per test (``nodeid``,
``wall`` and ``cpu`` in seconds, setup and teardown included; ``ended``, the clock time it
ended, and ``worker``, its xdist worker or empty, to lay runs side by side). The CPU time is
read from ``/proc/stat`` (every core, every process: the test's containers, service stacks and
private servers too), so it is the test's own only when nothing else runs on the machine and
the suite runs in one process (``-n 0``). ``benchmarks/suite_cost.py`` sums the lines by module.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU time spent by every core since boot, idle and I/O wait left out."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / _TICKS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    path = os.environ.get("AUTOGRADE_CPU_LOG")
    if not path:
        yield
        return
    started, cpu = time.monotonic(), machine_cpu_seconds()
    yield
    line = {"nodeid": item.nodeid, "wall": round(time.monotonic() - started, 3),
            "cpu": round(machine_cpu_seconds() - cpu, 3), "ended": round(time.time(), 1),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")
