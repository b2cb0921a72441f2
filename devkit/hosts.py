"""Grading hosts on one machine: each a network namespace of its own with its own host name,
joined to the root namespace by a veth link, reaching the database and the broker through a
TCP relay on the root side of its link; and a private RabbitMQ node to restart.

The services (PostgreSQL, the broker) listen on the root namespace's loopback; a host sees them
only at the root end of its own link (``10.213.<n>.1``), where a relay of this process passes
each connection on to the loopback. What the hosts call out to (a webhook receiver) listens on
``SERVICE_ADDRESS``, one address of the root namespace that every host routes to over its own
link, so that one URL reaches it from every host and from the root namespace alike. Cutting a
host's link (``ip link set ... down``) then cuts that host alone from everything, as a failed
switch port would: its TCP connections stall, nothing is reset. Every namespace, link and
process is this kit's own, removed on exit; the machine's services are never reconfigured or
restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from devkit.paths import REPO
from devkit.stack import _die_with_parent, free_port


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def namespaces_unavailable() -> str | None:
    """Why hosts cannot be made here (not root, no ``ip``), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "iproute2 and util-linux (ip, unshare) are needed"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


SERVICE_ADDRESS = "10.213.0.1"
"""An address of the root namespace, on a veth pair of the kit's own (this machine's kernel has
no dummy links), that each host reaches through its own link's gateway."""


class Relay:
    """A TCP relay in a thread of this process: connections to ``listen`` are passed to
    ``target``."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.listen, self.target = listen, target
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"relay-{listen[0]}:{listen[1]}")
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> None:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._relay, *self.listen), self._loop).result(10)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                with contextlib.suppress(OSError, RuntimeError):
                    sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    def stop(self) -> None:
        """Stop listening, end the connections still relayed (their tasks cancelled, so none
        is left pending) and the thread."""
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


@dataclass
class GradingHost:
    """One grading host: a network namespace named ``namespace`` whose address is ``address``,
    linked to the root namespace's ``gateway``; ``name`` is its host name (its claims say
    ``name:pid``)."""

    name: str
    index: int
    prefix: str
    logs: Path
    block: int = 10
    """The links are ``10.213.<block + index>.0/30``."""
    namespace: str = ""
    gateway: str = ""
    address: str = ""
    root_link: str = ""
    relays: list[Relay] = field(default_factory=list)
    worker: subprocess.Popen[bytes] | None = None

    def create(self) -> None:
        self.namespace = f"{self.prefix}-h{self.index}"
        self.root_link = f"{self.prefix}r{self.index}"
        inner = f"{self.prefix}h{self.index}"
        octet = self.block + self.index
        self.gateway, self.address = f"10.213.{octet}.1", f"10.213.{octet}.2"
        _ip("netns", "add", self.namespace)
        _ip("link", "add", self.root_link, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", self.namespace)
        _ip("addr", "add", f"{self.gateway}/30", "dev", self.root_link)
        _ip("link", "set", self.root_link, "up")
        _ip("netns", "exec", self.namespace, "ip", "addr", "add", f"{self.address}/30",
            "dev", inner)
        _ip("netns", "exec", self.namespace, "ip", "link", "set", inner, "up")
        _ip("netns", "exec", self.namespace, "ip", "link", "set", "lo", "up")
        _ip("netns", "exec", self.namespace, "ip", "route", "add", f"{SERVICE_ADDRESS}/32",
            "via", self.gateway)

    def reach(self, port: int) -> int:
        """A relay on this host's gateway to ``127.0.0.1:port``; the port the host uses."""
        relay = Relay((self.gateway, free_port()), ("127.0.0.1", port))
        relay.start()
        self.relays.append(relay)
        return relay.listen[1]

    def start_worker(self, env: dict[str, str], concurrency: int = 1) -> None:
        """The host's Celery worker, in its namespace under its own host name."""
        log = open(self.logs / f"{self.name}.log", "ab")  # noqa: SIM115 - lives with the process
        boot = ("import os, socket, sys; socket.sethostname(sys.argv[1]); "
                "os.execv(sys.executable, [sys.executable, '-m', 'service.cli', 'worker', "
                "'--concurrency', sys.argv[2]])")
        self.worker = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace, "unshare", "--uts", sys.executable, "-c",
             boot, self.name, str(concurrency)],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
            preexec_fn=_die_with_parent)

    def kill_worker(self) -> None:
        """Every process of the worker killed at once (SIGKILL), as a host losing power."""
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(timeout=30)
        self.worker = None

    def cut(self) -> None:
        """The host's link down: it reaches nothing, and nothing is reset."""
        _ip("link", "set", self.root_link, "down")

    def restore(self) -> None:
        _ip("link", "set", self.root_link, "up")

    def remove(self) -> None:
        """The host gone: its worker killed (a warm shutdown, which waits for the broker and
        its tasks, proves nothing more at the end of a test), its relays, link and namespace
        removed."""
        self.kill_worker()
        for relay in self.relays:
            relay.stop()
        with contextlib.suppress(subprocess.SubprocessError):
            _ip("link", "del", self.root_link)
        with contextlib.suppress(subprocess.SubprocessError):
            _ip("netns", "del", self.namespace)

    def log(self) -> str:
        path = self.logs / f"{self.name}.log"
        return path.read_text(errors="replace")[-5000:] if path.exists() else ""


