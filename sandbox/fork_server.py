"""Fork-server mode of the Docker backend, host side: long-lived containers that fork per job.

Off by default (``AUTOGRADE_DOCKER_MODE=fork-server`` turns it on; docs/operators/fork-server.md).
Each fork-server container runs ``sandbox/fork_runner.py``, which keeps torch imported and runs
every job in a child isolated by namespaces, a uid of its own, rlimits and a seccomp filter.
The container itself is hardened as a per-run one is, except that its root user keeps the
four capabilities the server needs (set uid, set gid, chown, kill) and its seccomp profile
lets the server create the job's namespaces.

What goes through, and how the host reads it, is the per-container mode's:

* in: the job laid out by ``sandbox.outputs.write_job`` in ``<input dir>/N`` (moved in whole)
  under the container's read-only bind mount ``/job``;
* out: the probe runner's stream, relayed by the server in frames on the exec stream, fed to
  the same ``ChannelDecoder`` and caps (``CappedOutput``); the output files (``/out/N/out``),
  sent by the server at the job's end as a tar in frames of their own (read from the volume
  through the engine if the server is gone), read by ``read_output_archive``. The grader
  validates both as it does any run's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from typing import Any

import docker
import docker.errors
from docker.types import Mount

from sandbox.base import Job, Limits, RunResult, Termination
from sandbox.docker_image import HOME_IN_IMAGE
from sandbox.docker_sandbox import (
    JOB_MOUNT,
    LABEL_DEADLINE,
    LABEL_JOB,
    LABEL_OWNER,
    LABEL_ROLE,
    OUT_MOUNT,
    ROLE_SANDBOX,
    WOKEN_WAIT_POLL_SECONDS,
    ContainerSpec,
    SandboxContainer,
    hardening_options,
    is_gvisor,
    out_archive_bytes,
    out_volume_bytes,
)
from sandbox.outputs import CappedOutput, read_output_archive, write_job

logger = logging.getLogger(__name__)

MODE = "fork-server"
FORK_RUNNER_IN_IMAGE = os.path.join(HOME_IN_IMAGE, "fork_runner.py")
FORK_SERVER_JOB = "fork-server"
KILL_FILE = "kill"
"""Created in a job's input directory to end it (its deadline or a flood)."""
MAX_JOBS_PER_CONTAINER = 1 << 14
"""Jobs get uids ``base + N``: a container is replaced before its range runs out."""
_UID_BASE_MIN = 1 << 20
_UID_BASE_SLOTS = 1 << 12
# The server, its keeper and cleaner, beside the job's own processes and memory.
_SERVER_PROCESSES = 16
_SERVER_MEMORY_BYTES = 128 << 20
_JOB_SPACE_BYTES = 64 << 20
"""Room on the output volume for a job's private copy of its inputs and submission."""
_CAPABILITIES = ["SETUID", "SETGID", "CHOWN", "KILL"]
_POLL_SECONDS = 0.005
_END_AFTER_KILL_SECONDS = 5.0
_STREAM_DRAIN_SECONDS = 0.5
_READY_POLL_SECONDS = 0.1
_HEADER_LIMIT = 64
"""Bytes of a frame's header (kind, job number, size) at most."""
_FRAME_LIMIT = 1 << 20
"""Bytes of a frame's payload at most: the server's output-files frames are chunks of 1 MiB
(``fork_runner.FRAME_BYTES``), its other frames of 64 KiB."""

# Docker's default seccomp profile refuses unshare(2) and mount(2) to a container without
# CAP_SYS_ADMIN. This one allows them (the server needs them to isolate each job, which then
# installs a filter of its own refusing them) and refuses what no job or server uses.
SECCOMP_PROFILE = json.dumps({
    "defaultAction": "SCMP_ACT_ALLOW",
    "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "syscalls": [{
        "names": [
            "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
            "delete_module", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
            "get_kernel_syms", "init_module", "io_uring_enter", "io_uring_register",
            "io_uring_setup", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load",
            "keyctl", "lookup_dcookie", "mount_setattr", "move_mount", "name_to_handle_at",
            "nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open", "pivot_root",
            "process_vm_readv", "process_vm_writev", "ptrace", "query_module", "quotactl",
            "reboot", "request_key", "setns", "settimeofday", "swapoff", "swapon", "syslog",
            "_sysctl", "umount2", "uselib", "userfaultfd", "ustat", "vhangup",
        ],
        "action": "SCMP_ACT_ERRNO",
        "errnoRet": 1,
    }],
}, separators=(",", ":"))


