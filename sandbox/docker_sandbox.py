"""One single-use hardened container: how it is configured, handed its job, watched and read back.

Layout of a sandbox container:

* The container's own process is an idle ``sleep`` under Docker's init. The probe runner runs
  beside it as an ``exec`` process (same namespaces, cgroup, capabilities and limits).
  That keeps the container, and with it the output volume, alive after the runner exits, so the
  outputs can be read; a volume of type tmpfs is emptied as soon as its last container stops.
* The init and its ``sleep`` run as a user of their own (``INIT_USER``), the runner as
  ``SANDBOX_USER``: student code can neither kill them nor open their standard output through
  ``/proc/1/fd/1``, which leads to the engine's log driver. Its log is capped as well, but a
  flood written there would cost the daemon's CPU, outside the container's quota.
* ``/job`` is a host directory bind-mounted read-only, holding exactly what
  ``sandbox.outputs.write_job`` lays out. A warm container gets it empty and waits for
  ``plan.json``, which is moved in last, after the inputs and the submission.
* ``/out`` is a per-run Docker volume of type tmpfs with a size and inode cap: the only writable
  place that outlives a process, charged to the container's memory, unable to fill the host
  disk. Once no process of the run is left, the runner's supervisor sends its files on its
  stream as a tar (``--send-outputs``); where that did not arrive whole (the supervisor was
  killed), the host reads the volume back as a tar stream from the engine. Either way the host
  parses the tar itself, keeping only regular files with the expected names, within the
  result limit; links are never followed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tarfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container
from docker.models.volumes import Volume
from docker.types import LogConfig, Mount, Ulimit

from sandbox import wire
from sandbox.base import Job, Limits, RunResult, Termination
from sandbox.docker_image import RUNNER_IN_IMAGE
from sandbox.outputs import (
    EVENTS_LIMIT_BYTES,
    OUT_FOLDER,
    CappedOutput,
    read_output_archive,
    write_job,
)

logger = logging.getLogger(__name__)

SANDBOX_USER = "65534:65534"
SANDBOX_UID = 65534
INIT_USER = "65533:65533"
"""The container's own processes: another user than the runner's, out of the student's reach."""
JOB_MOUNT = "/job"
OUT_MOUNT = f"/{OUT_FOLDER}"
READY_FILE = "ready"

LABEL_ROLE = "org.autograde.role"
ROLE_SANDBOX = "sandbox"
LABEL_JOB = "org.autograde.job"
LABEL_DEADLINE = "org.autograde.deadline"
LABEL_OWNER = "org.autograde.owner"
WARM_POOL_JOB = "warm-pool"
"""Job label of a warm container: labels are fixed at creation, before its job is known."""

ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONHASHSEED": "0",
}
# Headroom of the output volume over the result limit: tar headers, the ready marker, and the
# events file, which has its own cap.
_OUT_SLACK_BYTES = EVENTS_LIMIT_BYTES + (1 << 20)
_OUT_INODES = 4096
_LOG_MAX_SIZE = "1m"
_POLL_SECONDS = 0.02
_EXEC_POLL_SECONDS = 0.5
_OOM_EVENT_GRACE_SECONDS = 0.05
_GVISOR_HOST_PIDS_PER_PROCESS = 8
_STREAM_DRAIN_SECONDS = 0.5
# How long a runner killed by a signal waits for the engine to say whether its container went too.
_CONTAINER_SETTLE_SECONDS = 1.0
_CONTAINER_SETTLE_POLL_SECONDS = 0.1
_SIGNAL_EXIT_BASE = 128  # an exit status above it is 128 + the signal that killed the process


@dataclass(frozen=True)
class ContainerSpec:
    """What every sandbox container of a backend shares."""

    image: str
    owner: str
    """Who created the container (host, pid and start time of the worker), for the janitor."""
    workdir: Path
    """Host directory under which each container gets its input directory."""
    runtime: str | None = None
    """An OCI runtime such as ``runsc`` (gVisor) where the host has it; Docker's default if None."""


def is_gvisor(runtime: str | None) -> bool:
    """Whether ``runtime`` names gVisor (``runsc``, or a variant registered as ``runsc-*``)."""
    return runtime is not None and runtime.split("-")[0] == "runsc"


def _process_limits(limits: Limits, runtime: str | None) -> tuple[int, list[Ulimit]]:
    """The cgroup's pids limit and the ulimits that cap the run's processes.

    Under runc every process of the run is a host process, so the cgroup's pids limit is the
    run's process limit (RLIMIT_NPROC would count the sandbox user's processes of every
    container on the host). Under gVisor the run's processes live in gVisor's kernel, which
    enforces RLIMIT_NPROC for the sandbox alone, while the host cgroup counts gVisor's own
    threads and stub processes (about six per process of the run): that one gets room for them.
    """
    if not is_gvisor(runtime):
        return limits.max_processes, []
    nproc = Ulimit(name="nproc", soft=limits.max_processes, hard=limits.max_processes)
    return limits.max_processes * _GVISOR_HOST_PIDS_PER_PROCESS + 128, [nproc]


