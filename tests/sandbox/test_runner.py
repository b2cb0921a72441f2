"""The runner's supervisor against its child: reports in order and once, the budget its own."""

from __future__ import annotations

import pytest

from sandbox.base import Limits, Termination
from sandbox.local import LocalBackend
from tests.sandbox.sandbox_jobs import ATTENTION, attention_call, events_of, make_job

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
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_REAL, 0)
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
    result = LocalBackend().run(job, Limits(wall_seconds=60))
    assert result.termination is Termination.EXITED
    assert result.exit_code == 124
    events = events_of(result.events)
    assert [(e["event"], e.get("id", e.get("call"))) for e in events
            if e["event"] in {"call", "watchdog"}] == [("call", "fast"), ("watchdog", "stuck")]
    assert result.wall_seconds < 30
