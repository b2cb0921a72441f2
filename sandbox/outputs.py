"""Moving a job into a sandbox and its raw outputs out, with size caps and no links followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sandbox import probe_runner
from sandbox.base import Job

EVENTS_LIMIT_BYTES = 1 << 20


def write_job(job_dir: Path, job: Job) -> None:
    """Lay out a job directory as the runner reads it."""
    submission = job_dir / probe_runner.SUBMISSION_DIR
    submission.mkdir(parents=True)
    for name, content in job.files.items():
        if os.path.basename(name) != name or name in {"", ".", ".."}:
            raise ValueError(f"submission file names must be plain names, not {name!r}")
        (submission / name).write_bytes(content)
    (job_dir / probe_runner.PLAN_FILE).write_bytes(job.plan_json)
    (job_dir / probe_runner.INPUTS_FILE).write_bytes(job.inputs_safetensors)


def collect_outputs(out_dir: Path, limit_bytes: int) -> tuple[bytes, dict[str, bytes], bool]:
    """Read events and tensor files without following links; report whether the cap was hit."""
    events = _read_regular(out_dir / probe_runner.EVENTS_FILE, EVENTS_LIMIT_BYTES)
    over_limit = events is None
    budget = limit_bytes - len(events or b"")
    tensors: dict[str, bytes] = {}
    tensors_dir = out_dir / probe_runner.TENSORS_DIR
    if _is_real_dir(tensors_dir):
        for name in sorted(os.listdir(tensors_dir)):
            content = _read_regular(tensors_dir / name, budget)
            if content is None:
                over_limit = True
                continue
            if not content:
                continue
            budget -= len(content)
            tensors[f"{probe_runner.TENSORS_DIR}/{name}"] = content
    return events or b"", tensors, over_limit


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The file's bytes if it is a regular file (not a link); None if it is over ``limit``.

    Anything else reads as empty, as the Docker backend skips it: a missing file (a run that
    died early produced nothing), or a link, FIFO or device planted by student code, which is
    not output past a limit.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # missing, or a link (ELOOP)
        return b""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b""
        if info.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1)[:limit]
    finally:
        os.close(fd)
