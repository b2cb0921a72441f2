"""The Docker backend: each run in a fresh hardened container, from a warm pool when one is ready.

The production sandbox (SPEC §4). Every run gets its own container, used once and destroyed:
no network, memory equal to memory+swap, a CPU quota, a pids limit, a read-only root file
system, small private tmpfs mounts, no capabilities, no new privileges, a non-root user,
ulimits on open files, file size and core dumps, capped logs and an init process. The job comes
in through a read-only bind mount of a directory holding only that job; results go out through
a size-capped tmpfs volume read back without following links (see ``sandbox.docker_sandbox``).

A warm pool keeps containers started ahead, their runner with torch imported and warmed up,
each waiting for its one job (``sandbox.docker_pool``). A janitor removes containers left by
workers that died. The image must be the one built from this checkout's runner and pins
(``sandbox.docker_image``); any other is refused.

A fork-server mode (off by default, ``mode="fork-server"``) runs the pool's jobs instead in a
few long-lived containers, each job in an isolated child of a server there
(``sandbox.fork_server``); runs with other limits still get a container of their own.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import docker
import docker.errors

from sandbox.base import Job, Limits, RunResult, SandboxUnavailable, Termination
from sandbox.docker_image import HASH_LABEL, expected_image, inputs_hash, tag_of
from sandbox.docker_pool import (
    DEADLINE_MARGIN_SECONDS,
    Janitor,
    WarmPool,
    owner_id,
    wait_until_ready,
)
from sandbox.docker_sandbox import ContainerSpec, SandboxContainer
from sandbox.fork_server import MODE as FORK_SERVER_MODE
from sandbox.fork_server import ForkServer, ForkServerPool

logger = logging.getLogger(__name__)

# A cold container's deadline label covers its start as well as the run.
COLD_START_GRACE_SECONDS = 120.0
ENGINE_TIMEOUT_SECONDS = 60
CONTAINER_MODE = "container"
MODES = (CONTAINER_MODE, FORK_SERVER_MODE)


@dataclass(frozen=True)
class DockerSettings:
    """How the Docker backend runs; ``DockerBackend.from_environment`` reads them from env vars."""

    image: str = field(default_factory=expected_image)
    """Image reference; its tag must be the hash of this checkout's image inputs."""
    pool_size: int = 2
    """Warm containers kept ready; 0 starts every run cold."""
    runtime: str | None = None
    """OCI runtime, e.g. ``runsc`` for gVisor where the host has it."""
    workdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "autograde-docker")
    """Host directory for the per-container input directories (on the engine's host)."""
    pool_limits: Limits = field(default_factory=Limits)
    """Limits of the warm containers; runs with other limits start cold."""
    pool_max_age_seconds: float = 1800.0
    """Deadline label of a warm container: idle ones are replaced before it."""
    janitor_interval_seconds: float = 60.0
    mode: str = CONTAINER_MODE
    """``container`` (a fresh container per run) or ``fork-server`` (see ``sandbox.fork_server``:
    faster, weaker isolation between runs; off by default)."""
    fork_servers: int = 2
    """Fork-server containers (one per core) in the fork-server mode."""
    starters: int = 0
    """Containers started (importing torch) at a time; 0: as many as the pool holds, at most
    two. Several grading processes on one host each keep a pool: a share of the cores each
    keeps starts beside the gradings bounded by the cores, however many are kept ready."""
    refill: bool = True
    """Whether a container taken from the warm pool is replaced (off for a backend serving one
    run: its one container starts at once and nothing after it)."""