def hardening_options(limits: Limits, *, runtime: str | None) -> dict[str, Any]:
    """Deny-by-default container options for ``limits`` (SPEC §4)."""
    pids_limit, process_ulimits = _process_limits(limits, runtime)
    return {
        "user": INIT_USER,
        "network_mode": "none",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "privileged": False,
        "init": True,
        "mem_limit": limits.memory_bytes,
        # Equal to the memory limit: no swap, so a memory bomb is killed instead of thrashing.
        "memswap_limit": limits.memory_bytes,
        "nano_cpus": int(limits.cpus * 1e9),
        "pids_limit": pids_limit,
        "ulimits": [
            Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
            Ulimit(name="fsize", soft=limits.file_size_bytes, hard=limits.file_size_bytes),
            Ulimit(name="core", soft=0, hard=0),
            *process_ulimits,
        ],
        "tmpfs": {
            "/tmp": f"size={limits.tmpfs_bytes},uid={SANDBOX_UID},gid={SANDBOX_UID},"
            "mode=1777,nosuid,nodev,noexec"
        },
        # /dev/shm is one more writable tmpfs; keep it to the same budget as /tmp.
        "shm_size": limits.tmpfs_bytes,
        "log_config": LogConfig(
            type="json-file", config={"max-size": _LOG_MAX_SIZE, "max-file": "1"}
        ),
        "environment": ENVIRONMENT,
        "working_dir": "/tmp",
        "hostname": "sandbox",
        "runtime": runtime,
    }


def out_volume_bytes(limits: Limits) -> int:
    """Size of the output tmpfs: the result limit plus one more file, and bookkeeping.

    Every file is at most ``file_size_bytes`` (an rlimit), so the volume fills up only once the
    files in it are over the result limit, which the host then sees, as the local backend
    would. A volume just the size of the limit would fail the runner's write instead, and the
    run would look like one that returned nothing. The memory limit bounds it either way.
    """
    return limits.result_bytes + limits.file_size_bytes + _OUT_SLACK_BYTES


def out_archive_bytes(limits: Limits) -> int:
    """Most bytes the tar stream of a full output volume can take (data plus headers)."""
    return out_volume_bytes(limits) + _OUT_INODES * 2 * tarfile.BLOCKSIZE


WOKEN_WAIT_POLL_SECONDS = 0.05
"""How often a warm runner (or fork server) looks for its job under Docker's own runtime,
where inotify wakes it when the job is moved in: the interval is a backstop. gVisor does not
pass on the host's rename, so a runner there looks every 2 ms (the runner's default)."""


def runner_command(limits: Limits, runtime: str | None = None) -> list[str]:
    """The probe runner's command line inside the container: it imports and warms up torch,
    then waits for the job's plan, so a job's deadline never pays for our start-up; at its end
    it sends the output files on its stream, within the result limit."""
    woken = runtime in (None, "runc")  # the host's renames reach inotify in the container
    return ["python3", "-I", RUNNER_IN_IMAGE, JOB_MOUNT, OUT_MOUNT,
            "--wait-for", f"{JOB_MOUNT}/{wire.PLAN_FILE}",
            *(["--wait-poll", str(WOKEN_WAIT_POLL_SECONDS)] if woken else []),
            "--sole-user", "--send-outputs", str(limits.result_bytes)]


