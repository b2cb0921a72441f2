"""The embedded queue's worker, woken when a task is sent instead of finding it at its next read.

The embedded default's queue is a table in SQLite (kombu's SQL transport), which a worker reads
again and again while it is empty, at its polling interval: a long interval adds to every
submission's wait, and a short one costs an idle worker CPU all the time. Here the worker
waits on a Unix datagram socket between two reads instead. Every process that sends a task
(the web, the worker, beat) sends a datagram after it (``after_task_publish``), and the worker
reads the queue at once. A datagram is only a hint that something may be there: one that
is lost (no worker yet, a full socket buffer) is made up by the read every
``WAKE_BACKSTOP_SECONDS``, and one for nothing costs a read.

The socket is in Linux's abstract namespace (no file to clean up), named after the queue's
database file. Where there is none (another OS), or another worker on the same queue holds the
name, the worker reads the queue at its polling interval (``service.tasks.PollQueueOften``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import select
import socket
import sys
import time
from collections.abc import Callable
from queue import Empty
from typing import Any

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import sqlalchemy as sql_transport

log = logging.getLogger(__name__)

SCHEME = "sqlawake"
"""kombu's name of this transport, in the broker URL given to Celery (``sqlawake+sqlite:///``)."""
TRANSPORT_ALIASES[SCHEME] = f"{__name__}:Transport"

WAKE_BACKSTOP_SECONDS = 1.0
LISTEN_RETRY_SECONDS = 30.0
"""How often a worker that could not take the name tries again (its holder may have ended: a
worker restarted while the old one was still shutting down)."""
SQLITE_FILE = "sqlite:///"


def wakeable_broker_url(url: str) -> str:
    """Celery's broker URL for ours: a SQLite queue through this transport, others as they are."""
    prefix = "sqla+sqlite:"
    return f"{SCHEME}+sqlite:{url[len(prefix):]}" if url.startswith(prefix) else url


def wake_address(broker_url: str) -> bytes | None:
    """The abstract socket name of a SQLite queue's worker (``sqla+`` or ours, or the bare
    ``sqlite:`` URL kombu hands the transport); None for any other broker or OS."""
    if not sys.platform.startswith("linux"):
        return None
    bare = broker_url.removeprefix("sqla+").removeprefix(f"{SCHEME}+")
    if not bare.startswith(SQLITE_FILE):
        return None
    database = bare[len(SQLITE_FILE):].partition("?")[0]
    if database in ("", ":memory:"):
        return None
    try:
        resolved = os.path.realpath(database)
    except (UnicodeEncodeError, ValueError):  # a name no file system holds: hash it as given
        resolved = database
    path = resolved.encode("utf-8", "surrogatepass")
    return b"\0autograde-queue-" + hashlib.sha256(path).hexdigest()[:32].encode()


def waker(address: bytes) -> Callable[..., None]:
    """What a sending process calls after each task sent (a signal handler) to wake the worker
    listening at ``address``. Never blocks and never raises."""
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sender.setblocking(False)

    def wake(**_: Any) -> None:
        # No worker listening, or its buffer full: it reads the queue on its own soon.
        with contextlib.suppress(OSError):
            sender.sendto(b"!", address)

    return wake


class Transport(sql_transport.Transport):
    """kombu's SQL transport whose wait between two reads of an empty queue ends when a
    datagram arrives (see the module)."""

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)  # type: ignore[no-untyped-call]
        self._address = wake_address(str(client.hostname or ""))
        self._listener: socket.socket | None = None
        self._next_listen_try = 0.0  # monotonic; none before the first wait
        self._told_not_listening = False

    def drain_events(  # type: ignore[override]  # as kombu's virtual transport has it
            self, connection: Any, timeout: Any = None) -> None:
        """kombu's loop (``virtual.Transport.drain_events``) with the pause a wait for a wake."""
        assert self.cycle is not None  # made with the transport's first channel
        listener = self._listen()
        started = time.monotonic()
        while True:
            try:
                self.cycle.get(self._deliver, timeout=timeout)  # type: ignore[no-untyped-call]
                return
            except Empty:
                waited = time.monotonic() - started
                if timeout is not None and waited >= timeout:
                    raise TimeoutError from None
                pause = WAKE_BACKSTOP_SECONDS if listener is not None else self.polling_interval
                if timeout is not None:
                    pause = min(pause, timeout - waited)
                if listener is None:
                    time.sleep(pause)
                else:
                    _wait_for_wake(listener, pause)

    def _listen(self) -> socket.socket | None:
        """The wake socket, bound on the first wait of a consuming process (a process that only
        sends never binds it); None while it cannot be had, tried again now and then."""
        if self._listener is not None or self._address is None:
            return self._listener
        now = time.monotonic()
        if now < self._next_listen_try:
            return None
        self._next_listen_try = now + LISTEN_RETRY_SECONDS
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            listener.bind(self._address)
        except OSError as exc:
            listener.close()
            if not self._told_not_listening:
                self._told_not_listening = True
                log.info("queue: not woken on new tasks (%s); reading it every %.1f s",
                         exc.strerror or type(exc).__name__, self.polling_interval)
            return None
        if self._told_not_listening:
            self._told_not_listening = False
            log.info("queue: woken on new tasks again")
        listener.setblocking(False)
        self._listener = listener
        return listener

    def close_connection(self, connection: Any) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener, self._next_listen_try = None, 0.0
        super().close_connection(connection)  # type: ignore[no-untyped-call]


def _wait_for_wake(listener: socket.socket, seconds: float) -> None:
    """Up to ``seconds``, less when a datagram comes; every datagram waiting is consumed (one
    read of the queue answers them all)."""
    readable, _, _ = select.select([listener], [], [], max(seconds, 0.0))
    if not readable:
        return
    while True:
        try:
            listener.recv(64)
        except BlockingIOError:
            return
