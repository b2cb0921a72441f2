"""The Docker backend against a real engine: hardening, limits, outputs, and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import torch
from safetensors.torch import load

from devkit.sandbox_jobs import ATTENTION, STOP_THE_SUPERVISOR, attention_call, events_of, make_job
from sandbox.base import Limits, RunResult, Termination
from sandbox.docker_backend import DockerBackend, DockerSettings
from sandbox.docker_pool import owner_id, wait_until_ready
from sandbox.docker_sandbox import (
    INIT_USER,
    LABEL_OWNER,
    OUT_MOUNT,
    SANDBOX_USER,
    ContainerSpec,
    SandboxContainer,
)
from sandbox.local import LocalBackend

pytestmark = pytest.mark.docker

# Limits that differ from the warm pool's, so the run starts a cold container.
COLD = Limits(run_seconds=19.0)


def _import_failure(result: RunResult) -> dict[str, Any]:
    """The exception the submission raised at import, as the runner reported it."""
    event = next(e for e in events_of(result.events) if e["event"] == "import")
    assert event["status"] == "raised", event
    exception: dict[str, Any] = event["exception"]
    return exception


def test_container_is_created_with_deny_by_default_settings(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    limits = Limits()
    spec = ContainerSpec(image=DockerSettings().image, owner=owner_id(), workdir=tmp_path)
    sandbox = SandboxContainer(docker_client, spec, limits, label=None, lifetime_seconds=120)
    try:
        sandbox.container.reload()
        attrs = sandbox.container.attrs
    finally:
        sandbox.destroy()
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["Privileged"] is False
    assert host["Init"] is True
    assert host["Memory"] == host["MemorySwap"] == limits.memory_bytes
    assert host["NanoCpus"] == int(limits.cpus * 1e9)
    assert host["PidsLimit"] == limits.max_processes
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]}
    assert ulimits == {
        "nofile": (limits.open_files, limits.open_files),
        "fsize": (limits.file_size_bytes, limits.file_size_bytes),
        "core": (0, 0),
    }
    assert f"size={limits.tmpfs_bytes}" in host["Tmpfs"]["/tmp"]
    assert host["LogConfig"]["Config"]["max-size"]
    assert attrs["Config"]["User"] == INIT_USER != SANDBOX_USER
    assert attrs["Config"]["Labels"][LABEL_OWNER] == spec.owner
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert set(mounts) == {"/job", "/out"}
    assert mounts["/job"]["Type"] == "bind" and mounts["/job"]["RW"] is False
    assert mounts["/job"]["Source"] == str(sandbox.job_dir)
    assert mounts["/out"]["Type"] == "volume"


INSIDE = """
import json, os, socket

def writable(path):
    try:
        with open(path, "w") as handle:
            handle.write("x")
        return True
    except OSError:
        return False

def signals_init():
    try:
        os.kill(1, 0)
        return True
    except OSError:
        return False

def sockets_of(family, kind):
    try:
        socket.socket(family, kind).close()
        return True
    except OSError:
        return False

