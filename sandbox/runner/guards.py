"""The guards of a run: what limits and watches the student's code, and shields the supervisor.

The forbidden-API trap, the per-stage time budget and the address-space cap inside the child,
the integrity watch (what only tampering does, flagged for the instructor), and what keeps the
supervisor out of the student's reach (not dumpable, deaf to the run's signals).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import struct
import sys
import time
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from .executor import CallTimeout
from .shared import WALL_SLACK

# The kernels and helpers the forbidden public APIs dispatch to, by the family named in the
# API's dotted path: a submission that calls one of them directly
# (``torch._scaled_dot_product_flash_attention_for_cpu``, ``torch.ops.aten...``,
# ``torch._C._nn.cross_entropy_loss``) uses the forbidden API as much as one that calls it by
# name.
UNDERLYING_KERNELS = {
    "scaled_dot_product_attention": (
        "scaled_dot_product_attention", "_fused_sdp_choice", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_attention_math_for_mps", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable",
        "_triton_scaled_dot_attention"),
    "MultiheadAttention": (
        "multi_head_attention_forward", "_native_multi_head_attention",
        "_triton_multi_head_attention"),
    # A loss's library paths: what F.cross_entropy, nll_loss and log_softmax dispatch to.
    "cross_entropy": ("cross_entropy", "cross_entropy_loss", "nll_loss", "nll_loss_nd",
                      "nll_loss2d", "nll_loss_forward", "nll_loss2d_forward", "log_softmax",
                      "_log_softmax"),
    "nll_loss": ("nll_loss", "nll_loss_nd", "nll_loss2d", "nll_loss_forward",
                 "nll_loss2d_forward"),
    "log_softmax": ("log_softmax", "_log_softmax", "special_log_softmax"),
    "logsumexp": ("logsumexp", "special_logsumexp"),
}


class ForbiddenTrap(torch.overrides.TorchFunctionMode):
    """Records calls of forbidden APIs while delegating to them (the student is not crashed on).

    Two nets: the listed attributes are wrapped (a method such as ``MultiheadAttention.forward``
    is no torch function), and, as a torch function mode, every torch function the submission
    calls is seen by name, so the forbidden functions and the ATen kernels under them are
    recorded however they were reached (an alias, ``torch.ops.aten``, the original behind a
    wrapper). Inside a wrapped API the mode records nothing more: one call, one name.

    Each name is also sent at once by ``send`` (the witness frames' writer): what the child later
    reports from ``called`` is only its own account, which the student's code can empty.
    """

    def __init__(self, dotted_names: list[str],
                 send: Callable[[str], None] = lambda name: None) -> None:
        super().__init__()
        self.called: set[str] = set()
        self._send = send
        self._inside = 0
        self._kernels: dict[str, str] = {}
        for dotted in dotted_names:
            self._install(dotted)
        # A kernel several APIs share is named by the first listed API of its own name, or else
        # by the first listed API it is under.
        for own_name in (True, False):
            for dotted in dotted_names:
                for kernels in underlying_kernels(dotted):
                    for kernel in kernels:
                        if (kernel == dotted.rsplit(".", 1)[-1]) == own_name:
                            self._kernels.setdefault(kernel, _kernel_path(kernel, dotted))

    def _install(self, dotted: str) -> None:
        owner_path, _, attribute = dotted.rpartition(".")
        owner = _resolve(owner_path)
        if owner is None or not hasattr(owner, attribute):
            return
        original = getattr(owner, attribute)
        trap, send = self, self._send

        def recording(*args: Any, **kwargs: Any) -> Any:
            if not trap._inside:  # the outermost forbidden API is the one the student called
                send(dotted)
                trap.called.add(dotted)
            trap._inside += 1
            try:
                return original(*args, **kwargs)
            finally:
                trap._inside -= 1

        with contextlib.suppress(AttributeError, TypeError):
            setattr(owner, attribute, recording)

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        if not self._inside:
            name = _function_name(func)
            if name in self._kernels:
                self._send(self._kernels[name])
                self.called.add(self._kernels[name])
        return func(*args, **(kwargs or {}))

    def take(self) -> list[str]:
        called = sorted(self.called)
        self.called.clear()
        return called


def underlying_kernels(api: str) -> list[tuple[str, ...]]:
    """The kernel names under a forbidden API (by the family named in its dotted path)."""
    return [kernels for family, kernels in UNDERLYING_KERNELS.items()
            if family in api.split(".")]


def _kernel_path(kernel: str, api: str) -> str:
    """How a kernel is reported: the API itself by its listed name, others where they live."""
    if api.rsplit(".", 1)[-1] == kernel:
        return api
    if kernel == "multi_head_attention_forward":
        return "torch.nn.functional.multi_head_attention_forward"
    return f"torch.{kernel}"


def _function_name(func: Any) -> str:
    """The bare name of a torch function or ATen overload (``aten.x.default`` -> ``x``)."""
    name = getattr(func, "__name__", "")
    if not isinstance(name, str):
        return ""
    overload = getattr(func, "_overloadpacket", None)
    if overload is not None:
        name = str(getattr(overload, "__name__", name))
    return name


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    if not parts or parts[0] != "torch":
        return None
    obj: Any = torch
    for part in parts[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


_BUDGET_SIGNALS = (signal.SIGPROF, signal.SIGALRM)
"""The signals of a stage's budget in the child: CPU time, then the wall-clock backstop."""


class CallBudget:
    """The soft per-stage limit inside the child: SIGPROF when the process has used the budget
    in CPU time, SIGALRM at ``WALL_SLACK`` times it on the wall clock (a stage that sleeps).

    A time-out never lands inside a library's import (torch imports ``torch._dynamo`` lazily,
    for one; the warm-up imports sympy ahead): one raised there would leave a half-made module in
    ``sys.modules`` that fails every later call. It waits for the import to finish, a retry
    every ``_IMPORT_RETRY_SECONDS``; the supervisor's hard limit still bounds the wait.

    The hard limit is the supervisor's, which ``on_stage`` tells each time a stage begins (it
    budgets each stage from its start, a bounded number per call: a child that stops telling
    gets less time, not more). A timer cancelled or a timeout swallowed inside a call is
    noticed here and flagged.
    """

    _TIMERS = ((signal.ITIMER_PROF, 1.0), (signal.ITIMER_REAL, WALL_SLACK))
    _IMPORT_RETRY_SECONDS = 0.02

    def __init__(self, seconds: float, integrity: Integrity, student_dir: str,
                 on_stage: Callable[[], None] = lambda: None) -> None:
        self._seconds = seconds
        self._integrity = integrity
        self._on_stage = on_stage
        self._student_dir = os.path.join(student_dir, "")
        for number in _BUDGET_SIGNALS:
            signal.signal(number, self._alarm)

    def _alarm(self, signum: int, frame: types.FrameType | None) -> None:
        if _inside_library_import(frame, self._student_dir):
            timer = signal.ITIMER_PROF if signum == signal.SIGPROF else signal.ITIMER_REAL
            signal.setitimer(timer, self._IMPORT_RETRY_SECONDS)
            return
        raise CallTimeout()

    def lasting(self, seconds: float) -> CallBudget:
        """This budget with ``seconds`` per stage from now on."""
        self._seconds = seconds
        return self

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        self._on_stage()
        for timer, scale in self._TIMERS:
            signal.setitimer(timer, self._seconds * scale)
        finished = False
        try:
            yield
            finished = True
        finally:
            left = [signal.setitimer(timer, 0)[0] for timer, _ in self._TIMERS]
            if finished and 0 in left:
                self._integrity.flag("timer-changed", "the call's timer was cancelled, or its "
                                     "time-out swallowed, inside the call")


def _inside_library_import(frame: types.FrameType | None, student_dir: str) -> bool:
    """Whether ``frame`` runs inside the import of a module that is not the student's, with
    none of the student's code in between.

    Walking outward from where the signal landed: a frame of the student's files first means
    the student's code is running (a loop at the top level of their module included); a
    module's top level run by ``importlib`` first means a library is being imported.
    """
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(student_dir):
            return False
        caller = frame.f_back
        if (code.co_name == "<module>" and caller is not None
                and caller.f_code.co_filename.startswith("<frozen importlib")):
            return True
        frame = caller
    return False


def call_seconds(call: Mapping[str, Any], default: float) -> float:
    """A call's own budget where the plan gives one (the training probe), else the plan's."""
    seconds = call.get("seconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        return float(seconds)
    return default


def limit_address_space(limit: Any) -> None:
    """Cap this process's address space (soft and hard) before student code runs.

    An allocation past the limit then fails at once with MemoryError, reported as
    memory-limit, where a container's cgroup limit alone lets a memory bomb thrash until the
    deadline. Without privileges the student cannot raise it again.
    """
    if isinstance(limit, int) and limit > 0:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


MAX_INTEGRITY_FLAGS = 32


class Integrity:
    """What only tampering does, noticed inside the child (the student's process).

    Informative only: a determined student can silence it, and no flag ever changes a score.
    The audit hook is installed before the student's code and cannot be removed.
    """

    _WATCHED_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "gc.get_objects",
                                 "gc.get_referrers", "gc.get_referents", "sys.setprofile",
                                 "sys.settrace"})
    _FILE_EVENTS = frozenset({"open", "os.rename", "os.remove", "os.rmdir", "os.symlink",
                              "os.link", "os.truncate", "os.chmod", "os.utime", "shutil.rmtree",
                              "os.mkdir"})
    _HELPERS = ("inspect.py", "traceback.py", "threading.py")

    def __init__(self, out_dir: str, student_files: tuple[str, ...], forbidden: list[str],
                 runner: Mapping[str, tuple[Any, str]]) -> None:
        """``runner``: the runner's own parts the child looks up as it runs, by the label a
        replacement is flagged with: the module (or class) that holds each, and its name."""
        self._out_dir = os.path.realpath(out_dir)
        self._student_files = frozenset(student_files)
        self._flags: list[dict[str, str]] = []
        self._inside = False
        self._where = "import"
        self._traps = {dotted: _resolve(dotted) for dotted in forbidden}
        self._runner = self._runner_parts(runner)
        self._alarms = self._budget_handlers()

    @staticmethod
    def _budget_handlers() -> dict[signal.Signals, Any]:
        return {number: signal.getsignal(number) for number in _BUDGET_SIGNALS}

    def install(self) -> None:
        self._alarms = self._budget_handlers()
        sys.addaudithook(self._audit)

    def at(self, where: str) -> None:
        self._where = where

    def flag(self, name: str, evidence: str) -> None:
        entry = {"flag": name, "evidence": f"{evidence} (during {self._where})"[:300]}
        if entry not in self._flags and len(self._flags) < MAX_INTEGRITY_FLAGS:
            self._flags.append(entry)

    def take(self) -> list[dict[str, str]]:
        """Check what a call may have changed, and hand over the flags raised since last time."""
        for dotted, original in self._traps.items():
            if _resolve(dotted) is not original:
                self.flag("trap-patched", f"{dotted} was replaced")
        for label, (owner, attribute, original) in self._runner.items():
            if getattr(owner, attribute, None) is not original:
                self.flag("runner-patched", f"{label} was replaced")
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        for number, handler in self._alarms.items():
            if signal.getsignal(number) is not handler:
                self.flag("signals-changed", f"the {number.name} handler was replaced")
            if number in blocked:
                self.flag("signals-changed", f"{number.name} was blocked")
        if sys.getprofile() is not None or sys.gettrace() is not None:
            self.flag("profile-hook", "a profile or trace function was installed")
        flags, self._flags = self._flags, []
        return flags

    @staticmethod
    def _runner_parts(runner: Mapping[str, tuple[Any, str]]) -> dict[str, tuple[Any, str, Any]]:
        parts: dict[str, tuple[Any, str, Any]] = {
            label: (owner, attribute, getattr(owner, attribute))
            for label, (owner, attribute) in runner.items()
        }
        parts.update({
            "json.dumps": (json, "dumps", json.dumps),
            "json.encoder.c_make_encoder": (json.encoder, "c_make_encoder",
                                            getattr(json.encoder, "c_make_encoder", None)),
            "json.JSONEncoder.encode": (json.JSONEncoder, "encode", json.JSONEncoder.encode),
            "os.write": (os, "write", os.write),
            "os._exit": (os, "_exit", os._exit),
            "signal.signal": (signal, "signal", signal.signal),
            "signal.setitimer": (signal, "setitimer", signal.setitimer),
            "time.perf_counter": (time, "perf_counter", time.perf_counter),
        })
        return parts

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self._inside or (event not in self._WATCHED_EVENTS and event not in self._FILE_EVENTS):
            return
        self._inside = True
        try:
            if event in self._FILE_EVENTS:
                self._file_event(event, args)
            elif self._from_student():
                self.flag("introspection" if event.startswith(("sys._", "gc.")) else
                          "profile-hook", f"{event} called from the submission")
        except Exception:  # an audit hook must never break the code it watches
            pass
        finally:
            self._inside = False

    def _file_event(self, event: str, args: tuple[Any, ...]) -> None:
        path = args[0] if args else None
        if event == "open" and len(args) > 2:
            mode, flags = args[1], args[2]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            if not writing:
                return
        if isinstance(path, int | bytes) or not path:
            return
        full = os.path.realpath(os.fspath(path))
        if full == self._out_dir or full.startswith(self._out_dir + os.sep):
            self.flag("output-folder-written", f"{event} on {os.path.relpath(full, self._out_dir)}")

    def _from_student(self) -> bool:
        frame: types.FrameType | None = sys._getframe(2)
        for _ in range(4):
            if frame is None:
                return False
            filename = frame.f_code.co_filename
            if filename in self._student_files or os.path.realpath(filename) in self._student_files:
                return True
            if not filename.endswith(self._HELPERS):
                return False
            frame = frame.f_back
        return False


