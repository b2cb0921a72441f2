"""The suite's xdist groups hold: tests a conftest puts in one group run on one worker.

``tests/conftest.py`` groups the tests that share the machine's engine, stacks and the hostile
markers folder, and the corpus modules that grade their files ahead; on two workers, a group
split across them would run two engines' worth of load at once, or grade every corpus file
twice. Nothing fails when a pytest and xdist pair stops honouring the groups (pytest 9.2 with
xdist 3.8 does): this runs a small suite of its own on two workers and reads where each test ran.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFTEST = '''
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if "grouped" in item.name:
            item.add_marker(pytest.mark.xdist_group("together"))
'''

MODULE = '''
import os
import time
from pathlib import Path

def _note(name):
    time.sleep(0.05)
    with open(Path(__file__).parent / "ran.txt", "a") as out:
        out.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

''' + "".join(f'''
def test_grouped_{n}():
    _note("grouped")

def test_free_{n}():
    _note("free")
''' for n in range(6))


def test_a_group_made_by_a_conftest_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text(MODULE)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "-o", "addopts=", "--basetemp", str(tmp_path / "base"),
         str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    ran = [line.split() for line in (tmp_path / "ran.txt").read_text().splitlines()]
    assert len(ran) == 24
    grouped_on = {worker for kind, worker in ran if kind == "grouped"}
    assert len(grouped_on) == 1, f"one group ran on {sorted(grouped_on)}"