def _free_block(count: int) -> int:
    """A block of ``count`` link subnets that no link of this machine uses (another run of this
    kit may hold ``10.213.11-12``): the same addresses twice would route one run's hosts into
    the other's relays."""
    shown = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True,
                           check=True, timeout=30).stdout
    used = {int(octet) for octet in re.findall(r"inet 10\.213\.(\d+)\.", shown)}
    for block in range(10, 250 - count, 10):
        if used.isdisjoint(range(block + 1, block + count + 1)):
            return block
    raise RuntimeError("no free 10.213.x subnets for grading hosts")


@contextlib.contextmanager
def grading_hosts(count: int, logs: Path) -> Iterator[list[GradingHost]]:
    """``count`` hosts, named ``grader-1``...; removed, workers and links, on exit; each routes
    to ``SERVICE_ADDRESS`` through its link."""
    prefix = "ag" + uuid.uuid4().hex[:4]
    block = _free_block(count)
    hosts = [GradingHost(name=f"grader-{n}", index=n, prefix=prefix, logs=logs, block=block)
             for n in range(1, count + 1)]
    service_link = f"{prefix}s0"
    try:
        _ip("link", "add", service_link, "type", "veth", "peer", "name", f"{prefix}s1")
        _ip("addr", "add", f"{SERVICE_ADDRESS}/32", "dev", service_link)
        _ip("link", "set", service_link, "up")
        _ip("link", "set", f"{prefix}s1", "up")
        for host in hosts:
            host.create()
        yield hosts
    finally:
        for host in hosts:
            host.remove()
        with contextlib.suppress(subprocess.SubprocessError):
            _ip("link", "del", service_link)


class PrivateRabbit:
    """A RabbitMQ node of our own (its own name, ports, data and log folders) on the loopback;
    guest may log in from there, which is where the relays connect from."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        self.node = f"ag{uuid.uuid4().hex[:8]}@localhost"
        self.process: subprocess.Popen[bytes] | None = None
        (folder / "enabled_plugins").write_text("[].\n")

    def start(self) -> None:
        env = dict(os.environ, RABBITMQ_NODENAME=self.node, RABBITMQ_NODE_PORT=str(self.port),
                   RABBITMQ_DIST_PORT=str(free_port()), RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
                   RABBITMQ_MNESIA_BASE=str(self.folder / "mnesia"),
                   RABBITMQ_LOG_BASE=str(self.folder / "log"),
                   RABBITMQ_ENABLED_PLUGINS_FILE=str(self.folder / "enabled_plugins"),
                   RABBITMQ_CONFIG_FILE=str(self.folder / "none"), HOME=str(self.folder))
        log = open(self.folder / "rabbitmq.log", "ab")  # noqa: SIM115 - lives with the process
        self.process = subprocess.Popen(["/usr/lib/rabbitmq/bin/rabbitmq-server"], env=env,
                                        stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True, preexec_fn=_die_with_parent)
        wait_until(self.answers, 90, "the private RabbitMQ node starting")

    def answers(self) -> bool:
        from kombu.connection import Connection

        try:
            with Connection(self.url, connect_timeout=1) as connection:  # type: ignore[no-untyped-call]
                connection.ensure_connection(max_retries=0)
            return True
        except Exception:
            return False

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def rabbitmq_unavailable() -> str | None:
    if not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists():
        return "rabbitmq-server is not installed"
    return None


def port_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False