def connects(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False

status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
raise RuntimeError(json.dumps({
    "uid": os.getuid(),
    "cap_eff": status["CapEff"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "writable": [p for p in ("/evil", "/job/evil", "/usr/evil", "/tmp/ok") if writable(p)],
    "log_writable": [p for p in ("/proc/1/fd/1", "/proc/1/fd/2") if writable(p)],
    "supervisor_reachable": [p for p in (f"/proc/{os.getppid()}/fd/1",
                                         f"/proc/{os.getppid()}/mem") if writable(p)],
    "signals_init": signals_init(),
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "netlink": sockets_of(socket.AF_NETLINK, socket.SOCK_RAW),
    "inet": sockets_of(socket.AF_INET, socket.SOCK_DGRAM),
    "unix": sockets_of(socket.AF_UNIX, socket.SOCK_STREAM),
    "redis": connects("127.0.0.1", 6379),
    "environment": sorted(os.environ),
    "job": sorted(os.listdir("/job")),
}))
"""


def test_student_code_sees_a_locked_down_machine(docker_backend: DockerBackend) -> None:
    result = docker_backend.run(make_job(INSIDE), Limits())
    assert result.termination is Termination.EXITED
    facts = json.loads(_import_failure(result)["message"])
    assert facts["uid"] == 65534
    assert int(facts["cap_eff"], 16) == 0
    assert facts["no_new_privs"] == "1"
    assert facts["writable"] == ["/tmp/ok"]
    assert facts["log_writable"] == []
    assert facts["supervisor_reachable"] == []
    assert facts["signals_init"] is False
    assert facts["interfaces"] == ["lo"]
    # Only unix sockets can be made at all (the runner's socket filter).
    assert (facts["netlink"], facts["inet"], facts["unix"]) == (False, False, True)
    assert facts["redis"] is False
    assert not any("SECRET" in name or "PASSWORD" in name for name in facts["environment"])
    assert facts["job"] == ["inputs.safetensors", "plan.json", "submission"]


def _comparable(raw: bytes) -> list[dict[str, Any]]:
    """Events without their timings, which differ from run to run."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "seconds"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(event) for event in events_of(raw)]


@pytest.mark.parametrize("limits", [Limits(), COLD], ids=["warm", "cold"])
def test_a_normal_job_returns_what_the_local_backend_returns(
    docker_backend: DockerBackend, limits: Limits
) -> None:
    job = make_job(calls=[attention_call("first"), attention_call("second")])
    local = LocalBackend().run(job, limits)
    result = docker_backend.run(job, limits)
    assert result.termination is Termination.EXITED, result.detail
    assert result.exit_code == 0
    assert ("(warm)" in result.detail) == (limits == docker_backend.pool.limits)
    assert _comparable(result.events) == _comparable(local.events)
    assert result.stdout == local.stdout == "hello from the student\n" * 2
    assert result.tensor_files.keys() == local.tensor_files.keys()
    for name, content in result.tensor_files.items():
        ours, theirs = load(content), load(local.tensor_files[name])
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[key], theirs[key]) for key in ours)


def test_the_run_budget_ends_a_spinning_run_and_keeps_finished_calls(
    docker_backend: DockerBackend,
) -> None:
    source = ATTENTION + "\ndef spin(*args):\n    while True:\n        pass\n"
    job = make_job(source, calls=[attention_call("fast"), attention_call("slow", "spin")],
                   call_timeout=60, run_seconds=3)
    result = docker_backend.run(job, Limits(run_seconds=3))
    assert (result.termination, result.exit_code) == (Termination.EXITED, 124)
    events = events_of(result.events)
    assert [(e["event"], e.get("id", e.get("call"))) for e in events
            if e["event"] in {"call", "watchdog"}] == [("call", "fast"), ("watchdog", "slow")]
    assert result.tensor_files


def test_the_wall_clock_deadline_ends_a_run_whose_supervisor_was_stopped(
    docker_backend: DockerBackend,
) -> None:
    source = ATTENTION + STOP_THE_SUPERVISOR
    job = make_job(source, calls=[attention_call("fast"), attention_call("slow", "stop")],
                   run_seconds=2)
    limits = Limits(run_seconds=2)
    # A cold run: the deadline covers starting the interpreter and importing torch too.
    result = docker_backend.run(job, limits)
    assert result.termination is Termination.TIME_LIMIT
    assert limits.deadline_seconds <= result.wall_seconds < limits.deadline_seconds + 2
    calls = [e for e in events_of(result.events) if e["event"] == "call"]
    assert [(c["id"], c["status"]) for c in calls] == [("fast", "ok")]
    assert result.tensor_files


def test_a_memory_bomb_is_reported_as_memory_limit(docker_backend: DockerBackend) -> None:
    source = "import torch\nhog = torch.ones(1 << 28)  # 1 GiB, touched\n"
    result = docker_backend.run(make_job(source), Limits(memory_bytes=256 << 20))
    assert result.termination is Termination.MEMORY_LIMIT


