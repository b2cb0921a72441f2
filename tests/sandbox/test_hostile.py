"""The hostile-code suite: submissions that attack the grader get what their real outputs deserve.

Each file in ``tests/hostile/attention/`` is graded through a real backend and checked against
``tests/hostile/manifest.toml``: the grader survives with a complete document, the score and the
set of feedback codes are exactly the manifest's, no marker the backend should have stopped
appears on the host, nothing was ever unpickled and no process of the run outlives it. After
the suite an ordinary correct submission must still get full marks.

The local backend is not a security boundary: its cases assert the verdict and clean-up, and
allow the markers the manifest lists for it. The Docker backend allows no marker at all.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import shutil
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assignments import Assignment
from devkit.sandbox_jobs import FORK_SERVER_MODE, GVISOR_RUNTIME
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline
from sandbox import Job, Limits, RunResult, SandboxBackend
from sandbox.local import LocalBackend

TESTS = Path(__file__).resolve().parents[1]
HOSTILE = TESTS / "hostile" / "attention"
MANIFEST = TESTS / "hostile" / "manifest.toml"
CORRECT = TESTS / "corpus" / "attention" / "correct_matmul.py"
# Fixed in the attack files: nothing but the submitted files reaches the sandbox.
MARKERS = Path("/tmp/autograde-hostile-markers")
PICKLE_MARKER = "pickle"
SEED = 20240611
SHORT_LIMITS = {"call_seconds": 1.5, "run_seconds": 10.0}
DOCKER_POOL_SIZE = 2


@dataclasses.dataclass(frozen=True)
class HostileCase:
    file: str
    score: float
    codes: frozenset[str]
    short: bool
    local_markers: tuple[str, ...]
    xfail: str
    flags: frozenset[str] = frozenset()
    under_gvisor: tuple[float, frozenset[str]] | None = None
    """Score and codes under gVisor where they differ (``[files."x".runsc]``): never higher."""

    @property
    def path(self) -> Path:
        return HOSTILE / self.file


def _cases(backend: str, mode: str | None = None) -> list[Any]:
    """The manifest's cases for ``backend``, with the overrides of ``mode`` (``fork-server``)."""
    entries = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["files"]
    params = []
    for name, entry in entries.items():
        if backend not in entry.get("backends", ["local", "docker"]):
            continue
        expected = {**entry, **entry.get(backend, {}), **entry.get(mode or backend, {})}
        case = HostileCase(
            file=name,
            score=float(expected["score"]),
            codes=frozenset(expected["codes"]),
            short=bool(entry.get("short", False)),
            local_markers=tuple(entry.get("local_markers", [])),
            xfail=str(expected.get("xfail", "")),
            flags=frozenset(expected.get("flags", [])),
            under_gvisor=(float(entry["runsc"]["score"]), frozenset(entry["runsc"]["codes"]))
            if backend == "docker" and "runsc" in entry else None,
        )
        strict = not expected.get("flaky", False)
        marks = [pytest.mark.xfail(reason=case.xfail, strict=strict)] if case.xfail else []
        params.append(pytest.param(case, id=name.removesuffix(".py"), marks=marks))
    return params


def test_manifest_covers_every_hostile_file() -> None:
    listed = set(tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["files"])
    assert listed == {path.name for path in HOSTILE.glob("*.py")}


@pytest.fixture(scope="module")
def attention() -> Assignment:
    return load_assignment("attention")


@pytest.fixture
def markers() -> Iterator[Path]:
    """A clean marker directory on the host for one case, removed afterwards."""
    shutil.rmtree(MARKERS, ignore_errors=True)
    yield MARKERS
    shutil.rmtree(MARKERS, ignore_errors=True)


def _with_short_limits(assignment: Assignment) -> Assignment:
    """The assignment with quick time limits (the budgets travel in the plan)."""
    limits = assignment.limits.replace(SHORT_LIMITS)
    build_plan = assignment.build_plan
    return dataclasses.replace(
        assignment,
        limits=limits,
        build_plan=lambda seed: dataclasses.replace(build_plan(seed),
                                                    call_timeout=limits.call_seconds,
                                                    run_seconds=limits.run_seconds),
    )


