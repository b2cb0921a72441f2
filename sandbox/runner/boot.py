"""The runner's boot: warm torch up, wait for the job if asked, read it, start the supervised run.

Usage (inside the sandbox, with ``python -I``, through the package's ``__main__.py``)::

    runner/__main__.py JOB_DIR OUT_DIR [--wait-for FILE [--wait-poll SECONDS]] [--sole-user]
        [--warm]

JOB_DIR holds ``plan.json``, ``inputs.safetensors`` and ``submission/``. The events go to
standard output as JSON lines (the student's printed output among them as ``stdout`` and
``stderr`` frames), the tensors to ``OUT_DIR/tensors/NNNN.safetensors``.
With ``--wait-for`` the runner imports torch, warms it up, writes ``OUT_DIR/ready`` and then
waits until FILE exists before it reads the job (the warm-pool mode of the Docker backend),
looking for it every SECONDS (2 ms by default) and whenever inotify tells of it.
``--sole-user`` says that every other process of this user belongs to the run (a container
of its own), so the supervisor can tell the survivors of a run. ``--warm`` says the process
is already warm (the fork server's job: forked from a server that warmed up once).

``runner/__main__.py --fork FD`` is the local backend's warm runner instead (``serve_forks``):
warmed up once, it forks a runner for each job asked for on the socket FD.
"""

from __future__ import annotations

import time

_STARTED_AT = time.perf_counter()  # before the heavy imports, to time them

import contextlib
import ctypes
import importlib
import json
import os
import resource
import select
import signal
import socket
import tempfile
from collections.abc import Mapping
from typing import Any, NoReturn

import torch
from safetensors.torch import load_file

from .child import child_main
from .executor import backward_with
from .guards import PR_SET_DUMPABLE, SUPERVISOR_IGNORES, prctl
from .shared import INPUTS_FILE, PLAN_FILE, SUBMISSION_DIR, TENSORS_DIR
from .stream import Channel
from .supervisor import Child, Supervisor
from .witness import InputArena

_IMPORTED_AT = time.perf_counter()


def warm_up(*, ahead: bool = False) -> None:
    """Pay torch's first-call costs before the submission is on the clock; ``ahead`` (a fork
    server, whose warm-up is paid once for all its jobs) also the imports of paths only some
    submissions take."""
    q = torch.randn(2, 3, 4, 8, requires_grad=True)
    weights = torch.softmax(q @ q.transpose(-2, -1) / 8**0.5, dim=-1)
    out = weights @ q
    backward_with(out, torch.ones_like(out))
    torch.nn.functional.linear(q, torch.randn(8, 8), torch.randn(8)).sum()
    import_lazy_modules(ahead=ahead)


def import_lazy_modules(*, ahead: bool = False) -> None:
    """What torch imports on first use on some paths (``torch.broadcast_shapes``, a backward
    given an explicit gradient): its symbolic shapes, and sympy with them, a costly import.
    ``ahead``: also its compiler front end (``torch._dynamo``), which building any
    ``torch.optim`` optimizer imports, as costly again; a run of its own (one-off, or a
    container of the per-container mode, each paying its warm-up) leaves it to the submissions
    that build one.

    Imported before the job, off the student's clock, although only some submissions take
    those paths: under gVisor the import costs more CPU time than a short budget, as gVisor
    counts it on a loaded host, and a submission that blinds the soft limit
    (``watchdog_blinded.py``) would then lose every call to the supervisor's. A time-out never
    lands inside an import (``CallBudget``), for the lazy imports this does not foresee."""
    importlib.import_module("torch.fx.experimental.symbolic_shapes")
    if ahead:
        importlib.import_module("torch._dynamo")


_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_IN_CREATE, _IN_MOVED_TO = 0x100, 0x80
WAIT_POLL_SECONDS = 0.002
"""How often a warm runner looks for its job where nothing wakes it (the default)."""


def wait_for(path: str, poll_seconds: float) -> None:
    """Until ``path`` (a file or a folder) exists: looked for every ``poll_seconds``, and at
    once when inotify tells of an entry created in or moved into its folder. Docker's runtime
    passes on the host's rename into the bind-mounted job folder, so the host can give a long
    interval there: an idle warm runner looking at the default interval spends a steady share
    of a core. gVisor does not pass on changes made outside it, and another runtime may not:
    there the host keeps the short interval."""
    watch = _watch_folder(os.path.dirname(path))
    try:
        while not os.path.exists(path):
            if watch is None:
                time.sleep(poll_seconds)
                continue
            readable, _, _ = select.select([watch], [], [], poll_seconds)
            if readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(watch, 65536)  # the events themselves: existence is what counts
    finally:
        if watch is not None:
            os.close(watch)  # before any student code runs


