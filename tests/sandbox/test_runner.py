"""The runner's supervisor against its child: reports in order and once, the budgets its own
(counted in CPU time, with the wall clock as their backstop)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from devkit.sandbox_jobs import (
    ATTENTION,
    STOP_THE_SUPERVISOR,
    TYPED_ARGUMENTS,
    attention_call,
    events_of,
    make_job,
    typed_arguments_plan,
)
from sandbox.base import Job, Limits, RunResult, Termination
from sandbox.local import LocalBackend
from sandbox.wire import WALL_SLACK

pytestmark = pytest.mark.slow

FORGER = ATTENTION + '''
import json, os

def forge(*args):
    """Writes reports of its own into every pipe it holds, then answers like attention."""
    for fd in map(int, os.listdir("/proc/self/fd")):
        if fd > 2:
            for event in ({"event": "call", "id": "later", "status": "ok", "stages": []},
                          {"event": "done"}, "not an object"):
                try:
                    os.write(fd, (json.dumps(event) + "\\n").encode())
                except OSError:
                    pass
    return attention(*args)
'''


def test_reports_out_of_order_are_dropped_and_flagged() -> None:
    job = make_job(FORGER, calls=[attention_call("first", "forge"), attention_call("later")])
    result = LocalBackend().run(job, Limits())
    assert result.termination is Termination.EXITED
    events = events_of(result.events)
    calls = [(e["id"], e["status"]) for e in events if e["event"] == "call"]
    assert calls == [("first", "ok"), ("later", "ok")]
    later = next(e for e in events if e.get("id") == "later")
    assert later["stages"], "the forged, empty report was taken for the real one"
    flags = next(e["flags"] for e in events if e["event"] == "integrity")
    assert {flag["flag"] for flag in flags} == {"forged-report"}
    assert [e["event"] for e in events][-1] == "done"


STUBBORN = ATTENTION + '''
import signal

def hang(*args):
    for number, timer in ((signal.SIGALRM, signal.ITIMER_REAL),
                          (signal.SIGPROF, signal.ITIMER_PROF)):
        signal.signal(number, signal.SIG_IGN)
        signal.setitimer(timer, 0)
    while True:
        try:
            pass
        except BaseException:
            pass
'''


def test_the_supervisor_ends_a_call_whose_timer_the_student_disarmed() -> None:
    job = make_job(STUBBORN, call_timeout=1,
                   calls=[attention_call("fast"), attention_call("stuck", "hang"),
                          attention_call("never")])
    result = LocalBackend().run(job, Limits(run_seconds=60))
    assert result.termination is Termination.EXITED
    assert result.exit_code == 124
    events = events_of(result.events)
    assert [(e["event"], e.get("id", e.get("call"))) for e in events
            if e["event"] in {"call", "watchdog"}] == [("call", "fast"), ("watchdog", "stuck")]
    assert result.wall_seconds < 30


# Budgets count the submission's CPU time, with WALL_SLACK times as much wall clock as their
# backstop: a busy machine must not cost a correct submission its score, and a sleeping or
# blocked one must still end.

BUSY = ATTENTION + '''
import time

def busy(*args):
    """Uses 0.6 s of CPU, whatever the wall clock says, then answers like attention."""
    started = time.process_time()
    while time.process_time() - started < 0.6:
        pass
    return attention(*args)

def sleepy(*args):
    time.sleep(1000)

def spin(*args):
    while True:
        pass
'''


@contextlib.contextmanager
def one_busy_core(hogs: int = 2) -> Iterator[None]:
    """This process (and what it starts) confined to one core, shared with ``hogs`` busy
    processes, each in a session (a scheduling group) of its own: a run started inside gets a
    third of a core."""
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    pinned = {"preexec_fn": lambda: os.sched_setaffinity(0, {core}), "start_new_session": True}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], **pinned)  # type: ignore[call-overload]
            for _ in range(hogs)]
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
        for process in busy:
            process.kill()
            process.wait()


def _calls(result: RunResult) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in events_of(result.events) if e["event"] == "call"}


def test_a_call_slowed_by_a_busy_core_keeps_its_whole_cpu_budget() -> None:
    job = make_job(BUSY, call_timeout=1.0, calls=[attention_call("busy", "busy")])
    with one_busy_core():
        result = LocalBackend().run(job, Limits(call_seconds=1.0))
    call = _calls(result)["busy"]
    assert call["status"] == "ok", call
    # The control: on the wall clock the call did overrun its budget (a budget counted there
    # would have ended it).
    assert call["stages"][0]["seconds"] > 1.0


def test_a_call_that_sleeps_ends_at_its_wall_clock_backstop_and_the_run_goes_on() -> None:
    job = make_job(BUSY, call_timeout=0.5,
                   calls=[attention_call("sleepy", "sleepy"), attention_call("after")])
    result = LocalBackend().run(job, Limits(call_seconds=0.5))
    calls = _calls(result)
    assert calls["sleepy"]["status"] == "timeout"
    assert 0.5 * WALL_SLACK <= calls["sleepy"]["stages"][0]["seconds"] < 0.5 * WALL_SLACK + 1.0
    assert calls["after"]["status"] == "ok"


LATE_IMPORT = ATTENTION + '''
import time

def import_late(q, k, v, allowed):
    """Spends nearly all its CPU budget, then imports torch._dynamo (1 CPU-s), then spins."""
    started = time.process_time()
    while time.process_time() - started < 0.85:
        pass
    import torch._dynamo
    while True:
        pass

def after(q, k, v, allowed):
    import torch._dynamo
    torch._dynamo.reset()
    return attention(q, k, v, allowed)
'''


def test_a_time_out_waits_for_a_library_import_to_finish_and_later_calls_can_use_it() -> None:
    """The budget runs out inside the import of a library (torch._dynamo, which torch imports
    lazily): raised there, the time-out would leave a half-made module behind and the next
    call that needs it would fail."""
    job = make_job(LATE_IMPORT, call_timeout=1.0,
                   calls=[attention_call("late", "import_late"), attention_call("after", "after")])
    calls = _calls(LocalBackend().run(job, Limits(call_seconds=1.0)))
    assert calls["late"]["status"] == "timeout", calls["late"]
    assert calls["after"]["status"] == "ok", calls["after"]


def test_the_run_budget_counts_cpu_and_ends_the_run_in_the_call_that_spends_it() -> None:
    job = make_job(BUSY, call_timeout=60, run_seconds=1.5,
                   calls=[attention_call("fast"), attention_call("spin", "spin"),
                          attention_call("never")])
    result = LocalBackend().run(job, Limits(run_seconds=1.5))
    assert (result.termination, result.exit_code) == (Termination.EXITED, 124)
    events = events_of(result.events)
    assert [(e["event"], e.get("id", e.get("call"))) for e in events
            if e["event"] in {"call", "watchdog"}] == [("call", "fast"), ("watchdog", "spin")]


def test_the_host_ends_a_run_whose_supervisor_was_stopped_at_its_wall_clock_deadline() -> None:
    job = make_job(ATTENTION + STOP_THE_SUPERVISOR, run_seconds=1.0,
                   calls=[attention_call("fast"), attention_call("stop", "stop")])
    limits = Limits(run_seconds=1.0)
    result = LocalBackend().run(job, limits)
    assert result.termination is Termination.TIME_LIMIT
    # The run's wall time includes the runner's own start (torch's import), before the deadline.
    assert limits.deadline_seconds <= result.wall_seconds < limits.deadline_seconds + 15
    assert list(_calls(result)) == ["fast"]


def test_a_tuple_argument_reaches_the_submission_as_a_tuple() -> None:
    # The plan travels as JSON, which has no tuple: a correct isinstance(shape, tuple) failed.
    plan = typed_arguments_plan()
    job = Job(files={"shapes.py": TYPED_ARGUMENTS.encode()}, plan_json=plan.runner_json(),
              inputs_safetensors=plan.inputs_safetensors())
    result = LocalBackend().run(job, Limits())
    calls = _calls(result)
    assert calls["typed"]["status"] == "ok", calls["typed"]


LIAR = ATTENTION + '''
class Liar:
    """Claims to be a tuple: ``isinstance`` believes it, the built-in tuple's methods do not."""

    @property
    def __class__(self):
        return tuple

    def __getitem__(self, index):
        raise TypeError("not really a tuple")

    def __len__(self):
        return 2


