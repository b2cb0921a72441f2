"""What the runner and the host agree on, on disk and on the runner's stream: torch-free, so
the host's sandbox code starts a container before it imports torch.

The runner loads this file by path, from the folder it runs in (``sandbox/`` here,
``/opt/autograde`` in the image); only the standard library may be imported here.
"""

PLAN_FILE = "plan.json"
INPUTS_FILE = "inputs.safetensors"
SUBMISSION_DIR = "submission"
EVENTS_FILE = "events.jsonl"
"""Not written by the runner (events travel on its stream): in the output folder, such
a file is student code's, and the host reports it as such."""
TENSORS_DIR = "tensors"

STDOUT_FRAME_PREFIX = b'{"event": "stdout", "data": "'
STDERR_FRAME_PREFIX = b'{"event": "stderr", "data": "'
"""Printed output of the student's code travels on the supervisor's stream in such lines: no
process of the student's holds a descriptor of the sandbox's own output streams, so none can
keep them open past the run or write into them unframed."""
OUTPUTS_FRAME_PREFIX = b'{"event": "outputs", "data": "'
OUTPUTS_END_PREFIX = b'{"event": "outputs-end", "data": "'
OUTPUTS_FRAME_BYTES = 512 << 10
"""With ``--send-outputs`` the supervisor ends its stream with the output folder, once no
process of the run is left: a tar in frames of at most ``OUTPUTS_FRAME_BYTES`` bytes, then an
end frame (``runner_end``) with the runner's exit status and whether files were left out over
the result budget. That frame is the last thing the runner does: the host knows the run has
ended without asking the engine, and has its files without an archive request and without
waiting for the engine to close the stream of an exited runner. A stream
without the end frame (the supervisor was killed) leaves the host to ask the engine."""


def runner_end(status: int, cut: bool) -> bytes:
    """The end frame's data: ``STATUS`` or ``STATUS cut``."""
    return f"{status} cut".encode() if cut else str(status).encode()


def parse_runner_end(data: bytes) -> tuple[int, bool] | None:
    """The exit status and the cut flag of an end frame's data; None if it is malformed."""
    status, _, rest = data.partition(b" ")
    if not (status.isdigit() and len(status) <= 3 and rest in (b"", b"cut")):
        return None
    end = (int(status), rest == b"cut")
    return end if end[0] <= 255 and runner_end(*end) == data else None


WALL_SLACK = 3.0
"""Time budgets (a call's, the whole run's) count the submission's CPU seconds, so that a busy
machine, where the submission waits for a core, does not cost the student its score. A
submission that sleeps or blocks uses no CPU: every budget also ends, whatever the CPU count
says, at this many times itself on the wall clock. The host's own deadline of a run, the last
line behind the runner's, is the run's budget times this."""
