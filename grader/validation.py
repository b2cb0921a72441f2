"""What a run produced, validated: the sandbox's raw bytes become typed outcomes, or are refused.

Everything the sandbox hands back is the student's and is treated as hostile data: events are
size-capped JSON read field by field with types checked, tensors are safetensors (a format that
holds numbers and cannot hold code) with allowed dtypes and capped sizes. Nothing is unpickled,
imported or executed. The records of in-process runs (``grader.in_process``) are read by the
same code, so that the student, the reference and the variants are compared alike.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors

from assignments import ProbePlan
from grader import untrusted
from grader.outcomes import CallOutcome, Forward, Frame, IntegrityFlag, Raised, SubmissionRun
from grader.untrusted import Refused, integer, name, seconds, strings, text
from sandbox import RunResult

ALLOWED_DTYPES = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16,
                            torch.bool, torch.int64, torch.int32})
MAX_ELEMENTS_PER_TENSOR = 1 << 20
MAX_TENSORS_PER_CALL = 256
MAX_EVENTS = 10_000
MAX_STAGES = 64
MAX_RETURNED_ITEMS = 16
MAX_RETURNED_DEPTH = 2  # the runner's: (output, cache) with the cache's items
MAX_FRAMES = 12
MAX_INTEGRITY_FLAGS = 32


class _Invalid(Exception):
    pass


class _Rewritten(_Invalid):
    """A tensor file that differs from the one the supervisor pinned when the call reported."""


class _Flags:
    def __init__(self) -> None:
        self.flags: list[IntegrityFlag] = []

    def add(self, flag: str, evidence: str) -> None:
        entry = IntegrityFlag(flag[:40], evidence[:300])
        if entry not in self.flags and len(self.flags) < MAX_INTEGRITY_FLAGS:
            self.flags.append(entry)

    def extend(self, reported: Any) -> None:
        """Flags the runner reported, each a ``{"flag", "evidence"}`` object."""
        if not isinstance(reported, list):
            return
        for item in reported[:MAX_INTEGRITY_FLAGS]:
            if isinstance(item, dict) and name(item.get("flag"), 40):
                self.add(item["flag"], text(item.get("evidence"), 300))


def parse_run(run: RunResult, plan: ProbePlan) -> SubmissionRun:
    """Validate a sandbox run against the plan it executed."""
    problems: list[str] = []
    records: dict[str, dict[str, Any]] = {}
    flags = _Flags()
    if run.forged_events_file:
        flags.add("output-folder-written", "an events file was written into the output folder")
    import_event: dict[str, Any] | None = None
    watchdog: dict[str, Any] | None = None
    timings: dict[str, float] = {}
    known = {call.id for call in plan.calls}
    for number, line in enumerate(run.events.splitlines()[:MAX_EVENTS]):
        try:
            event = untrusted.loads(line)
        except Refused as exc:
            problems.append(f"event {number}: {exc}")
            continue
        if not isinstance(event, dict):
            problems.append(f"event {number}: not an object")
            continue
        kind = event.get("event")
        for phase, key in (("imports", "imports_seconds"), ("warm_up", "warm_up_seconds"),
                           ("probes", "probes_seconds")):
            value = seconds(event.get(key))
            if value is not None:
                timings.setdefault(phase, value)
        call_id = name(event.get("id"), 200)
        if kind == "import" and import_event is None:
            import_event = event
            value = seconds(event.get("seconds"))
            if value is not None:
                timings["submission_import"] = value
        elif kind == "call" and call_id in known:
            if call_id in records:
                # The supervisor forwards one report per call: the first copy is the one kept.
                flags.add("duplicate-report", f"call {call_id} was reported twice")
            else:
                records[call_id] = event
        elif kind == "watchdog" and watchdog is None:
            watchdog = event
        elif kind == "integrity":
            flags.extend(event.get("flags"))

    # The runner's watchdog ended the process inside a call (or the import) whose code
    # swallowed or blocked the soft time limit: that call timed out, it did not crash. A forged
    # watchdog event can only relabel a call that never reported back, which scores 0 anyway.
    overran = name(watchdog.get("call"), 200) if watchdog is not None else None
    calls: dict[str, CallOutcome] = {}
    for call in plan.calls:
        record = records.get(call.id)
        if record is None:
            calls[call.id] = CallOutcome(call.id, "timeout" if call.id == overran else "lost")
            continue
        try:
            tensors = _load_tensors(record, run.tensor_files)
            calls[call.id] = outcome_from_record(record, tensors)
        except _Rewritten as exc:
            flags.add("output-rewritten", f"call {call.id}: {exc}")
            calls[call.id] = CallOutcome(call.id, "invalid", detail=str(exc))
        except _Invalid as exc:
            problems.append(f"{call.id}: {exc}")
            calls[call.id] = CallOutcome(call.id, "invalid", detail=str(exc))

    import_error: Raised | None = None
    forbidden: tuple[str, ...] = ()
    import_timed_out = import_event is None and watchdog is not None and overran is None
    if import_event is not None:
        status = name(import_event.get("status"), 20)
        import_timed_out = status == "timeout"
        if status == "raised":
            import_error = _raised(import_event.get("exception"))
        forbidden = _forbidden(import_event.get("forbidden"))
    return SubmissionRun(
        termination=run.termination,
        exit_code=run.exit_code,
        calls=calls,
        import_error=import_error,
        import_timed_out=import_timed_out,
        forbidden_at_import=forbidden,
        stdout=run.stdout,
        stderr=run.stderr,
        output_truncated=run.output_truncated,
        wall_seconds=run.wall_seconds,
        protocol_problems=tuple(problems),
        timings=timings,
        watchdog_fired=watchdog is not None,
        integrity=tuple(flags.flags),
    )


def outcome_from_record(record: Mapping[str, Any],
                        tensors: Mapping[str, torch.Tensor]) -> CallOutcome:
    """Build a call outcome from the runner's record and tensors; _Invalid on malformed data."""
    call_id = text(record.get("id"), 200)
    status = name(record.get("status"), 20)
    forbidden = _forbidden(record.get("forbidden"))
    if status in {"missing", "interface"}:
        detail = (f"the submission does not define `{text(record.get('missing'), 80)}`"
                  if status == "missing" else record.get("interface"))
        unregistered = status == "interface" and record.get("unregistered") is True
        return CallOutcome(call_id, str(status), forbidden=forbidden, detail=text(detail, 300),
                           unregistered=unregistered)
    if status not in {"ok", "raised", "timeout"}:
        raise _Invalid(f"unknown status {text(record.get('status'), 20)!r}")
    stages = record.get("stages")
    if not isinstance(stages, list):
        raise _Invalid("stages missing")
    if len(stages) > MAX_STAGES:
        raise _Invalid(f"{len(stages)} stages")
    changed = frozenset(strings(record.get("inputs_changed"), items=MAX_STAGES, limit=80))
    forwards = _forwards(stages, tensors, changed)
    return CallOutcome(call_id, status, tuple(forwards), forbidden)


