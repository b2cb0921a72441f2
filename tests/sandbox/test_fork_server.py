"""The fork-server mode against a real engine: the same grades and limits as a container per
run, and nothing of one job within reach of the next on the same server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import pytest

from assignments import Assignment
from devkit.sandbox_jobs import ATTENTION, FORK_SERVER_MODE, attention_call, events_of, make_job
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline
from sandbox import Job, Limits, RunResult, SandboxBackend
from sandbox.base import SandboxUnavailable, Termination
from sandbox.docker_backend import DockerBackend, DockerSettings

pytestmark = pytest.mark.docker

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "attention"
SEED = 20240611


class _Recording:
    """A backend that remembers how each of its runs went (which container served it)."""

    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend
        self.name = backend.name
        self.isolation = backend.isolation
        self.details: list[str] = []

    def run(self, job: Job, limits: Limits) -> RunResult:
        result = self._backend.run(job, limits)
        self.details.append(result.detail)
        return result

    def close(self) -> None:
        """The wrapped backend is the fixture's to close."""


@pytest.fixture(scope="module")
def attention() -> Assignment:
    return load_assignment("attention")


@pytest.fixture(scope="module")
def one_server(docker_client: docker.DockerClient,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerBackend]:
    """A fork-server backend with a single server: consecutive jobs share its container."""
    backend = DockerBackend(client=docker_client, settings=DockerSettings(
        mode=FORK_SERVER_MODE, fork_servers=1, workdir=tmp_path_factory.mktemp("one-server")))
    assert backend.fork_servers.wait_until_full(120)
    yield backend
    backend.close()


def _verdict(document: dict[str, Any]) -> tuple[Any, ...]:
    return (
        document["score"],
        [(d["code"], d.get("message")) for d in document["diagnoses"]],
        [(t["number"], t["score"], t["output"]) for t in document["tests"]],
        document["autograde"]["integrity"],
    )


@pytest.mark.parametrize(
    "name", ["correct_matmul.py", "no_scale_matmul.py", "mask_inverted_where.py"])
def test_a_corpus_file_grades_the_same_in_both_modes(
        name: str, attention: Assignment, docker_backend: DockerBackend,
        fork_server_backend: DockerBackend) -> None:
    files = {"attention.py": (CORPUS / name).read_bytes()}
    forked = _Recording(fork_server_backend)
    in_fork_server = GradingPipeline(backend=forked).grade(attention, files, seed=SEED)
    in_container = GradingPipeline(backend=docker_backend).grade(attention, files, seed=SEED)
    assert forked.details and all(d.startswith("fork server") for d in forked.details)
    assert _verdict(in_fork_server) == _verdict(in_container)
    assert (in_fork_server["score"] == attention.max_score) == name.startswith("correct")


# The first job leaves a process of a session of its own behind, writing a file in /tmp and
# its output folder, and files in /tmp, /dev/shm and /dev/mqueue (a POSIX message queue), a
# folder in its output folder that it locked itself out of (mode 0), a link out of it and a
# hard link to a file of root's (where the kernel allows one); it prints a token and raises it
# in every call, so that it passes through the server's relay, and waits until the writer has
# started.
FIRST_JOB = """
import json, os, secrets, sys, time
for path in ("/tmp/first-job-file", "/dev/shm/first-job-file", "/dev/mqueue/first-job-queue"):
    try:
        with open(path, "w") as handle:
            handle.write("first")
    except OSError:
        pass
try:
    os.link("/etc/hostname", os.path.join(sys.argv[2], "root-file"))
except OSError:
    pass
token = "TOK" + "EN-" + secrets.token_hex(16)
print(token, flush=True)
locked = os.path.join(sys.argv[2], "locked")
os.makedirs(os.path.join(locked, "inner"))
open(os.path.join(locked, "inner", "file"), "w").close()
for folder in (os.path.join(locked, "inner"), locked):
    os.chmod(folder, 0)
os.symlink("/etc", os.path.join(sys.argv[2], "link"))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            for path in ("/tmp/first-job-writer", os.path.join(sys.argv[2], "writer")):
                try:
                    with open(path, "a") as handle:
                        handle.write("x")
                except OSError:
                    pass
            time.sleep(0.01)
    os._exit(0)
while not os.path.exists("/tmp/first-job-writer"):
    time.sleep(0.01)
print(json.dumps({"uid": os.getuid(), "out": sys.argv[2], "job": sys.argv[1]}))
""" + ATTENTION + """
def attention(q, k, v, allowed):
    raise RuntimeError(token)  # the message travels in the runner's events
"""

# The second job reports what it can find of the first, in its files and in its own memory,
# a copy of the process it was forked from.
SECOND_JOB = """
import json, os, re
FIRST = json.loads({first!r})

def tokens_in_memory():
    found = set()
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw"):
                continue
            start, end = (int(part, 16) for part in fields[0].split("-"))
            try:
                mem.seek(start)
                found.update(re.findall(rb"TOKEN-[0-9a-f]{{32}}", mem.read(end - start)))
            except (OSError, ValueError, OverflowError):
                pass
    return sorted(token.decode() for token in found)

def attempt(action):
    try:
        return action()
    except OSError as exc:
        return type(exc).__name__

def uids():
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{{entry}}/status") as status:
                    found.update(int(line.split()[1]) for line in status if line.startswith("Uid:"))
            except OSError:
                pass
    return sorted(found)

print(json.dumps({{
    "uid": os.getuid(),
    "tmp": sorted(os.listdir("/tmp")),
    "shm": sorted(os.listdir("/dev/shm")),
    "mqueue": attempt(lambda: sorted(os.listdir("/dev/mqueue"))),
    "tokens": tokens_in_memory(),
    "first_out": attempt(lambda: sorted(os.listdir(FIRST["out"]))),
    "first_job": attempt(lambda: sorted(os.listdir(FIRST["job"]))),
    "uids": uids(),
}}))
""" + ATTENTION


