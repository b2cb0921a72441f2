"""What the supervisor establishes outside the student's interpreter: witness frames, the shared
input slots, and the descriptors the child can neither close nor replace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.compare import mutated_inputs
from grader.outcomes import Forward
from grader.validation import outcome_from_record
from sandbox.runner.witness import MAGIC, InputArena, split_frames, witness_frame

ROOT = Path(__file__).resolve().parents[2]

names = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                max_size=60)
# What the child's own writes may put between two frames: anything, fake and cut frames too.
junk = st.one_of(
    st.binary(max_size=80),
    st.builds(lambda body: MAGIC + body, st.binary(max_size=200)),
    st.builds(lambda cut: MAGIC[:cut], st.integers(1, len(MAGIC) - 1)),
)


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(names, min_size=1, max_size=6),
       between=st.lists(junk, min_size=7, max_size=7))
def test_every_frame_is_found_whatever_the_child_writes_around_it(
        frames: list[str], between: list[bytes]) -> None:
    # Each frame is one write, so its bytes are whole; the child's own writes come between.
    stream = between[0] + b"".join(witness_frame(name) + between[i + 1]
                                   for i, name in enumerate(frames))
    found = [name for line in stream.split(b"\n") for name in split_frames(line)[1]]
    assert set(frames) <= set(found)


def test_a_report_line_is_no_witness_line() -> None:
    line = json.dumps({"event": "call", "id": "x\u0000y", "forbidden": []}).encode()
    assert split_frames(line) == (line, [])
    assert split_frames(b"junk" + witness_frame("torch.a").rstrip(b"\n")) == (b"junk",
                                                                             ["torch.a"])


def _arena() -> tuple[InputArena, dict[str, torch.Tensor]]:
    inputs = {"q": torch.randn(2, 3, 4), "mask": torch.rand(3, 3) > 0.5,
              "ids": torch.arange(5)}
    plan = {"calls": [
        {"id": "plain", "target": "f", "args": [{"tensor": "q"}, {"tensor": "q"}, 3],
         "kwargs": {"mask": {"tensor": "mask"}}},
        {"id": "module", "target": "M", "init": {}, "forward": [
            {"args": [{"tensor": "ids"}]}, {"args": [{"output_of": 0}, {"tensor": "q"}]}]},
    ]}
    return InputArena(plan, inputs), inputs


def test_the_arena_holds_each_forward_s_inputs_in_slots_of_their_own() -> None:
    arena, inputs = _arena()
    first, second = arena.tensor("plain", "arg0"), arena.tensor("plain", "arg1")
    assert first is not None and second is not None
    assert torch.equal(first, inputs["q"]) and torch.equal(second, inputs["q"])
    assert torch.equal(arena.tensor("plain", "kw.mask"), inputs["mask"])  # type: ignore[arg-type]
    assert torch.equal(arena.tensor("module", "f0.arg0"), inputs["ids"])  # type: ignore[arg-type]
    assert torch.equal(arena.tensor("module", "f1.arg1"), inputs["q"])  # type: ignore[arg-type]
    assert arena.tensor("module", "f1.arg0") is None  # an earlier output is not an input
    first.mul_(2)
    assert arena.changed("plain") == ["arg0"] and arena.changed("module") == []


def test_a_change_made_in_a_forked_child_is_seen_by_the_process_that_made_the_arena() -> None:
    arena, _ = _arena()
    pid = os.fork()
    if pid == 0:  # the child: change one slot in place, as a submission's q.div_() would
        try:
            slot = arena.tensor("module", "f1.arg1")
            assert slot is not None
            slot.div_(3)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert arena.changed("module") == ["f1.arg1"]
    assert arena.changed("plain") == []


def test_the_supervisor_s_changed_slots_make_an_input_mutated_whatever_after_says() -> None:
    record = {"id": "module", "status": "ok", "inputs_changed": ["f1.arg1", "f9.arg0", "x"],
              "stages": [{"stage": "f0.forward", "status": "ok", "returned": {"kind": "tensor",
                                                                            "key": None}},
                         {"stage": "f1.forward", "status": "ok", "returned": {"kind": "tensor",
                                                                            "key": None}}]}
    outcome = outcome_from_record(record, {})
    assert [forward.changed for forward in outcome.forwards] == [frozenset(),
                                                                  frozenset({"arg1"})]
    q = torch.randn(2, 3)
    told_unchanged = Forward("ok", after={"arg1": q.clone()}, changed=frozenset({"arg1"}))
    assert mutated_inputs(told_unchanged, {"q": q}, {"arg1": "q"}) == ["arg1"]
    assert mutated_inputs(Forward("ok", after={"arg1": q.clone()}), {"q": q},
                          {"arg1": "q"}) == []


# Runs in a process of its own: a seccomp filter cannot be removed once installed.
PROTECT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from sandbox.runner.guards import protect_descriptors
read, write = os.pipe()
other_read, other_write = os.pipe()
report = {"installed": protect_descriptors((write,))}
def errno_of(function):
    try:
        function()
        return 0
    except OSError as error:
        return error.errno
report["close"] = errno_of(lambda: os.close(write))
report["dup2_onto"] = errno_of(lambda: os.dup2(other_write, write))
report["dup3_onto"] = errno_of(lambda: os.dup2(other_write, write, inheritable=False))
os.closerange(write, write + 1)
report["dup_of"] = errno_of(lambda: os.dup(write))
report["dup2_elsewhere"] = errno_of(lambda: os.dup2(write, 90))
report["close_other"] = errno_of(lambda: os.close(other_read))
os.write(write, b"still here")
report["read"] = os.read(read, 20).decode()
print(json.dumps(report))
"""


def test_the_witness_descriptor_cannot_be_closed_or_replaced() -> None:
    done = subprocess.run([sys.executable, "-I", "-c", PROTECT, str(ROOT)], capture_output=True,
                          text=True, timeout=120, check=True)
    report = json.loads(done.stdout.splitlines()[-1])
    eperm = 1
    assert report == {"installed": True, "close": eperm, "dup2_onto": eperm, "dup3_onto": eperm,
                      "dup_of": 0, "dup2_elsewhere": 0, "close_other": 0,
                      "read": "still here"}