PR_SET_DUMPABLE = 4
SUPERVISOR_IGNORES = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                      signal.SIGUSR2, signal.SIGALRM, signal.SIGPROF, signal.SIGPIPE)


def prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


# Socket families the child may create: AF_UNIX only (what a library's own socketpair needs;
# the run has no network to reach). socket(2) and socketpair(2) of any other family fail with
# EAFNOSUPPORT, as on a kernel built without it: no IP, no AF_VSOCK to a virtual machine's
# host, no netlink or packet sockets, whatever the container runtime's own profile allows.
_AF_UNIX = 1
_EAFNOSUPPORT, _EPERM = 97, 1
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_SOCKET_SYSCALLS = {
    # machine: (audit arch, socket, socketpair, lowest number of another ABI or None)
    "x86_64": (0xC000003E, 41, 53, 0x40000000),
    "aarch64": (0xC00000B7, 198, 199, None),
}


def socket_filter_program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The seccomp BPF program of the socket-family allowlist for ``machine`` (``os.uname()``),
    as (code, jump if true, jump if false, k) instructions; None for an unknown machine.

    A system call of another ABI (32-bit x86, whose ``socketcall`` hides the family in memory,
    or x32) fails with EPERM: a 64-bit interpreter makes none."""
    if machine not in _SOCKET_SYSCALLS:
        return None
    arch, socket_nr, socketpair_nr, other_abi = _SOCKET_SYSCALLS[machine]
    load, jump_eq, jump_ge, ret = 0x20, 0x15, 0x35, 0x06
    allow, refuse_family, refuse_abi = 0x7FFF0000, 0x00050000 | _EAFNOSUPPORT, 0x00050000 | _EPERM
    return [
        (load, 0, 0, 4),                                        # 0: the ABI
        (jump_eq, 0, 8, arch),                                  # 1: another -> 10
        (load, 0, 0, 0),                                        # 2: the call's number
        (jump_ge, 6, 0, other_abi or 0xFFFFFFFF),               # 3: another ABI's -> 10
        (jump_eq, 1, 0, socket_nr),                             # 4: socket -> 6
        (jump_eq, 0, 2, socketpair_nr),                         # 5: neither -> 8
        (load, 0, 0, 16),                                       # 6: the family
        (jump_eq, 0, 1, _AF_UNIX),                              # 7: unix -> 8, else -> 9
        (ret, 0, 0, allow),                                     # 8
        (ret, 0, 0, refuse_family),                             # 9
        (ret, 0, 0, refuse_abi),                                # 10
    ]


def allow_unix_sockets_only() -> bool:
    """Install the socket-family allowlist on this process and its children, for good; False
    where it cannot be (an unknown machine, no seccomp)."""
    return _install_filter(socket_filter_program(os.uname().machine))


# close(2), dup2(2) (x86_64 only), dup3(2) and close_range(2), by machine.
_DESCRIPTOR_SYSCALLS = {
    "x86_64": {"close": 3, "dup2": 33, "dup3": 292, "close_range": 436},
    "aarch64": {"close": 57, "dup3": 24, "close_range": 436},
}


def descriptor_filter_program(machine: str,
                              fds: tuple[int, ...]) -> list[tuple[int, int, int, int]] | None:
    """The seccomp BPF program that keeps descriptors ``fds`` open and in place for good:
    ``close`` of one of them, ``dup2``/``dup3`` onto one and every ``close_range`` fail with
    EPERM (a library that closes a range falls back to closing one by one). None for an
    unknown machine; another ABI's calls are left to the socket filter, which refuses them."""
    if machine not in _DESCRIPTOR_SYSCALLS or not fds:
        return None
    arch = _SOCKET_SYSCALLS[machine][0]
    numbers = _DESCRIPTOR_SYSCALLS[machine]
    load, jump_eq, ret = 0x20, 0x15, 0x06
    allow, refuse = 0x7FFF0000, 0x00050000 | _EPERM
    # Laid out as: the ABI and call checks, then "check arg0", then "check arg1", then the
    # two returns; jumps are counted from the instruction after the jump.
    checks = [("close_range", "refuse"), ("close", "arg0"), ("dup2", "arg1"), ("dup3", "arg1")]
    checks = [(name, target) for name, target in checks if name in numbers]
    head_length = 3 + len(checks) + 1
    block = 1 + len(fds) + 1  # load the argument, compare with each fd, allow
    start = {"arg0": head_length, "arg1": head_length + block}
    refuse_at = head_length + 2 * block
    program: list[tuple[int, int, int, int]] = [
        (load, 0, 0, 4),
        (jump_eq, 0, refuse_at - 3, arch),  # another ABI -> the allow just before refuse
        (load, 0, 0, 0),
    ]
    for name, target in checks:
        here = len(program)
        where = refuse_at if target == "refuse" else start[target]
        program.append((jump_eq, where - here - 1, 0, numbers[name]))
    program.append((ret, 0, 0, allow))
    for offset in (16, 24):  # the low half of the first and of the second argument
        program.append((load, 0, 0, offset))
        for fd in fds:
            here = len(program)
            program.append((jump_eq, refuse_at - here - 1, 0, fd))
        program.append((ret, 0, 0, allow))
    program.append((ret, 0, 0, refuse))
    return program


def protect_descriptors(fds: tuple[int, ...]) -> bool:
    """Keep ``fds`` open and in place in this process and its children, for good (the report
    pipe, which carries the witness frames: the student's code can write on it, never close or
    replace it); False where it cannot be (an unknown machine, no seccomp)."""
    return _install_filter(descriptor_filter_program(os.uname().machine, fds))


def _install_filter(program: list[tuple[int, int, int, int]] | None) -> bool:
    if program is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    filters = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("HxxxxxxQ", len(program), ctypes.addressof(buffer))
    return bool(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog, 0, 0) == 0)
