"""Sandbox test fixtures: a real Docker engine and backend, jobs to run in them.

Docker tests need an engine and the image of this checkout. Where either is missing they are
skipped with one loud line in the summary, except in CI (``CI=true``), where a docker test that
cannot run is a failure: CI starts an engine (``scripts/ensure-docker.sh``) and builds the image
(``make sandbox-image``) first. The ``docker_backend`` fixture is the hook for suites that run
code through the real backend (the hostile-code suite); ``gvisor_backend`` is the same under
gVisor and ``any_docker_backend`` runs a test under both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from devkit.sandbox_jobs import FORK_SERVER_MODE, GVISOR_RUNTIME
from devkit.skips import skip_reasons
from sandbox.docker_backend import (
    DockerBackend,
    DockerSettings,
    SandboxUnavailable,
    check_image,
    connect,
)


def _docker_unavailable(reason: str) -> None:
    """Skip the test, or fail it in CI, where every docker test must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"docker test cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One loud line when docker tests were skipped, so a green run does not hide them."""
    for reason in skip_reasons(terminalreporter, "docker"):
        terminalreporter.write_sep(
            "!",
            f"DOCKER TESTS SKIPPED: {reason} "
            "(run `bash scripts/ensure-docker.sh && make sandbox-image`)",
            red=True,
            bold=True,
        )


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    """A client of a running engine whose sandbox image matches this checkout."""
    try:
        client = connect()
        check_image(client, DockerSettings().image)
    except SandboxUnavailable as exc:
        _docker_unavailable(str(exc))
    return client


@pytest.fixture(scope="session")
def docker_backend(docker_client: docker.DockerClient) -> Iterator[DockerBackend]:
    """The Docker backend as production builds it (warm pool of 2), shared by the session."""
    backend = DockerBackend(client=docker_client, settings=DockerSettings(pool_size=2))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def gvisor_backend(docker_client: docker.DockerClient) -> Iterator[DockerBackend]:
    """The Docker backend under gVisor (``runsc``, registered by scripts/ensure-docker.sh)."""
    if GVISOR_RUNTIME not in (docker_client.info().get("Runtimes") or {}):
        _docker_unavailable(f"the engine has no {GVISOR_RUNTIME} runtime")
    backend = DockerBackend(client=docker_client,
                            settings=DockerSettings(pool_size=2, runtime=GVISOR_RUNTIME))
    yield backend
    backend.close()


@pytest.fixture(params=["runc", GVISOR_RUNTIME])
def any_docker_backend(request: pytest.FixtureRequest) -> DockerBackend:
    """The Docker backend under each OCI runtime: Docker's default, then gVisor."""
    name = "docker_backend" if request.param == "runc" else "gvisor_backend"
    backend: DockerBackend = request.getfixturevalue(name)
    return backend


@pytest.fixture
def make_backend(
    docker_client: docker.DockerClient, tmp_path: Path
) -> Iterator[Callable[..., DockerBackend]]:
    """Build a backend of one's own (closed after the test), e.g. with another pool size."""
    built: list[DockerBackend] = []

    def make(**settings: Any) -> DockerBackend:
        settings.setdefault("workdir", tmp_path / f"work{len(built)}")
        backend = DockerBackend(client=docker_client, settings=DockerSettings(**settings))
        built.append(backend)
        return backend

    yield make
    for backend in built:
        backend.close()


@pytest.fixture(scope="session")
def fork_server_backend(
    docker_client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DockerBackend]:
    """The Docker backend in its fork-server mode (two servers), shared by the session."""
    backend = DockerBackend(client=docker_client, settings=DockerSettings(
        mode=FORK_SERVER_MODE, fork_servers=2, workdir=tmp_path_factory.mktemp("fork-server")))
    yield backend
    backend.close()
