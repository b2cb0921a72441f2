"""The suite's cost plugin counts CPU spent anywhere on the machine, not only in pytest."""

from __future__ import annotations

import subprocess
import sys

from devkit.cputime import machine_cpu_seconds


def test_a_child_process_busy_for_half_a_second_is_counted() -> None:
    before = machine_cpu_seconds()
    subprocess.run([sys.executable, "-c",
                    "import time\nend = time.process_time() + 0.5\n"
                    "while time.process_time() < end: pass"], check=True, timeout=60)
    assert machine_cpu_seconds() - before >= 0.45