def _forwards(stages: list[Any], tensors: Mapping[str, torch.Tensor],
              changed: frozenset[str] = frozenset()) -> list[Forward]:
    """The call's forwards from its stages; ``changed``: the input slots (``f0.arg0``) the
    supervisor saw changed."""
    forwards: list[Forward] = []
    for stage in stages:
        if not isinstance(stage, dict):
            raise _Invalid("malformed stage")
        stage_name = text(stage.get("stage"), 40)
        status = name(stage.get("status"), 20)
        if stage_name in {"init", "setup"}:
            if status != "ok":
                forwards.append(_failed(stage_name, stage))
            continue
        prefix, _, kind = stage_name.rpartition(".")
        prefix = f"{prefix}." if prefix else ""
        if kind == "forward":
            if status != "ok":
                forwards.append(_failed("forward", stage))
                continue
            structure, keys = _structure(stage.get("returned"))
            forwards.append(Forward(
                status="ok",
                structure=structure,
                outputs=tuple(tensors.get(key) if key else None for key in keys),
                after=_with_prefix(tensors, f"{prefix}after."),
                changed=_positions_under(changed, prefix),
                seconds=seconds(stage.get("seconds")) or 0.0,
            ))
        elif kind == "backward" and forwards:
            last = forwards[-1]
            raised = _raised(stage.get("exception")) if status == "raised" else None
            forwards[-1] = Forward(
                status="timeout" if status == "timeout" else last.status,
                raised=raised or last.raised,
                stage="backward" if raised or status == "timeout" else last.stage,
                structure=last.structure,
                outputs=last.outputs,
                grads=_with_prefix(tensors, f"{prefix}grad."),
                backward=status or "",
                after=last.after,
                changed=last.changed,
                seconds=last.seconds,
            )
    return forwards


_POSITION = re.compile(r"arg[0-9]{1,3}|kw\.[A-Za-z_][A-Za-z0-9_]{0,60}")


def _positions_under(keys: frozenset[str], prefix: str) -> frozenset[str]:
    """The argument positions (``arg0``, ``kw.mask``) of the keys under one forward's prefix."""
    return frozenset(key[len(prefix):] for key in keys
                     if key.startswith(prefix) and _POSITION.fullmatch(key[len(prefix):]))


