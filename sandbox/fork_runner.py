"""The fork server: inside one long-lived sandbox container, it runs each job in an isolated child.

Part of the fork-server mode of the Docker backend (``sandbox.fork_server`` is the host side;
see docs/operators/fork-server.md). The server imports torch once and warms it up, then
serves jobs one at a time, numbered 0, 1, 2, ... from the container's start:

1. It waits until the host has moved the directory ``JOBS_DIR/N`` in (plan, inputs and
   submission, laid out by ``sandbox.outputs.write_job``), copies it into ``OUT_DIR/N/job``
   and makes ``OUT_DIR/N/out`` for the outputs, both owned by the job's own uid and readable by
   no one else.
2. It forks a keeper that isolates itself before any student code exists: a fresh uid and gid
   of its own (no supplementary groups), rlimits equal to the per-container limits, new user,
   mount, pid, network, IPC and UTS namespaces, private tmpfs mounts over ``/tmp`` and
   ``/dev/shm``, the host's input directory hidden, no capabilities, no new privileges and a
   seccomp filter against further namespaces, mounts and tracing. The keeper forks the pid
   namespace's init, which runs the probe runner's ``main`` unchanged: supervisor and student
   child, the same event stream and safetensors files as in a container of its own. When the
   init ends, the kernel kills every process left in its namespace.
3. It relays the job's stream to its own standard output (the exec stream the host reads) in
   frames only it writes, ``KIND N LENGTH\\n`` followed by LENGTH bytes: ``O`` the probe
   runner's stream, ``R`` the runner's own standard error, ``T`` the output files as a tar
   (``L`` if they were cut at their limit), ``E`` the exit status at the end.
   A file ``JOBS_DIR/N/kill`` from the host ends the job at once (its deadline or a flood).
4. Once ``E`` is sent, the host has all it reads of the job; the server kills any process of
   the job's uid still alive and wipes its directory while the host compares, before it
   looks for the next job.

The container runs the server as its root with only the capabilities this needs (set user and
group ids, chown, kill); it never runs student code. Standard library and the probe runner only.

Usage (inside the sandbox)::

    fork_runner.py JOBS_DIR OUT_DIR SETTINGS_JSON
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import runpy
import select
import shutil
import signal
import struct
import sys
import time
import traceback
from collections.abc import Iterator, Mapping
from typing import Any

# The probe runner's package, loaded as its script loads it (``runner/__main__.py``): from the
# folder next to this file, without putting that folder on ``sys.path``.
RUNNER_ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner", "__main__.py")
_ENTRY = runpy.run_path(RUNNER_ENTRY)
runner_boot = _ENTRY["load_boot"]()
runner_shared, runner_stream, runner_supervisor = (
    importlib.import_module(f"{_ENTRY['PACKAGE']}.{name}")
    for name in ("shared", "stream", "supervisor"))

KILL_FILE = "kill"
_LIBC = ctypes.CDLL(None, use_errno=True)

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
NAMESPACES = (_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC
              | _CLONE_NEWUTS)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REC, _MS_PRIVATE = 0x4000, 0x40000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_LAST_CAPABILITY = 63
_SETPRIV = "/usr/bin/setpriv"
FRAME_BYTES = 1 << 20
"""Most bytes in one frame of output files (the host refuses larger frames)."""
_KILL_CHECK_SECONDS = 0.02
_DRAIN_SECONDS = 2.0
_SETUP_FAILED = 71
_MQUEUE = "/dev/mqueue"

# x86_64 system calls the job may not make: more namespaces, mounts, tracing, kernel keyrings,
# BPF, perf, userfaultfd, io_uring, the new mount API (their attack surface, not their use).
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_NR_CLONE = 56
_NR_CLONE3 = 435
_DENIED_SYSCALLS = (
    101,  # ptrace
    155, 161, 165, 166,  # pivot_root, chroot, mount, umount2
    248, 249, 250,  # add_key, request_key, keyctl
    272, 308,  # unshare, setns
    298, 310, 311, 312,  # perf_event_open, process_vm_readv, process_vm_writev, kcmp
    321, 323,  # bpf, userfaultfd
    425, 426, 427,  # io_uring_setup, io_uring_enter, io_uring_register
    428, 429, 430, 431, 432, 433, 442,  # open_tree .. fspick, mount_setattr
)
_ERRNO_EPERM, _ERRNO_ENOSYS = 1, 38


def main(argv: list[str]) -> None:
    jobs_dir, out_dir, settings = argv[0], argv[1], json.loads(argv[2])
    stream = os.dup(1)  # the exec stream: nothing but frames goes there
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    _prctl(_PR_SET_DUMPABLE, 0)
    for ignored in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(ignored, signal.SIG_IGN)
    runner_boot.torch.set_num_threads(1)
    runner_boot.warm_up(ahead=True)
    open(os.path.join(out_dir, "ready"), "w").close()
    number = 0
    while True:
        job_dir = os.path.join(jobs_dir, str(number))
        runner_boot.wait_for(job_dir, float(settings["wait_poll_seconds"]))
        manager = os.fork()
        if manager == 0:
            _manage(number, job_dir, out_dir, settings, stream)
        _, status = os.waitpid(manager, 0)
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            # The job was not seen to its end and wiped: no later job may run beside its rest.
            if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != _MANAGER_WIPE_FAILED:
                _send(stream, b"E", number, str(_SETUP_FAILED).encode())
            sys.exit(f"job {number} was not wiped")
        number += 1


_MANAGER_WIPE_FAILED = 3


def _manage(number: int, job_dir: str, out_dir: str, settings: Mapping[str, Any],
            stream: int) -> None:
    """One job from start to wipe, in a process of its own forked from the server (never
    returns). Everything of the job that passes through a process (its copy, its stream, its
    output files) passes through this one, which exits: the server, whose fork every later job
    starts from, never holds a byte of any job."""
    uid = int(settings["uid_base"]) + number
    root = os.path.join(out_dir, str(number))
    try:
        status = _serve(job_dir, root, uid, settings, stream)
        _send(stream, b"E", number, str(status).encode())
    except BaseException:
        with contextlib.suppress(BaseException):
            os.write(2, traceback.format_exc().encode()[-4000:])
        os._exit(1)
    try:
        _wipe(uid, root)  # the outputs went on the stream: wiped while the host compares them
    except BaseException:
        with contextlib.suppress(BaseException):
            os.write(2, traceback.format_exc().encode()[-4000:])
        os._exit(_MANAGER_WIPE_FAILED)
    os._exit(0)


def _serve(job_dir: str, root: str, uid: int, settings: Mapping[str, Any], stream: int) -> int:
    """Run one job in its own keeper, relaying its output; the keeper's exit status."""
    os.mkdir(root, 0o700)
    shutil.copytree(job_dir, os.path.join(root, "job"), ignore=shutil.ignore_patterns(KILL_FILE))
    os.makedirs(os.path.join(root, "out", runner_shared.TENSORS_DIR))
    for folder, _, files in os.walk(root, topdown=False):  # a folder once all in it is done
        for name in [*(os.path.join(folder, entry) for entry in files), folder]:
            os.chown(name, uid, uid)
    channel_read, channel_write = os.pipe()
    error_read, error_write = os.pipe()
    keeper = os.fork()
    if keeper == 0:
        try:
            os.dup2(channel_write, 1)
            os.dup2(error_write, 2)
            os.closerange(3, 1 << 16)
            _keeper(root, uid, settings)
        except BaseException:
            with contextlib.suppress(BaseException):
                os.write(2, traceback.format_exc().encode()[-4000:])
        os._exit(_SETUP_FAILED)
    os.close(channel_write)
    os.close(error_write)
    number = int(os.path.basename(root))
    kill_file = os.path.join(job_dir, KILL_FILE)
    kinds = {channel_read: b"O", error_read: b"R"}
    keeper_ended = os.pidfd_open(keeper)  # readable once the keeper has exited: no polling
    status: int | None = None
    drained_by = float("inf")
    next_check = 0.0
    while kinds or status is None:
        waited = [*kinds, keeper_ended] if status is None else [*kinds]
        ready, _, _ = select.select(waited, [], [], _KILL_CHECK_SECONDS)
        for fd in ready:
            if fd == keeper_ended:
                _, wait_status = os.waitpid(keeper, 0)
                status = runner_supervisor.exit_status(wait_status)
                drained_by = time.monotonic() + _DRAIN_SECONDS
                continue
            chunk = os.read(fd, 65536)
            if chunk:
                _send(stream, kinds[fd], number, chunk)
            else:
                os.close(fd)
                del kinds[fd]
        if status is None and time.monotonic() >= next_check:
            next_check = time.monotonic() + _KILL_CHECK_SECONDS
            if os.path.exists(kill_file):
                with contextlib.suppress(OSError):
                    os.kill(keeper, signal.SIGKILL)
        if time.monotonic() > drained_by:
            break  # a descriptor held past the namespace's end: the job is over regardless
    os.close(keeper_ended)
    for fd in kinds:
        os.close(fd)
    with _file_access_of(uid):  # its folder is its own (mode 0700), the server has no override
        _send_outputs(stream, number, os.path.join(root, "out"), int(settings["out_bytes"]))
    return status if status is not None else 70


