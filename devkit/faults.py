"""The fault harness: private PostgreSQL, Redis and dockerd, the service on them, and each fault
injected under a burst of real submissions, counted as graded, failed and graded twice.

Everything killed or restarted here is a **private** instance started by the harness (a
redis-server on a free port, a PostgreSQL cluster from ``initdb`` in a temporary folder run as
user ``postgres``, a dockerd with its own socket, data-root, exec-root and pidfile, loaded with
the sandbox image by ``docker save | docker -H ... load``): the machine's shared services are
never touched. ``benchmarks/faults.py`` runs the full fault table on it and
``tests/faults/test_faults.py`` a reduced one.

Faults: ``worker-kill`` (kill -9 of the whole worker, then started again as a supervisor
would), ``child-kill`` (kill -9 of the pool process that is grading), ``redis-restart``
(restarted without persistence: its queue is lost), ``postgres-restart``, ``docker-restart``,
``docker-outage`` (the engine stopped for 75 s).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import requests

from devkit.courses import PASSWORD
from devkit.paths import CORPUS
from devkit.stack import Stack, free_port
from sandbox.docker_image import expected_image

FAULTS = ("worker-kill", "child-kill", "redis-restart", "postgres-restart", "docker-restart",
          "docker-outage")
OUTAGE_SECONDS = 75.0
# Real gradings through the sandbox: correct files and known mistakes of the attention lab.
SUBMISSIONS = ("correct_matmul.py", "no_scale_matmul.py", "correct_einsum.py",
               "mask_inverted_where.py", "correct_loops.py", "no_row_check_nan.py")


def _pg_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not found:
        raise RuntimeError(f"PostgreSQL's {name} is not installed")
    return str(found[-1])


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not happen within {timeout:g} s")


def _stop_process(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM,
                  timeout: float = 60) -> None:
    """Stop one process this script started, by its own pid (never by name)."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class PrivateRedis:
    """A redis-server of our own on a free port, without persistence (a restart loses its
    queue: the harder case; production's compose file adds append-only persistence)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.folder / "redis.log", "ab")  # noqa: SIM115 - lives with the process
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(self.answers, 30, "redis-server starting")

    def answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url, socket_connect_timeout=1).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        _stop_process(self.process)


class PrivatePostgres:
    """A PostgreSQL cluster of our own: initdb in a temporary folder, run as user postgres."""

    def __init__(self) -> None:
        # A folder of its own under /tmp: user postgres must reach it, and pytest's temporary
        # folders (/tmp/pytest-of-root, mode 700) are root's only.
        self.folder = Path(tempfile.mkdtemp(prefix="agf-pg-", dir="/tmp"))
        self.data = self.folder / "pgdata"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/autograde"
        self.admin = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *argv: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=120)

    def init(self) -> None:
        self.folder.chmod(0o755)
        self.data.mkdir(mode=0o700)
        shutil.chown(self.data, "postgres", "postgres")
        self._as_postgres(_pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U",
                          "postgres", "--no-sync")
        self.start()
        with psycopg.connect(self.admin, autocommit=True) as admin:
            admin.execute("CREATE DATABASE autograde")

    def _ctl(self, *args: str) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} "
                   "-c fsync=off -c max_connections=200")
        self._as_postgres(_pg_bin("pg_ctl"), "-D", str(self.data), "-l",
                          str(self.data / "server.log"), "-o", options, "-w", *args)

    def start(self) -> None:
        self._ctl("start")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ctl("stop", "-m", "fast")

    def restart(self) -> None:
        self._ctl("restart", "-m", "fast")

    def remove(self) -> None:
        """The cluster's folder gone (after ``stop``)."""
        shutil.rmtree(self.folder, ignore_errors=True)


