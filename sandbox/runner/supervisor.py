"""The supervisor: the runner's process that forks the child, checks its reports, and streams them.

The supervisor reads the job and forks the child, which imports the submission and runs the
calls. The child reports each call over a pipe; the supervisor checks each report against
the plan (the next call's id, once), pins its tensor file by SHA-256 and streams it to the
host on its standard output, which the child does not hold. The supervisor is not dumpable,
so no process of the student's (same user, no capabilities) can ptrace it or open its
/proc/PID/mem or /proc/PID/fd: what the host reads on that stream is the first and only copy
of each report, and nothing the child does afterwards rewrites it. The supervisor also keeps
the per-call budget by its own clock and ends the child past it, whatever the child did to
its own signals and timers.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import select
import signal
import stat
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .guards import (
    MAX_INTEGRITY_FLAGS,
    PR_SET_DUMPABLE,
    SUPERVISOR_IGNORES,
    call_seconds,
    prctl,
)
from .shared import TENSORS_DIR, WALL_SLACK, WIRE
from .stream import Channel, send_outputs
from .witness import MAX_NAMES, InputArena, split_frames

# Grace after a call's budget before the supervisor ends the child: the soft limit (the
# child's own timers) lets the runner carry on with the next call, the hard one does not need
# the student's cooperation.
WATCHDOG_GRACE_SECONDS = 1.0
# How often the supervisor reads the child's CPU clock while it waits for a report.
_CPU_POLL_SECONDS = 0.05


STDOUT_FRAME_PREFIX: bytes = WIRE.STDOUT_FRAME_PREFIX
STDERR_FRAME_PREFIX: bytes = WIRE.STDERR_FRAME_PREFIX


REPORT_LINE_LIMIT = 1 << 20
TENSOR_FILE_LIMIT = 256 << 20


class _Reports:
    """Reads the child's report lines, each within a deadline and a size cap."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self.closed = False

    def next_line(self, deadline: float) -> bytes | None:
        """The next line; None at the deadline or once the child closed its end."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                return line
            if self.closed or len(self._buffer) > REPORT_LINE_LIMIT:
                self.closed = True
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if ready:
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    self.closed = True
                self._buffer += chunk


class _Flags:
    """Integrity flags: what only tampering does, with its evidence, for the instructor."""

    def __init__(self) -> None:
        self.flags: list[dict[str, str]] = []

    def add(self, flag: str, evidence: str) -> None:
        entry = {"flag": flag[:40], "evidence": evidence[:300]}
        if entry not in self.flags and len(self.flags) < MAX_INTEGRITY_FLAGS:
            self.flags.append(entry)

    def take_from(self, record: Mapping[str, Any]) -> None:
        """Flags the child reported about itself (informative: the child is the student's)."""
        reported = record.get("integrity")
        if isinstance(reported, list):
            for item in reported[:MAX_INTEGRITY_FLAGS]:
                if isinstance(item, dict) and isinstance(item.get("flag"), str):
                    self.add(item["flag"], str(item.get("evidence", "")))


class Child:
    """The forked process that runs the student's code; it reports on ``reports``."""

    def __init__(self, run: Callable[[int], None], *, channel_fd: int) -> None:
        report_read, report_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        stderr_read, stderr_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                # A fork copies every descriptor: the channel's must not stay in this process.
                for fd in (channel_fd, report_read, stdout_read, stderr_read):
                    os.close(fd)
                os.dup2(stdout_write, 1)
                os.dup2(stderr_write, 2)
                os.close(stdout_write)
                os.close(stderr_write)
                os.setpgid(0, 0)
                prctl(PR_SET_DUMPABLE, 1)
                for number in SUPERVISOR_IGNORES:
                    signal.signal(number, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGPIPE, signal.SIG_IGN)
                run(report_write)
            finally:
                os._exit(70)
        os.close(report_write)
        os.close(stdout_write)
        os.close(stderr_write)
        self.pid = pid
        self.reports = _Reports(report_read)
        self.outputs = {STDOUT_FRAME_PREFIX: stdout_read, STDERR_FRAME_PREFIX: stderr_read}
        self.status: int | None = None

    def wait(self, seconds: float) -> int | None:
        """Reap the child within ``seconds``; its wait status, or None if it still runs."""
        until = time.monotonic() + seconds
        while self.status is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.status = status
                    break
            if time.monotonic() > until:
                return None
            time.sleep(0.005)
        return self.status

    def kill(self) -> None:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                kill(self.pid, signal.SIGKILL)
        self.wait(5.0)


def _relay(fd: int, prefix: bytes, channel: Channel) -> None:
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 65536):
            channel.send_output(prefix, chunk)


