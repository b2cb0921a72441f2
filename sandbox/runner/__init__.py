"""The probe runner: the only code of ours that runs next to student code, inside the sandbox.

It executes the calls of a probe plan on the inputs the grader chose and streams each call's
raw outcome as it finishes: returned tensors and gradients in safetensors files, everything
else as JSON lines. It never sees expected values, the reference or the known-mistake
variants, and it computes no verdict: the grader, outside, decides everything from what comes
back.

Two processes: a supervisor, which holds the stream to the host, and a child forked from it
that imports the submission and runs the calls. The student's code shares the child's process,
so what the child reports is only the student's own outputs; the supervisor, which the
student's code cannot reach, decides the order, the uniqueness and the timing of what the host
receives (see ``supervisor``).

Its modules: ``executor`` (the call executor, which the grader also uses to run the reference
and the known-mistake variants on the same plan, so all three are exercised identically),
``guards`` (the limits, traps and integrity watch around the student's code), ``supervisor``
and ``child`` (the two processes of a run), ``stream`` (what goes to the host), ``boot`` (the
entry point) and ``__main__`` (the script the sandbox runs).

Only the standard library, torch and safetensors may be imported here (and ``wire.py`` and
``training.py``, loaded from the folder above this one by ``shared``).
"""