# Children of their own address space each stay under the runner's rlimit, together over the
# container's memory: gVisor's whole sandbox is then killed, and the engine forgets the exec.
FORKED_HOGS = """
import os
for _ in range(6):
    if os.fork() == 0:
        hog = bytearray(150 << 20)
        for i in range(0, len(hog), 4096):
            hog[i] = 1
        os._exit(0)
for _ in range(6):
    os.wait()
"""


def test_a_sandbox_killed_at_its_memory_limit_is_reported_as_memory_limit(
    gvisor_backend: DockerBackend,
) -> None:
    result = gvisor_backend.run(make_job(FORKED_HOGS), Limits(memory_bytes=512 << 20))
    assert result.termination is Termination.MEMORY_LIMIT, result.detail


@contextlib.contextmanager
def _ready_container(client: docker.DockerClient, workdir: Path) -> Iterator[SandboxContainer]:
    """A container of our own whose runner has imported torch and waits for its job."""
    spec = ContainerSpec(image=DockerSettings().image, owner=owner_id(), workdir=workdir)
    sandbox = SandboxContainer(client, spec, Limits(), label="test", lifetime_seconds=120)
    try:
        wait_until_ready(sandbox, 120)
        yield sandbox
    finally:
        sandbox.destroy()


KILL_THE_SUPERVISOR = '''
import os, signal, time

def kill(*args):
    """Kills the runner's supervisor before it can send the output files."""
    time.sleep(0.5)  # the supervisor forwards what came before meanwhile
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(5)
'''