def _grade(backend: SandboxBackend, assignment: Assignment, case: HostileCase) -> dict[str, Any]:
    if case.short:
        assignment = _with_short_limits(assignment)
    pipeline = GradingPipeline(backend=backend)
    return pipeline.grade(assignment, {"attention.py": case.path.read_bytes()}, seed=SEED,
                          label=f"hostile-{case.path.stem}")


def _assert_verdict(document: dict[str, Any], case: HostileCase, assignment: Assignment) -> None:
    assert {"score", "max_score", "output", "tests", "diagnoses", "autograde"} <= set(document)
    assert [test["number"] for test in document["tests"]] == [
        check.number for check in assignment.checks]
    assert document["max_score"] == assignment.max_score
    codes = frozenset(diagnosis["code"] for diagnosis in document["diagnoses"])
    failed = [(test["number"], test["output"]) for test in document["tests"] if test["output"]]
    assert (document["score"], codes) == (case.score, case.codes), (document["output"], failed)
    raised = {flag["flag"] for flag in document["autograde"]["integrity"]}
    assert case.flags <= raised, document["autograde"]["integrity"]


def _assert_markers(allowed: tuple[str, ...]) -> None:
    """Only allowed markers on the host; the pickle marker never (nothing was unpickled)."""
    time.sleep(0.3)  # a lingering writer would have to be quicker than this to hide
    found = sorted(os.listdir(MARKERS)) if MARKERS.is_dir() else []
    assert PICKLE_MARKER not in found, (MARKERS / PICKLE_MARKER).read_text()
    unexpected = [name for name in found
                  if not any(fnmatch.fnmatch(name, pattern) for pattern in allowed)]
    assert not unexpected, f"markers reached the host: {unexpected}"


# --------------------------------------------------------------------------------------------
# Local backend
# --------------------------------------------------------------------------------------------


class _RecordingLocalBackend(LocalBackend):
    """The local backend, remembering each run's directory to look for its leftovers."""

    def __init__(self) -> None:
        super().__init__()
        self.roots: list[Path] = []

    def _run_in(self, root: Path, job: Job, limits: Limits) -> RunResult:
        self.roots.append(root)
        return super()._run_in(root, job, limits)


