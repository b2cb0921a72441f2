"""The local backend: a limited child process. For development and tests, NOT a security boundary.

The runner runs in its own session and process group with rlimits (CPU time, address space,
processes, file size, open files), a private temporary directory, an empty environment and a
wall-clock deadline that kills the whole group. That stops accidents (infinite loops, memory
and output floods) but not an attacker: the runner runs as the grading user, can read what that
user can read and can reach the network. Production uses the Docker backend.

Each run is either a fresh interpreter (one-off gradings) or, for a backend that serves many
runs, a process forked from a warm runner that imported torch once (``ForkingRunner``): the
same runner code on the same job, without paying torch's import per run.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from sandbox.base import RUNNER_PATH, Job, Limits, RunResult, Termination
from sandbox.outputs import CappedStream, ChannelDecoder, collect_outputs, write_job

STARTUP_SECONDS = 120.0
"""How long the runner may take to import torch and warm up before the job's deadline starts."""


RUNNER_ENVIRONMENT = {
    "PATH": "/usr/bin:/bin",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONHASHSEED": "0",
}
"""The runner's whole environment, beside its run's own ``HOME`` and ``TMPDIR``."""


class LocalBackend:
    """Runs each job in a limited child process: a fresh interpreter each, or (``warm``) a
    process forked from one warm runner kept for this backend's runs."""

    name = "local"
    isolation = "a child process (not a security boundary)"

    def __init__(self, *, python: str = sys.executable, warm: bool = False,
                 run_as: int | None = None) -> None:
        """``run_as``: a user id (its group id the same) each run drops to, for a caller that
        is root and keeps files that user cannot read (an exported grader's hidden parts);
        fresh-interpreter runs only."""
        if run_as is not None and warm:
            raise ValueError("run_as is for fresh-interpreter runs (warm=False)")
        self._python = python
        self._forking = ForkingRunner(python) if warm else None
        self._run_as = run_as
        if run_as is not None:
            self.isolation = (f"a child process as user {run_as}, with rlimits "
                              "(not a security boundary beyond that user's file permissions)")

    def run(self, job: Job, limits: Limits) -> RunResult:
        root = Path(tempfile.mkdtemp(prefix="autograde-run-"))
        try:
            return self._run_in(root, job, limits)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def close(self) -> None:
        """Stop the warm runner, if any (a fresh interpreter keeps nothing between runs)."""
        if self._forking is not None:
            self._forking.close()

    def _start(self, job_dir: Path, out_dir: Path, tmp_dir: Path,
               limits: Limits) -> _RunnerProcess:
        home = {"HOME": str(tmp_dir), "TMPDIR": str(tmp_dir)}
        if self._forking is not None:
            return self._forking.start(job_dir, out_dir, tmp_dir, home, _rlimits(limits))
        return _FreshProcess(subprocess.Popen(
            [self._python, "-I", RUNNER_PATH, str(job_dir), str(out_dir)],
            cwd=tmp_dir,
            env={**RUNNER_ENVIRONMENT, **home},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limit_child(limits, self._run_as),
        ))

    def _run_in(self, root: Path, job: Job, limits: Limits) -> RunResult:
        job_dir, out_dir, tmp_dir = root / "job", root / "out", root / "tmp"
        write_job(job_dir, job)
        out_dir.mkdir()
        tmp_dir.mkdir()
        if self._run_as is not None:
            _give(root, self._run_as)
        started = time.monotonic()
        try:
            process = self._start(job_dir, out_dir, tmp_dir, limits)
        except RunnerLost as lost:
            return RunResult(termination=Termination.SANDBOX_ERROR, exit_code=None,
                             wall_seconds=time.monotonic() - started, events=b"",
                             tensor_files={}, stdout="", stderr="", detail=str(lost))
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
        process.end()
        _kill_strays(root)
        for drain in drains:
            drain.join()
        if process.lost and termination is Termination.EXITED:
            termination = Termination.SANDBOX_ERROR
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
                f", {process.lost}" if process.lost
                else ", the runner did not start in time"
                if termination is Termination.SANDBOX_ERROR else ""),
        )