class SandboxContainer:
    """A started container with its input directory, output volume and running probe runner.

    Used for exactly one job, then destroyed.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        spec: ContainerSpec,
        limits: Limits,
        *,
        label: str | None,
        lifetime_seconds: float,
    ) -> None:
        """Create and start the container; its runner waits for a job (``run`` hands it over).

        ``label`` names the submission of a container started for it (a cold start); None
        makes a warm-pool container, whose submission is not known yet.

        On failure everything created so far is removed and the engine's error is raised.
        """
        self.client = client
        self.limits = limits
        self.warm = label is None
        self.name = f"autograde-{uuid.uuid4().hex[:16]}"
        self.job_dir = spec.workdir / self.name
        self.deadline = time.time() + lifetime_seconds
        self._container: Container | None = None
        self._volume: Volume | None = None
        self._output: CappedOutput | None = None
        self._exec_id = ""
        self._paused = False
        self._destroyed = False
        try:
            self._create(spec, label)
        except BaseException:
            self.destroy()
            raise

    def _create(self, spec: ContainerSpec, label: str | None) -> None:
        labels = {
            LABEL_ROLE: ROLE_SANDBOX,
            LABEL_JOB: label if label is not None else WARM_POOL_JOB,
            LABEL_DEADLINE: str(int(self.deadline)),
            LABEL_OWNER: spec.owner,
        }
        self.job_dir.mkdir(parents=True)
        self.job_dir.chmod(0o755)  # readable by the sandbox user, writable only by us
        self._volume = self.client.volumes.create(
            name=self.name,
            driver="local",
            driver_opts={
                "type": "tmpfs",
                "device": "tmpfs",
                "o": f"size={out_volume_bytes(self.limits)},nr_inodes={_OUT_INODES},"
                f"uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0700,nosuid,nodev,noexec",
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
            **hardening_options(self.limits, runtime=spec.runtime),
        )
        self._container.start()
        execution = self.client.api.exec_create(
            self._container.id, runner_command(self.limits, spec.runtime), user=SANDBOX_USER,
            workdir="/tmp",
        )
        self._exec_id = execution["Id"]
        stream = self.client.api.exec_start(self._exec_id, stream=True, demux=True)
        self._output = CappedOutput(stream, self.limits,
                                    archive_limit=out_archive_bytes(self.limits))

    @property
    def container(self) -> Container:
        """The Docker container (created by the constructor)."""
        assert self._container is not None
        return self._container

    @property
    def output(self) -> CappedOutput:
        """The runner's printed output (its stream is opened by the constructor)."""
        assert self._output is not None
        return self._output

    def is_ready(self) -> bool:
        """Whether a warm runner has imported and warmed up torch and now waits for its job."""
        try:
            self.container.get_archive(f"{OUT_MOUNT}/{READY_FILE}")
        except docker.errors.NotFound:
            return False
        return True

    def run(self, job: Job) -> RunResult:
        """Hand over the job, wait for the runner, read its outputs."""
        started = time.monotonic()
        since = time.time()
        self._hand_over(job)
        deadline = started + self.limits.deadline_seconds
        termination = Termination.EXITED
        exit_code: int | None = None
        asked = started
        while True:
            # Woken by the runner's end frame, its last act, or else by its stream closing
            # (an end frame whose files were cut at the stream's limit does not count).
            finished = self.output.finished.wait(_POLL_SECONDS)
            if self.output.flooded:
                termination = Termination.OUTPUT_LIMIT
                break
            end = self.output.runner_end
            if end is not None:
                exit_code = end[0]
                break
            closed = finished and self.output.closed.is_set()
            if closed:
                time.sleep(0.002)  # the stream may close a moment before the exec is reaped
            # Without the end frame the engine says whether the runner ended: asked at once
            # when its stream closes, otherwise only now and then, in case it ended with its
            # stream still open: each question costs this process CPU and the engine more,
            # too much to ask at every poll.
            if closed or time.monotonic() - asked >= _EXEC_POLL_SECONDS:
                asked = time.monotonic()
                state = self._exec_state()
                if state is None:  # the container ended under the runner: execs are forgotten
                    exit_code = self._container_exit_code()
                    break
                if not state["Running"]:
                    exit_code = state["ExitCode"]
                    break
            if time.monotonic() > deadline:
                termination = Termination.TIME_LIMIT
                break
        wall = time.monotonic() - started
        if termination is Termination.EXITED:
            # A clean exit needs no question to the engine; only a killed runner may be an OOM.
            if exit_code != 0:
                termination = self._judge_killed_runner(since, exit_code)
        else:
            # Freeze whatever still runs so the outputs are read as they were at the limit.
            with contextlib.suppress(docker.errors.APIError):
                self.container.pause()
                self._paused = True
        if self.output.runner_end is None:
            # The stream's last bytes may still be in flight when a killed runner is reaped.
            self.output.closed.wait(_STREAM_DRAIN_SECONDS)
        forged, tensors, over_limit = self._read_outputs()
        if (over_limit or self.output.channel.over_limit) \
                and termination is Termination.EXITED:
            termination = Termination.OUTPUT_LIMIT
        return RunResult(
            termination=termination,
            exit_code=exit_code,
            wall_seconds=wall,
            events=bytes(self.output.channel.events),
            tensor_files=tensors,
            stdout=self.output.stdout.text(),
            stderr=self.output.stderr.text(),
            output_truncated=self.output.stdout.truncated or self.output.stderr.truncated,
            detail=f"container {self.container.short_id} ({'warm' if self.warm else 'cold'})",
            forged_events_file=bool(forged),
        )

    def _hand_over(self, job: Job) -> None:
        """Lay the job out beside the mounted directory, then move it in with the plan last."""
        staging = self.job_dir.with_name(self.name + ".stage")
        write_job(staging, job)
        for name in (wire.SUBMISSION_DIR, wire.INPUTS_FILE):
            os.rename(staging / name, self.job_dir / name)
        os.rename(staging / wire.PLAN_FILE, self.job_dir / wire.PLAN_FILE)
        staging.rmdir()

    def _exec_state(self) -> dict[str, Any] | None:
        """The runner's exec as the engine sees it, or None once its container has ended."""
        try:
            state: dict[str, Any] = self.client.api.exec_inspect(self._exec_id)
        except docker.errors.NotFound:
            return None
        return state

    def _judge_killed_runner(self, since: float, exit_code: int | None) -> Termination:
        """A runner that failed: the memory limit, the student's own doing, or not theirs.

        The student cannot signal the container's init (another user); when it has ended as
        well, the whole container was killed: gVisor's sandbox at the memory limit, otherwise
        the engine or an operator, which the caller reports as a sandbox error to retry.
        """
        state = self._container_state()
        # A container killed from outside takes its runner first: the engine may still call it
        # running for a moment after the killed exec has ended.
        settle = time.monotonic() + _CONTAINER_SETTLE_SECONDS
        killed = exit_code is None or exit_code >= _SIGNAL_EXIT_BASE
        while killed and state.get("Running") and time.monotonic() < settle:
            time.sleep(_CONTAINER_SETTLE_POLL_SECONDS)
            state = self._container_state()
        if self._out_of_memory(since, state):
            return Termination.MEMORY_LIMIT
        if not state.get("Running"):
            raise RuntimeError(
                f"container {self.container.short_id} ended under the runner "
                f"(exit status {exit_code}) without reaching its memory limit"
            )
        return Termination.EXITED

    def _container_state(self) -> dict[str, Any]:
        """The container's state as the engine knows it now (empty once it is gone)."""
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return {}
        state: dict[str, Any] = self.container.attrs.get("State") or {}
        return state

    def _container_exit_code(self) -> int | None:
        """The ended container's exit status (None if the engine no longer knows it)."""
        code = self._container_state().get("ExitCode")
        return code if isinstance(code, int) else None

    def _out_of_memory(self, since: float, state: dict[str, Any]) -> bool:
        """Whether the kernel's OOM killer struck in this container since ``since``.

        Docker's ``OOMKilled`` state only covers the container's own process, not an exec'd
        one, so the engine's ``oom`` events are asked as well.
        """
        if state.get("OOMKilled"):  # gVisor's whole sandbox was killed
            return True
        events = self.client.api.events(
            since=f"{since - 1:.9f}",
            until=f"{time.time() + _OOM_EVENT_GRACE_SECONDS:.9f}",
            filters={"container": self.container.id, "event": "oom"},
            decode=True,
        )
        return any(True for _ in events)

    def _read_outputs(self) -> tuple[bytes, dict[str, bytes], bool]:
        """The output files: as the runner sent them at its end, else read from the volume."""
        end = self.output.runner_end
        if end is not None:
            forged, tensors, over_limit = read_output_archive(
                [bytes(self.output.channel.archive.kept)], self.limits.result_bytes,
                stream_limit=out_archive_bytes(self.limits))
            return forged, tensors, over_limit or end[1]
        # The runner was killed, or its files were more than its stream may carry.
        try:
            chunks, _ = self.container.get_archive(OUT_MOUNT)
        except docker.errors.APIError:
            # The container is gone (the student stopped its init): nothing came back.
            return b"", {}, False
        return read_output_archive(
            chunks, self.limits.result_bytes, stream_limit=out_archive_bytes(self.limits)
        )

    def destroy(self) -> None:
        """Remove the container, its volume and its input directory (idempotent, never raises)."""
        if self._destroyed:
            return
        self._destroyed = True
        if self._container is not None:
            if self._paused:  # gVisor cannot kill a paused sandbox: thaw it first
                _quietly(self._container.unpause)
            _quietly(self._container.remove, force=True)
        if self._output is not None:
            self._output.close()
        if self._volume is not None:
            _quietly(self._volume.remove, force=True)
        for path in (self.job_dir, self.job_dir.with_name(self.name + ".stage")):
            shutil.rmtree(path, ignore_errors=True)


def _quietly(remove: Any, **kwargs: Any) -> None:
    """Remove something of the engine's; already gone is fine, other failures are logged."""
    try:
        remove(**kwargs)
    except docker.errors.NotFound:
        pass
    except Exception:  # cleanup must go on; the janitor retries later
        logger.exception("sandbox cleanup step failed")
