"""Keeping sandbox containers ahead of demand (warm pool) and removing abandoned ones (janitor)."""

from __future__ import annotations

import collections
import logging
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

import docker
import docker.errors

from sandbox.base import Limits
from sandbox.docker_sandbox import (
    LABEL_DEADLINE,
    LABEL_OWNER,
    LABEL_ROLE,
    ROLE_SANDBOX,
    SandboxContainer,
)

logger = logging.getLogger(__name__)

READY_POLL_SECONDS = 0.05
# A refill nobody waits for checks its container this seldom: each check is an archive request
# through the engine, and at READY_POLL_SECONDS for as long as torch's import takes, the
# checks of a rush's starting containers would take the worker's CPU, and the engine's, from
# the gradings running meanwhile. A run that starts waiting cuts the pause short.
IDLE_READY_POLL_SECONDS = 1.0
# A pooled container is handed out only if its deadline label leaves the whole run this much
# room on top of the run's wall clock, so the janitor never removes a container mid-run.
DEADLINE_MARGIN_SECONDS = 60.0
# An input directory with no container is left alone this long: its container may be being
# created right now by another worker on this host.
ORPHAN_DIR_AGE_SECONDS = 600.0


def wait_until_ready(sandbox: SandboxContainer, timeout: float,
                     pause: Callable[[], None] = lambda: time.sleep(READY_POLL_SECONDS)) -> None:
    """Block until the container's runner has torch imported and warm, waiting for its job.
    ``pause`` runs between two checks (each is a round trip through the engine)."""
    ready_by = time.monotonic() + timeout
    while not sandbox.is_ready():
        if sandbox.output.closed.is_set() or time.monotonic() > ready_by:
            raise RuntimeError(f"sandbox container {sandbox.name} did not become ready")
        pause()


