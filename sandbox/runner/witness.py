"""What the supervisor establishes about a run where the student's code cannot rewrite it.

The child is the student's process: whatever it keeps about itself (a list of the forbidden
APIs it saw, the input tensors it hands back after a call) the student's code can empty or
replace before it is reported. Two facts the verdict depends on are therefore established by
the supervisor instead:

* **Forbidden calls** are sent by the child's trap the moment it sees one, as a frame
  (``witness_frame``) on the report pipe, which the child can neither close nor replace
  (``guards.protect_descriptors``). A frame once written is the supervisor's, in order with the
  reports: forgetting it afterwards changes nothing, and nothing the child writes around it
  can hide it (``split_frames``).
* **Input changes**: the tensors a forward is handed live in memory the supervisor shares with
  the child (``InputArena``), filled by the supervisor with the plan's inputs before the child
  exists and read back by it after each call: a tensor written in place shows there, whatever
  the child reports.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

MAGIC = b"\x00autograde-witness\x01"
"""The start of a witness frame. Its first byte occurs nowhere else in it, so no bytes written
before a frame can overlap it and hide where it starts."""
MAX_NAME_BYTES = 160
MAX_NAMES = 64
"""Distinct names kept for one report: a trap hit in a loop is one name."""


def witness_frame(name: str) -> bytes:
    """The frame of a forbidden API seen: written with one ``write``, shorter than a pipe's
    atomic size, so that no other write to the pipe lands inside it."""
    return MAGIC + name.encode("ascii", "replace")[:MAX_NAME_BYTES] + b"\n"


def frame_writer(fd: int) -> Callable[[str], None]:
    """The child's sender of witness frames on ``fd``: every name it needs is bound now, before
    the student's code runs, so replacing ``os.write`` or this module's globals later does not
    reach it. The bytes are ``witness_frame``'s."""

    def send(name: str, _write: Any = os.write, _fd: int = fd, _magic: bytes = MAGIC,
             _limit: int = MAX_NAME_BYTES, _error: type[BaseException] = OSError) -> None:
        # not contextlib.suppress: a module looked up when it runs, which the student can patch
        try:  # noqa: SIM105
            _write(_fd, _magic + name.encode("ascii", "replace")[:_limit] + b"\n")
        except _error:  # the pipe cannot be closed or replaced; a full one is drained
            pass

    return send


def split_frames(line: bytes) -> tuple[bytes, list[str]]:
    """A report line read as witness frames: the bytes before the first frame, and the names of
    the frames in it (none: not a witness line).

    A frame is written with one ``write`` and ends the line, so its bytes are whole at the end
    of the line they land in, whatever the child wrote before them on that line; a JSON report
    never holds a frame's first byte (its encoder escapes control characters).
    """
    before, *frames = line.split(MAGIC)
    names = [name for frame in frames if (name := frame.decode("ascii", "replace"))
             and len(frame) <= MAX_NAME_BYTES and name.isprintable()]
    return before, names


_ALIGN = 64


def forward_specs(call: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each forward of a call with the prefix its stages are reported under (``f0.``, ...)."""
    if "forward" in call:
        return [(f"f{index}.", spec) for index, spec in enumerate(call["forward"])]
    return [("", call)]


def tensor_positions(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(position, input key) of the plan's input tensors handed to one forward as a whole
    argument: the positions whose change the grader judges (``grader.checks.input_positions``)."""
    for index, value in enumerate(spec.get("args", [])):
        if isinstance(value, dict) and "tensor" in value:
            yield f"arg{index}", str(value["tensor"])
    for name, value in spec.get("kwargs", {}).items():
        if isinstance(value, dict) and "tensor" in value:
            yield f"kw.{name}", str(value["tensor"])


class InputArena:
    """The input tensors of every forward of a plan, one slot each, in memory shared between the
    supervisor and the child it forks.

    The supervisor makes it (before the fork) and fills each slot with the plan's input; the
    child hands the code under test a tensor on the slot instead of a private copy; after the
    call the supervisor compares each slot with the input it wrote. Slots are keyed by call id
    and ``prefix + position`` (``f0.arg0``), as the runner reports them. A plan whose inputs
    would take more than ``limit`` bytes gets slots for its first calls only.
    """

    def __init__(self, plan: Mapping[str, Any], inputs: Mapping[str, torch.Tensor],
                 limit: int = 64 << 20) -> None:
        self._slots: dict[str, dict[str, tuple[int, torch.Tensor]]] = {}
        size = 0
        for call in plan.get("calls", []):
            slots: dict[str, tuple[int, torch.Tensor]] = {}
            for prefix, spec in forward_specs(call):
                for position, key in tensor_positions(spec):
                    tensor = inputs.get(key)
                    if not isinstance(tensor, torch.Tensor):
                        continue
                    nbytes = tensor.numel() * tensor.element_size()
                    if size + nbytes > limit:
                        break
                    slots[prefix + position] = (size, tensor)
                    size += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
            if slots:
                self._slots[str(call.get("id"))] = slots
        self._memory = mmap.mmap(-1, max(size, _ALIGN))  # shared and anonymous: a fork shares it
        self._written: dict[tuple[str, str], bytes] = {}
        for call_id, slots in self._slots.items():
            for key, (offset, tensor) in slots.items():
                data = _bytes_of(tensor)
                self._memory[offset:offset + len(data)] = data
                self._written[(call_id, key)] = data

    def tensor(self, call_id: str, key: str) -> torch.Tensor | None:
        """The child's tensor on the slot of ``key`` of call ``call_id``, holding the plan's input
        (None where the plan has no slot for it)."""
        slot = self._slots.get(call_id, {}).get(key)
        if slot is None:
            return None
        offset, like = slot
        if like.numel() == 0:
            return None
        flat = torch.frombuffer(self._memory, dtype=like.dtype, count=like.numel(),
                                offset=offset)
        return flat.view(like.shape)

    def changed(self, call_id: str) -> list[str]:
        """The slots of call ``call_id`` whose bytes are no longer the input the supervisor
        wrote there."""
        changed = []
        for key, (offset, _) in self._slots.get(call_id, {}).items():
            written = self._written[(call_id, key)]
            if self._memory[offset:offset + len(written)] != written:
                changed.append(key)
        return changed


def _bytes_of(tensor: torch.Tensor) -> bytes:
    """The tensor's values as the bytes of a contiguous tensor of its dtype."""
    flat = tensor.detach().contiguous().reshape(-1)
    return bytes(flat.view(torch.uint8).numpy().tobytes()) if flat.numel() else b""
