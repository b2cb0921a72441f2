"""What a run produced, as typed data: the outcomes the grader judges, whoever ran the code.

A submission's run in the sandbox reaches these types only through ``grader.validation``; the
reference and the known-mistake variants, run in the grader's own process, through
``grader.in_process``. All three are then compared alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from sandbox import Termination


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    code: str


@dataclass(frozen=True)
class Raised:
    """An exception raised by the code under test, as data."""

    type: str
    value_error: bool
    message: str
    frames: tuple[Frame, ...] = ()

    @property
    def memory_error(self) -> bool:
        """Out of memory: Python's MemoryError, or torch's allocator refusing at the limit."""
        if self.type == "MemoryError":
            return True
        return self.type == "RuntimeError" and any(
            sign in self.message for sign in ("can't allocate memory", "not enough memory"))

    def summary(self) -> str:
        """Type, first line of the message, and the student's line it came from."""
        message = self.message.strip().splitlines()[0][:300] if self.message.strip() else ""
        text = f"{self.type}: {message}" if message else self.type
        if self.frames:
            frame = self.frames[-1]
            text += f" (in {frame.file}, line {frame.line}, in {frame.function}: `{frame.code}`)"
        return text

    @property
    def at_call_boundary(self) -> bool:
        """A TypeError raised by the call itself (no frame in the student's files): the
        function or class does not accept the contract's arguments."""
        return self.type == "TypeError" and not self.frames


@dataclass(frozen=True)
class Forward:
    """One forward (and backward) of a call."""

    status: str
    """``ok``, ``raised`` or ``timeout``."""
    raised: Raised | None = None
    stage: str = "forward"
    """Where it failed: ``init``, ``setup``, ``forward``, ``backward`` or ``import``."""
    structure: str = ""
    """What was returned: ``tensor``, ``tuple[2]``, ``list[2]``, ``tensor-subclass``, ``None``..."""
    outputs: tuple[torch.Tensor | None, ...] = ()
    """Returned tensors in order (a tensor, or the items of a returned tuple)."""
    grads: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """Gradients by input position (``arg0``, ``kw.key_value``, ``param.q_proj.weight``)."""
    backward: str = ""
    """``ok``, ``no-graph`` (the output is disconnected), ``raised``, ``skipped`` or empty."""
    after: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """Input tensors as they were after the call, by position, as the run handed them back."""
    changed: frozenset[str] = frozenset()
    """Positions whose input the sandbox's supervisor saw changed in place, whatever ``after``
    says (the student's process hands ``after`` back, the supervisor reads its own memory)."""
    seconds: float = 0.0


@dataclass(frozen=True)
class CallOutcome:
    """Everything one probe call produced."""

    id: str
    status: str
    """``ok``, ``raised``, ``timeout``, ``missing`` (required name absent), ``interface``
    (a module the grader cannot drive), ``invalid`` (malformed data came back) or ``lost``
    (no report: the process ended before this call)."""
    forwards: tuple[Forward, ...] = ()
    forbidden: tuple[str, ...] = ()
    """Forbidden APIs the runner saw this call use."""
    detail: str = ""
    """For ``missing``, ``interface`` and ``invalid``: what was wrong."""
    unregistered: bool = False
    """For ``interface``: the module registers fewer parameters than the contract's weights
    (its layers are in a plain list or dict, or made in ``forward``)."""

    @property
    def usable(self) -> bool:
        """Whether the call ran to the end, so its outputs can be judged."""
        return self.status in {"ok", "raised"} and bool(self.forwards)

    @property
    def first_raised(self) -> Raised | None:
        for forward in self.forwards:
            if forward.raised is not None:
                return forward.raised
        return None

    @property
    def rejected(self) -> bool:
        """Whether a step of the call raised ValueError (of the reference: the contract
        rejects the call's input)."""
        return any(f.raised is not None and f.raised.value_error for f in self.forwards)

    @property
    def raise_site(self) -> tuple[str, tuple[Frame, ...], str] | None:
        """Where the call's first exception came from: its type and the student's lines it
        went through. Not its message where a line is known: the message may carry the input's
        shapes, which differ from call to call while the failing check is the same."""
        raised = self.first_raised
        if raised is None:
            return None
        return raised.type, raised.frames, "" if raised.frames else raised.message


@dataclass(frozen=True)
class IntegrityFlag:
    """Something only tampering does, seen in a run: for the instructor, never scored."""

    flag: str
    """``trap-patched``, ``runner-patched``, ``signals-changed``, ``timer-changed``,
    ``profile-hook``, ``introspection``, ``output-folder-written``, ``output-rewritten``,
    ``forged-report``, ``duplicate-report``, ``process-survived``, ``stage-overran``."""
    evidence: str

    def to_json(self) -> dict[str, str]:
        return {"flag": self.flag, "evidence": self.evidence}


@dataclass(frozen=True)
class SubmissionRun:
    """A run of the submission in the sandbox, validated."""

    termination: Termination
    exit_code: int | None
    calls: Mapping[str, CallOutcome]
    import_error: Raised | None = None
    import_timed_out: bool = False
    forbidden_at_import: tuple[str, ...] = ()
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    wall_seconds: float = 0.0
    protocol_problems: tuple[str, ...] = ()
    """Malformed events or tensors (hostile or broken output), for logs."""
    watchdog_fired: bool = False
    """The runner's watchdog ended the process: a call overran its budget past the grace."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """What the runner said of its own phases (``imports``, ``warm_up``, ``submission_import``,
    ``probes``): for benchmarks and logs only, never for a verdict."""
    integrity: tuple[IntegrityFlag, ...] = ()
    """What only tampering does, with its evidence: shown to instructors, never scored."""
