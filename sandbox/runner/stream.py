"""The runner's stream to the host: JSON lines, printed output and the output folder in frames.

Only the supervisor writes it (``wire.py`` says how the host reads it); the fork server sends
the output folder in its own frames with ``write_outputs_tar`` and ``FramedFile``.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import stat
import tarfile
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .shared import EVENTS_FILE, TENSORS_DIR, WIRE

OUTPUTS_FRAME_PREFIX: bytes = WIRE.OUTPUTS_FRAME_PREFIX
OUTPUTS_END_PREFIX: bytes = WIRE.OUTPUTS_END_PREFIX
READ_UNTRUSTED = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""How a file the student's code could have planted is opened: no link followed (the last
name's), nothing blocked on (a FIFO), nothing inherited."""


class Channel:
    """The supervisor's stream to the host: whole JSON lines on one file descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()

    def send(self, event: Mapping[str, Any]) -> None:
        self._write(json.dumps(event, allow_nan=False).encode() + b"\n")

    def send_output(self, prefix: bytes, data: bytes) -> None:
        self._write(prefix + base64.b64encode(data) + b'"}\n')

    def _write(self, line: bytes) -> None:
        with self._lock:
            view = memoryview(line)
            while view:
                view = view[os.write(self.fd, view):]


def send_outputs(channel: Channel, out_dir: str, budget: int, status: int) -> None:
    """End the stream with the output folder's files and the runner's exit status
    (``wire.OUTPUTS_FRAME_PREFIX``)."""
    frames = FramedFile(lambda data: channel.send_output(OUTPUTS_FRAME_PREFIX, data),
                        WIRE.OUTPUTS_FRAME_BYTES)
    with frames:
        cut = write_outputs_tar(frames, out_dir, budget)
    channel.send_output(OUTPUTS_END_PREFIX, WIRE.runner_end(status, cut))


def write_outputs_tar(target: io.RawIOBase, out_dir: str, budget: int) -> bool:
    """Write the output folder's files to ``target`` as a tar; whether any was left out for
    being over what remained of ``budget`` bytes (as the host skips such a file in an archive
    of the folder, ``sandbox.outputs.read_output_archive``).

    Only what the host reads goes in: ``events.jsonl`` and the regular files directly in
    ``tensors/``, archived under ``out/``. The student's code wrote them: every open refuses
    links (the folder's too) and blocks on nothing, and only what is a regular file once open
    is read. One file at a time is held.
    """
    cut = False
    with tarfile.open(fileobj=target, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        def add(folder: int, name: str, archived: str) -> None:
            nonlocal budget, cut
            with contextlib.suppress(OSError):
                fd = os.open(name, READ_UNTRUSTED, dir_fd=folder)
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        return
                    content = read_at_most(fd, budget + 1)
                finally:
                    os.close(fd)
                if len(content) > budget:
                    cut = True
                    return
                budget -= len(content)
                member = tarfile.TarInfo(archived)
                member.size = len(content)
                archive.addfile(member, io.BytesIO(content))

        with contextlib.suppress(OSError):
            top = os.open(out_dir, READ_UNTRUSTED | os.O_DIRECTORY)
            try:
                add(top, EVENTS_FILE, f"out/{EVENTS_FILE}")
                tensors = os.open(TENSORS_DIR, READ_UNTRUSTED | os.O_DIRECTORY, dir_fd=top)
                try:
                    for name in sorted(os.listdir(tensors)):
                        add(tensors, name, f"out/{TENSORS_DIR}/{name}")
                finally:
                    os.close(tensors)
            finally:
                os.close(top)
    return cut


class FramedFile(io.RawIOBase):
    """A write-only file that hands what is written to ``send`` in chunks of ``size`` bytes
    (the last one shorter, at close)."""

    def __init__(self, send: Callable[[bytes], None], size: int) -> None:
        super().__init__()
        self._send, self._size = send, size
        self._pending = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._pending += data
        while len(self._pending) >= self._size:
            self._send(bytes(self._pending[:self._size]))
            del self._pending[:self._size]
        return len(data)

    def close(self) -> None:
        if not self.closed and self._pending:
            self._send(bytes(self._pending))
            self._pending.clear()
        super().close()


def read_at_most(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from ``fd``, to its end."""
    chunks, left = [], size
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)

