"""The local backend's warm runner: a run forked from it is the runner a fresh interpreter
would start, on its own folder, environment and limits, and nothing it starts outlives it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.sandbox_jobs import ATTENTION, attention_call, events_of, make_job
from sandbox.base import Limits, Termination
from sandbox.local import LocalBackend

pytestmark = pytest.mark.slow


@pytest.fixture
def warm() -> Iterator[LocalBackend]:
    backend = LocalBackend(warm=True)
    yield backend
    backend.close()


def _warm_runners() -> set[int]:
    """This process's children that are warm runners (other tests' backends' among them)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = stat[stat.rfind(b")") + 2:].split()[1]
        if int(parent) == os.getpid() and b"--fork" in cmdline:
            found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rfind(b")") + 2:].split()[0] != b"Z"


def test_a_forked_run_reports_what_a_fresh_runner_reports(warm: LocalBackend) -> None:
    job = make_job(ATTENTION, calls=[attention_call("first"), attention_call("second")])
    fresh = LocalBackend().run(job, Limits())
    forked = warm.run(job, Limits())
    assert forked.termination is fresh.termination is Termination.EXITED
    assert forked.exit_code == fresh.exit_code == 0
    summary = [[(e["event"], e.get("id"), e.get("status")) for e in events_of(result.events)
                if e["event"] != "start"] for result in (fresh, forked)]
    assert summary[0] == summary[1]
    assert ("call", "second", "ok") in summary[1]
    assert forked.tensor_files.keys() == fresh.tensor_files.keys()
    assert forked.tensor_files == fresh.tensor_files
    assert "hello from the student" in forked.stdout


WHERE_AM_I = ATTENTION + '''
import os, tempfile

def where(*args):
    print("where", os.getcwd(), os.environ["HOME"], os.environ["TMPDIR"], tempfile.gettempdir())
    return attention(*args)
'''


def test_each_forked_run_has_its_own_folder_and_environment(warm: LocalBackend) -> None:
    job = make_job(WHERE_AM_I, calls=[attention_call("where", "where")])
    places = []
    for _ in range(2):
        result = warm.run(job, Limits())
        line = next(line for line in result.stdout.splitlines() if line.startswith("where "))
        cwd, home, tmpdir, gettempdir = line.split()[1:]
        assert cwd == home == tmpdir == gettempdir
        assert Path(cwd).name == "tmp" and Path(cwd).parent.name.startswith("autograde-run-")
        assert not Path(cwd).exists(), "the run's folder outlived it"
        places.append(cwd)
    assert places[0] != places[1]


LEAVES_A_DAEMON = ATTENTION + '''
import os, time

def leave(*args):
    """Leaves a grandchild in a session of its own, which records its pid and sleeps."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.environ["DAEMON_PID_FILE"], "w") as handle:
                handle.write(str(os.getpid()))
            time.sleep(300)
        os._exit(0)
    time.sleep(1.0)
    return attention(*args)
'''


def test_a_process_the_run_leaves_in_a_session_of_its_own_is_killed(
        warm: LocalBackend, tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    source = LEAVES_A_DAEMON.replace('os.environ["DAEMON_PID_FILE"]', repr(str(pid_file)))
    result = warm.run(make_job(source, calls=[attention_call("leave", "leave")]), Limits())
    assert result.termination is Termination.EXITED
    daemon = int(pid_file.read_text())
    assert not _alive(daemon)


SLEEPS = ATTENTION + '''
import time

def sleep(*args):
    time.sleep(300)
'''


def test_a_run_whose_warm_runner_dies_is_a_sandbox_error_and_the_next_run_starts_one(
        warm: LocalBackend) -> None:
    others = _warm_runners()
    warm.run(make_job(ATTENTION, calls=[attention_call()]), Limits())  # the runner is up
    (runner,) = _warm_runners() - others
    killer = threading.Timer(1.5, os.kill, (runner, signal.SIGKILL))
    killer.start()
    started = time.monotonic()
    result = warm.run(make_job(SLEEPS, calls=[attention_call("sleep", "sleep")]),
                      Limits(call_seconds=60, run_seconds=120))
    killer.join()
    assert result.termination is Termination.SANDBOX_ERROR
    assert "warm runner ended" in result.detail
    assert time.monotonic() - started < 30
    again = warm.run(make_job(ATTENTION, calls=[attention_call()]), Limits())
    assert again.termination is Termination.EXITED
    assert len(_warm_runners() - others - {runner}) == 1


def test_the_forked_run_keeps_the_address_space_limit(warm: LocalBackend) -> None:
    greedy = ATTENTION + '''
def greedy(*args):
    hoard = bytearray(3 << 30)
    return attention(*args)
'''
    result = warm.run(make_job(greedy, calls=[attention_call("greedy", "greedy")]),
                      Limits(memory_bytes=2 << 30))
    (call,) = [e for e in events_of(result.events) if e.get("id") == "greedy"]
    assert call["status"] != "ok"
    assert "MemoryError" in str(call)


def test_closing_the_backend_ends_its_warm_runner() -> None:
    others = _warm_runners()
    backend = LocalBackend(warm=True)
    backend.run(make_job(ATTENTION, calls=[attention_call()]), Limits())
    (runner,) = _warm_runners() - others
    backend.close()
    assert not _alive(runner)
