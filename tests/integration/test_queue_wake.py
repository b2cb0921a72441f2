"""The embedded queue's worker is woken by a task sent, and still reads the queue without one.

Real kombu connections on a SQLite queue file, the consumer draining in a thread as a Celery
worker's loop does; the backstop between two reads is made long where the wake is what is
tested, so a task that arrives is one the wake brought.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kombu import Connection, Exchange, Queue

from service import queue_wake
from service.config import celery_settings, load_config
from service.queue_wake import wake_address, wakeable_broker_url, waker

LONG = 60.0
"""A backstop no test waits for: a task delivered sooner was delivered by its wake."""


def _url(tmp_path: Path) -> str:
    return f"sqla+sqlite:///{tmp_path / 'broker.db'}"


STOP = {"stop": True}
"""The message a test consumer is stopped by (with its wake): its wait may be a long one."""


class Consumer:
    """A connection draining one queue in a thread, as a worker's loop does: ``drain_events``
    ``drain_seconds`` at a time (2 s in Celery), each call reading the queue first."""

    def __init__(self, url: str, name: str = "grading", *, interval: float = 1.0,
                 drain_seconds: float = 2.0) -> None:
        self.url, self.name = url, name
        self.connection = Connection(wakeable_broker_url(url))
        self.connection.transport.polling_interval = interval  # its reads without a wake
        self.queue = Queue(name, Exchange(name), routing_key=name)
        self.received: list[tuple[Any, float]] = []
        self._drain_seconds = drain_seconds
        self._stop = threading.Event()
        self._consumer = self.connection.Consumer([self.queue], callbacks=[self._got],
                                                  accept=["json"])
        self._consumer.consume()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _got(self, body: Any, message: Any) -> None:
        if body != STOP:
            self.received.append((body, time.monotonic()))
        message.ack()

    def _drain(self) -> None:
        while not self._stop.is_set():
            try:
                self.connection.drain_events(timeout=self._drain_seconds)
            except TimeoutError:
                continue

    def wait_for(self, count: int, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return len(self.received) >= count

    def close(self) -> None:
        self._stop.set()
        _send(self.url, STOP, self.name)
        address = wake_address(self.url)
        if address is not None:
            waker(address)()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "the consumer did not stop"
        self.connection.release()


@pytest.fixture
def consumer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Consumer]:
    monkeypatch.setattr(queue_wake, "WAKE_BACKSTOP_SECONDS", LONG)
    drained = Consumer(_url(tmp_path), interval=LONG, drain_seconds=LONG)
    assert _eventually(lambda: _bound(wake_address(_url(tmp_path))))
    yield drained
    drained.close()


def _bound(address: bytes | None) -> bool:
    """Whether a worker holds the name, read from the kernel's list of Unix sockets.

    Not by trying to bind it: a probe that holds the name for a moment can take it from the
    worker binding at that moment, which then reads at its interval for good.
    """
    assert address is not None and address.startswith(b"\0")
    name = "@" + address[1:].decode()
    with open("/proc/net/unix", encoding="utf-8", errors="replace") as sockets:
        return any(line.rstrip("\n").endswith(" " + name) for line in sockets)


def _send(url: str, body: dict[str, int], name: str = "grading") -> None:
    with Connection(wakeable_broker_url(url)) as connection:
        connection.Producer().publish(body, exchange=Exchange(name), routing_key=name,
                                      serializer="json", declare=[Queue(name, Exchange(name),
                                                                        routing_key=name)])


def test_a_task_sent_wakes_the_worker_at_once(tmp_path: Path, consumer: Consumer) -> None:
    url = _url(tmp_path)
    address = wake_address(url)
    assert address is not None
    wake = waker(address)
    for n in range(3):
        _send(url, {"n": n})
        wake()
        # The consumer reads the queue without a wake only once a minute.
        assert consumer.wait_for(n + 1, 5.0), "the wake did not reach the worker"
    assert [body for body, _ in consumer.received] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_a_lost_wake_is_made_up_by_the_backstop(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_wake, "WAKE_BACKSTOP_SECONDS", 0.2)
    drained = Consumer(_url(tmp_path))
    try:
        _send(_url(tmp_path), {"n": 1})  # and no wake
        assert drained.wait_for(1, 30.0)
    finally:
        drained.close()


def test_a_second_worker_on_the_queue_reads_it_at_its_interval(
        tmp_path: Path, consumer: Consumer, caplog: pytest.LogCaptureFixture) -> None:
    """The name is the first worker's; another still gets the tasks it takes, by reading."""
    caplog.set_level("INFO", logger="service.queue_wake")
    second = Consumer(_url(tmp_path), name="other")
    try:
        assert _eventually(lambda: "not woken" in caplog.text)
        _send(_url(tmp_path), {"n": 7}, name="other")  # no wake reaches the second
        assert second.wait_for(1, 30.0)
    finally:
        second.close()