class PrivateDocker:
    """A dockerd of our own: its own socket, data-root, exec-root, pidfile and configuration,
    no bridge and no iptables changes (sandboxes have no network)."""

    def __init__(self, folder: Path, data_root: Path | None) -> None:
        self.folder = folder
        self.run_dir = Path(tempfile.mkdtemp(prefix="agf-", dir="/tmp"))  # short socket path
        self.data_root = data_root or folder / "docker-data"
        self.host = f"unix://{self.run_dir}/docker.sock"
        self.process: subprocess.Popen[bytes] | None = None
        (self.run_dir / "daemon.json").write_text("{}")

    def start(self) -> None:
        log = open(self.folder / "dockerd.log", "ab")  # noqa: SIM115 - lives with the process
        self.process = subprocess.Popen(
            ["dockerd", "--host", self.host, "--data-root", str(self.data_root),
             "--exec-root", str(self.run_dir / "exec"), "--pidfile",
             str(self.run_dir / "docker.pid"), "--config-file", str(self.run_dir / "daemon.json"),
             "--storage-driver", "overlay2", "--bridge", "none", "--iptables=false",
             "--ip6tables=false", "--cgroup-parent", "autograde-faults"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        _wait(self.answers, 90, "the private dockerd starting")

    def docker(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True,
                              timeout=kwargs.pop("timeout", 60), check=False, **kwargs)

    def answers(self) -> bool:
        try:
            return self.docker("version", timeout=5).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def load_image(self, image: str) -> None:
        if self.docker("image", "inspect", image).returncode == 0:
            return
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "-H", self.host, "load"], stdin=save.stdout,
                              capture_output=True, timeout=900, check=False)
        save.wait()
        if load.returncode != 0 or save.returncode != 0:
            raise RuntimeError(f"could not load {image}: {load.stderr.decode()[-500:]}")

    def stop(self) -> None:
        _stop_process(self.process, timeout=90)

    def containers(self) -> int:
        listed = self.docker("ps", "-aq", "--filter", "label=autograde.role")
        return len(listed.stdout.split())

    def volumes(self) -> int:
        listed = self.docker("volume", "ls", "-q", "--filter", "label=autograde.role")
        return len(listed.stdout.split())


@dataclass
class Row:
    fault: str
    submissions: int
    graded: int = 0
    failed: int = 0
    duplicates: int = 0
    interruptions: int = 0
    recovered_to_last: float = 0.0
    recovered_to_first: float | None = None
    burst_to_last: float = 0.0
    leftover_containers: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def survived(self) -> bool:
        return self.graded == self.submissions and self.failed == 0 and self.duplicates == 0


@dataclass
class Harness:
    """The private services and the service's own processes on them."""

    folder: Path
    redis: PrivateRedis
    postgres: PrivatePostgres
    docker: PrivateDocker
    stack: Stack
    headers: dict[str, str] = field(default_factory=dict)
    concurrency: int = 2

    def start_worker(self) -> None:
        self.stack.start_worker(self.concurrency, beat=True)

    def worker_pid(self) -> int:
        return self.stack.processes["worker"].pid

    def rows(self, ids: list[int]) -> dict[int, tuple[str, int, int]]:
        """status, interruptions and round-1 results of each submission (read directly)."""
        url = self.postgres.url.replace("+psycopg", "")
        with psycopg.connect(url, connect_timeout=3) as connection:
            found = connection.execute(
                "SELECT s.id, s.status, s.interruptions, "
                "(SELECT count(*) FROM results r WHERE r.submission_id = s.id AND r.round = 1) "
                "FROM submissions s WHERE s.id = ANY(%s)", (ids,)).fetchall()
        return {row[0]: (row[1], row[2], row[3]) for row in found}

    def last_result_at(self, ids: list[int]) -> float | None:
        url = self.postgres.url.replace("+psycopg", "")
        with psycopg.connect(url, connect_timeout=3) as connection:
            moment = connection.execute(
                "SELECT extract(epoch FROM max(graded_at)) FROM submissions "
                "WHERE id = ANY(%s)", (ids,)).fetchone()
        return float(moment[0]) if moment and moment[0] is not None else None

    def first_result_after(self, ids: list[int], after: float) -> float | None:
        url = self.postgres.url.replace("+psycopg", "")
        with psycopg.connect(url, connect_timeout=3) as connection:
            moment = connection.execute(
                "SELECT extract(epoch FROM min(graded_at)) FROM submissions "
                "WHERE id = ANY(%s) AND graded_at > to_timestamp(%s)", (ids, after)).fetchone()
        return float(moment[0]) if moment and moment[0] is not None else None

    def burst(self, count: int) -> list[int]:
        files = [(CORPUS / "attention" / name).read_bytes() for name in SUBMISSIONS]

        def post(index: int) -> int:
            response = requests.post(
                f"{self.stack.url}/api/v1/assignments/attention/submissions",
                headers=self.headers, timeout=60,
                files=[("files", ("attention.py", files[index % len(files)]))])
            response.raise_for_status()
            return int(response.json()["id"])

        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(post, range(count)))

    def graded_count(self, ids: list[int]) -> int:
        try:
            return sum(1 for status, _, _ in self.rows(ids).values() if status == "graded")
        except psycopg.OperationalError:
            return 0

    def wait_all_done(self, ids: list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(status in ("graded", "failed")
                       for status, _, _ in self.rows(ids).values()):
                    return
            except psycopg.OperationalError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"not every submission was graded within {timeout:g} s:\n"
                           + self.stack.log("worker")[-3000:])

    # --- the faults: each returns the moment (epoch) the fault ended -----------------------

    def inject(self, fault: str) -> float:
        if fault == "none":
            return time.time()
        if fault == "worker-kill":
            os.killpg(self.worker_pid(), signal.SIGKILL)  # the worker and its pool, like OOM
            self.stack.processes.pop("worker").wait()
            self.start_worker()
            return time.time()
        if fault == "child-kill":
            child = _busiest_child(self.worker_pid())
            os.kill(child, signal.SIGKILL)
            return time.time()
        if fault == "redis-restart":
            self.redis.stop()
            time.sleep(3)
            self.redis.start()
            return time.time()
        if fault == "postgres-restart":
            self.postgres.stop()
            time.sleep(3)
            self.postgres.start()
            return time.time()
        if fault in ("docker-restart", "docker-outage"):
            self.docker.stop()
            time.sleep(OUTAGE_SECONDS if fault == "docker-outage" else 3)
            self.docker.start()
            return time.time()
        raise ValueError(f"unknown fault {fault!r}")

    def run(self, fault: str, count: int, *, timeout: float = 1800) -> Row:
        row = Row(fault, count)
        started = time.time()
        ids = self.burst(count)
        # Strike while the burst is being graded: a few results in, most still waiting.
        with contextlib.suppress(RuntimeError):
            _wait(lambda: self.graded_count(ids) >= min(3, count), 600, "first results")
        recovered = self.inject(fault)
        self.wait_all_done(ids, timeout)
        rows = self.rows(ids)
        row.graded = sum(1 for status, _, _ in rows.values() if status == "graded")
        row.failed = sum(1 for status, _, _ in rows.values() if status == "failed")
        row.duplicates = sum(results - 1 for _, _, results in rows.values() if results > 1)
        row.interruptions = sum(interrupted for _, interrupted, _ in rows.values())
        last = self.last_result_at(ids) or time.time()
        row.recovered_to_last = max(0.0, last - recovered)
        first = self.first_result_after(ids, recovered)
        row.recovered_to_first = None if first is None else first - recovered
        row.burst_to_last = last - started
        time.sleep(5)  # let the sandbox janitor and destroyer catch up
        row.leftover_containers = self.docker.containers()
        return row


