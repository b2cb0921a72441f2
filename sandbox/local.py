"""The local backend: a limited child process. For development and tests, NOT a security boundary.

The child runs in its own session and process group with rlimits (CPU time, address space,
processes, file size, open files), a private temporary directory, an empty environment and a
wall-clock deadline that kills the whole group. That stops accidents (infinite loops, memory
and output floods) but not an attacker: the child runs as the grading user, can read what that
user can read and can reach the network. Production uses the Docker backend.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from sandbox.base import RUNNER_PATH, Job, Limits, RunResult, Termination
from sandbox.outputs import CappedStream, ChannelDecoder, collect_outputs, write_job

STARTUP_SECONDS = 120.0
"""How long the runner may take to import torch and warm up before the job's deadline starts."""


class LocalBackend:
    """Runs each job in a fresh limited child process of this interpreter."""

    name = "local"
    isolation = "a child process (not a security boundary)"

    def __init__(self, *, python: str = sys.executable) -> None:
        self._python = python

    def run(self, job: Job, limits: Limits) -> RunResult:
        root = Path(tempfile.mkdtemp(prefix="autograde-run-"))
        try:
            return self._run_in(root, job, limits)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def close(self) -> None:
        """Nothing is kept between runs."""

    def _run_in(self, root: Path, job: Job, limits: Limits) -> RunResult:
        job_dir, out_dir, tmp_dir = root / "job", root / "out", root / "tmp"
        write_job(job_dir, job)
        out_dir.mkdir()
        tmp_dir.mkdir()
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_dir),
            "TMPDIR": str(tmp_dir),
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONHASHSEED": "0",
        }
        started = time.monotonic()
        process = subprocess.Popen(
            [self._python, "-I", RUNNER_PATH, str(job_dir), str(out_dir)],
            cwd=tmp_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limit_child(limits),
        )
        stdout = CappedStream(limits.kept_output_bytes)
        stderr = CappedStream(limits.kept_output_bytes)
        channel = ChannelDecoder(stdout, stderr)
        drains = [_Drain(process.stdout, channel.feed), _Drain(process.stderr, stderr.add)]
        termination = Termination.EXITED
        # The deadline starts at the runner's first event, after its own imports and warm-up
        # and before any student code: a loaded host slowing our start-up must not cost the
        # student. Start-up itself has a generous allowance of its own.
        deadline: float | None = None
        startup_by = started + STARTUP_SECONDS
        while process.poll() is None:
            now = time.monotonic()
            if deadline is None and channel.started.is_set():
                deadline = now + limits.deadline_seconds
            if deadline is not None and now > deadline:
                termination = Termination.TIME_LIMIT
                break
            if deadline is None and now > startup_by:
                termination = Termination.SANDBOX_ERROR
                break
            if max(stdout.total, stderr.total) > limits.flood_output_bytes:
                termination = Termination.OUTPUT_LIMIT
                break
            time.sleep(0.005)
        _kill_group(process)
        _kill_strays(root)
        for drain in drains:
            drain.join()
        wall = time.monotonic() - started
        forged, tensors, over_limit = collect_outputs(out_dir, limits.result_bytes)
        if (over_limit or channel.over_limit) and termination is Termination.EXITED:
            termination = Termination.OUTPUT_LIMIT
        return RunResult(
            termination=termination,
            exit_code=process.returncode,
            wall_seconds=wall,
            events=bytes(channel.events),
            tensor_files=tensors,
            stdout=stdout.text(),
            stderr=stderr.text(),
            output_truncated=stdout.truncated or stderr.truncated,
            forged_events_file=bool(forged),
            detail=f"pid {process.pid}" + (
                ", the runner did not start in time"
                if termination is Termination.SANDBOX_ERROR else ""),
        )


def _limit_child(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        cpu = limits.cpu_seconds
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        # RLIMIT_NPROC counts every process of the user, not of this run: it is the
        # fork-bomb brake of a development backend, not an exact per-run count.
        nproc = limits.max_processes + _processes_of_this_user()
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes)
        )
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _processes_of_this_user() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
    return count


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _kill_strays(root: Path) -> None:
    """Kill the run's processes that left its process group (a new session, a double fork).

    They are recognised by the run's directory in the command line or environment they
    inherited from the runner. Killing repeats until none is left, so that one forking while
    it is being killed is caught too; a process that scrubbed both escapes (not a boundary).
    """
    sign = str(root).encode()
    for _ in range(50):
        strays = [pid for pid in _pids() if pid != os.getpid()
                  and (sign in _proc_file(pid, "cmdline") or sign in _proc_file(pid, "environ"))]
        if not strays:
            return
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _proc_file(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


class _Drain:
    """Drains a pipe in a thread into ``sink``."""

    def __init__(self, pipe: IO[bytes] | None, sink: Callable[[bytes], None]) -> None:
        self._pipe = pipe
        self._sink = sink
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        if self._pipe is None:
            return
        while chunk := self._pipe.read1(65536):  # type: ignore[attr-defined]
            self._sink(chunk)

    def join(self) -> None:
        self._thread.join(timeout=2)