def lying(q, k, v, allowed):
    out, weights = attention(q, k, v, allowed)
    return out, Liar()


def lying_alone(q, k, v, allowed):
    return Liar()
'''


def test_a_returned_object_that_claims_to_be_a_tuple_is_read_as_what_it_is() -> None:
    job = make_job(LIAR, calls=[attention_call("nested", "lying"),
                                attention_call("alone", "lying_alone"), attention_call("after")])
    result = LocalBackend().run(job, Limits())
    calls = _calls(result)
    assert list(calls) == ["nested", "alone", "after"], result.stderr
    nested = calls["nested"]["stages"][0]["returned"]
    assert nested["kind"] == "tuple"
    assert nested["items"][1] == {"kind": "other", "type": "Liar"}
    assert calls["alone"]["stages"][0]["returned"] == {"kind": "other", "type": "Liar"}
    # the backward of the lone liar has no tensor to start from, and is skipped, not crashed
    assert calls["alone"]["stages"][1]["status"] == "skipped"
    assert calls["after"]["status"] == "ok"


SOCKETS = ATTENTION + '''
import socket

def sockets(q, k, v, allowed):
    """Tries every family it might reach a host with, then says which it could create."""
    made = []
    for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_DGRAM),
                         (40, socket.SOCK_STREAM), (socket.AF_NETLINK, socket.SOCK_RAW),
                         (socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_UNIX, socket.SOCK_STREAM)):
        try:
            socket.socket(family, kind).close()
            made.append(int(family))
        except OSError:
            pass
    try:
        socket.socketpair(socket.AF_INET)
        made.append(-2)
    except OSError:
        pass
    socket.socketpair()[0].close()
    raise RuntimeError(f"made {made}")