def _watch_folder(folder: str) -> int | None:
    """An inotify descriptor told of files created in or moved into ``folder``; None where
    there is none to be had."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        watch = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    except AttributeError:
        return None
    if watch < 0:
        return None
    if libc.inotify_add_watch(watch, folder.encode(), _IN_CREATE | _IN_MOVED_TO) < 0:
        os.close(watch)
        return None
    return watch


PR_SET_CHILD_SUBREAPER = 36
_REQUEST_BYTES = 1 << 16


def serve_forks(control_fd: int) -> NoReturn:
    """The local backend's warm runner: torch imported and warmed up once, then a process
    forked for each job asked for on ``control_fd`` (``sandbox.local.ForkingRunner``).

    A request is a JSON object (the job's folders, environment and rlimits) with the job's
    stdout and stderr descriptors passed beside it. Each job gets a keeper, forked from this
    process, that forks the job's runner, tells its pid, waits for it, kills whatever it left
    behind (a subreaper, it inherits every orphan of the job) and then tells its wait status.
    This process never runs student code. When the host's end closes, every job is killed
    and the server ends.
    """
    torch.set_num_threads(1)
    warm_up(ahead=True)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, _REQUEST_BYTES, 2)
        except OSError:
            break
        if not message:
            break
        pid = os.fork()
        if pid == 0:
            try:
                _keep(control, json.loads(message), fds)
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)
        _reap_children()
    _kill_children()
    os._exit(0)


def _keep(control: socket.socket, request: Mapping[str, Any], fds: list[int]) -> None:
    """One job's keeper: fork its runner, tell its pid and, once it and every process it left
    behind are gone, its wait status."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    pid = os.fork()
    if pid == 0:
        try:
            control.close()
            _become_job(request, fds)
        finally:
            os._exit(70)
    for fd in fds:
        os.close(fd)
    control.send(json.dumps({"id": request["id"], "pid": pid}).encode())
    _, status = os.waitpid(pid, 0)
    _kill_children()
    control.send(json.dumps({"id": request["id"], "status": status}).encode())
    os._exit(0)


def _become_job(request: Mapping[str, Any], fds: list[int]) -> None:
    """Turn this forked process into the job's runner, as a fresh one would start: its own
    session, its pipes, folder, environment and rlimits; then run it (never returns)."""
    os.setsid()
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    for target, fd in zip((1, 2), fds, strict=True):
        os.dup2(fd, target)
    for fd in (stdin, *fds):
        os.close(fd)
    os.chdir(request["tmp"])
    os.environ.update(request["environment"])
    tempfile.tempdir = None  # the job's TMPDIR, not the server's
    for name, (soft, hard) in request["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    main([request["job"], request["out"], "--warm"])


def _reap_children() -> None:
    """Reap the children that have ended, without waiting."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _kill_children() -> None:
    """Kill this process's children until none is left: an orphan of one of them is
    inherited by this subreaper and killed in a later round."""
    me = str(os.getpid())
    for _ in range(1000):
        children = [pid for pid in _pids_in_proc() if _parent_of(pid) == me]
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        time.sleep(0.001)


def _pids_in_proc() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _parent_of(pid: int) -> str:
    """The parent pid of ``pid`` from ``/proc/PID/stat`` (empty if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat_line = handle.read()
    except OSError:
        return ""
    fields = stat_line[stat_line.rfind(b")") + 2:].split()
    return fields[1].decode() if len(fields) > 1 else ""


def main(argv: list[str]) -> None:
    if argv[:1] == ["--fork"]:
        serve_forks(int(argv[1]))
    job_dir, out_dir = argv[0], argv[1]
    torch.set_num_threads(1)
    # The host's stream: kept on a descriptor of its own, and stdout made /dev/null until the
    # child gets a pipe, so nothing printed by mistake in this process corrupts the stream.
    channel = Channel(os.dup(1))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    prctl(PR_SET_DUMPABLE, 0)
    for number in SUPERVISOR_IGNORES:
        signal.signal(number, signal.SIG_IGN)
    warm_up_started = time.perf_counter()
    if "--warm" not in argv:
        warm_up()
    warm_up_seconds = time.perf_counter() - warm_up_started
    if "--wait-for" in argv:
        ready = open(os.path.join(out_dir, "ready"), "w")  # noqa: SIM115
        ready.close()
        poll = (float(argv[argv.index("--wait-poll") + 1]) if "--wait-poll" in argv
                else WAIT_POLL_SECONDS)
        wait_for(argv[argv.index("--wait-for") + 1], poll)
        warm_up_seconds = 0.0  # paid before the job arrived

    os.makedirs(os.path.join(out_dir, TENSORS_DIR), exist_ok=True)
    with open(os.path.join(job_dir, PLAN_FILE), encoding="utf-8") as plan_file:
        plan = json.load(plan_file)
    inputs = load_file(os.path.join(job_dir, INPUTS_FILE))
    submission_dir = os.path.realpath(os.path.join(job_dir, SUBMISSION_DIR))
    job = {
        "plan": plan,
        "inputs": inputs,
        "out_dir": out_dir,
        "submission_dir": submission_dir,
        "student_files": tuple(os.path.realpath(os.path.join(submission_dir, name))
                               for name in os.listdir(submission_dir)),
    }
    channel.send({"event": "start", "calls": len(plan["calls"]),
                  "imports_seconds": _IMPORTED_AT - _STARTED_AT,
                  "warm_up_seconds": warm_up_seconds})
    # Made before the fork, so that the child's slots are the supervisor's memory.
    job["arena"] = arena = InputArena(plan, inputs)
    child = Child(lambda report_fd: child_main(report_fd, job), channel_fd=channel.fd)
    supervisor = Supervisor(channel, plan, out_dir, sole_user="--sole-user" in argv, arena=arena,
                            send_outputs=(int(argv[argv.index("--send-outputs") + 1])
                                          if "--send-outputs" in argv else None))
    os._exit(supervisor.run(child))

