"""A reduced fault table (``benchmarks/faults.py`` runs the full one): private PostgreSQL, Redis
and dockerd, the service on them, a few real submissions under each fault; every one graded
exactly once and none failed. Needs root, dockerd, redis-server, PostgreSQL's initdb and the
sandbox image in the machine's engine; never touches the shared services."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.stack import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.docker]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    missing = [tool for tool in ("dockerd", "redis-server", "runuser", "docker")
               if shutil.which(tool) is None]
    if os.geteuid() != 0 or missing or not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        unavailable(f"the fault test needs root and {missing or 'initdb'}")
    from devkit.faults import harness

    data = os.environ.get("AUTOGRADE_FAULTS_DOCKER_DATA")
    with harness(tmp_path_factory.mktemp("faults"),
                 docker_data=Path(data) if data else None) as made:
        yield made


@pytest.mark.parametrize("fault", ["child-kill", "redis-restart", "postgres-restart",
                                   "docker-restart"])
def test_a_fault_fails_nothing_and_grades_each_once(running: object, fault: str) -> None:
    from devkit.faults import Harness

    assert isinstance(running, Harness)
    row = running.run(fault, 6, timeout=900)
    assert (row.graded, row.failed, row.duplicates) == (6, 0, 0), row