def _failed(stage_name: str, stage: Mapping[str, Any]) -> Forward:
    status = "timeout" if stage.get("status") == "timeout" else "raised"
    raised = _raised(stage.get("exception")) if status == "raised" else None
    return Forward(status=status, raised=raised, stage=stage_name)


def _structure(returned: Any, depth: int = 0) -> tuple[str, list[str | None]]:
    """A returned value's shape description and the tensor keys of its items.

    A tuple or list inside the returned one (the cache of ``(output, cache)``) is read the same
    way, to the runner's depth: its tensors follow in order, and the description names the
    form of every item (``tuple[2](tensor, tuple[3](tensor, tensor, tensor))``). A flat tuple
    returned on its own keeps its short description (``tuple[2]``).
    """
    if not isinstance(returned, dict):
        raise _Invalid("malformed returned value")
    kind = name(returned.get("kind"), 40)
    if kind == "tensor":
        return "tensor", [text(returned.get("key"), 100)]
    if kind in {"tuple", "list"}:
        items = returned.get("items")
        if not isinstance(items, list) or len(items) > MAX_RETURNED_ITEMS:
            raise _Invalid("malformed returned items")
        length = integer(returned.get("length"), 0, 1 << 40)
        described = f"{kind}[{length if length is not None else len(items)}]"
        nested = any(isinstance(item, dict) and item.get("kind") in {"tuple", "list"}
                     for item in items)
        if not nested and depth == 0:
            keys = [text(item.get("key"), 100)
                    if isinstance(item, dict) and item.get("kind") == "tensor" else None
                    for item in items]
            return described, keys
        if nested and depth >= MAX_RETURNED_DEPTH - 1:
            raise _Invalid("returned value nested too deep")
        forms, keys = [], []
        for item in items:
            form, item_keys = _structure(item, depth + 1)
            forms.append(form)
            # One output per item: a tensor's key, a tuple's own items, None for anything else.
            is_tuple = isinstance(item, dict) and item.get("kind") in {"tuple", "list"}
            keys.extend(item_keys if item_keys or is_tuple else [None])
        if len(keys) > MAX_RETURNED_ITEMS:
            raise _Invalid("too many returned items")
        return f"{described}({', '.join(forms)})", keys
    if kind == "tensor-subclass":
        return f"tensor-subclass {text(returned.get('type'), 80)}", []
    return text(returned.get("type"), 80) or "unknown", []


def _with_prefix(tensors: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {key[len(prefix):]: value for key, value in tensors.items() if key.startswith(prefix)}


def _load_tensors(record: Mapping[str, Any], files: Mapping[str, bytes]) -> dict[str, torch.Tensor]:
    file_name = record.get("tensors")
    if file_name is None:
        return {}
    if not isinstance(file_name, str) or file_name not in files:
        raise _Invalid("tensor file missing")
    pinned = name(record.get("sha256"), 64)
    if pinned is None:
        raise _Invalid("tensor file not pinned by the runner")
    if hashlib.sha256(files[file_name]).hexdigest() != pinned:
        raise _Rewritten(f"{file_name} changed after the call reported it")
    try:
        untrusted.check_safetensors(files[file_name], max_tensors=MAX_TENSORS_PER_CALL,
                                    max_elements=MAX_ELEMENTS_PER_TENSOR)
        tensors = load_safetensors(files[file_name])
    except Refused as exc:
        raise _Invalid(f"tensor file refused: {exc}") from exc
    except (SafetensorError, ValueError, RuntimeError, OverflowError) as exc:
        raise _Invalid(f"unreadable tensor file: {str(exc)[:200]}") from exc
    for key, value in tensors.items():
        if type(value) is not torch.Tensor or value.dtype not in ALLOWED_DTYPES:
            raise _Invalid(f"{key}: dtype {value.dtype} is not allowed")
        if value.numel() > MAX_ELEMENTS_PER_TENSOR:
            raise _Invalid(f"{key}: {value.numel()} elements is over the limit")
    return tensors


def _raised(data: Any) -> Raised:
    if not isinstance(data, dict):
        return Raised(type="Exception", value_error=False, message="")
    listed = data.get("frames")
    frames = tuple(
        Frame(
            file=text(frame.get("file"), 120),
            line=integer(frame.get("line"), 0, 10_000_000) or 0,
            function=text(frame.get("function"), 120),
            code=text(frame.get("code"), 200),
        )
        for frame in (listed[-MAX_FRAMES:] if isinstance(listed, list) else [])
        if isinstance(frame, dict)
    )
    return Raised(
        type=text(data.get("type"), 80) or "Exception",
        value_error=data.get("value_error") is True,
        message=text(data.get("message"), 2000),
        frames=frames,
    )


def _forbidden(value: Any) -> tuple[str, ...]:
    return strings(value, items=16, limit=120)


