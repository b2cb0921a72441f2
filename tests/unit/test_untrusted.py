"""No byte from the sandbox can crash or stall the grader: the parser is total and capped.

Forged events, tensor files and headers, as student code can write them, must each give a
complete results document. Bounds are asserted through the caps (what is refused before it is
parsed), never through timings.
"""

from __future__ import annotations

import hashlib
import json
import struct
import tracemalloc
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save

from assignments import Assignment, ProbePlan
from grader import untrusted
from grader.pipeline import GradingPipeline
from grader.untrusted import Refused
from grader.validation import MAX_ELEMENTS_PER_TENSOR, MAX_TENSORS_PER_CALL, parse_run
from sandbox import Job, Limits, RunResult, Termination

FUZZ = settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
TENSOR_FILE = "tensors/0000.safetensors"


class _CannedSandbox:
    """A sandbox that hands back the given bytes, as a hostile runner would."""

    name = "canned"
    isolation = "none: canned bytes"

    def __init__(self, result: RunResult) -> None:
        self.result = result

    def run(self, job: Job, limits: Limits) -> RunResult:
        return self.result

    def close(self) -> None:
        """Nothing to release."""


def _result(events: bytes, tensors: dict[str, bytes] | None = None) -> RunResult:
    return RunResult(termination=Termination.EXITED, exit_code=0, wall_seconds=0.1,
                     events=events, tensor_files=tensors or {})


