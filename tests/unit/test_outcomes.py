"""Validating what comes back from the sandbox: malformed, forged or oversized data is refused."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import save

from assignments import Assignment, ProbePlan
from grader.validation import MAX_ELEMENTS_PER_TENSOR, parse_run
from sandbox import RunResult, Termination


@pytest.fixture
def plan(attention: Assignment) -> ProbePlan:
    return attention.build_plan(0)


def _run(events: list[object], tensors: dict[str, bytes] | None = None) -> RunResult:
    """A run of these events, each tensor file pinned by its hash as the supervisor does."""
    for event in events:
        if isinstance(event, dict) and event.get("tensors") in (tensors or {}):
            event.setdefault("sha256", hashlib.sha256(tensors[event["tensors"]]).hexdigest())
    lines = b"".join(
        (json.dumps(e) if not isinstance(e, bytes) else e.decode()).encode() + b"\n"
        for e in events)
    return RunResult(termination=Termination.EXITED, exit_code=0, wall_seconds=0.1,
                     events=lines, tensor_files=tensors or {})


def _ok_call(call_id: str, tensor_file: str | None = None) -> dict[str, object]:
    event: dict[str, object] = {
        "event": "call", "id": call_id, "status": "ok", "forbidden": [],
        "stages": [{"stage": "forward", "status": "ok", "seconds": 0.001,
                    "returned": {"kind": "tuple", "length": 2, "items": [
                        {"kind": "tensor", "key": "out.0"}, {"kind": "tensor", "key": "out.1"}]}}],
    }
    if tensor_file:
        event["tensors"] = tensor_file
    return event


def test_a_call_without_a_report_is_lost(plan: ProbePlan) -> None:
    run = parse_run(_run([{"event": "import", "status": "ok"}]), plan)
    assert {outcome.status for outcome in run.calls.values()} == {"lost"}


def test_the_first_report_of_a_call_is_kept_and_a_second_flagged(plan: ProbePlan) -> None:
    tensors = {"tensors/0000.safetensors": save({"out.0": torch.zeros(2), "out.1": torch.zeros(2)})}
    forged = {**_ok_call("plain"), "status": "raised", "stages": []}
    run = parse_run(_run([_ok_call("plain", "tensors/0000.safetensors"), forged], tensors), plan)
    assert run.calls["plain"].status == "ok"
    assert [flag.flag for flag in run.integrity] == ["duplicate-report"]


def test_a_tensor_file_rewritten_after_its_report_is_refused_and_flagged(
        plan: ProbePlan) -> None:
    reported = save({"out.0": torch.zeros(2), "out.1": torch.zeros(2)})
    event = {**_ok_call("plain", "tensors/0000.safetensors"),
             "sha256": hashlib.sha256(reported).hexdigest()}
    rewritten = {"tensors/0000.safetensors": save({"out.0": torch.ones(2),
                                                   "out.1": torch.ones(2)})}
    run = parse_run(_run([event], rewritten), plan)
    assert run.calls["plain"].status == "invalid"
    assert [flag.flag for flag in run.integrity] == ["output-rewritten"]


def test_a_tensor_file_the_runner_did_not_pin_is_refused(plan: ProbePlan) -> None:
    tensors = {"tensors/0000.safetensors": save({"out.0": torch.zeros(2), "out.1": torch.zeros(2)})}
    event = {**_ok_call("plain", "tensors/0000.safetensors"), "sha256": None}
    assert parse_run(_run([event], tensors), plan).calls["plain"].status == "invalid"


def test_integrity_flags_of_the_runner_and_the_output_folder_reach_the_run(
        plan: ProbePlan) -> None:
    result = _run([{"event": "integrity", "flags": [
        {"flag": "trap-patched", "evidence": "torch.x was replaced"}, "junk", {"flag": 3}]}])
    result.forged_events_file = True
    run = parse_run(result, plan)
    assert [(f.flag, f.evidence) for f in run.integrity] == [
        ("output-folder-written", "an events file was written into the output folder"),
        ("trap-patched", "torch.x was replaced")]


def test_garbage_lines_and_unknown_calls_are_ignored(plan: ProbePlan) -> None:
    run = parse_run(_run([b"{not json", ["a", "list"], _ok_call("no-such-call")]), plan)
    assert run.calls["plain"].status == "lost"
    assert run.protocol_problems


def test_a_pickle_instead_of_safetensors_is_refused_not_loaded(plan: ProbePlan,
                                                               tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (Path.touch, (str(marker),))  # type: ignore[return-value]

    tensors = {"tensors/0000.safetensors": pickle.dumps(Payload())}
    run = parse_run(_run([_ok_call("plain", "tensors/0000.safetensors")], tensors), plan)
    assert run.calls["plain"].status == "invalid"
    assert not marker.exists()


def test_oversized_and_oddly_typed_tensors_are_refused(plan: ProbePlan) -> None:
    big = {"tensors/0000.safetensors": save({"out.0": torch.zeros(MAX_ELEMENTS_PER_TENSOR + 1)})}
    run = parse_run(_run([_ok_call("plain", "tensors/0000.safetensors")], big), plan)
    assert run.calls["plain"].status == "invalid"
    odd = {"tensors/0000.safetensors": save({"out.0": torch.zeros(2, dtype=torch.complex64)})}
    run = parse_run(_run([_ok_call("plain", "tensors/0000.safetensors")], odd), plan)
    assert run.calls["plain"].status == "invalid"


def test_a_well_formed_report_becomes_an_outcome(plan: ProbePlan) -> None:
    tensors = {"tensors/0000.safetensors": save({"out.0": torch.ones(2, 5, 6),
                                                 "out.1": torch.ones(2, 5, 7)})}
    run = parse_run(_run([_ok_call("plain", "tensors/0000.safetensors")], tensors), plan)
    outcome = run.calls["plain"]
    assert outcome.status == "ok" and outcome.usable
    assert outcome.forwards[0].structure == "tuple[2]"
    assert outcome.forwards[0].outputs[0] is not None
    assert outcome.forwards[0].outputs[0].shape == (2, 5, 6)
