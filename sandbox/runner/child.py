"""The child: the runner's process that imports the submission and runs the plan's calls.

The student's code shares this process, so what it reports is only the student's own outputs:
each call as a JSON line on the report pipe, its tensors in a safetensors file; the supervisor
checks and forwards them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from safetensors.torch import save_file

from . import executor
from .executor import CallTimeout, execute_call, stage_failure, unreadable_return
from .guards import (
    CallBudget,
    ForbiddenTrap,
    Integrity,
    allow_unix_sockets_only,
    call_seconds,
    limit_address_space,
    protect_descriptors,
)
from .shared import TENSORS_DIR
from .witness import frame_writer


def _encoder() -> Callable[[Any], str]:
    """A JSON encoder made of the C encoder as it is now, before the student's code runs:
    patching ``json.dumps``, ``JSONEncoder`` or ``json.encoder`` later does not reach it."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the pure-Python encoder, bound now
        return json.JSONEncoder(allow_nan=False).encode

    def unsupported(value: Any) -> Any:
        raise TypeError(f"{type(value).__name__} is not JSON")

    encode = make(None, unsupported, json.encoder.encode_basestring_ascii, None, ": ", ", ",
                  False, False, False)
    return lambda value: "".join(encode(value, 0))


class _Report:
    """The child's side: each event as a JSON line on the report pipe, tensors in files."""

    def __init__(self, fd: int, out_dir: str) -> None:
        self._fd = fd
        self._out_dir = out_dir
        self._count = 0
        self._dumps = _encoder()

    def emit(self, event: dict[str, Any],
             tensors: Mapping[str, torch.Tensor] | None = None) -> None:
        if tensors:
            name = f"{self._count:04d}.safetensors"
            self._count += 1
            try:
                # Copies: a returned input (``return q``) shares memory with the input handed
                # back after the call, which safetensors refuses to write.
                save_file(
                    {key: value.contiguous().clone() for key, value in tensors.items()},
                    os.path.join(self._out_dir, TENSORS_DIR, name),
                )
                event["tensors"] = f"{TENSORS_DIR}/{name}"
            except Exception as exc:
                event["tensors_error"] = f"{type(exc).__name__}: {exc}"[:300]
        line = memoryview((self._dumps(event) + "\n").encode())
        while line:
            line = line[os.write(self._fd, line):]


def child_main(report_fd: int, job: Mapping[str, Any]) -> None:
    """Import the submission and run the plan's calls, reporting each on ``report_fd``, where
    the forbidden APIs seen also go at once, as witness frames."""
    hard_exit = os._exit  # kept before student code can replace it
    plan, inputs = job["plan"], job["inputs"]
    student_files = job["student_files"]
    report = _Report(report_fd, job["out_dir"])
    trap = ForbiddenTrap(list(plan.get("forbidden", [])), frame_writer(report_fd))
    trap.__enter__()  # type: ignore[no-untyped-call]  # for the life of the child: it ends by hard_exit
    # After the trap, so that the integrity snapshot holds the trap's wrappers.
    integrity = Integrity(job["out_dir"], student_files, list(plan.get("forbidden", [])),
                          _runner_parts())
    budget = CallBudget(float(plan["call_timeout"]), integrity, job["submission_dir"],
                        on_stage=lambda: report.emit({"event": "stage"}))
    integrity.install()

    limit_address_space(plan.get("memory_bytes"))
    sockets = "unix-only" if allow_unix_sockets_only() else "unfiltered"
    protect_descriptors((report_fd,))
    sys.path.insert(0, job["submission_dir"])
    sys.dont_write_bytecode = True
    started = time.perf_counter()
    try:
        with budget():
            namespace = _import_submission(os.path.join(job["submission_dir"], plan["entry"]))
    except BaseException as exc:
        failure = stage_failure("import", exc, student_files)
        report.emit({"event": "import", "seconds": time.perf_counter() - started, **failure,
                     "integrity": integrity.take()})
        hard_exit(0)
    report.emit({
        "event": "import", "status": "ok", "seconds": time.perf_counter() - started,
        "forbidden": trap.take(), "integrity": integrity.take(), "sockets": sockets,
    })
    for call in plan["calls"]:
        integrity.at(f"call {call['id']}")
        try:
            record, tensors = execute_call(
                namespace, call, inputs, student_files=student_files,
                guard=budget.lasting(call_seconds(call, float(plan["call_timeout"]))),
                arena=job.get("arena"),
            )
        except CallTimeout:
            record, tensors = {"id": call["id"], "status": "timeout", "stages": []}, {}
        except BaseException as exc:
            # What the call handed back broke the runner's own reading of it: that call's
            # interface problem, and the next call runs as if nothing happened.
            record, tensors = {"id": call["id"], "status": "interface", "stages": [],
                               "interface": unreadable_return(exc)}, {}
        record["event"] = "call"
        record["forbidden"] = trap.take()
        record["integrity"] = integrity.take()
        report.emit(record, tensors)
    sys.stdout.flush()
    sys.stderr.flush()
    hard_exit(0)  # skip interpreter teardown: atexit hooks and finalizers are the student's


def _import_submission(path: str) -> dict[str, Any]:
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {os.path.basename(path)}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return vars(module)


def _runner_parts() -> dict[str, tuple[Any, str]]:
    """The runner's parts this process looks up as it runs (``Integrity``'s ``runner``)."""
    child = sys.modules[__name__]
    return {
        "runner.execute_call": (child, "execute_call"),
        "runner.describe_exception": (executor, "describe_exception"),
        "runner._Report": (child, "_Report"),
        "runner._CallBudget": (child, "CallBudget"),
        "runner._Integrity": (child, "Integrity"),
        "runner._child_main": (child, "child_main"),
        "safetensors.save_file": (child, "save_file"),
    }