def test_a_worker_takes_the_name_once_its_holder_has_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A worker restarted while the old one still held the name is woken once it is gone."""
    caplog.set_level("INFO", logger="service.queue_wake")
    monkeypatch.setattr(queue_wake, "WAKE_BACKSTOP_SECONDS", LONG)
    monkeypatch.setattr(queue_wake, "LISTEN_RETRY_SECONDS", 0.2)
    url = _url(tmp_path)
    old = Consumer(url, interval=LONG)
    assert _eventually(lambda: _bound(wake_address(url)))
    new = Consumer(url, interval=LONG)  # a read each 2 s, when its drain_events call returns
    try:
        assert _eventually(lambda: "not woken" in caplog.text)
        old.close()
        assert _eventually(lambda: "woken on new tasks again" in caplog.text, seconds=15.0)
        address = wake_address(url)
        assert address is not None
        _send(url, {"n": 1})
        waker(address)()
        assert new.wait_for(1, 5.0), "the wake did not reach the new worker"
    finally:
        new.close()


def _eventually(condition: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(condition())


def test_sending_never_binds_the_worker_s_name(tmp_path: Path) -> None:
    """A process that only sends (the web) leaves the name to the worker."""
    url = _url(tmp_path)
    for n in range(2):
        _send(url, {"n": n})
    assert not _bound(wake_address(url))


def test_a_wake_with_no_worker_is_harmless(tmp_path: Path) -> None:
    address = wake_address(_url(tmp_path))
    assert address is not None
    waker(address)()  # nobody listening: no error, no wait


def test_celery_is_given_this_transport_for_the_embedded_queue_only(tmp_path: Path) -> None:
    embedded = celery_settings({**load_config(), "BROKER_URL": _url(tmp_path)})
    assert embedded["broker_url"].startswith("sqlawake+sqlite:///")
    redis = celery_settings({**load_config(), "BROKER_URL": "redis://127.0.0.1:6379/3"})
    assert redis["broker_url"] == "redis://127.0.0.1:6379/3"
    assert "task_default_queue_type" not in redis


def test_rabbitmq_gets_quorum_queues_confirms_and_heartbeats() -> None:
    rabbit = celery_settings({**load_config(), "BROKER_URL": "amqp://guest:guest@mq:5672//"})
    assert rabbit["task_default_queue_type"] == "quorum"
    assert rabbit["broker_transport_options"] == {"confirm_publish": True}
    assert rabbit["broker_heartbeat"] == 10 and rabbit["task_acks_late"] is True


@given(st.text(alphabet=st.characters(blacklist_characters="\0/?#", min_codepoint=33),
               min_size=1, max_size=200))
def test_every_sqlite_queue_file_has_a_short_name_of_its_own(stem: str) -> None:
    """Unix socket names are at most 107 bytes; two queue files never share one."""
    first = wake_address(f"sqla+sqlite:////srv/{stem}/broker.db")
    second = wake_address(f"sqlawake+sqlite:////srv/{stem}/broker2.db")
    assert first is not None and second is not None
    assert first != second and len(first) <= 107 and first.startswith(b"\0")
    assert wake_address(f"sqlite:////srv/{stem}/broker.db") == first


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "sqla+postgresql://u@h/db",
                                 "sqla+sqlite://", "not a url", "sqla+sqlite:///:memory:"])
def test_other_brokers_have_no_worker_to_wake(url: str) -> None:
    assert wake_address(url) is None
