"""Moving a job into a sandbox and its raw outputs out, with size caps and no links followed."""

from __future__ import annotations

import binascii
import contextlib
import io
import os
import stat
import tarfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox import wire
from sandbox.base import Job, Limits

EVENTS_LIMIT_BYTES = 1 << 20
CHANNEL_LINE_LIMIT_BYTES = 1 << 20
OUT_FOLDER = "out"
"""The output folder's name in a tar of it: the runner's own and the engine's of ``/out``."""


@dataclass
class CappedStream:
    """One output stream: the first bytes kept for the report, the rest only counted."""

    keep: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > self.keep

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


class ChannelDecoder:
    """Splits the runner's stream into its event lines and the student's printed output.

    The stream is the supervisor's standard output, which student code cannot write to (see
    ``sandbox.runner.supervisor``); the student's prints travel in it as ``stdout`` and ``stderr``
    frames (the runner's own standard error, a crash of ours, goes to the other stream), and
    the output files, where the runner sends them, as ``outputs`` frames at the end. Events
    are kept up to ``EVENTS_LIMIT_BYTES``, a line longer than ``CHANNEL_LINE_LIMIT_BYTES`` is
    dropped whole; neither is parsed here beyond telling frames from events.
    """

    def __init__(self, stdout: CappedStream, stderr: CappedStream, *,
                 archive_limit: int = 0) -> None:
        self._frames = {wire.STDOUT_FRAME_PREFIX: stdout,
                        wire.STDERR_FRAME_PREFIX: stderr}
        self.events = bytearray()
        self.over_limit = False
        self.started = threading.Event()
        """Set at the first event: the runner has the job and student code is about to run."""
        self.archive = CappedStream(archive_limit)
        """The output files the supervisor sent at the end (``wire.OUTPUTS_FRAME_PREFIX``), as
        a tar; the rest only counted past ``archive_limit``."""
        self.archive_end: bytes | None = None
        """The end frame's data once it came (``wire.parse_runner_end``)."""
        self._frames[wire.OUTPUTS_FRAME_PREFIX] = self.archive
        self._pending = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> None:
        self._pending += chunk
        while (end := self._pending.find(b"\n")) >= 0:
            line = bytes(self._pending[:end])
            del self._pending[:end + 1]
            if self._skipping:
                self._skipping = False
            else:
                self._line(line)
        if len(self._pending) > CHANNEL_LINE_LIMIT_BYTES:
            self._pending.clear()
            self._skipping = True
            self.over_limit = True

    def _line(self, line: bytes) -> None:
        if line.startswith(wire.OUTPUTS_END_PREFIX) and line.endswith(b'"}'):
            try:
                self.archive_end = binascii.a2b_base64(line[len(wire.OUTPUTS_END_PREFIX):-2],
                                                       strict_mode=True)
            except binascii.Error:
                self.over_limit = True
            return
        for prefix, stream in self._frames.items():
            if line.startswith(prefix) and line.endswith(b'"}'):
                try:
                    stream.add(binascii.a2b_base64(line[len(prefix):-2], strict_mode=True))
                except binascii.Error:
                    self.over_limit = True
                return
        if len(self.events) + len(line) + 1 > EVENTS_LIMIT_BYTES:
            self.over_limit = True
            return
        self.events += line + b"\n"
        self.started.set()


def write_job(job_dir: Path, job: Job) -> None:
    """Lay out a job directory as the runner reads it."""
    submission = job_dir / wire.SUBMISSION_DIR
    submission.mkdir(parents=True)
    for name, content in job.files.items():
        if os.path.basename(name) != name or name in {"", ".", ".."}:
            raise ValueError(f"submission file names must be plain names, not {name!r}")
        (submission / name).write_bytes(content)
    (job_dir / wire.PLAN_FILE).write_bytes(job.plan_json)
    (job_dir / wire.INPUTS_FILE).write_bytes(job.inputs_safetensors)


def collect_outputs(out_dir: Path, limit_bytes: int) -> tuple[bytes, dict[str, bytes], bool]:
    """Read an events file and the tensor files without following links; whether the cap was
    hit. The runner writes no events file: one found there is student code's."""
    events = _read_regular(out_dir / wire.EVENTS_FILE, EVENTS_LIMIT_BYTES)
    over_limit = events is None
    budget = limit_bytes - len(events or b"")
    tensors: dict[str, bytes] = {}
    tensors_dir = out_dir / wire.TENSORS_DIR
    if _is_real_dir(tensors_dir):
        for name in sorted(os.listdir(tensors_dir)):
            content = _read_regular(tensors_dir / name, budget)
            if content is None:
                over_limit = True
                continue
            if not content:
                continue
            budget -= len(content)
            tensors[f"{wire.TENSORS_DIR}/{name}"] = content
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