'''


def test_student_code_can_create_unix_sockets_only() -> None:
    job = make_job(SOCKETS, calls=[attention_call("sockets", "sockets")])
    result = LocalBackend().run(job, Limits())
    imported = next(e for e in events_of(result.events) if e["event"] == "import")
    assert imported["sockets"] == "unix-only"
    failure = _calls(result)["sockets"]["stages"][0]
    assert failure["exception"]["message"] == f"made {[int(socket.AF_UNIX)]}"


SLEEPER = ATTENTION + '''
import signal, time

def sleeper(*args):
    """Disarms its stage's timers, freezes the clock the runner reads, sleeps past the stage's
    wall-clock backstop but within the sum over the call's stages, then answers correctly."""
    for number, timer in ((signal.SIGALRM, signal.ITIMER_REAL),
                          (signal.SIGPROF, signal.ITIMER_PROF)):
        signal.signal(number, signal.SIG_IGN)
        signal.setitimer(timer, 0)
    frozen = time.monotonic()
    time.monotonic = lambda: frozen
    time.sleep(6)
    return attention(*args)
'''


def test_a_stage_past_its_limits_on_the_supervisors_clocks_is_a_time_out() -> None:
    # One second per stage: a 3 s wall-clock backstop (and the grace) for the forward, however
    # much the call's other stage (its backward) would have been allowed on top.
    job = make_job(SLEEPER, call_timeout=1,
                   calls=[attention_call("slept", "sleeper"), attention_call("after")])
    result = LocalBackend().run(job, Limits(run_seconds=60))
    calls = _calls(result)
    assert calls["slept"]["status"] == "timeout"
    assert calls["after"]["status"] == "ok"
    events = events_of(result.events)
    assert not any(e["event"] == "stage" for e in events)  # markers stay with the supervisor
    flags = [flag for e in events if e["event"] == "integrity" for flag in e["flags"]]
    assert any(flag["flag"] == "stage-overran" and "slept" in flag["evidence"]
               for flag in flags), flags