def _send_outputs(stream: int, number: int, out: str, budget: int) -> None:
    """Send the job's output files to the host as a tar in frames T, then frame L if the files
    were more than ``budget`` bytes (``runner.stream.write_outputs_tar``: what is sent and how
    the job's files are opened). The server holds one file and one frame at a time."""
    frames = runner_stream.FramedFile(lambda data: _send(stream, b"T", number, data), FRAME_BYTES)
    with frames:
        cut = runner_stream.write_outputs_tar(frames, out, budget)
    if cut:
        _send(stream, b"L", number, b"")


@contextlib.contextmanager
def _file_access_of(uid: int) -> Iterator[None]:
    """Open files as ``uid`` (the file-system ids only: the server keeps its other rights)."""
    for change in (_LIBC.setfsgid, _LIBC.setfsuid):
        change(uid)
    if _LIBC.setfsuid(uid) != uid:  # it returns the id before the call
        raise OSError(f"setfsuid({uid}) refused")
    try:
        yield
    finally:
        for change in (_LIBC.setfsuid, _LIBC.setfsgid):
            change(0)
        if _LIBC.setfsuid(0) != 0:
            sys.exit("the server could not take back its own file-system ids")


def _keeper(root: str, uid: int, settings: Mapping[str, Any]) -> None:
    """Isolate this process, then fork the job's init and wait for it (never returns)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    with open("/proc/self/oom_score_adj", "w") as adjust:  # the job, not the server, is killed
        adjust.write("1000")
    for limit, value in ((resource.RLIMIT_NOFILE, settings["open_files"]),
                         (resource.RLIMIT_FSIZE, settings["file_size_bytes"]),
                         (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_NPROC, settings["max_processes"]),
                         (resource.RLIMIT_CPU, settings["cpu_seconds"])):
        resource.setrlimit(limit, (int(value), int(value)))
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # every capability of the container's root is gone here
    _prctl(_PR_SET_DUMPABLE, 1)  # /proc/self must be ours to write the namespace's maps
    _check(_LIBC.unshare(NAMESPACES), "unshare")
    for name, content in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                          ("gid_map", f"{uid} {uid} 1")):
        with open(f"/proc/self/{name}", "w") as mapping:
            mapping.write(content)
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
    private = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    for target in ("/tmp", "/dev/shm"):
        _mount("tmpfs", target, "tmpfs", private,
               f"size={int(settings['tmpfs_bytes'])},mode=1777")
    if os.path.isdir(_MQUEUE):
        # The container's /dev/mqueue shows the container's message queues, which outlive a
        # job: the job's own IPC namespace's queues are mounted there instead, gone with it.
        try:
            _mount("mqueue", _MQUEUE, "mqueue", private, None)
        except OSError:  # a runtime without mqueue: nothing to write there at all
            _mount("tmpfs", _MQUEUE, "tmpfs", private | _MS_RDONLY, "size=4k,mode=0555")
    _mount("tmpfs", settings["jobs_mount"], "tmpfs", private | _MS_RDONLY, "size=4k,mode=0555")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _drop_capabilities()
    _install_seccomp()
    _prctl(_PR_SET_DUMPABLE, 0)
    alive_read, alive_write = os.pipe()  # at its end the keeper is gone
    init = os.fork()
    if init == 0:  # pid 1 of the job's namespace: the probe runner, as in a container of its own
        os.close(alive_write)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if select.select([alive_read], [], [], 0)[0]:  # the keeper died before that
            os._exit(_SETUP_FAILED)
        os.close(alive_read)
        os.chdir("/tmp")
        job, out = os.path.join(root, "job"), os.path.join(root, "out")
        sys.argv = [RUNNER_ENTRY, job, out, "--sole-user", "--warm"]
        runner_boot.main(sys.argv[1:])
        os._exit(70)
    os.close(alive_read)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    _, status = os.waitpid(init, 0)
    os._exit(runner_supervisor.exit_status(status))


def _wipe(uid: int, root: str) -> None:
    """Kill what is left of a job's uid and remove its directory; exit if either fails."""
    for _ in range(50):
        left = _processes_of(uid)
        if not left:
            break
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    else:
        sys.exit(f"processes of uid {uid} survive SIGKILL")
    # As the job's uid, whose files they all are whatever modes it gave them; spawned, not
    # forked: a fork of this process (torch imported) costs far more CPU than a spawn.
    cleaner = os.posix_spawn(_SETPRIV, [
        _SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
        # chmod's errors do not stop the removal: a file that is not the job's own (a hard
        # link to one of root's) cannot be changed, and need not be to be unlinked.
        "/bin/sh", "-c", 'chmod -R u+rwx -- "$1" 2>/dev/null; exec find "$1" -mindepth 1 -delete',
        "sh", root,
    ], {"PATH": "/usr/bin:/bin"}, file_actions=[
        (os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)])
    os.waitpid(cleaner, 0)
    os.rmdir(root)  # fails, and ends the server, if the cleaner left anything