def _stage_count(call: Mapping[str, Any]) -> int:
    """Budgeted stages of a call: init and setup, then each forward and its backward."""
    if "init" in call:
        return 2 + 2 * len(call.get("forward", []))
    return 2 if "backward" in call else 1


class _ChildClock:
    """The child's CPU time, read from outside it: what its budgets count.

    Waiting for a core on a busy machine does not advance it, so a loaded host never costs the
    student; nor does a virtual machine's steal time, where the kernel accounts for it
    (``CONFIG_PARAVIRT_TIME_ACCOUNTING``, as on these machines). Where the clock cannot be read
    (a kernel without per-process CPU clocks) the wall clock stands in.
    """

    def __init__(self, pid: int) -> None:
        self._clock = _process_cpu_clock(pid)
        self._last = 0.0

    def seconds(self) -> float:
        """CPU seconds the child has used (its last reading once it is gone)."""
        if self._clock is None:
            return time.monotonic()
        with contextlib.suppress(OSError):  # the child ended: its last reading stands
            self._last = time.clock_gettime(self._clock)
        return self._last


def _process_cpu_clock(pid: int) -> int | None:
    """The clock id of a process's CPU time (``clock_getcpuclockid``), if it can be read."""
    clock = ctypes.c_int()
    try:
        if ctypes.CDLL(None, use_errno=True).clock_getcpuclockid(pid, ctypes.byref(clock)):
            return None
        time.clock_gettime(clock.value)
    except (OSError, AttributeError):
        return None
    return clock.value


class _Allowance:
    """A budget from now: CPU seconds of the child, with ``WALL_SLACK`` times as much wall
    clock as the backstop for a child that sleeps or blocks."""

    def __init__(self, clock: _ChildClock, cpu_until: float, wall_until: float) -> None:
        self._clock = clock
        self.cpu_until = cpu_until
        self.wall_until = wall_until

    @classmethod
    def starting(cls, clock: _ChildClock, seconds: float) -> _Allowance:
        return cls(clock, clock.seconds() + seconds, time.monotonic() + seconds * WALL_SLACK)

    def sooner(self, other: _Allowance) -> _Allowance:
        """The allowance that ends at whichever of the two limits comes first, on each clock."""
        return _Allowance(self._clock, min(self.cpu_until, other.cpu_until),
                          min(self.wall_until, other.wall_until))

    def used_up(self) -> bool:
        return (time.monotonic() >= self.wall_until
                or self._clock.seconds() >= self.cpu_until)


class _StageClock:
    """The stages of one call as the supervisor times them: each from its marker to the next
    marker or the call's report, on the child's CPU clock and the wall clock."""

    def __init__(self, clock: _ChildClock, seconds: float) -> None:
        self._clock = clock
        self._cpu_limit = seconds + WATCHDOG_GRACE_SECONDS
        self._wall_limit = seconds * WALL_SLACK + WATCHDOG_GRACE_SECONDS
        self._cpu, self._wall = clock.seconds(), time.monotonic()
        self.overran: str | None = None
        """How the first stage past its limits overran them (None: none did)."""

    def next(self) -> None:
        """End the current stage and start the next one."""
        cpu, wall = self._clock.seconds(), time.monotonic()
        used_cpu, used_wall = cpu - self._cpu, wall - self._wall
        if self.overran is None and (used_cpu > self._cpu_limit or used_wall > self._wall_limit):
            self.overran = f"{used_cpu:.1f} s of CPU and {used_wall:.1f} s on the wall clock"
        self._cpu, self._wall = cpu, wall