def _report(result: RunResult) -> dict[str, Any]:
    assert result.termination is Termination.EXITED, result.detail
    first_line = result.stdout.splitlines()[0]
    report: dict[str, Any] = json.loads(first_line)
    return report


def _flags(result: RunResult) -> set[str]:
    return {flag["flag"] for event in events_of(result.events) if event["event"] == "integrity"
            for flag in event["flags"]}


def test_a_job_cannot_see_the_files_or_processes_of_the_one_before(
        one_server: DockerBackend) -> None:
    first_result = one_server.run(make_job(FIRST_JOB), Limits())
    token = first_result.stdout.splitlines()[0]
    first = json.loads(first_result.stdout.splitlines()[1])
    assert first_result.termination is Termination.EXITED and token.startswith("TOKEN-")
    # Its writer outlived the last report: the supervisor found it in the job's pid namespace.
    assert "process-survived" in _flags(first_result)
    second_result = one_server.run(make_job(SECOND_JOB.format(first=json.dumps(first))), Limits())
    second = _report(second_result)
    server = first_result.detail.split(",")[0]
    assert second_result.detail.startswith(server) and second_result.detail != first_result.detail
    assert second["uid"] != first["uid"]
    assert second["tokens"] == []  # nothing the first job printed is in the second's memory
    assert second["tmp"] == [] and second["shm"] == [] and second["mqueue"] == []
    assert second["first_out"] == second["first_job"] == "FileNotFoundError"  # wiped
    assert first["uid"] not in second["uids"]  # every process of the first job is dead
    assert second["uid"] in second["uids"]
    assert _flags(second_result) == set()


FORK_UNTIL_REFUSED = """
import os, time
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3600)
        os._exit(0)
""" + ATTENTION

SPIN = ATTENTION + "\ndef spin(*args):\n    while True:\n        pass\n"

# Sparse files at the file-size limit in its tensors folder: more to read than a full output
# volume holds, in almost no space.
SPARSE_OUTPUTS = """
import os, sys
folder = os.path.join(sys.argv[2], "tensors")
for number in range(4):
    with open(os.path.join(folder, f"sparse-{number}"), "wb") as handle:
        handle.truncate(64 << 20)
""" + ATTENTION


@pytest.mark.parametrize(("source", "calls", "timeout", "termination", "statuses"), [
    # No address-space limit in this plan: the container's memory limit ends the bomb. Near it
    # the kernel reclaims (torch's own pages) before it kills, CPU-seconds counted against the
    # import: a budget of 2 s was sometimes spent first, and the watchdog ended the run.
    ("import torch\nhog = torch.ones(1 << 29)  # 2 GiB, touched\n", None, 15,
     Termination.MEMORY_LIMIT, []),
    (FORK_UNTIL_REFUSED, None, 2, Termination.EXITED, ["ok", "ok"]),
    (SPIN, [attention_call("slow", "spin")], 2, Termination.EXITED, ["ok", "timeout"]),
    (SPARSE_OUTPUTS, None, 2, Termination.OUTPUT_LIMIT, ["ok", "ok"]),
], ids=["memory-bomb", "fork-bomb", "infinite-loop", "sparse-outputs"])
def test_a_bomb_ends_as_in_a_container_of_its_own(
        source: str, calls: list[dict[str, Any]] | None, timeout: float,
        termination: Termination, statuses: list[str], one_server: DockerBackend,
        docker_backend: DockerBackend) -> None:
    job = make_job(source, calls=calls, call_timeout=timeout)
    outcomes = []
    details = []
    for backend in (one_server, docker_backend):
        result = backend.run(job, Limits())
        outcomes.append((result.termination,
                         [e["status"] for e in events_of(result.events) if "status" in e]))
        details.append((result.detail, result.exit_code, result.stderr[-500:]))
    assert outcomes[0] == outcomes[1] == (termination, statuses), details
    # The server survived the bomb and runs the next job normally.
    after = one_server.run(make_job(), Limits())
    assert after.termination is Termination.EXITED and after.exit_code == 0
    assert after.stdout == "hello from the student\n"


def test_runs_beyond_the_servers_wait_for_one_instead_of_starting_containers(
        one_server: DockerBackend) -> None:
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: one_server.run(make_job(), Limits()), range(4)))
    assert [r.termination for r in results] == [Termination.EXITED] * 4
    assert all(r.detail.startswith("fork server") for r in results), [r.detail for r in results]


def test_an_unknown_mode_is_refused(docker_client: docker.DockerClient, tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="unknown docker sandbox mode 'forking'"):
        DockerBackend(client=docker_client,
                      settings=DockerSettings(mode="forking", workdir=tmp_path))
