"""Running untrusted code: a backend interface, the local and Docker backends, the probe runner.

This package imports nothing else of ours.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from sandbox.base import Job, Limits, RunResult, SandboxBackend, SandboxUnavailable, Termination

__all__ = [
    "Job",
    "Limits",
    "RunResult",
    "SandboxBackend",
    "SandboxUnavailable",
    "Termination",
    "available_backends",
    "create_backend",
]


def available_backends() -> dict[str, Callable[[bool, Limits | None], SandboxBackend]]:
    """The backends this installation knows, by name (built on demand, not at import).

    Each factory takes ``warm``: whether the backend will serve many runs, so that keeping
    warm sandboxes ready pays off (a worker), or just one (a command-line grading), and the
    limits of that one run when known (then its sandbox starts at once, while the caller
    prepares the job).
    """

    def local(warm: bool, limits: Limits | None) -> SandboxBackend:
        from sandbox.local import LocalBackend

        return LocalBackend(warm=warm)

    def docker(warm: bool, limits: Limits | None) -> SandboxBackend:
        from sandbox.docker_backend import DockerBackend

        if warm:
            return DockerBackend.from_environment(os.environ)
        if limits is not None:
            return DockerBackend.from_environment(os.environ, one_run=limits)
        return DockerBackend.from_environment(
            {**os.environ, "AUTOGRADE_DOCKER_POOL_SIZE": "0", "AUTOGRADE_DOCKER_FORK_SERVERS": "0"})

    return {"local": local, "docker": docker}


def create_backend(name: str, *, warm: bool = True,
                   limits: Limits | None = None) -> SandboxBackend:
    """Build the backend called ``name``; ValueError for an unknown name, SandboxUnavailable
    when it cannot run here. ``warm=False`` with the run's ``limits``: a backend for one run,
    whose sandbox starts now."""
    factories = available_backends()
    if name not in factories:
        raise ValueError(f"unknown sandbox backend {name!r}; choose from {', '.join(factories)}")
    return factories[name](warm, limits)