def _processes_of(root: Path) -> list[str]:
    """Live processes that carry a run's directory in their command line or environment."""
    sign = str(root).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if sign in cmdline or sign in environ:
            found.append(entry + ": " + cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


@pytest.fixture(scope="module")
def local_backend() -> _RecordingLocalBackend:
    return _RecordingLocalBackend()


@pytest.mark.slow
@pytest.mark.parametrize("case", _cases("local"))
def test_hostile_submission_local(case: HostileCase, attention: Assignment,
                                  local_backend: _RecordingLocalBackend, markers: Path) -> None:
    document = _grade(local_backend, attention, case)
    _assert_verdict(document, case, attention)
    root = local_backend.roots[-1]
    assert not root.exists(), f"the run directory {root} was left behind"
    assert _processes_of(root) == [], "processes of the run outlived it"
    _assert_markers(case.local_markers)
    assert _processes_of(root) == [], "processes of the run outlived it"


@pytest.mark.slow
def test_correct_submission_grades_normally_after_hostile_local(
        attention: Assignment, local_backend: _RecordingLocalBackend) -> None:
    document = GradingPipeline(backend=local_backend).grade(
        attention, {"attention.py": CORRECT.read_bytes()}, seed=SEED)
    assert (document["score"], document["diagnoses"]) == (attention.max_score, [])
    assert document["autograde"]["integrity"] == []


# --------------------------------------------------------------------------------------------
# Docker backend (fixtures from tests/sandbox/conftest.py)
# --------------------------------------------------------------------------------------------


def _owned_containers(client: Any, owner: str) -> list[Any]:
    # sparse: no per-container inspect, which races with the pool removing a used container.
    return list(client.containers.list(all=True, sparse=True,
                                       filters={"label": f"org.autograde.owner={owner}"}))


@pytest.mark.docker
@pytest.mark.parametrize("case", _cases("docker"))
def test_hostile_submission_docker(case: HostileCase, attention: Assignment, docker_client: Any,
                                   any_docker_backend: Any, markers: Path,
                                   request: pytest.FixtureRequest) -> None:
    if case.under_gvisor is not None and request.node.callspec.params.get(
            "any_docker_backend") == GVISOR_RUNTIME:
        score, codes = case.under_gvisor
        assert score <= case.score, "gVisor may not grant more than the real outputs deserve"
        case = dataclasses.replace(case, score=score, codes=codes)
    document = _grade(any_docker_backend, attention, case)
    _assert_verdict(document, case, attention)
    _assert_markers(())
    # The run's container is gone: only the warm pool (refilling) may remain.
    deadline = time.monotonic() + 15
    while len(_owned_containers(docker_client, any_docker_backend.owner)) > DOCKER_POOL_SIZE:
        assert time.monotonic() < deadline, "a container of the run was left behind"
        time.sleep(0.2)


@pytest.mark.docker
def test_correct_submission_grades_normally_after_hostile_docker(
        attention: Assignment, any_docker_backend: Any) -> None:
    document = GradingPipeline(backend=any_docker_backend).grade(
        attention, {"attention.py": CORRECT.read_bytes()}, seed=SEED)
    assert (document["score"], document["diagnoses"]) == (attention.max_score, [])
    assert document["autograde"]["integrity"] == []


# --------------------------------------------------------------------------------------------
# Docker backend in its fork-server mode (off by default): the same expectations as runc
# --------------------------------------------------------------------------------------------


class _ForkServersByLimits:
    """Fork-server backends for the suite's two sets of limits (each pool serves one set)."""

    name = "docker"
    isolation = "fork-server mode, default runtime"

    def __init__(self, backends: list[Any]) -> None:
        self.backends = {backend.fork_servers.limits: backend for backend in backends}
        self.details: list[str] = []

    def run(self, job: Job, limits: Limits) -> RunResult:
        result: RunResult = self.backends[limits].run(job, limits)
        self.details.append(result.detail)
        return result

    def close(self) -> None:
        for backend in self.backends.values():
            backend.close()


@pytest.fixture(scope="module")
def fork_servers(docker_client: Any, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[_ForkServersByLimits]:
    from sandbox.docker_backend import DockerBackend, DockerSettings

    limits = load_assignment("attention").limits
    backends = [
        DockerBackend(client=docker_client, settings=DockerSettings(
            mode=FORK_SERVER_MODE, fork_servers=1, pool_limits=pool_limits,
            workdir=tmp_path_factory.mktemp("hostile-fork")))
        for pool_limits in (limits, limits.replace(SHORT_LIMITS))
    ]
    wrapper = _ForkServersByLimits(backends)
    yield wrapper
    wrapper.close()


@pytest.mark.docker
@pytest.mark.parametrize("case", _cases("docker", FORK_SERVER_MODE))
def test_hostile_submission_fork_server(case: HostileCase, attention: Assignment,
                                        docker_client: Any, fork_servers: _ForkServersByLimits,
                                        markers: Path) -> None:
    document = _grade(fork_servers, attention, case)  # type: ignore[arg-type]
    assert fork_servers.details and all(
        detail.startswith("fork server") for detail in fork_servers.details), fork_servers.details
    fork_servers.details.clear()
    _assert_verdict(document, case, attention)
    _assert_markers(())
    for backend in fork_servers.backends.values():  # only its servers (one, or a replacement)
        assert len(_owned_containers(docker_client, backend.owner)) <= 2


@pytest.mark.docker
def test_correct_submission_grades_normally_after_hostile_fork_server(
        attention: Assignment, fork_servers: _ForkServersByLimits) -> None:
    document = GradingPipeline(backend=fork_servers).grade(  # type: ignore[arg-type]
        attention, {"attention.py": CORRECT.read_bytes()}, seed=SEED)
    assert (document["score"], document["diagnoses"]) == (attention.max_score, [])
    assert document["autograde"]["integrity"] == []