class Supervisor:
    """Checks the child's reports against the plan and streams them to the host."""

    def __init__(self, channel: Channel, plan: Mapping[str, Any], out_dir: str,
                 *, sole_user: bool, send_outputs: int | None = None,
                 arena: InputArena | None = None) -> None:
        self.channel = channel
        self.arena = arena
        self.plan = plan
        self.out_dir = out_dir
        self.sole_user = sole_user
        self.send_outputs = send_outputs
        self.flags = _Flags()
        self.budget = float(plan["call_timeout"])
        self.run_budget = float(plan["run_seconds"])
        self.pinned: set[str] = set()
        self.sent: list[str] = []
        """Forbidden APIs the trap sent since the last report, in the order they came."""

    def run(self, child: Child) -> int:
        """Supervise the child to its end; the exit status the runner should end with."""
        started = time.perf_counter()
        relays = [threading.Thread(target=_relay, args=(fd, prefix, self.channel), daemon=True)
                  for prefix, fd in child.outputs.items()]
        for relay in relays:
            relay.start()
        overran, call_id = self._follow(child)
        if overran:
            self.channel.send({"event": "watchdog", "call": call_id})
            child.kill()
        # Survivors go before the child is reaped: one waiting for the child's end to rewrite
        # the outputs never sees it.
        self._end_survivors(child.pid)
        status = child.wait(2.0)
        if status is None:
            child.kill()
            status = child.status
        self._end_survivors(child.pid)
        self._check_outputs()
        for relay in relays:
            relay.join(timeout=0.5)
        if self.flags.flags:
            self.channel.send({"event": "integrity", "flags": self.flags.flags})
        code = 124 if overran else exit_status(status)
        self.channel.send({"event": "done", "probes_seconds": time.perf_counter() - started})
        if self.send_outputs is not None:  # once no process of the run can change them
            send_outputs(self.channel, self.out_dir, self.send_outputs, code)
        return code

    def _follow(self, child: Child) -> tuple[bool, str | None]:
        """Forward the reports in the plan's order until the child ends or overruns.

        Returns whether it overran a budget (its call's or the run's), and in which call (None:
        in the import).
        """
        clock = _ChildClock(child.pid)
        run = _Allowance.starting(clock, self.run_budget)
        event = self._expect(child, "import", None, run, clock, self.budget,
                             stages=1)
        if event is None:
            return not child.reports.closed, None
        self.channel.send(event)
        if event.get("status") != "ok":
            return False, None
        for call in self.plan["calls"]:
            record = self._expect(child, "call", call["id"], run, clock,
                                  call_seconds(call, self.budget), stages=_stage_count(call))
            if record is None:
                return not child.reports.closed, call["id"]
            self._pin_tensors(record)
            self.channel.send(record)
        return False, None

    def _expect(self, child: Child, kind: str, call_id: str | None, run: _Allowance,
                clock: _ChildClock, seconds: float, *, stages: int) -> dict[str, Any] | None:
        """The child's next report of ``kind`` (for ``call_id``), within the run's allowance
        and the call's (``seconds`` for each of its ``stages``, and the grace).

        The child sends a marker as each stage begins (at most ``stages`` count): the time
        from one to the next, or to the report, is the stage's on this process's clocks. A
        stage past its limits (``seconds`` of CPU time, ``WALL_SLACK`` times as much on the
        wall clock, with the grace) makes the report a time-out, whatever the child did to its
        own timers and clocks, and is flagged. A child that sends no markers has its whole
        call judged as one stage.

        Anything else the child sends meanwhile is not what the runner sends: it is dropped
        and flagged, and the first report that fits is the one kept.
        """
        allowance = run.sooner(_Allowance.starting(clock, seconds * stages
                                                   + WATCHDOG_GRACE_SECONDS))
        stage = _StageClock(clock, seconds)
        started = 0
        while True:
            line = child.reports.next_line(
                min(allowance.wall_until, time.monotonic() + _CPU_POLL_SECONDS))
            if line is None:
                if child.reports.closed or allowance.used_up():
                    return None
                continue
            before, names = split_frames(line)
            if names:
                for name in names:  # a fake name only adds to the calls it is charged to
                    if name not in self.sent and len(self.sent) < MAX_NAMES:
                        self.sent.append(name)
                if before:
                    self.flags.add("forged-report", "bytes before a witness frame")
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                self.flags.add("forged-report", "a report that is not JSON")
                continue
            if not isinstance(event, dict):
                self.flags.add("forged-report", "a report that is not an object")
                continue
            if event.get("event") == "stage" and len(event) == 1:
                started += 1
                if started <= stages:
                    stage.next()
                    continue
            self.flags.take_from(event)
            event.pop("integrity", None)
            if event.get("event") == kind and (call_id is None or event.get("id") == call_id):
                self._witness(event, call_id)
                stage.next()
                if stage.overran is not None:
                    self.flags.add("stage-overran", f"{kind} {call_id or ''}".strip()
                                   + f": a stage took {stage.overran}")
                    if event.get("status") in ("ok", "raised"):
                        event["status"] = "timeout"
                return event
            self.flags.add("forged-report", f"an unexpected {str(event.get('event'))[:20]!r} "
                           f"report while waiting for {kind} {call_id or ''}".strip())

    def _witness(self, event: dict[str, Any], call_id: str | None) -> None:
        """Add to a report what this process established itself: the forbidden APIs the trap
        sent before it (to the child's own list, which can only grow), and for a call the
        input slots whose bytes changed (what the child says of them is dropped)."""
        sent, self.sent = self.sent, []
        if sent:
            claimed = event.get("forbidden")
            claimed = [name for name in claimed if isinstance(name, str)] \
                if isinstance(claimed, list) else []
            event["forbidden"] = list(dict.fromkeys([*sent, *claimed]))
        event.pop("inputs_changed", None)
        if call_id is not None and self.arena is not None:
            changed = self.arena.changed(call_id)
            if changed:
                event["inputs_changed"] = changed

    def _pin_tensors(self, record: dict[str, Any]) -> None:
        """Record the SHA-256 of the call's tensor file as it is now: a later rewrite shows."""
        name = record.get("tensors")
        if name is None:
            return
        digest = (_file_digest(os.path.join(self.out_dir, name))
                  if isinstance(name, str) and _is_tensor_name(name) and name not in self.pinned
                  else None)
        if digest is None:
            record.pop("tensors", None)
            record["tensors_error"] = "the tensor file could not be read back"
            return
        self.pinned.add(name)
        record["sha256"] = digest

    def _end_survivors(self, child_pid: int) -> None:
        """Kill (and flag) the run's processes other than the child, once its reports ended."""
        survivors = _survivors(self.sole_user, child_pid)
        if survivors:
            self.flags.add("process-survived",
                           "process(es) of the submission outlived its last report")
            for pid in survivors:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _check_outputs(self) -> None:
        """Flag files in the output folder that no report named."""
        strays = _stray_outputs(self.out_dir, self.pinned)
        if strays:
            self.flags.add("output-folder-written", "unexpected files in the output folder: "
                           + ", ".join(strays[:8]))


