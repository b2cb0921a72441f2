"""The fork server's seccomp filter for jobs: what it refuses, and what a job still may do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SANDBOX = Path(__file__).resolve().parents[2] / "sandbox"

# Runs in a process of its own: a seccomp filter cannot be removed once installed.
PROBE = """
import ctypes, errno, json, os, sys, threading
sys.path.insert(0, sys.argv[1])
import fork_runner
libc = ctypes.CDLL(None, use_errno=True)

def call(function, *args):
    result = function(*args)
    return 0 if result == 0 else ctypes.get_errno()

fork_runner._prctl(fork_runner._PR_SET_NO_NEW_PRIVS, 1)
fork_runner._install_seccomp()
report = {
    "unshare_user": call(libc.unshare, fork_runner._CLONE_NEWUSER),
    "unshare_net": call(libc.unshare, fork_runner._CLONE_NEWNET),
    "mount": call(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None),
    "ptrace": call(libc.ptrace, 16, os.getppid(), 0, 0),
    "clone3": call(libc.syscall, fork_runner._NR_CLONE3, None, 0),
    "clone_newpid": call(libc.syscall, fork_runner._NR_CLONE,
                         fork_runner._CLONE_NEWPID | 17, None, None, None, None),
}
pid = os.fork()
if pid == 0:
    os._exit(7)
report["fork_status"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
worker = threading.Thread(target=lambda: report.setdefault("thread", "ran"))
worker.start()
worker.join()
report["write"] = os.write(1, b"") == 0
print(json.dumps(report))
"""


def test_the_job_filter_refuses_namespaces_mounts_and_tracing_but_not_forks_or_threads() -> None:
    done = subprocess.run([sys.executable, "-I", "-c", PROBE, str(SANDBOX)],
                          capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(done.stdout.splitlines()[-1])
    eperm, enosys = 1, 38
    assert report == {
        "unshare_user": eperm, "unshare_net": eperm, "mount": eperm, "ptrace": eperm,
        "clone3": enosys, "clone_newpid": eperm,
        "fork_status": 7, "thread": "ran", "write": True,
    }