def _busiest_child(parent: int) -> int:
    """The pool process of ``parent`` that used the most CPU in the last second (grading)."""
    def children() -> dict[int, int]:
        found = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == parent:
                    found[int(stat.parent.name)] = int(fields[11]) + int(fields[12])
        return found

    before = children()
    time.sleep(1.0)
    after = children()
    if not after:
        raise RuntimeError("the worker has no pool process")
    return max(after, key=lambda pid: after[pid] - before.get(pid, after[pid]))


@contextlib.contextmanager
def harness(folder: Path, *, docker_data: Path | None = None,
            concurrency: int = 2) -> Iterator[Harness]:
    """Private Redis, PostgreSQL and dockerd, the service on them (gunicorn, a Celery worker
    with beat, the Docker sandbox), a course and an instructor; all stopped afterwards."""
    redis = PrivateRedis(folder)
    postgres = PrivatePostgres()
    docker = PrivateDocker(folder, docker_data)
    stack: Stack | None = None
    try:
        redis.start()
        postgres.init()
        docker.start()
        docker.load_image(expected_image())
        port = free_port()
        env = dict(os.environ)
        env.update({
            "AUTOGRADE_DATABASE_URL": postgres.url, "AUTOGRADE_BROKER_URL": redis.url,
            "AUTOGRADE_QUEUE": f"faults-{uuid.uuid4().hex[:8]}",
            "AUTOGRADE_SANDBOX_BACKEND": "docker", "DOCKER_HOST": docker.host,
            "AUTOGRADE_DOCKER_WORKDIR": str(folder / "sandbox-jobs"),
            "AUTOGRADE_SECRET_KEY": uuid.uuid4().hex, "AUTOGRADE_CONFIG_DIR": str(folder),
            "AUTOGRADE_URL": f"http://127.0.0.1:{port}", "PYTHONUNBUFFERED": "1",
        })
        stack = Stack(env=env, url=f"http://127.0.0.1:{port}", logs=folder)
        for args in (["admin", "db", "upgrade"], ["admin", "create-course", "faults"],
                     ["admin", "sync-assignments", "faults"]):
            done = stack.autograde(*args)
            assert done.returncode == 0, done.stderr
        done = stack.autograde("admin", "create-user", "prof", "--role", "instructor",
                               "--password-stdin", stdin=PASSWORD + "\n")
        assert done.returncode == 0, done.stderr
        done = stack.autograde("admin", "enrol", "faults", "prof", "--role", "instructor")
        assert done.returncode == 0, done.stderr
        stack.start_server()
        made = Harness(folder, redis, postgres, docker, stack, concurrency=concurrency)
        made.headers = stack.login("prof")
        made.start_worker()
        yield made
    finally:
        if stack is not None:
            stack.stop_all()
        docker.stop()
        postgres.stop()
        postgres.remove()
        redis.stop()
        shutil.rmtree(docker.run_dir, ignore_errors=True)