class DockerBackend:
    """Runs each job in its own hardened, single-use container."""

    name = "docker"

    def __init__(self, *, client: docker.DockerClient, settings: DockerSettings) -> None:
        """Check the image, sweep abandoned containers and start filling the warm pool."""
        check_image(client, settings.image)
        if settings.mode not in MODES:
            raise SandboxUnavailable(f"unknown docker sandbox mode {settings.mode!r} "
                                     f"(one of {', '.join(MODES)})")
        self._client = client
        self._settings = settings
        self.isolation = f"{settings.mode} mode, {settings.runtime or 'default'} runtime"
        settings.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._spec = ContainerSpec(
            image=settings.image,
            owner=owner_id(),
            workdir=settings.workdir,
            runtime=settings.runtime,
        )
        # Destroying is off the critical path of a run; starting warm containers too.
        self._destroyer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-destroy")
        forking = settings.mode == FORK_SERVER_MODE
        kept = settings.fork_servers if forking else settings.pool_size
        self._starter = ThreadPoolExecutor(
            max_workers=settings.starters if settings.starters > 0 else max(1, min(kept, 2)),
            thread_name_prefix="sandbox-start",
        )
        self.janitor = Janitor(client, workdir=settings.workdir)
        self.janitor.sweep()
        self.fork_servers = ForkServerPool(
            self._start_fork_server,
            size=settings.fork_servers if forking else 0,
            limits=settings.pool_limits,
            starter=self._starter,
            discard=self._discard,
            margin_seconds=DEADLINE_MARGIN_SECONDS,
        )
        self.pool = WarmPool(
            self._start_warm,
            size=0 if forking else settings.pool_size,
            limits=settings.pool_limits,
            starter=self._starter,
            discard=self._discard,
            refill=settings.refill,
        )
        self.pool.fill()
        self.fork_servers.fill()
        self._stopping = threading.Event()
        self._maintenance = threading.Thread(
            target=self._maintain, daemon=True, name="sandbox-janitor"
        )
        self._maintenance.start()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ, *,
                         one_run: Limits | None = None) -> DockerBackend:
        """A backend configured from ``AUTOGRADE_DOCKER_*`` variables and Docker's own.

        With ``one_run``, a backend for a single run with those limits (a command-line
        grading): its container starts now, while the caller prepares the job, and is not
        replaced; no fork servers.

        ``AUTOGRADE_DOCKER_IMAGE`` (default: the image of this checkout),
        ``AUTOGRADE_DOCKER_POOL_SIZE`` (default 2), ``AUTOGRADE_DOCKER_RUNTIME`` (optional),
        ``AUTOGRADE_DOCKER_WORKDIR``, ``AUTOGRADE_DOCKER_MODE`` (``container``, the default, or
        ``fork-server``), ``AUTOGRADE_DOCKER_FORK_SERVERS`` (default 2),
        ``AUTOGRADE_DOCKER_STARTERS`` (containers started at a time; default: up to two); the
        engine from ``DOCKER_HOST`` and friends.
        """
        defaults = DockerSettings()
        settings = DockerSettings(
            image=environ.get("AUTOGRADE_DOCKER_IMAGE") or defaults.image,
            pool_size=int(environ.get("AUTOGRADE_DOCKER_POOL_SIZE", defaults.pool_size)),
            runtime=environ.get("AUTOGRADE_DOCKER_RUNTIME") or None,
            workdir=Path(environ.get("AUTOGRADE_DOCKER_WORKDIR") or defaults.workdir),
            mode=environ.get("AUTOGRADE_DOCKER_MODE") or defaults.mode,
            fork_servers=int(environ.get("AUTOGRADE_DOCKER_FORK_SERVERS",
                                         defaults.fork_servers)),
            starters=int(environ.get("AUTOGRADE_DOCKER_STARTERS", defaults.starters)),
        )
        if one_run is not None:
            settings = replace(settings, pool_size=1, pool_limits=one_run,
                                           refill=False, mode=CONTAINER_MODE, fork_servers=0)
        return cls(client=connect(), settings=settings)

    @property
    def settings(self) -> DockerSettings:
        return self._settings

    @property
    def owner(self) -> str:
        """The owner label of this backend's containers and volumes."""
        return self._spec.owner

    def run(self, job: Job, limits: Limits) -> RunResult:
        """Run ``job`` in a container of its own; engine failures come back as SANDBOX_ERROR."""
        started = time.monotonic()
        sandbox: SandboxContainer | None = None
        try:
            with self.fork_servers.server(limits) as server:
                if server is not None:
                    logger.info("job %s runs in fork server %s", job.label, server.name)
                    return server.run(job)
            sandbox = self.pool.take(limits)
            if sandbox is not None:
                logger.info("job %s runs in warm container %s", job.label, sandbox.name)
                return sandbox.run(job)
            # A cold container starts like a warm one and gets the job once torch is ready:
            # the deadline then covers the student's code only, not our start-up, which a
            # loaded host can stretch past it.
            sandbox = SandboxContainer(
                self._client,
                self._spec,
                limits,
                label=job.label,
                lifetime_seconds=limits.deadline_seconds + COLD_START_GRACE_SECONDS,
            )
            wait_until_ready(sandbox, COLD_START_GRACE_SECONDS)
            return sandbox.run(job)
        # Whatever fails here is the engine's or ours, never the student's: report it as a
        # sandbox error for the grader to retry instead of failing the task.
        except Exception as exc:
            logger.exception("docker sandbox failed on job %s", job.label)
            return RunResult(
                termination=Termination.SANDBOX_ERROR,
                exit_code=None,
                wall_seconds=time.monotonic() - started,
                events=b"",
                detail=f"{type(exc).__name__}: {exc}"[:500],
            )
        finally:
            if sandbox is not None:
                self._discard(sandbox)

    def close(self) -> None:
        """Remove the pool's containers and wait until every container of ours is removed."""
        self._stopping.set()
        self.fork_servers.close()
        self.pool.close()
        self._starter.shutdown(wait=True)
        self._destroyer.shutdown(wait=True)
        self._maintenance.join(timeout=5)

    def _start_warm(self) -> SandboxContainer:
        return SandboxContainer(
            self._client,
            self._spec,
            self.pool.limits,
            label=None,
            lifetime_seconds=self._settings.pool_max_age_seconds,
        )

    def _start_fork_server(self) -> ForkServer:
        return ForkServer(self._client, self._spec, self.fork_servers.limits,
                          lifetime_seconds=self._settings.pool_max_age_seconds)

    def _discard(self, sandbox: SandboxContainer) -> None:
        try:
            self._destroyer.submit(sandbox.destroy)
        except RuntimeError:  # shut down already: destroy in this thread
            sandbox.destroy()

    def _maintain(self) -> None:
        while not self._stopping.wait(self._settings.janitor_interval_seconds):
            try:
                self.janitor.sweep()
                self.pool.retire_expired()
                self.fork_servers.retire_expired()
            except Exception:  # the next sweep retries
                logger.exception("sandbox janitor failed")


def connect() -> docker.DockerClient:
    """A client of the engine named by Docker's environment; SandboxUnavailable if none answers."""
    try:
        client = docker.from_env(
            version="auto", timeout=ENGINE_TIMEOUT_SECONDS, max_pool_size=32
        )
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxUnavailable(f"no Docker engine answers: {exc}") from exc
    return client


def check_image(client: docker.DockerClient, image: str) -> None:
    """Refuse an image that was not built from this checkout's runner, Dockerfile and pins."""
    expected = inputs_hash()
    if tag_of(image) != expected:
        raise SandboxUnavailable(
            f"sandbox image {image!r} does not match this code (expected tag {expected}); "
            "build it with `make sandbox-image`"
        )
    try:
        labels = client.images.get(image).labels or {}
    except docker.errors.ImageNotFound as exc:
        raise SandboxUnavailable(
            f"sandbox image {image} is not built; build it with `make sandbox-image`"
        ) from exc
    if labels.get(HASH_LABEL) != expected:
        raise SandboxUnavailable(
            f"sandbox image {image} was built from other inputs "
            f"({labels.get(HASH_LABEL)!r}, expected {expected!r})"
        )