class WarmPool:
    """Started containers whose runners wait, torch imported and warmed up, for one job each.

    Each container is handed out once; taking one starts its replacement in the background
    (unless ``refill`` is off: then the pool shrinks by the one taken). Only runs with the
    pool's limits use it (the limits are fixed when a container is created).
    """

    def __init__(
        self,
        start: Callable[[], SandboxContainer],
        *,
        size: int,
        limits: Limits,
        starter: Executor,
        discard: Callable[[SandboxContainer], None],
        ready_timeout_seconds: float = 120.0,
        refill: bool = True,
    ) -> None:
        self._start = start
        self.size = size
        self._refill = refill
        self.limits = limits
        self._starter = starter
        self._discard = discard
        self._ready_timeout = ready_timeout_seconds
        self._ready: collections.deque[SandboxContainer] = collections.deque()
        self._starting = 0
        self._waiting = 0  # runs in ``take`` waiting for a container
        self._closed = False
        self._changed = threading.Condition()

    def fill(self) -> None:
        """Start containers in the background until the pool has ``size`` ready or starting."""
        with self._changed:
            while not self._closed and len(self._ready) + self._starting < self.size:
                self._starting += 1
                self._starter.submit(self._start_one)

    def wait_until_full(self, timeout_seconds: float) -> bool:
        """Wait until ``size`` containers are ready; whether they are (e.g. before measuring)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: len(self._ready) >= self.size or self._closed, timeout_seconds
            )

    def take(self, limits: Limits) -> SandboxContainer | None:
        """A ready container for a run with ``limits``, or None (then the caller starts one cold).

        When none is ready but some are starting, waits for one: a container already importing
        torch is ready sooner than a new one.
        """
        if self.size == 0 or limits != self.limits:
            return None
        waited_until = time.monotonic() + self._ready_timeout
        with self._changed:
            try:
                while True:
                    while self._ready:
                        sandbox = self._ready.popleft()
                        if self._usable(sandbox, limits):
                            if not self._refill:
                                self.size -= 1
                            return sandbox
                        self._discard(sandbox)
                    remaining = waited_until - time.monotonic()
                    if self._closed or self._starting == 0 or remaining <= 0:
                        return None
                    if self._waiting == 0:  # the first: starting containers check now, often
                        self._changed.notify_all()  # (only the first: takers would wake each
                    self._waiting += 1              # other's notify back and forth)
                    try:
                        self._changed.wait(remaining)
                    finally:
                        self._waiting -= 1
            finally:
                self.fill()

    @staticmethod
    def _usable(sandbox: SandboxContainer, limits: Limits) -> bool:
        runner_alive = not sandbox.output.closed.is_set()
        room = sandbox.deadline - time.time() - limits.deadline_seconds
        return runner_alive and room > DEADLINE_MARGIN_SECONDS

    def retire_expired(self) -> None:
        """Discard idle containers too close to their deadline label, and start replacements."""
        with self._changed:
            keep = [s for s in self._ready if self._usable(s, self.limits)]
            for sandbox in self._ready:
                if sandbox not in keep:
                    self._discard(sandbox)
            self._ready = collections.deque(keep)
        self.fill()

    def _start_one(self) -> None:
        sandbox: SandboxContainer | None = None
        try:
            sandbox = self._start()
            wait_until_ready(sandbox, self._ready_timeout, self._pause)
        except Exception:  # a failed start leaves the pool smaller, runs go cold
            logger.exception("could not start a warm sandbox container")
            if sandbox is not None:
                self._discard(sandbox)
            sandbox = None
        with self._changed:
            self._starting -= 1
            if sandbox is not None:
                if self._closed:
                    self._discard(sandbox)
                else:
                    self._ready.append(sandbox)
            self._changed.notify_all()

    def _pause(self) -> None:
        """Between two readiness checks of a starting container: short while a run waits for
        one, else up to IDLE_READY_POLL_SECONDS, cut short when a run starts waiting."""
        with self._changed:
            if not self._waiting and not self._closed:
                self._changed.wait_for(lambda: self._waiting > 0 or self._closed,
                                       IDLE_READY_POLL_SECONDS)
                return
        time.sleep(READY_POLL_SECONDS)

    def close(self) -> None:
        """Discard the idle containers; containers still starting are discarded when ready."""
        with self._changed:
            self._closed = True
            while self._ready:
                self._discard(self._ready.popleft())
            self._changed.notify_all()


def owner_id() -> str:
    """A new container owner in this process: host, pid, the process's start time, a nonce.

    The nonce tells apart several backends of one process (their containers are each their own).
    """
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}:{uuid.uuid4().hex[:8]}"


def containers_of_host(client: docker.DockerClient, host: str) -> int:
    """How many sandbox containers the grading processes of ``host`` have on this engine:
    warm ones waiting for a job (or still starting) and those grading one, which their labels,
    fixed at creation, do not tell apart."""
    listed = client.api.containers(filters={"label": f"{LABEL_ROLE}={ROLE_SANDBOX}"})
    return sum(1 for container in listed
               if (container.get("Labels") or {}).get(LABEL_OWNER, "").split(":")[0] == host)


def owner_gone(owner: str) -> bool:
    """Whether the worker process that created a container has ended.

    Only workers on this host can be checked; for others the deadline label alone decides.
    """
    host, pid, started, *_ = [*owner.split(":"), "", "", ""]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return _start_time(int(pid)) != started


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' if there is no such process).

    Together with the pid it names a process uniquely: pids are reused, start times are not.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return ""
    return fields[19] if len(fields) > 19 else ""


class Janitor:
    """Removes sandbox containers, volumes and input directories that nobody will clean up.

    A container is abandoned when its deadline label has passed or the worker that owns it has
    ended (a crashed or killed worker leaves its containers running).
    """

    def __init__(self, client: docker.DockerClient, *, workdir: Path) -> None:
        self._client = client
        self._workdir = workdir
        # Containers seen stopped at the previous sweep: a sandbox container runs until it is
        # removed, so one still stopped a sweep later is dead (an engine restart stops them
        # all, and a worker that is alive never removes what its pool had lost).
        self._stopped: set[str] = set()
        self._dead_names: set[str] = set()
        self._unattached: set[str] = set()  # volumes seen without their container

    def sweep(self) -> int:
        """Remove what is abandoned now; the number of containers removed."""
        now = time.time()
        selector = {"label": f"{LABEL_ROLE}={ROLE_SANDBOX}"}
        removed = 0
        live: set[str] = set()
        # The low-level listing: the high-level one inspects each container and fails on one
        # that a worker removes meanwhile.
        stopped: set[str] = set()
        for container in self._client.api.containers(all=True, filters=selector):
            names = {name.lstrip("/") for name in container.get("Names") or []}
            if container.get("State") in ("exited", "dead"):
                stopped.add(container["Id"])
            dead = container["Id"] in self._stopped and container["Id"] in stopped
            if dead or _abandoned(container.get("Labels") or {}, now):
                try:
                    self._client.api.remove_container(container["Id"], force=True)
                    removed += 1
                    if dead:
                        self._dead_names |= names
                except docker.errors.NotFound:
                    pass
                except docker.errors.APIError as exc:  # e.g. 409: its removal is in progress
                    logger.info("janitor: container %s not removed now (%s)",
                                container["Id"][:12], exc)
            else:
                live |= names
        self._stopped = stopped
        unattached: set[str] = set()
        for volume in self._client.volumes.list(filters=selector):
            labels = volume.attrs.get("Labels") or {}
            if volume.name not in live:
                unattached.add(volume.name)
            # A volume is created just before its container: without one for a whole sweep
            # interval, its container is gone (removed while the volume's removal failed).
            dead_volume = volume.name in self._dead_names or volume.name in self._unattached
            if volume.name not in live and (dead_volume or _abandoned(labels, now)):
                self._dead_names.discard(volume.name)
                unattached.discard(volume.name)
                try:
                    volume.remove(force=True)
                except docker.errors.APIError:
                    logger.warning("janitor could not remove volume %s", volume.name)
            else:
                live.add(volume.name)
        self._unattached = unattached
        self._sweep_dirs(live, now)
        if removed:
            logger.info("janitor removed %d abandoned sandbox containers", removed)
        return removed

    def _sweep_dirs(self, live: set[str], now: float) -> None:
        if not self._workdir.is_dir():
            return
        for entry in self._workdir.iterdir():
            owner_name = entry.name.removesuffix(".stage")
            if not owner_name.startswith("autograde-") or owner_name in live:
                continue
            try:
                age = now - entry.lstat().st_mtime
            except OSError:
                continue
            if age > ORPHAN_DIR_AGE_SECONDS:
                shutil.rmtree(entry, ignore_errors=True)


def _abandoned(labels: dict[str, str], now: float) -> bool:
    try:
        deadline = float(labels.get(LABEL_DEADLINE, "0"))
    except ValueError:
        deadline = 0.0
    return deadline < now or owner_gone(labels.get(LABEL_OWNER, ""))