def _rlimits(limits: Limits, uid: int | None = None) -> dict[str, tuple[int, int]]:
    """The rlimits of one run, by ``resource`` name (``uid``: the user it runs as)."""
    cpu = limits.cpu_seconds
    # RLIMIT_NPROC counts every process of the user, not of this run: it is the fork-bomb
    # brake of a development backend, not an exact per-run count.
    nproc = limits.max_processes + _processes_of_user(os.getuid() if uid is None else uid)
    return {
        "RLIMIT_CPU": (cpu, cpu + 1),
        "RLIMIT_AS": (limits.memory_bytes, limits.memory_bytes),
        "RLIMIT_NPROC": (nproc, nproc),
        "RLIMIT_FSIZE": (limits.file_size_bytes, limits.file_size_bytes),
        "RLIMIT_NOFILE": (limits.open_files, limits.open_files),
        "RLIMIT_CORE": (0, 0),
    }


def _limit_child(limits: Limits, uid: int | None = None) -> Callable[[], None]:
    rlimits = _rlimits(limits, uid)

    def apply() -> None:
        for name, values in rlimits.items():
            resource.setrlimit(getattr(resource, name), values)
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return apply


def _give(root: Path, uid: int) -> None:
    """Hand one run's folder (job, outputs, temporary files) to the user the run drops to."""
    for folder, _, names in os.walk(root):
        os.chown(folder, uid, uid)
        for name in names:
            os.chown(os.path.join(folder, name), uid, uid)


