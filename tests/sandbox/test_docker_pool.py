"""The warm pool, the janitor and the image check, against a real engine."""

from __future__ import annotations

import contextlib
import io
import socket
import subprocess
import time
from collections.abc import Callable

import docker
import docker.errors
import pytest

from devkit.sandbox_jobs import ATTENTION, events_of, make_job
from sandbox.base import Limits, Termination
from sandbox.docker_backend import DockerBackend, DockerSettings, SandboxUnavailable
from sandbox.docker_image import REPOSITORY, inputs_hash
from sandbox.docker_pool import Janitor, containers_of_host, owner_id
from sandbox.docker_sandbox import LABEL_DEADLINE, LABEL_OWNER, LABEL_ROLE, ROLE_SANDBOX

pytestmark = pytest.mark.docker

# Fails the import if anything of an earlier run is still in the container's /tmp.
FRESH_CONTAINER_ONLY = (
    "import os\n"
    "if os.path.exists('/tmp/used'):\n"
    "    raise RuntimeError('this container ran a job before')\n"
    "open('/tmp/used', 'w').close()\n"
) + ATTENTION


def test_the_warm_pool_hands_each_container_out_once(
    make_backend: Callable[..., DockerBackend],
) -> None:
    backend = make_backend(pool_size=2)
    containers = []
    for _ in range(4):
        result = backend.run(make_job(FRESH_CONTAINER_ONLY), Limits())
        assert result.termination is Termination.EXITED
        assert "(warm)" in result.detail
        imported = next(e for e in events_of(result.events) if e["event"] == "import")
        assert imported["status"] == "ok", imported
        containers.append(result.detail)
    assert len(set(containers)) == 4


def test_a_hosts_sandbox_containers_are_counted_by_their_owner_label(
    make_backend: Callable[..., DockerBackend], docker_client: docker.DockerClient,
) -> None:
    """What a grading host's metrics report: its containers on the engine, another host's not."""
    here = socket.gethostname()
    before = containers_of_host(docker_client, here)
    backend = make_backend(pool_size=2)
    assert backend.pool.wait_until_full(120)
    assert containers_of_host(docker_client, here) >= before + 2
    assert containers_of_host(docker_client, here + "-elsewhere") == 0


def test_a_warm_run_is_fast(make_backend: Callable[..., DockerBackend]) -> None:
    backend = make_backend(pool_size=1)
    assert backend.pool.wait_until_full(120)
    started = time.monotonic()
    result = backend.run(make_job(), Limits())
    assert result.termination is Termination.EXITED
    assert time.monotonic() - started < 2.0


def test_pool_size_zero_starts_every_run_cold(
    make_backend: Callable[..., DockerBackend],
) -> None:
    backend = make_backend(pool_size=0)
    result = backend.run(make_job(), Limits())
    assert result.termination is Termination.EXITED
    assert "(cold)" in result.detail


def _dead_owner() -> str:
    """The owner label of a worker process that has ended."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return f"{socket.gethostname()}:{ended.pid}:1:gone"


def test_the_janitor_removes_expired_and_orphaned_containers_only(
    docker_client: docker.DockerClient, tmp_path: object
) -> None:
    image = DockerSettings().image
    now = time.time()
    labels = {
        "expired": {LABEL_DEADLINE: str(int(now - 5)), LABEL_OWNER: owner_id()},
        "orphaned": {LABEL_DEADLINE: str(int(now + 600)), LABEL_OWNER: _dead_owner()},
        "live": {LABEL_DEADLINE: str(int(now + 600)), LABEL_OWNER: owner_id()},
    }
    created = {}
    for kind, extra in labels.items():
        container = docker_client.containers.create(
            image, ["sleep", "infinity"], network_mode="none",
            labels={LABEL_ROLE: ROLE_SANDBOX, **extra},
        )
        container.start()
        created[kind] = container
    try:
        janitor = Janitor(docker_client, workdir=DockerSettings().workdir)
        # Not a count of two: another janitor on this engine (a worker of another test) may
        # remove the expired container first. What is left afterwards is what matters.
        janitor.sweep()
        for kind, container in created.items():
            if kind == "live":
                container.reload()
            else:
                with pytest.raises(docker.errors.NotFound):
                    container.reload()
    finally:
        for container in created.values():
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_an_image_whose_tag_does_not_match_the_code_is_refused(
    docker_client: docker.DockerClient, tmp_path: object
) -> None:
    with pytest.raises(SandboxUnavailable, match="does not match"):
        DockerBackend(
            client=docker_client,
            settings=DockerSettings(image=f"{REPOSITORY}:0000000000000000", pool_size=0),
        )


def test_an_image_built_from_other_inputs_is_refused_despite_its_tag(
    docker_client: docker.DockerClient,
) -> None:
    impostor = f"{REPOSITORY}-impostor:{inputs_hash()}"
    dockerfile = f"FROM {DockerSettings().image}\nLABEL org.autograde.inputs-hash=other\n"
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=impostor, rm=True)
    try:
        with pytest.raises(SandboxUnavailable, match="other inputs"):
            DockerBackend(
                client=docker_client, settings=DockerSettings(image=impostor, pool_size=0)
            )
    finally:
        docker_client.images.remove(impostor)