def server_options(limits: Limits) -> dict[str, Any]:
    """The per-run container's hardening, adapted to a server of many runs one at a time."""
    options = hardening_options(limits, runtime=None)
    options.update(
        user="0:0",
        cap_add=_CAPABILITIES,
        security_opt=["no-new-privileges", f"seccomp={SECCOMP_PROFILE}"],
        mem_limit=limits.memory_bytes + _SERVER_MEMORY_BYTES,
        memswap_limit=limits.memory_bytes + _SERVER_MEMORY_BYTES,
        pids_limit=limits.max_processes + _SERVER_PROCESSES,
    )
    return options


def server_settings(limits: Limits, uid_base: int) -> dict[str, Any]:
    """What the server applies to each job (``fork_runner.py``'s third argument)."""
    return {
        "uid_base": uid_base,
        "open_files": limits.open_files,
        "file_size_bytes": limits.file_size_bytes,
        "max_processes": limits.max_processes,
        "cpu_seconds": limits.cpu_seconds,
        "tmpfs_bytes": limits.tmpfs_bytes,
        "jobs_mount": JOB_MOUNT,
        "out_bytes": out_volume_bytes(limits),
        "wait_poll_seconds": WOKEN_WAIT_POLL_SECONDS,  # the mode runs under runc only
    }


