"""The pipeline computes the reference's outcomes in threads while the sandbox runs; a process
forked after those threads started (a worker process) still gets them computed."""

from __future__ import annotations

import os

from grader import pipeline


def test_a_forked_child_still_computes_the_reference() -> None:
    assert pipeline._REFERENCE_RUNS.submit(lambda: 1).result(timeout=10) == 1  # threads started
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        try:
            status = 0 if pipeline._REFERENCE_RUNS.submit(lambda: 2).result(timeout=10) == 2 else 1
        except BaseException:
            status = 1
        os._exit(status)
    _, wait_status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 0