def exit_status(status: int | None) -> int:
    if status is None:
        return 70
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70


def _is_tensor_name(name: str) -> bool:
    folder, _, file = name.partition("/")
    return folder == TENSORS_DIR and len(file) == 16 and file[:4].isdigit() \
        and file.endswith(".safetensors")


def _file_digest(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > TENSOR_FILE_LIMIT:
            return None
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def _survivors(sole_user: bool, child_pid: int) -> list[int]:
    """This user's processes other than the supervisor: in a container of its own
    (``sole_user``) all of them, elsewhere those of the supervisor's session.

    Pids are the supervisor's own: where ``/proc`` belongs to an outer pid namespace than the
    supervisor's (the fork-server mode, whose jobs cannot mount their own), each entry is
    translated by its ``NSpid`` line, and processes outside the supervisor's namespace are
    not the run's.
    """
    me, uid, session = os.getpid(), os.getuid(), os.getsid(0)
    depth = len(_namespace_pids("self"))
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            pids = _namespace_pids(entry)
            if len(pids) != depth or pids[-1] in (me, child_pid):
                continue
            if not sole_user and os.getsid(pids[-1]) != session:
                continue
        except OSError:
            continue
        found.append(pids[-1])
    return found


def _namespace_pids(entry: str) -> list[int]:
    """A process's pid in each pid namespace from that of ``/proc`` down to its own."""
    with open(f"/proc/{entry}/status", "rb") as status:
        for line in status:
            if line.startswith(b"NSpid:"):
                return [int(value) for value in line.split()[1:]]
    return [os.getpid() if entry == "self" else int(entry)]  # a kernel without NSpid


def _stray_outputs(out_dir: str, pinned: set[str]) -> list[str]:
    strays = [name for name in sorted(os.listdir(out_dir)) if name not in {"ready", TENSORS_DIR}]
    tensors_dir = os.path.join(out_dir, TENSORS_DIR)
    if os.path.isdir(tensors_dir) and not os.path.islink(tensors_dir):
        strays += [f"{TENSORS_DIR}/{name}" for name in sorted(os.listdir(tensors_dir))
                   if f"{TENSORS_DIR}/{name}" not in pinned]
    return strays