def _volume_reads(sandbox: SandboxContainer) -> list[str]:
    """Counts the engine's archive requests of the container from now on."""
    asked: list[str] = []
    ask = sandbox.container.get_archive

    def counted(path: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(path)
        return ask(path, *args, **kwargs)

    sandbox.container.get_archive = counted  # type: ignore[method-assign]
    return asked


def test_the_output_files_come_on_the_runners_stream(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    job = make_job(calls=[attention_call("first"), attention_call("second")])
    local = LocalBackend().run(job, Limits())
    with _ready_container(docker_client, tmp_path) as sandbox:
        asked = _volume_reads(sandbox)
        result = sandbox.run(job)
    assert result.termination is Termination.EXITED
    assert asked == []  # the engine was not asked for the output volume
    assert sorted(result.tensor_files) == sorted(local.tensor_files) != []
    for name, content in result.tensor_files.items():
        ours, theirs = load(content), load(local.tensor_files[name])
        assert all(torch.equal(ours[key], theirs[key]) for key in ours)


def test_outputs_of_a_runner_killed_before_sending_them_are_read_from_the_volume(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    job = make_job(ATTENTION + KILL_THE_SUPERVISOR,
                   calls=[attention_call("fast"), attention_call("killer", "kill")])
    with _ready_container(docker_client, tmp_path) as sandbox:
        asked = _volume_reads(sandbox)
        result = sandbox.run(job)
    assert result.exit_code == 128 + signal.SIGKILL
    assert asked == [OUT_MOUNT]
    calls = [e for e in events_of(result.events) if e["event"] == "call"]
    assert [(c["id"], c["status"]) for c in calls] == [("fast", "ok")]
    assert [name for name in result.tensor_files] == [calls[0]["tensors"]]


def test_a_container_killed_by_someone_else_is_not_the_students_doing(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    with _ready_container(docker_client, tmp_path) as sandbox:
        killer = threading.Timer(2.0, sandbox.container.kill)
        killer.start()
        with pytest.raises(RuntimeError, match="ended under the runner"):
            sandbox.run(make_job("while True:\n    pass\n"))
        killer.join()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_an_output_flood_is_reported_as_output_limit(
    docker_backend: DockerBackend, stream: str
) -> None:
    source = f"import sys\nwhile True:\n    print('x' * 10000, file=sys.{stream})\n"
    limits = Limits(flood_output_bytes=2 << 20)
    result = docker_backend.run(make_job(source), limits)
    assert result.termination is Termination.OUTPUT_LIMIT
    assert result.wall_seconds < 10
    assert result.output_truncated
    assert len(getattr(result, stream)) == limits.kept_output_bytes


LOG_FLOOD = """
import os
for pid in os.listdir("/proc"):
    for fd in ("1", "2"):
        try:
            target = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY)
        except OSError:
            continue
        if pid not in ("self", "thread-self", str(os.getpid())):
            for _ in range(64):
                os.write(target, b"x" * 65536)
"""


def test_a_flood_of_the_container_log_cannot_start(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    with _ready_container(docker_client, tmp_path) as sandbox:
        result = sandbox.run(make_job(LOG_FLOOD))
        logged = sandbox.container.logs(stdout=True, stderr=True)
    assert result.termination is Termination.EXITED
    assert logged == b""


def test_results_over_the_limit_are_reported_as_output_limit(
    docker_backend: DockerBackend,
) -> None:
    source = ATTENTION + "\ndef huge(*args):\n    return torch.zeros(1 << 20)\n"
    job = make_job(source, calls=[attention_call("huge", "huge")])
    result = docker_backend.run(job, Limits(result_bytes=1 << 20))
    assert result.termination is Termination.OUTPUT_LIMIT
    assert result.tensor_files == {}


def test_links_in_the_output_channel_are_not_followed(
    docker_backend: DockerBackend, tmp_path: Path
) -> None:
    secret = tmp_path / "0000.safetensors"
    secret.write_text("HOST-SECRET")
    source = f"""
import os
os.symlink({str(secret)!r}, "/out/events.jsonl")
os.rmdir("/out/tensors")
os.symlink({str(tmp_path)!r}, "/out/tensors")
os.link("/out/ready", "/out/hard")
os._exit(0)
"""
    result = docker_backend.run(make_job(source), Limits())
    assert result.termination is Termination.EXITED
    assert [e["event"] for e in events_of(result.events)] == ["start", "integrity", "done"]
    assert b"HOST-SECRET" not in result.events
    assert not result.forged_events_file
    assert result.tensor_files == {}
    assert secret.read_text() == "HOST-SECRET"


def test_an_engine_failure_is_a_sandbox_error_and_leaves_nothing(
    make_backend: Callable[..., DockerBackend], docker_client: docker.DockerClient
) -> None:
    backend = make_backend(pool_size=0, runtime="no-such-runtime")
    result = backend.run(make_job(), Limits())
    assert result.termination is Termination.SANDBOX_ERROR
    assert "no-such-runtime" in result.detail
    backend.close()
    assert _left_behind(docker_client, backend) == ([], [], [])


def _left_behind(
    client: docker.DockerClient, backend: DockerBackend
) -> tuple[list[str], list[str], list[str]]:
    """Containers, volumes and input directories of ``backend`` that still exist."""
    selector = {"label": f"{LABEL_OWNER}={backend.owner}"}
    return (
        [c.name for c in client.containers.list(all=True, filters=selector)],
        [v.name for v in client.volumes.list(filters=selector)],
        [p.name for p in backend.settings.workdir.iterdir()],
    )


def test_no_container_volume_or_directory_is_left_behind(
    make_backend: Callable[..., DockerBackend], docker_client: docker.DockerClient
) -> None:
    backend = make_backend(pool_size=1)
    flood = "while True:\n    print('x' * 10000)\n"
    outcomes = [
        backend.run(make_job(), Limits()).termination,
        backend.run(make_job(), COLD).termination,
        backend.run(make_job(STOP_THE_SUPERVISOR + "stop()\n", run_seconds=2),
                    Limits(run_seconds=2)).termination,
        backend.run(make_job(flood), Limits(flood_output_bytes=1 << 20)).termination,
        backend.run(make_job("import os\nos.kill(1, 15)\n"), Limits()).termination,
    ]
    assert outcomes[:4] == [
        Termination.EXITED,
        Termination.EXITED,
        Termination.TIME_LIMIT,
        Termination.OUTPUT_LIMIT,
    ]
    backend.close()
    assert _left_behind(docker_client, backend) == ([], [], [])