class _Frames:
    """Reads the server's framed stream in a thread and hands each job's part to its run."""

    def __init__(self, stream: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._number = -1
        self._archive_limit = 0
        self._archive = bytearray()
        self._sink: queue.SimpleQueue[tuple[bytes | None, bytes | None] | None] = \
            queue.SimpleQueue()
        self.status: int | None = None
        self.archive: bytes | None = None
        """The job's output files, as the tar its server sent (frames T), once the job is done."""
        self.archive_cut = False
        """Only part of the output files came: the server or this reader cut them at the size
        a full output volume's archive can have."""
        self.job_done = threading.Event()
        self.closed = threading.Event()
        """The server's stream ended: the server (or its container) is gone."""
        threading.Thread(target=self._drain, daemon=True, name="fork-server-frames").start()

    def begin(self, number: int, limits: Limits) -> CappedOutput:
        """Route job ``number``'s frames to a new capped output (the per-container one)."""
        self._sink = queue.SimpleQueue()
        self.status = None
        self.archive = None
        self.archive_cut = False
        self._archive = bytearray()
        self._archive_limit = out_archive_bytes(limits)
        self.job_done.clear()
        self._number = number
        return CappedOutput(iter(self._sink.get, None), limits,
                            archive_limit=out_archive_bytes(limits))

    def _drain(self) -> None:
        try:
            for out, err in self._stream:
                if err:
                    logger.warning("fork server: %s", err[:2000].decode(errors="replace"))
                if out:
                    self._buffer += out
                    self._parse()
        except ValueError as exc:
            logger.warning("fork server: a stream not in its framing (%s): taken as gone", exc)
        except Exception:  # the connection ends when the container goes
            pass
        finally:
            self.closed.set()
            self._sink.put(None)

    def _parse(self) -> None:
        while True:
            end = self._buffer.find(b"\n", 0, _HEADER_LIMIT)
            if end < 0:
                if len(self._buffer) >= _HEADER_LIMIT:
                    raise ValueError("a frame header past its limit")
                return
            kind, number, length = bytes(self._buffer[:end]).split(b" ")
            size = int(length)
            if not 0 <= size <= _FRAME_LIMIT:
                raise ValueError(f"a frame of {size} bytes")
            if len(self._buffer) < end + 1 + size:
                return
            payload = bytes(self._buffer[end + 1:end + 1 + size])
            del self._buffer[:end + 1 + size]
            if int(number) != self._number:
                logger.warning("fork server: a frame of job %s during job %s", number, self._number)
            elif kind == b"O":
                self._sink.put((payload, None))
            elif kind == b"R":
                self._sink.put((None, payload))
            elif kind == b"T":
                if len(self._archive) + len(payload) > self._archive_limit:
                    self.archive_cut = True
                else:
                    self._archive += payload
            elif kind == b"L":
                self.archive_cut = True
            elif kind == b"E":
                self.archive = bytes(self._archive) if self._archive else None
                self.status = int(payload)
                self._sink.put(None)
                self.job_done.set()

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()


class ForkServer(SandboxContainer):
    """A long-lived container whose server runs its jobs one at a time, each isolated."""

    def __init__(self, client: docker.DockerClient, spec: ContainerSpec, limits: Limits,
                 *, lifetime_seconds: float) -> None:
        if is_gvisor(spec.runtime):
            raise ValueError("the fork-server mode runs under Docker's default runtime only")
        self._frames: _Frames | None = None
        self._next_job = 0
        self.broken = False
        super().__init__(client, spec, limits, label=None, lifetime_seconds=lifetime_seconds)

    def _create(self, spec: ContainerSpec, label: str | None) -> None:
        labels = {
            LABEL_ROLE: ROLE_SANDBOX,
            LABEL_JOB: FORK_SERVER_JOB,
            LABEL_DEADLINE: str(int(self.deadline)),
            LABEL_OWNER: spec.owner,
        }
        self.job_dir.mkdir(parents=True)
        self.job_dir.chmod(0o755)
        self._volume = self.client.volumes.create(
            name=self.name,
            driver="local",
            driver_opts={
                "type": "tmpfs",
                "device": "tmpfs",
                "o": f"size={out_volume_bytes(self.limits) + _JOB_SPACE_BYTES},"
                "nr_inodes=16384,uid=0,gid=0,mode=0711,nosuid,nodev,noexec",
            },
            labels=labels,
        )
        self._container = self.client.containers.create(
            spec.image,
            ["sleep", "infinity"],
            name=self.name,
            labels=labels,
            mounts=[
                Mount(JOB_MOUNT, str(self.job_dir), type="bind", read_only=True),
                Mount(OUT_MOUNT, self.name, type="volume"),
            ],
            **server_options(self.limits),
        )
        self._container.start()
        uid_base = _UID_BASE_MIN + secrets.randbelow(_UID_BASE_SLOTS) * MAX_JOBS_PER_CONTAINER
        command = ["python3", "-I", FORK_RUNNER_IN_IMAGE, JOB_MOUNT, OUT_MOUNT,
                   json.dumps(server_settings(self.limits, uid_base))]
        execution = self.client.api.exec_create(self._container.id, command, user="0:0",
                                                workdir="/tmp")
        self._exec_id = execution["Id"]
        stream = self.client.api.exec_start(self._exec_id, stream=True, demux=True)
        self._frames = _Frames(stream)

    @property
    def frames(self) -> _Frames:
        assert self._frames is not None
        return self._frames

    def wait_until_ready(self, timeout: float) -> None:
        """Block until the server has torch imported and warm, waiting for its first job."""
        ready_by = time.monotonic() + timeout
        while not self.is_ready():
            if self.frames.closed.is_set() or time.monotonic() > ready_by:
                raise RuntimeError(f"fork server {self.name} did not become ready")
            time.sleep(_READY_POLL_SECONDS)

    def usable(self, limits: Limits, margin_seconds: float) -> bool:
        """Whether the next job with ``limits`` may run here (alive, in time, uids left)."""
        room = self.deadline - time.time() - limits.deadline_seconds
        return (not self.broken and not self.frames.closed.is_set() and limits == self.limits
                and room > margin_seconds and self._next_job < MAX_JOBS_PER_CONTAINER)

    def run(self, job: Job) -> RunResult:
        """Hand the job to the server, follow it to its end or its limit, read its outputs."""
        number = self._next_job
        self._next_job += 1
        try:
            return self._run(number, job)
        except BaseException:
            self.broken = True
            raise
        finally:
            shutil.rmtree(self.job_dir / str(number), ignore_errors=True)

    def _run(self, number: int, job: Job) -> RunResult:
        started = time.monotonic()
        since = time.time()
        output = self.frames.begin(number, self.limits)
        staging = self.job_dir.with_name(f"{self.name}.{number}.stage")
        write_job(staging, job)
        staging.chmod(0o755)
        os.rename(staging, self.job_dir / str(number))  # all of it at once
        deadline = started + self.limits.deadline_seconds
        termination = Termination.EXITED
        while not self.frames.job_done.wait(_POLL_SECONDS):
            if self.frames.closed.is_set():
                break
            if output.flooded:
                termination = Termination.OUTPUT_LIMIT
                break
            if time.monotonic() > deadline:
                termination = Termination.TIME_LIMIT
                break
        wall = time.monotonic() - started
        if not self.frames.job_done.is_set():
            (self.job_dir / str(number) / KILL_FILE).touch()
            if not self.frames.job_done.wait(_END_AFTER_KILL_SECONDS):
                self.broken = True
        exit_code = self.frames.status if self.frames.job_done.is_set() else None
        if termination is Termination.EXITED:
            if exit_code is None:  # the server is gone: only a memory limit is the student's
                self.broken = True
                if not self._out_of_memory(since, self._container_state()):
                    raise RuntimeError(f"fork server {self.name} ended during job {number}")
                termination = Termination.MEMORY_LIMIT
            elif exit_code != 0:
                termination = self._judge_killed_runner(since, exit_code)
        forged, tensors, over_limit = self._read_job_outputs(number)
        output.closed.wait(_STREAM_DRAIN_SECONDS)
        if (over_limit or output.channel.over_limit) and termination is Termination.EXITED:
            termination = Termination.OUTPUT_LIMIT
        return RunResult(
            termination=termination,
            exit_code=exit_code,
            wall_seconds=wall,
            events=bytes(output.channel.events),
            tensor_files=tensors,
            stdout=output.stdout.text(),
            stderr=output.stderr.text(),
            output_truncated=output.stdout.truncated or output.stderr.truncated,
            detail=f"fork server {self.container.short_id}, job {number}",
            forged_events_file=bool(forged),
        )

    def _read_job_outputs(self, number: int) -> tuple[bytes, dict[str, bytes], bool]:
        # Sent by the server at the job's end: no archive request through the engine, which
        # costs time and the daemons' CPU. Without it (the server is gone), the volume.
        if self.frames.job_done.is_set() and self.frames.archive is not None:
            forged, tensors, over_limit = read_output_archive(
                [self.frames.archive], self.limits.result_bytes,
                stream_limit=out_archive_bytes(self.limits))
            return forged, tensors, over_limit or self.frames.archive_cut
        try:
            chunks, _ = self.container.get_archive(f"{OUT_MOUNT}/{number}/out")
        except docker.errors.APIError:
            return b"", {}, False
        return read_output_archive(
            chunks, self.limits.result_bytes, stream_limit=out_archive_bytes(self.limits)
        )

    def destroy(self) -> None:
        super().destroy()
        if self._frames is not None:
            self._frames.close()
        for stage in self.job_dir.parent.glob(f"{self.name}.*.stage"):
            shutil.rmtree(stage, ignore_errors=True)


class ForkServerPool:
    """A fixed number of fork servers (one per core), each running one job at a time.

    A run takes an idle server, or waits for one busy or starting; a server that broke, ages
    out or runs out of job uids is destroyed after its run and replaced in the background.
    """

    def __init__(self, start: Callable[[], ForkServer], *, size: int, limits: Limits,
                 starter: Executor, discard: Callable[[SandboxContainer], None],
                 margin_seconds: float, ready_timeout_seconds: float = 120.0) -> None:
        self._start = start
        self.size = size
        self.limits = limits
        self._starter = starter
        self._discard = discard
        self._margin = margin_seconds
        self._ready_timeout = ready_timeout_seconds
        self._idle: list[ForkServer] = []
        self._starting = 0
        self._busy = 0
        self._closed = False
        self._changed = threading.Condition()

    def fill(self) -> None:
        """Start the servers in the background."""
        with self._changed:
            while not self._closed and len(self._idle) + self._starting < self.size:
                self._start_one_locked()

    def wait_until_full(self, timeout_seconds: float) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: len(self._idle) >= self.size or self._closed, timeout_seconds)

    @contextlib.contextmanager
    def server(self, limits: Limits) -> Iterator[ForkServer | None]:
        """An idle server for a run with ``limits`` for the block (None: run it otherwise)."""
        taken = self._take(limits)
        try:
            yield taken
        finally:
            if taken is not None:
                self._give_back(taken)

    def _take(self, limits: Limits) -> ForkServer | None:
        if self.size == 0 or limits != self.limits:
            return None
        waited_until = time.monotonic() + self._ready_timeout
        with self._changed:
            while True:
                while self._idle:
                    server = self._idle.pop()
                    if server.usable(limits, self._margin):
                        self._busy += 1
                        return server
                    self._retire_locked(server)
                remaining = waited_until - time.monotonic()
                # A busy or starting server is free sooner than a container starts cold.
                if self._closed or self._starting + self._busy == 0 or remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def _give_back(self, server: ForkServer) -> None:
        with self._changed:
            self._busy -= 1
            if self._closed:
                self._discard(server)
            elif server.usable(self.limits, self._margin):
                self._idle.append(server)
            else:
                self._retire_locked(server)
            self._changed.notify_all()

    def _retire_locked(self, server: ForkServer) -> None:
        self._discard(server)
        self._start_one_locked()

    def _start_one_locked(self) -> None:
        if not self._closed:
            self._starting += 1
            self._starter.submit(self._start_one)

    def _start_one(self) -> None:
        server: ForkServer | None = None
        try:
            server = self._start()
            server.wait_until_ready(self._ready_timeout)
        except Exception:  # a failed start leaves the pool smaller: runs go cold
            logger.exception("could not start a fork server")
            if server is not None:
                self._discard(server)
            server = None
        with self._changed:
            self._starting -= 1
            if server is not None:
                if self._closed:
                    self._discard(server)
                else:
                    self._idle.append(server)
            self._changed.notify_all()

    def retire_expired(self) -> None:
        """Replace idle servers too close to their deadline label."""
        with self._changed:
            keep = []
            for server in self._idle:
                if server.usable(self.limits, self._margin):
                    keep.append(server)
                else:
                    self._retire_locked(server)
            self._idle = keep

    def close(self) -> None:
        with self._changed:
            self._closed = True
            while self._idle:
                self._discard(self._idle.pop())
            self._changed.notify_all()
