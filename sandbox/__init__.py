"""Running untrusted code: a backend interface, the local and Docker backends, the probe runner.

This package imports nothing else of ours.
"""

from __future__ import annotations

from collections.abc import Callable

from sandbox.base import Job, Limits, RunResult, SandboxBackend, Termination

__all__ = [
    "Job",
    "Limits",
    "RunResult",
    "SandboxBackend",
    "Termination",
    "available_backends",
    "create_backend",
]


def available_backends() -> dict[str, Callable[[], SandboxBackend]]:
    """The backends this installation knows, by name (built on demand, not at import)."""

    def local() -> SandboxBackend:
        from sandbox.local import LocalBackend

        return LocalBackend()

    def docker() -> SandboxBackend:
        from sandbox.docker_backend import DockerBackend

        return DockerBackend.from_environment()

    return {"local": local, "docker": docker}


def create_backend(name: str) -> SandboxBackend:
    """Build the backend called ``name``; ValueError for an unknown name."""
    factories = available_backends()
    if name not in factories:
        raise ValueError(f"unknown sandbox backend {name!r}; choose from {', '.join(factories)}")
    return factories[name]()