def _lines(*events: Any) -> bytes:
    return b"".join((e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n"
                    for e in events)


def _grade(attention: Assignment, result: RunResult) -> dict[str, Any]:
    files = {"attention.py": b"def attention(q, k, v, allowed):\n    return q, q\n"}
    return GradingPipeline(backend=_CannedSandbox(result)).grade(attention, files, seed=3)


def _assert_complete(document: dict[str, Any], attention: Assignment) -> None:
    assert {"score", "max_score", "tests", "diagnoses", "output"} <= set(document)
    assert len(document["tests"]) == len(attention.checks)
    assert 0.0 <= document["score"] <= document["max_score"]


@pytest.fixture(scope="module")
def plan(attention: Assignment) -> ProbePlan:
    return attention.build_plan(3)


IMPORT_OK = {"event": "import", "status": "ok", "seconds": 0.01, "forbidden": []}


@pytest.mark.parametrize("forged", [
    b'{"event": "start", "imports_seconds": 1' + b"7" * 400 + b"}",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"event": "import", "status": "raised", "exception": {"type": "ValueError", '
    b'"frames": [{"file": "attention.py", "line": Infinity}]}}',
    b'{"event": "call", "id": ["plain"], "status": {"ok": 1}}',
    b'{"event": "watchdog", "call": {"a": 1}}',
    b'{"event": "import", "status": ["ok"], "seconds": 1e999}',
])
def test_each_forged_line_of_the_issue_gives_a_complete_document(
        forged: bytes, attention: Assignment) -> None:
    _assert_complete(_grade(attention, _result(_lines(forged, IMPORT_OK))), attention)


def test_numbers_past_their_range_are_refused_while_parsing() -> None:
    for line in (b"1" * 400, b"[Infinity]", b"[-Infinity]", b"[NaN]", b"[1e999]"):
        with pytest.raises(Refused):
            untrusted.loads(line)
    assert untrusted.loads(b'{"a": [1.5, -3]}') == {"a": [1.5, -3]}


def test_length_and_depth_are_capped_before_anything_is_built() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(Refused, match="over the"):
            untrusted.loads(b" " * (untrusted.MAX_LINE_BYTES + 1))
        with pytest.raises(Refused):
            untrusted.loads(b"[" * 5000 + b"]" * 5000)
        with pytest.raises(Refused, match="deeper"):
            untrusted.loads(b"[" * (untrusted.MAX_DEPTH + 1) + b"]" * (untrusted.MAX_DEPTH + 1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def _header(entries: dict[str, Any], payload: bytes = b"") -> bytes:
    header = json.dumps(entries).encode()
    return struct.pack("<Q", len(header)) + header + payload


@pytest.mark.slow
def test_a_header_of_450000_entries_is_refused_by_its_size_alone() -> None:
    entries = {f"t{i}": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
               for i in range(450_000)}
    data = _header(entries, bytes(4 * 450_000))
    (declared,) = struct.unpack("<Q", data[:8])
    assert declared > untrusted.MAX_HEADER_BYTES
    with pytest.raises(Refused, match="header of"):
        untrusted.check_safetensors(data, max_tensors=MAX_TENSORS_PER_CALL,
                                    max_elements=MAX_ELEMENTS_PER_TENSOR)


def test_a_header_within_the_size_cap_is_capped_in_entries() -> None:
    entries = {f"{i}": {"dtype": "BOOL", "shape": [0], "data_offsets": [0, 0]}
               for i in range(MAX_TENSORS_PER_CALL + 1)}
    with pytest.raises(Refused, match="tensors in one file"):
        untrusted.check_safetensors(_header(entries), max_tensors=MAX_TENSORS_PER_CALL,
                                    max_elements=MAX_ELEMENTS_PER_TENSOR)


@pytest.mark.parametrize("entry", [
    {"dtype": "F32", "shape": [10**30], "data_offsets": [0, 4]},
    {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]},
    {"dtype": "F32", "shape": [1], "data_offsets": [0, 40]},
    {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
    {"dtype": "F32", "shape": [1] * 9, "data_offsets": [0, 4]},
    {"dtype": "F32", "shape": [1024, 1024, 2], "data_offsets": [0, 4]},
])
def test_a_header_entry_that_disagrees_with_the_file_is_refused(entry: dict[str, Any]) -> None:
    with pytest.raises(Refused):
        untrusted.check_safetensors(_header({"x": entry}, bytes(4)), max_tensors=256,
                                    max_elements=MAX_ELEMENTS_PER_TENSOR)


def test_a_real_tensor_file_passes_the_header_check() -> None:
    data = save({"out.0": torch.randn(2, 3), "mask": torch.ones(3, dtype=torch.bool),
                 "idx": torch.arange(4)})
    untrusted.check_safetensors(data, max_tensors=256, max_elements=MAX_ELEMENTS_PER_TENSOR)


def _ok_call(call_id: Any, stages: Any = None, **extra: Any) -> dict[str, Any]:
    return {"event": "call", "id": call_id, "status": "ok", "forbidden": [],
            "stages": stages if stages is not None else [
                {"stage": "forward", "status": "ok", "seconds": 0.001, "returned": {
                    "kind": "tuple", "length": 2, "items": [
                        {"kind": "tensor", "key": "out.0"}, {"kind": "tensor", "key": "out.1"}]}}],
            **extra}


# --------------------------------------------------------------------------------------------
# Fuzzing: arbitrary bytes, arbitrary JSON in the protocol's shape, arbitrary headers.
# --------------------------------------------------------------------------------------------

_KEYS = st.sampled_from(["event", "id", "status", "stages", "stage", "returned", "kind",
                         "items", "key", "length", "tensors", "forbidden", "exception", "frames",
                         "line", "file", "seconds", "imports_seconds", "call", "type",
                         "message", "value_error", "missing", "interface", "x"])
_SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
            | st.floats(allow_nan=True, allow_infinity=True)
            | st.sampled_from(["call", "import", "ok", "raised", "timeout", "forward",
                               "f0.forward", "backward", "tensor", "tuple", "plain",
                               TENSOR_FILE, "watchdog", "start", "done"])
            | st.text(max_size=20))
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=5)
                     | st.dictionaries(_KEYS, inner, max_size=6), max_leaves=40)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_arbitrary_bytes_parse_to_a_run(plan: ProbePlan, lines: list[bytes]) -> None:
    run = parse_run(_result(b"\n".join(lines)), plan)
    assert set(run.calls) == {call.id for call in plan.calls}


@FUZZ
@given(st.lists(_JSON, max_size=12), st.sampled_from(["plain", "heads", "masked-2d"]))
def test_arbitrary_json_events_parse_to_a_run(plan: ProbePlan, events: list[Any],
                                              call_id: str) -> None:
    forged = [e | {"event": "call", "id": call_id} if isinstance(e, dict) and len(e) % 2 else e
              for e in events]
    tensors = {TENSOR_FILE: save({"out.0": torch.zeros(2), "out.1": torch.zeros(2)})}
    run = parse_run(_result(b"\n".join(_dumps(e) for e in forged), tensors), plan)
    assert set(run.calls) == {call.id for call in plan.calls}
    assert all(o.status in {"ok", "raised", "timeout", "missing", "interface", "invalid", "lost"}
               for o in run.calls.values())


_DTYPES = st.sampled_from(["F32", "F64", "F16", "BOOL", "I64", "U8", "F8_E4M3", 3, None])
_ENTRY = st.fixed_dictionaries({
    "dtype": _DTYPES,
    "shape": st.lists(st.integers(min_value=-2, max_value=10**20), max_size=10) | _SCALARS,
    "data_offsets": st.lists(st.integers(min_value=-2, max_value=10**20), max_size=3) | _SCALARS,
})


@FUZZ
@given(st.dictionaries(st.text(max_size=10), _ENTRY | _JSON, max_size=8),
       st.binary(max_size=256), st.integers(min_value=0, max_value=2**64 - 1) | st.none())
def test_arbitrary_safetensors_headers_give_a_tensor_map_or_an_invalid_call(
        plan: ProbePlan, header: dict[str, Any], payload: bytes, declared: int | None) -> None:
    encoded = _dumps(header)
    size = len(encoded) if declared is None else declared
    data = struct.pack("<Q", size) + encoded + payload
    pinned = _ok_call("plain", tensors=TENSOR_FILE, sha256=hashlib.sha256(data).hexdigest())
    run = parse_run(_result(_lines(pinned), {TENSOR_FILE: data}), plan)
    assert run.calls["plain"].status in {"ok", "invalid"}
    assert not run.integrity


@settings(deadline=None, max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_JSON | st.binary(max_size=80), max_size=8))
def test_arbitrary_events_give_a_complete_document(attention: Assignment,
                                                    events: list[Any]) -> None:
    lines = b"\n".join(e if isinstance(e, bytes) else _dumps(e) for e in events)
    _assert_complete(_grade(attention, _result(_lines(IMPORT_OK) + lines)), attention)
