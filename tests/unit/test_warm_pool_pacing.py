"""The warm pool's readiness checks: seldom while a refill is nobody's wait (each is a round trip
through the engine), at once and often when a run waits for the container."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from sandbox.base import Limits
from sandbox.docker_pool import IDLE_READY_POLL_SECONDS, WarmPool
from sandbox.docker_sandbox import SandboxContainer


class FakeContainer:
    """Becomes ready once ``ready`` is set; counts how often it was asked."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.checks = 0
        self.name = "fake"
        self.deadline = time.time() + 3600
        self.output = type("Output", (), {"closed": threading.Event()})()

    def is_ready(self) -> bool:
        self.checks += 1
        return self.ready.is_set()


def _pool(container: FakeContainer, starter: ThreadPoolExecutor) -> WarmPool:
    return WarmPool(lambda: cast(SandboxContainer, container), size=1, limits=Limits(),
                    starter=starter, discard=lambda _sandbox: None)


def test_a_refill_nobody_waits_for_is_checked_seldom() -> None:
    container = FakeContainer()
    with ThreadPoolExecutor(1) as starter:
        pool = _pool(container, starter)
        pool.fill()
        time.sleep(2.5 * IDLE_READY_POLL_SECONDS)
        # At the busy pace (every 0.05 s) this would be about 50 checks.
        assert container.checks <= 5
        container.ready.set()
        assert pool.wait_until_full(10 * IDLE_READY_POLL_SECONDS)
        pool.close()


def test_a_run_waiting_for_a_starting_container_gets_it_once_ready() -> None:
    container = FakeContainer()
    with ThreadPoolExecutor(1) as starter:
        pool = _pool(container, starter)
        pool.fill()
        taken: list[Any] = []
        taker = threading.Thread(target=lambda: taken.append(pool.take(Limits())))
        taker.start()
        time.sleep(0.3)
        before = container.checks
        time.sleep(1.0)
        # About 20 at the busy pace; at most one at the idle pace.
        assert container.checks - before >= 3
        container.ready.set()
        taker.join(10)
        assert taken == [container]
        pool.close()


def test_each_grading_process_keeps_two_ready_and_the_worker_starts_one_per_core(
        monkeypatch: Any) -> None:
    from service.tasks import share_warm_pool

    variables = ("AUTOGRADE_DOCKER_POOL_SIZE", "AUTOGRADE_DOCKER_STARTERS",
                 "AUTOGRADE_DOCKER_FORK_SERVERS")

    def shared(cores: int, processes: int) -> tuple[str, ...]:
        for name in variables:
            monkeypatch.setenv(name, "")  # restored (removed) afterwards
            monkeypatch.delenv(name)
        monkeypatch.setattr("os.cpu_count", lambda: cores)
        share_warm_pool(options={"concurrency": processes})
        return tuple(os.environ[name] for name in variables)

    # (ready per process, started at a time per process, fork servers per process)
    assert shared(2, 2) == ("2", "1", "1")  # two started at a time on two cores
    assert shared(8, 2) == ("4", "4", "4")
    assert shared(4, 8) == ("2", "1", "1")
    monkeypatch.setenv("AUTOGRADE_DOCKER_POOL_SIZE", "3")
    share_warm_pool(options={"concurrency": 8})
    assert os.environ["AUTOGRADE_DOCKER_POOL_SIZE"] == "3"  # an explicit setting stands


def test_runs_waiting_together_do_not_wake_each_other_in_a_loop() -> None:
    container = FakeContainer()
    with ThreadPoolExecutor(1) as starter:
        pool = _pool(container, starter)
        pool.fill()
        takers = [threading.Thread(target=pool.take, args=(Limits(),)) for _ in range(2)]
        for taker in takers:
            taker.start()
        time.sleep(0.2)
        cpu = time.process_time()
        time.sleep(1.0)
        assert time.process_time() - cpu < 0.5  # a wake-up loop between them burns a core
        pool.close()
        container.ready.set()
        for taker in takers:
            taker.join(10)


def test_a_pool_for_one_run_starts_its_container_at_once_and_none_after_it() -> None:
    starts: list[FakeContainer] = []

    def start() -> SandboxContainer:
        container = FakeContainer()
        container.ready.set()
        starts.append(container)
        return cast(SandboxContainer, container)

    with ThreadPoolExecutor(1) as starter:
        pool = WarmPool(start, size=1, limits=Limits(), starter=starter,
                        discard=lambda _sandbox: None, refill=False)
        pool.fill()
        assert pool.take(Limits()) is starts[0]
        time.sleep(0.2)
        # A second run would start cold: the one-run pool keeps nothing in reserve.
        assert pool.take(Limits()) is None
        assert len(starts) == 1
        pool.close()