def _processes_of(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError), open(f"/proc/{entry}/status", "rb") as status:
            for line in status:
                if line.startswith(b"Uid:"):
                    if int(line.split()[1]) == uid:
                        found.append(int(entry))
                    break
    return found


def _send(stream: int, kind: bytes, number: int, payload: bytes) -> None:
    frame = memoryview(kind + f" {number} {len(payload)}\n".encode() + payload)
    while frame:
        frame = frame[os.write(stream, frame):]


def _prctl(option: int, value: int) -> None:
    _check(_LIBC.prctl(option, value, 0, 0, 0), f"prctl {option}")


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, kind: str | None, flags: int,
           options: str | None) -> None:
    def encode(value: str | None) -> bytes | None:
        return value.encode() if value is not None else None

    _check(_LIBC.mount(encode(source), encode(target), encode(kind), ctypes.c_ulong(flags),
                       encode(options)), f"mount {target}")


def _drop_capabilities() -> None:
    """No capability left, not even those of the job's own user namespace."""
    for capability in range(_LAST_CAPABILITY + 1):
        if _LIBC.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break  # past the kernel's last capability
    header = struct.pack("II", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = bytes(24)  # effective, permitted, inheritable: all empty, both 32-bit halves
    _check(_LIBC.capset(header, data), "capset")


def _install_seccomp() -> None:
    """A filter that refuses the calls of ``_DENIED_SYSCALLS``, namespace flags in ``clone``
    and ``clone3`` altogether (with ENOSYS, so the C library falls back to ``clone``)."""
    load, jump_eq, jump_ge, jump_set, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000
    program: list[tuple[int, int, int, int]] = [
        (load, 0, 0, 4),  # arch
        (jump_eq, 1, 0, _AUDIT_ARCH_X86_64),
        (ret, 0, 0, kill),
        (load, 0, 0, 0),  # nr
    ]
    # Jumps are filled in once the positions of the three verdicts at the end are known.
    pending: list[tuple[int, int, str]] = []
    program.append((jump_ge, 0, 0, _X32_SYSCALL_BIT))
    pending.append((len(program) - 1, jump_ge, "eperm"))
    for number in _DENIED_SYSCALLS:
        program.append((jump_eq, 0, 0, number))
        pending.append((len(program) - 1, jump_eq, "eperm"))
    program.append((jump_eq, 0, 0, _NR_CLONE3))
    pending.append((len(program) - 1, jump_eq, "enosys"))
    program.append((jump_eq, 0, 2, _NR_CLONE))  # not clone: on to "allow"
    program.append((load, 0, 0, 16))  # clone's flags (low half of the first argument)
    program.append((jump_set, 0, 0, NAMESPACES))
    pending.append((len(program) - 1, jump_set, "eperm"))
    verdicts = {"allow": len(program), "eperm": len(program) + 1, "enosys": len(program) + 2}
    program += [(ret, 0, 0, allow), (ret, 0, 0, 0x00050000 | _ERRNO_EPERM),
                (ret, 0, 0, 0x00050000 | _ERRNO_ENOSYS)]
    for index, code, target in pending:
        program[index] = (code, verdicts[target] - index - 1, 0, program[index][3])
    # the last clone test falls through to "allow" when no namespace flag is set
    filters = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("HxxxxxxQ", len(program), ctypes.addressof(buffer))
    _check(_LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog, 0, 0), "seccomp")


if __name__ == "__main__":
    main(sys.argv[1:])
