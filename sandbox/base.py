"""The sandbox backend interface: run a probe plan on untrusted files, hand back raw outputs."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sandbox.wire import WALL_SLACK

# The runner's script, by path: importing the runner here would load torch into every process
# that only wants these types (the runner imports torch at the top, for the sandboxed process).
RUNNER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner", "__main__.py")


@dataclass(frozen=True)
class Limits:
    """What one run may use. Defaults are SPEC §4's; an assignment may override any of them."""

    cpus: float = 1.0
    """CPU cores (a quota in Docker; in the local backend only the CPU-time limit applies)."""
    memory_bytes: int = 1 << 30
    """Memory; in Docker memory and memory+swap alike, so nothing spills to swap."""
    max_processes: int = 64
    """Processes and threads the run may have at once."""
    tmpfs_bytes: int = 64 << 20
    """The private writable /tmp."""
    kept_output_bytes: int = 64 << 10
    """Printed output (stdout and stderr each) kept for the report; the rest is dropped."""
    flood_output_bytes: int = 8 << 20
    """Printed output past which the run is ended as an output flood."""
    result_bytes: int = 32 << 20
    """Everything the runner hands back (events and tensors) together."""
    call_seconds: float = 5.0
    """Budget of each stage of a probe call (and of the import of the submission), in CPU
    seconds of the submission's process, ended at ``WALL_SLACK`` times itself of wall clock."""
    run_seconds: float = 20.0
    """Budget of the whole run, counted like ``call_seconds`` by the runner's supervisor; the
    host ends the run at ``deadline_seconds`` of wall clock whatever the runner does."""
    open_files: int = 256
    file_size_bytes: int = 64 << 20

    @property
    def deadline_seconds(self) -> float:
        """The host's wall-clock deadline of a run: the last line behind the runner's budgets
        (a busy machine stretches a run's wall-clock time, never its CPU count)."""
        return self.run_seconds * WALL_SLACK

    @property
    def cpu_seconds(self) -> int:
        """CPU time of each process of a run (``RLIMIT_CPU``): a backstop behind the runner."""
        return int(self.run_seconds * max(self.cpus, 1.0)) + 5

    def replace(self, overrides: Mapping[str, float | int]) -> Limits:
        """These limits with some fields overridden (unknown names are an error)."""
        unknown = set(overrides) - set(self.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown sandbox limits: {', '.join(sorted(unknown))}")
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values.update(overrides)
        return Limits(**values)


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run jobs (no engine, wrong image, engine failure): nothing the student
    did. A grading that meets it is retried later, never scored."""


class Termination(enum.Enum):
    """How the sandboxed run ended."""

    EXITED = "exited"
    """The process ended by itself (whatever its exit status)."""
    TIME_LIMIT = "time-limit"
    """The host's wall-clock deadline was reached and the run was killed."""
    MEMORY_LIMIT = "memory-limit"
    """The memory limit was reached (OOM kill, or an allocation refused at the limit)."""
    OUTPUT_LIMIT = "output-limit"
    """Printed output or the results channel grew past its limit."""
    SANDBOX_ERROR = "sandbox-error"
    """The sandbox itself failed (not the student's doing): the run should be retried."""


@dataclass(frozen=True)
class Job:
    """One run: the student's files, the plan and its inputs, exactly as the runner reads them."""

    files: Mapping[str, bytes]
    """Submission files by plain file name (no directories)."""
    plan_json: bytes
    inputs_safetensors: bytes
    label: str = "adhoc"
    """Who this run is for (a submission id); used for container labels and logs."""


@dataclass
class RunResult:
    """Everything a run produced, as raw bytes: the grader parses and validates it."""

    termination: Termination
    exit_code: int | None
    wall_seconds: float
    events: bytes
    """The event lines of the runner's stream (JSON lines), possibly cut at their limit."""
    tensor_files: dict[str, bytes] = field(default_factory=dict)
    """``tensors/NNNN.safetensors`` files by their relative name."""
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    detail: str = ""
    """A word from the backend for logs (never shown to students)."""
    forged_events_file: bool = False
    """An events file appeared in the output folder, where the runner writes none: student
    code wrote it (an integrity flag for the instructor; never read as events)."""


class SandboxBackend(Protocol):
    """Runs the probe runner on a job with limits; never raises for anything the student did."""

    name: str
    isolation: str
    """How a run is isolated (for a Docker backend its mode and runtime), recorded in every
    results document for the instructor: a grade can be traced to the sandbox that ran it."""

    def run(self, job: Job, limits: Limits) -> RunResult: ...

    def close(self) -> None: ...