class CappedOutput:
    """Drains the runner's demultiplexed stream in a thread: its events and the student's
    printed output (``ChannelDecoder``) on stdout, the student's stderr; watches for a flood."""

    def __init__(self, stream: Iterable[tuple[bytes | None, bytes | None]], limits: Limits, *,
                 archive_limit: int) -> None:
        self._stream = stream
        self._flood = limits.flood_output_bytes
        self.stdout = CappedStream(limits.kept_output_bytes)
        self.stderr = CappedStream(limits.kept_output_bytes)
        self.channel = ChannelDecoder(self.stdout, self.stderr,
                                      archive_limit=archive_limit)
        self.closed = threading.Event()
        self.finished = threading.Event()
        """Set when the runner's end frame came with its files whole (``runner_end``), or when
        the stream closed."""
        threading.Thread(target=self._drain, daemon=True, name="sandbox-output").start()

    def _drain(self) -> None:
        try:
            for out, err in self._stream:
                if out:
                    self.channel.feed(out)
                    if self.runner_end is not None:
                        self.finished.set()
                if err:
                    self.stderr.add(err)
        except Exception:  # the connection ends when the container goes
            pass
        finally:
            self.closed.set()
            self.finished.set()

    @property
    def runner_end(self) -> tuple[int, bool] | None:
        """The runner's exit status and whether files were left out, from its end frame with
        its output files whole; None without them (the host then asks the engine)."""
        end = self.channel.archive_end
        if end is None or self.channel.archive.truncated:
            return None
        return wire.parse_runner_end(end)

    @property
    def flooded(self) -> bool:
        return max(self.stdout.total, self.stderr.total) > self._flood

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()


def read_output_archive(
    chunks: Iterable[bytes], limit_bytes: int, *, stream_limit: int
) -> tuple[bytes, dict[str, bytes], bool]:
    """Events and tensor files from the tar stream of ``/out``; whether the result cap was hit.

    Same contract as ``collect_outputs``: only regular files named
    ``events.jsonl`` and ``tensors/<name>`` count (links, devices and anything else are
    skipped, never followed), the events file has its own cap and everything together at most
    ``limit_bytes``. The stream itself is cut at ``stream_limit`` bytes, past what a full
    output volume could hold.
    """
    reader = _CappedReader(iter(chunks), stream_limit)
    events: bytes = b""
    tensors: dict[str, bytes] = {}
    over_limit = False
    budget = limit_bytes
    try:
        with tarfile.open(fileobj=reader, mode="r|") as archive:
            for member in archive:
                name = _output_name(member.name)
                if name is None or not member.isreg():
                    continue
                if name == wire.EVENTS_FILE:
                    if member.size > EVENTS_LIMIT_BYTES:
                        over_limit = True
                        continue
                    events = _member_bytes(archive, member)
                    budget -= len(events)
                elif member.size > budget:
                    over_limit = True
                else:
                    tensors[name] = _member_bytes(archive, member)
                    budget -= member.size
    except (tarfile.TarError, OSError):
        # A cut or malformed stream: keep what was read before it.
        over_limit = over_limit or reader.exhausted
    if budget < 0:
        over_limit = True
    return events, dict(sorted(tensors.items())), over_limit or reader.exhausted


def _output_name(archived: str) -> str | None:
    """``events.jsonl`` or ``tensors/<file>`` from an archived path under ``out/``; else None."""
    parts = archived.split("/")
    if not parts or parts[0] != OUT_FOLDER:
        return None
    rest = parts[1:]
    if rest == [wire.EVENTS_FILE]:
        return wire.EVENTS_FILE
    if len(rest) == 2 and rest[0] == wire.TENSORS_DIR and rest[1] not in {"", ".", ".."}:
        return "/".join(rest)
    return None


def _member_bytes(archive: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = archive.extractfile(member)
    return handle.read() if handle is not None else b""


class _CappedReader(io.RawIOBase):
    """A file over an iterator of byte chunks that reads at most ``limit`` bytes."""

    def __init__(self, chunks: Iterator[bytes], limit: int) -> None:
        self._chunks = chunks
        self._left = limit
        self._buffer = memoryview(b"")
        self.exhausted = False
        """Whether the limit cut the stream."""

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            if len(chunk) > self._left:
                chunk = chunk[: self._left]
                self.exhausted = True
            self._left -= len(chunk)
            self._buffer = memoryview(chunk)  # read from in place: a chunk may be large
            if not chunk and self.exhausted:
                return 0
        size = min(len(target), len(self._buffer))
        target[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size
