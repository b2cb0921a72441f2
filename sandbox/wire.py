"""What the runner and the host agree on, on disk and on the runner's stream: torch-free, so
the host's sandbox code starts a container before it imports torch.

The runner loads this file by path, from the folder it runs in (``sandbox/`` here,
``/opt/autograde`` in the image); only the standard library may be imported here.
"""

PLAN_FILE = "plan.json"
INPUTS_FILE = "inputs.safetensors"
SUBMISSION_DIR = "submission"
EVENTS_FILE = "events.jsonl"
"""No longer written by the runner (events travel on its stream): in the output folder, such
a file is student code's, and the host reports it as such."""
TENSORS_DIR = "tensors"

STDOUT_FRAME_PREFIX = b'{"event": "stdout", "data": "'
STDERR_FRAME_PREFIX = b'{"event": "stderr", "data": "'
"""Printed output of the student's code travels on the supervisor's stream in such lines: no
process of the student's holds a descriptor of the sandbox's own output streams, so none can
keep them open past the run or write into them unframed."""
OUTPUTS_FRAME_PREFIX = b'{"event": "outputs", "data": "'
OUTPUTS_END_PREFIX = b'{"event": "outputs-end", "data": "'
OUTPUTS_CUT = b"cut"
OUTPUTS_FRAME_BYTES = 512 << 10
"""With ``--send-outputs`` the supervisor sends the output folder on its stream once the run
has ended, as a tar in frames of at most ``OUTPUTS_FRAME_BYTES`` bytes, then an end frame whose
data is ``OUTPUTS_CUT`` if the files were over their budget: the host need not ask the engine
for the folder (an archive request, 56 ms a grading). A stream without the end frame (the
supervisor was killed) leaves the host to read the folder itself."""

WALL_SLACK = 3.0
"""Time budgets (a call's, the whole run's) count the submission's CPU seconds, so that a busy
machine, where the submission waits for a core, does not cost the student its score. A
submission that sleeps or blocks uses no CPU: every budget also ends, whatever the CPU count
says, at this many times itself on the wall clock. The host's own deadline of a run, the last
line behind the runner's, is the run's budget times this."""