def _processes_of_user(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
    return count


class _RunnerProcess(Protocol):
    """One run's runner as the backend watches it: its pid, output pipes, end and exit code."""

    pid: int
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    @property
    def returncode(self) -> int | None: ...

    @property
    def lost(self) -> str:
        """Why the run's end was never told (its warm runner died), or empty."""

    def poll(self) -> int | None: ...

    def end(self) -> None:
        """Kill whatever is left of the run and wait for it."""


class _FreshProcess:
    """A runner in a fresh interpreter, this process's child."""

    lost = ""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self.pid = process.pid
        self.stdout = process.stdout
        self.stderr = process.stderr

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    def poll(self) -> int | None:
        return self._process.poll()

    def end(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self._process.wait()


class RunnerLost(Exception):
    """The warm runner could not take a run, or died during one."""


class ForkingRunner:
    """A warm runner kept for a backend's runs: the probe runner started once with ``--fork``,
    torch imported and warmed up, forking a process per run.

    Requests go on a ``SOCK_SEQPACKET`` socket, one JSON object each with the run's stdout and
    stderr pipes passed beside it; answers come back on it: the run's pid, then its wait
    status once it and everything it left behind are gone (``sandbox/probe_runner.py``,
    ``serve_forks``). Started on the first run, and again after it died; it ends when this
    end of its socket closes, killing whatever it still runs.
    """

    def __init__(self, python: str) -> None:
        self._python = python
        self._lock = threading.Lock()
        self._server: _ForkServerConnection | None = None

    def start(self, job_dir: Path, out_dir: Path, tmp_dir: Path, environment: Mapping[str, str],
              rlimits: Mapping[str, tuple[int, int]]) -> _ForkedProcess:
        """Fork a runner for one job; RunnerLost when no warm runner can take it."""
        stdout_read, stdout_write = os.pipe()
        stderr_read, stderr_write = os.pipe()
        try:
            with self._lock:
                if self._server is None or self._server.ended:
                    self._server = _ForkServerConnection.start(self._python)
                server = self._server
            run = server.request(
                {"job": str(job_dir), "out": str(out_dir), "tmp": str(tmp_dir),
                 "environment": dict(environment), "rlimits": dict(rlimits)},
                (stdout_write, stderr_write))
        except BaseException:
            os.close(stdout_read)
            os.close(stderr_read)
            raise
        finally:
            os.close(stdout_write)
            os.close(stderr_write)
        return _ForkedProcess(run, os.fdopen(stdout_read, "rb"), os.fdopen(stderr_read, "rb"))

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.close()
                self._server = None


@dataclass
class _ForkedRun:
    """What the warm runner has told of one run so far."""

    pid: int | None = None
    status: int | None = None
    lost: str = ""
    told: threading.Condition = field(default_factory=threading.Condition)


class _ForkServerConnection:
    """One warm runner process and the thread that reads its answers."""

    START_SECONDS = 120.0
    """How long a run waits for its pid: the warm runner's first start imports torch."""
    END_SECONDS = 10.0
    """How long the end of a killed run, with its strays', may take to be told."""

    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket,
                 home: str) -> None:
        self._process = process
        self._control = control
        self._home = home
        self._send_lock = threading.Lock()
        self._runs: dict[int, _ForkedRun] = {}
        self._numbers = iter(range(1, 1 << 62))
        self.ended = False
        self._reader = threading.Thread(target=self._read, name="warm-runner", daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, python: str) -> _ForkServerConnection:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        home = tempfile.mkdtemp(prefix="autograde-warm-runner-")
        try:
            process = subprocess.Popen(
                [python, "-I", RUNNER_PATH, "--fork", str(theirs.fileno())],
                cwd=home, env={**RUNNER_ENVIRONMENT, "HOME": home, "TMPDIR": home},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        except OSError as exc:
            ours.close()
            shutil.rmtree(home, ignore_errors=True)
            raise RunnerLost(f"the warm runner could not start: {exc}") from exc
        finally:
            theirs.close()
        return cls(process, ours, home)

    def request(self, job: Mapping[str, object], fds: tuple[int, int]) -> _ForkedRun:
        run = _ForkedRun()
        with self._send_lock:
            if self.ended:
                raise RunnerLost("the warm runner ended")
            number = next(self._numbers)
            self._runs[number] = run
            try:
                socket.send_fds(self._control, [json.dumps({"id": number, **job}).encode()],
                                list(fds))
            except OSError as exc:
                del self._runs[number]
                raise RunnerLost(f"the warm runner did not take the run: {exc}") from exc
        with run.told:
            run.told.wait_for(lambda: run.pid is not None or bool(run.lost), self.START_SECONDS)
        if run.pid is None:
            raise RunnerLost(run.lost or "the warm runner did not fork the run in time")
        return run

    def _read(self) -> None:
        """Hand each answer to its run, until the warm runner's socket closes or the warm
        runner itself ends (its keepers hold the socket open after it)."""
        ended = os.pidfd_open(self._process.pid)
        try:
            while True:
                readable, _, _ = select.select([self._control.fileno(), ended], [], [])
                if ended in readable:
                    break
                message = self._control.recv(4096)
                if not message:
                    break
                answer = json.loads(message)
                run = self._runs.get(answer["id"])
                if run is None:
                    continue
                with run.told:
                    if "status" in answer:
                        run.status = int(answer["status"])
                        self._runs.pop(answer["id"], None)
                    else:
                        run.pid = int(answer["pid"])
                    run.told.notify_all()
        except (OSError, ValueError, KeyError, TypeError):
            pass
        finally:
            os.close(ended)
            self._end_all("the warm runner ended during the run")

    def _end_all(self, why: str) -> None:
        with self._send_lock:
            self.ended = True
            runs, self._runs = list(self._runs.values()), {}
        for run in runs:
            with run.told:
                run.lost = why
                run.told.notify_all()

    def close(self) -> None:
        """End the warm runner (it kills what it still runs) and every run waiting on it."""
        self._end_all("the backend was closed")
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)
        try:
            self._process.wait(timeout=self.END_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._reader.join(timeout=2)
        self._control.close()
        shutil.rmtree(self._home, ignore_errors=True)


class _ForkedProcess:
    """A run forked by the warm runner: not this process's child, so its end is what the
    warm runner tells, once the run's process and whatever it left behind are gone."""

    def __init__(self, run: _ForkedRun, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        assert run.pid is not None
        self._run = run
        self.pid = run.pid
        self.stdout: IO[bytes] | None = stdout
        self.stderr: IO[bytes] | None = stderr

    @property
    def returncode(self) -> int | None:
        status = self._run.status
        return None if status is None else os.waitstatus_to_exitcode(status)

    @property
    def lost(self) -> str:
        return self._run.lost

    def poll(self) -> int | None:
        if self._run.lost:
            return -int(signal.SIGKILL)
        return self.returncode

    def end(self) -> None:
        if self._run.status is None:
            for kill in (os.killpg, os.kill):  # the group, or the run before it made one
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(self.pid, signal.SIGKILL)
        with self._run.told:
            self._run.told.wait_for(lambda: self._run.status is not None or bool(self._run.lost),
                                    _ForkServerConnection.END_SECONDS)


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
