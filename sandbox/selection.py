"""Choosing a backend: Docker wherever an engine answers with this code's image, else local."""

from __future__ import annotations

from typing import TextIO

from sandbox.base import SandboxUnavailable


def docker_unavailable_reason() -> str | None:
    """Why the Docker backend cannot run here, or None when it can."""
    try:
        from sandbox.docker_backend import DockerSettings, check_image, connect
    except ImportError as exc:  # the SDK is optional for local development
        return f"the Docker SDK is not installed ({exc})"
    try:
        client = connect()
    except SandboxUnavailable as exc:
        return str(exc)
    try:
        check_image(client, DockerSettings().image)
    except SandboxUnavailable as exc:
        return str(exc)
    finally:
        client.close()
    return None


def choose_backend(*, warn: TextIO | None = None) -> str:
    """``docker`` where it can run, else ``local`` with a warning saying why."""
    reason = docker_unavailable_reason()
    if reason is None:
        return "docker"
    if warn is not None:
        print(f"autograde: {reason}.\nautograde: using the local sandbox, which is NOT a "
              "security boundary (development only).", file=warn)
    return "local"
