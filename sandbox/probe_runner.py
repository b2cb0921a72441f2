"""Probe runner: the only code of ours that runs next to student code, inside the sandbox.

It imports the submission in this interpreter, executes the calls of a probe plan on the inputs
the grader chose, and streams each call's raw outcome as it finishes: returned tensors and
gradients in safetensors files, everything else as JSON lines. It never sees expected values,
the reference or the known-mistake variants, and it computes no verdict: the grader, outside,
decides everything from what this process hands back. Student code shares this process, so
nothing written here is trusted by the grader; it is only the student's own outputs, in bulk.

The call executor (``execute_call``) is also used by the grader to run the reference and the
known-mistake variants on the same plan, so all three are exercised identically.

Usage (inside the sandbox, with ``python -I``)::

    probe_runner.py JOB_DIR OUT_DIR [--wait-for FILE]

JOB_DIR holds ``plan.json``, ``inputs.safetensors`` and ``submission/``; OUT_DIR receives
``events.jsonl`` and ``tensors/NNNN.safetensors``. With ``--wait-for`` the runner imports
torch, warms it up, writes a ``ready`` event and then waits until FILE exists before it reads
the job (the warm-pool mode of the Docker backend).

Only the standard library, torch and safetensors may be imported here.
"""

from __future__ import annotations

import time

_STARTED_AT = time.perf_counter()  # before the heavy imports, to time them

import contextlib
import importlib.util
import json
import os
import resource
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from safetensors.torch import load_file, save_file

_IMPORTED_AT = time.perf_counter()

PLAN_FILE = "plan.json"
INPUTS_FILE = "inputs.safetensors"
SUBMISSION_DIR = "submission"
EVENTS_FILE = "events.jsonl"
TENSORS_DIR = "tensors"

MAX_MESSAGE_CHARS = 2000
MAX_TRACEBACK_FRAMES = 12
# Grace after a call's budget before the watchdog ends the whole process: the soft limit
# (SIGALRM) lets the runner carry on with the next call, the hard one does not need the
# student's cooperation.
WATCHDOG_GRACE_SECONDS = 1.0

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class CallTimeout(BaseException):
    """Raised by SIGALRM inside a call that overran its budget.

    A BaseException so that a student's ``except Exception`` does not swallow it.
    """


# The kernels and helpers the forbidden public APIs dispatch to: a submission that calls one of
# them directly (``torch._scaled_dot_product_flash_attention_for_cpu``, ``torch.ops.aten...``,
# ``F.multi_head_attention_forward``) uses the forbidden API as much as one that calls it by name.
UNDERLYING_KERNELS = {
    "scaled_dot_product_attention": (
        "scaled_dot_product_attention", "_fused_sdp_choice", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_attention_math_for_mps", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable",
        "_triton_scaled_dot_attention"),
    "MultiheadAttention": (
        "multi_head_attention_forward", "_native_multi_head_attention",
        "_triton_multi_head_attention"),
}


class _ForbiddenTrap(torch.overrides.TorchFunctionMode):
    """Records calls of forbidden APIs while delegating to them (the student is not crashed on).

    Two nets: the listed attributes are wrapped (a method such as ``MultiheadAttention.forward``
    is no torch function), and, as a torch function mode, every torch function the submission
    calls is seen by name, so the forbidden functions and the ATen kernels under them are
    recorded however they were reached (an alias, ``torch.ops.aten``, the original behind a
    wrapper). Inside a wrapped API the mode records nothing more: one call, one name.
    """

    def __init__(self, dotted_names: list[str]) -> None:
        super().__init__()
        self.called: set[str] = set()
        self._inside = 0
        self._kernels: dict[str, str] = {}
        for dotted in dotted_names:
            self._install(dotted)
            for kernels in underlying_kernels(dotted):
                if kernels:
                    self._kernels.update({kernel: _kernel_path(kernel, dotted)
                                          for kernel in kernels})

    def _install(self, dotted: str) -> None:
        owner_path, _, attribute = dotted.rpartition(".")
        owner = _resolve(owner_path)
        if owner is None or not hasattr(owner, attribute):
            return
        original = getattr(owner, attribute)
        trap = self

        def recording(*args: Any, **kwargs: Any) -> Any:
            if not trap._inside:  # the outermost forbidden API is the one the student called
                trap.called.add(dotted)
            trap._inside += 1
            try:
                return original(*args, **kwargs)
            finally:
                trap._inside -= 1

        with contextlib.suppress(AttributeError, TypeError):
            setattr(owner, attribute, recording)

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        if not self._inside:
            name = _function_name(func)
            if name in self._kernels:
                self.called.add(self._kernels[name])
        return func(*args, **(kwargs or {}))

    def take(self) -> list[str]:
        called = sorted(self.called)
        self.called.clear()
        return called


def underlying_kernels(api: str) -> list[tuple[str, ...]]:
    """The kernel names under a forbidden API (by the family named in its dotted path)."""
    return [kernels for family, kernels in UNDERLYING_KERNELS.items()
            if family in api.split(".")]


def _kernel_path(kernel: str, api: str) -> str:
    """How a kernel is reported: the API itself by its listed name, others where they live."""
    if api.rsplit(".", 1)[-1] == kernel:
        return api
    if kernel == "multi_head_attention_forward":
        return "torch.nn.functional.multi_head_attention_forward"
    return f"torch.{kernel}"


def _function_name(func: Any) -> str:
    """The bare name of a torch function or ATen overload (``aten.x.default`` -> ``x``)."""
    name = getattr(func, "__name__", "")
    if not isinstance(name, str):
        return ""
    overload = getattr(func, "_overloadpacket", None)
    if overload is not None:
        name = str(getattr(overload, "__name__", name))
    return name


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    if not parts or parts[0] != "torch":
        return None
    obj: Any = torch
    for part in parts[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


# --------------------------------------------------------------------------------------------
# The call executor, shared with the grader.
# --------------------------------------------------------------------------------------------


def execute_call(
    namespace: Mapping[str, Any],
    call: Mapping[str, Any],
    inputs: Mapping[str, torch.Tensor],
    *,
    student_files: tuple[str, ...] = (),
    guard: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Run one call of a probe plan against ``namespace`` (the submission's globals).

    Returns the JSON-able record of what happened and the tensors to hand back, keyed by
    name. ``guard`` wraps each stage that runs foreign code (the per-call time budget).
    """
    guard = guard or contextlib.nullcontext
    record: dict[str, Any] = {"id": call["id"], "status": "ok", "stages": []}
    tensors: dict[str, torch.Tensor] = {}
    if "init" in call:
        _execute_module_call(namespace, call, inputs, record, tensors, student_files, guard)
    else:
        target = namespace.get(call["target"])
        if not callable(target):
            record["status"] = "missing"
            record["missing"] = call["target"]
            return record, tensors
        _execute_forward(
            target, call, inputs, "", record, tensors, student_files, guard, parameters={}
        )
    return record, tensors


def _execute_module_call(
    namespace: Mapping[str, Any],
    call: Mapping[str, Any],
    inputs: Mapping[str, torch.Tensor],
    record: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    student_files: tuple[str, ...],
    guard: Callable[[], contextlib.AbstractContextManager[None]],
) -> None:
    cls = namespace.get(call["target"])
    if not isinstance(cls, type):
        record["status"] = "missing"
        record["missing"] = call["target"]
        return
    init = call["init"]
    try:
        with guard():
            module = cls(*_values(init.get("args", []), inputs), **_kwvalues(init, inputs))
    except BaseException as exc:
        record["stages"].append(_failure("init", exc, student_files))
        record["status"] = _status_of(exc)
        return
    record["stages"].append({"stage": "init", "status": "ok"})
    if not isinstance(module, torch.nn.Module):
        record["status"] = "interface"
        record["interface"] = f"{call['target']}(...) did not build a torch.nn.Module"
        return
    parameters: dict[str, torch.Tensor] = {}
    try:
        with guard():
            dtype = _DTYPES.get(call.get("dtype") or "")
            if dtype is not None:
                module.to(dtype)
            parameters = _load_parameters(module, call.get("parameters", {}), inputs)
            module.train(bool(call.get("train", False)))
    except _InterfaceError as exc:
        record["status"] = "interface"
        record["interface"] = str(exc)
        return
    except BaseException as exc:
        record["stages"].append(_failure("setup", exc, student_files))
        record["status"] = _status_of(exc)
        return
    for index, forward in enumerate(call.get("forward", [])):
        status = _execute_forward(
            module, forward, inputs, f"f{index}.", record, tensors, student_files, guard,
            parameters=parameters,
        )
        if status == "timeout":
            return


class _InterfaceError(Exception):
    pass


def _load_parameters(
    module: torch.nn.Module, wanted: Mapping[str, str], inputs: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Copy the grader's fixed weights into the named parameters; return those parameters."""
    loaded: dict[str, torch.Tensor] = {}
    for name, tensor_key in wanted.items():
        owner_name, _, attribute = name.rpartition(".")
        owner = getattr(module, owner_name, None) if owner_name else module
        parameter = getattr(owner, attribute, None) if owner is not None else None
        if not isinstance(parameter, torch.nn.Parameter):
            raise _InterfaceError(f"the module has no parameter {name!r}")
        value = inputs[tensor_key]
        if tuple(parameter.shape) != tuple(value.shape):
            raise _InterfaceError(
                f"{name} has shape {tuple(parameter.shape)}, expected {tuple(value.shape)}"
            )
        with torch.no_grad():
            parameter.copy_(value.to(parameter.dtype))
        loaded[name] = parameter
    return loaded


def _execute_forward(
    target: Callable[..., Any],
    spec: Mapping[str, Any],
    inputs: Mapping[str, torch.Tensor],
    prefix: str,
    record: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    student_files: tuple[str, ...],
    guard: Callable[[], contextlib.AbstractContextManager[None]],
    *,
    parameters: Mapping[str, torch.Tensor],
) -> str:
    """Run one forward (and optional backward); record its outcome under ``prefix``."""
    args = _values(spec.get("args", []), inputs, fresh=True)
    kwargs = _kwvalues(spec, inputs, fresh=True)
    leaves = _grad_leaves(spec, args, kwargs)
    if "seed" in spec:
        torch.manual_seed(int(spec["seed"]))
    for parameter in parameters.values():
        parameter.grad = None
    started = time.perf_counter()
    stage: dict[str, Any] = {"stage": prefix + "forward"}
    try:
        with guard():
            returned = target(*args, **kwargs)
    except BaseException as exc:
        stage.update(_failure(prefix + "forward", exc, student_files))
        stage["seconds"] = time.perf_counter() - started
        record["stages"].append(stage)
        status = _status_of(exc)
        record["status"] = _worst(record["status"], status)
        return status
    stage["seconds"] = time.perf_counter() - started
    stage["status"] = "ok"
    stage["returned"] = _describe_returned(returned, prefix + "out", tensors)
    _keep_inputs_after(spec, args, kwargs, prefix, tensors)
    record["stages"].append(stage)

    backward = spec.get("backward")
    if backward is None:
        return "ok"
    return _execute_backward(
        returned, backward, args, kwargs, spec, inputs, prefix, record, tensors,
        student_files, guard, parameters, leaves,
    )


def _execute_backward(
    returned: Any,
    backward: Mapping[str, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    spec: Mapping[str, Any],
    inputs: Mapping[str, torch.Tensor],
    prefix: str,
    record: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    student_files: tuple[str, ...],
    guard: Callable[[], contextlib.AbstractContextManager[None]],
    parameters: Mapping[str, torch.Tensor],
    leaves: Mapping[str, torch.Tensor],
) -> str:
    stage: dict[str, Any] = {"stage": prefix + "backward"}
    output = _pick_output(returned, int(backward.get("output", 0)))
    upstream = inputs[backward["grad"]]
    if type(output) is not torch.Tensor or tuple(output.shape) != tuple(upstream.shape):
        stage["status"] = "skipped"
        record["stages"].append(stage)
        return "ok"
    if output.grad_fn is None:
        # Nothing connects the output to the inputs: every gradient is missing.
        stage["status"] = "no-graph"
        record["stages"].append(stage)
        return "ok"
    try:
        with guard():
            output.backward(upstream.to(output.dtype))  # type: ignore[no-untyped-call]
    except BaseException as exc:
        stage.update(_failure(prefix + "backward", exc, student_files))
        record["stages"].append(stage)
        status = _status_of(exc)
        record["status"] = _worst(record["status"], status)
        return status
    stage["status"] = "ok"
    record["stages"].append(stage)
    for position, leaf in leaves.items():
        if leaf.grad is not None:
            tensors[f"{prefix}grad.{position}"] = leaf.grad.detach()
    for name, parameter in parameters.items():
        if parameter.grad is not None:
            tensors[f"{prefix}grad.param.{name}"] = parameter.grad.detach()
    return "ok"


def _pick_output(returned: Any, index: int) -> Any:
    if isinstance(returned, tuple | list):
        return returned[index] if index < len(returned) else None
    return returned if index == 0 else None


def _values(
    specs: list[Any], inputs: Mapping[str, torch.Tensor], *, fresh: bool = False
) -> list[Any]:
    return [_value(spec, inputs, fresh) for spec in specs]


def _kwvalues(
    spec: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, fresh: bool = False
) -> dict[str, Any]:
    return {name: _value(value, inputs, fresh) for name, value in spec.get("kwargs", {}).items()}


def _value(spec: Any, inputs: Mapping[str, torch.Tensor], fresh: bool) -> Any:
    """A plan value: JSON scalars as they are, ``{"tensor": key}`` as a fresh copy.

    An input whose gradient is wanted is handed over as a clone of a leaf: the student gets a
    tensor that tracks gradients and may even be changed in place (which the mutation check
    reports) without autograd refusing the in-place edit of a leaf.
    """
    if isinstance(spec, dict) and "tensor" in spec:
        tensor = inputs[spec["tensor"]]
        if fresh:
            tensor = tensor.detach().clone()
            if spec.get("grad"):
                leaf = tensor.requires_grad_(True)
                tensor = leaf.clone()
                _LEAF_OF[id(tensor)] = leaf
        return tensor
    return spec


# Leaves behind the arguments of the call being executed, by the argument's id().
_LEAF_OF: dict[int, torch.Tensor] = {}


def _grad_leaves(
    spec: Mapping[str, Any], args: list[Any], kwargs: dict[str, Any]
) -> dict[str, torch.Tensor]:
    leaves = {
        position: _LEAF_OF[id(value)]
        for position, value in _tensor_arguments(spec, args, kwargs)
        if id(value) in _LEAF_OF
    }
    _LEAF_OF.clear()
    return leaves


def _tensor_arguments(
    spec: Mapping[str, Any], args: list[Any], kwargs: dict[str, Any]
) -> Iterator[tuple[str, torch.Tensor]]:
    for index, value in enumerate(args):
        if isinstance(value, torch.Tensor):
            yield f"arg{index}", value
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            yield f"kw.{name}", value


def _keep_inputs_after(
    spec: Mapping[str, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    prefix: str,
    tensors: dict[str, torch.Tensor],
) -> None:
    """Hand back every input tensor as it is after the call; the grader compares it."""
    for position, value in _tensor_arguments(spec, args, kwargs):
        tensors[f"{prefix}after.{position}"] = value.detach()


def _describe_returned(value: Any, key: str, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    if type(value) is torch.Tensor:
        tensors[key] = value.detach()
        return {"kind": "tensor", "key": key}
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor-subclass", "type": type(value).__name__[:80]}
    if type(value) in (tuple, list):
        return {
            "kind": type(value).__name__,
            "items": [
                _describe_returned(item, f"{key}.{index}", tensors)
                for index, item in enumerate(value[:8])
            ],
            "length": len(value),
        }
    return {"kind": "other", "type": type(value).__name__[:80]}


def _status_of(exc: BaseException) -> str:
    return "timeout" if isinstance(exc, CallTimeout) else "raised"


def _worst(current: str, new: str) -> str:
    order = ["ok", "raised", "timeout"]
    return max(current, new, key=lambda status: order.index(status) if status in order else 0)


def _failure(stage: str, exc: BaseException, student_files: tuple[str, ...]) -> dict[str, Any]:
    if isinstance(exc, CallTimeout):
        return {"stage": stage, "status": "timeout"}
    return {"stage": stage, "status": "raised", "exception": describe_exception(exc, student_files)}


def describe_exception(exc: BaseException, student_files: tuple[str, ...]) -> dict[str, Any]:
    """Type, message and the student-side frames of an exception, as plain data."""
    frames = []
    for frame in traceback.extract_tb(exc.__traceback__):
        if student_files and os.path.realpath(frame.filename) not in student_files:
            continue
        frames.append({
            "file": os.path.basename(frame.filename),
            "line": frame.lineno,
            "function": frame.name,
            "code": (frame.line or "")[:200],
        })
    try:
        message = str(exc)
    except BaseException:
        message = "<message could not be read>"
    return {
        "type": type(exc).__name__[:80],
        "value_error": isinstance(exc, ValueError),
        "message": message[:MAX_MESSAGE_CHARS],
        "frames": frames[-MAX_TRACEBACK_FRAMES:],
    }


# --------------------------------------------------------------------------------------------
# The sandboxed process.
# --------------------------------------------------------------------------------------------


class _EventStream:
    def __init__(self, out_dir: str) -> None:
        os.makedirs(os.path.join(out_dir, TENSORS_DIR), exist_ok=True)
        self._out_dir = out_dir
        self._file = open(os.path.join(out_dir, EVENTS_FILE), "a", encoding="utf-8")  # noqa: SIM115
        self._count = 0

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
        self._file.write(json.dumps(event, allow_nan=False) + "\n")
        self._file.flush()


class _CallBudget:
    """SIGALRM at the budget (soft), a watchdog thread that ends the process after a grace."""

    def __init__(self, seconds: float, on_hard_limit: Callable[[], None]) -> None:
        self._seconds = seconds
        self._on_hard_limit = on_hard_limit
        self._deadline: float | None = None
        self._lock = threading.Lock()
        signal.signal(signal.SIGALRM, self._alarm)
        threading.Thread(target=self._watch, daemon=True).start()

    @staticmethod
    def _alarm(signum: int, frame: object) -> None:
        raise CallTimeout()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            self._deadline = time.monotonic() + self._seconds + WATCHDOG_GRACE_SECONDS
        signal.setitimer(signal.ITIMER_REAL, self._seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            with self._lock:
                self._deadline = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.05)
            with self._lock:
                deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                self._on_hard_limit()


def _warm_up() -> None:
    """Pay torch's first-call costs before the submission is on the clock."""
    q = torch.randn(2, 3, 4, 8, requires_grad=True)
    weights = torch.softmax(q @ q.transpose(-2, -1) / 8**0.5, dim=-1)
    out = weights @ q
    # An explicit upstream gradient, as the probes pass one: that path imports sympy (~0.6 s).
    out.backward(torch.ones_like(out))  # type: ignore[no-untyped-call]
    torch.nn.functional.linear(q, torch.randn(8, 8), torch.randn(8)).sum()


def _wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.002)


def main(argv: list[str]) -> None:
    job_dir, out_dir = argv[0], argv[1]
    hard_exit = os._exit  # kept before student code can replace it
    torch.set_num_threads(1)
    warm_up_started = time.perf_counter()
    _warm_up()
    warm_up_seconds = time.perf_counter() - warm_up_started
    if "--wait-for" in argv:
        ready = open(os.path.join(out_dir, "ready"), "w")  # noqa: SIM115
        ready.close()
        _wait_for(argv[argv.index("--wait-for") + 1])
        warm_up_seconds = 0.0  # paid before the job arrived

    events = _EventStream(out_dir)
    with open(os.path.join(job_dir, PLAN_FILE), encoding="utf-8") as plan_file:
        plan = json.load(plan_file)
    inputs = load_file(os.path.join(job_dir, INPUTS_FILE))
    submission_dir = os.path.realpath(os.path.join(job_dir, SUBMISSION_DIR))
    student_files = tuple(
        os.path.realpath(os.path.join(submission_dir, name)) for name in os.listdir(submission_dir)
    )
    events.emit({"event": "start", "calls": len(plan["calls"]),
                 "imports_seconds": _IMPORTED_AT - _STARTED_AT,
                 "warm_up_seconds": warm_up_seconds})

    def hard_limit() -> None:
        events.emit({"event": "watchdog", "call": current.get("id")})
        hard_exit(124)

    current: dict[str, Any] = {}
    budget = _CallBudget(float(plan["call_timeout"]), hard_limit)
    trap = _ForbiddenTrap(list(plan.get("forbidden", [])))
    trap.__enter__()  # type: ignore[no-untyped-call]  # for the life of the process: it ends by hard_exit

    _limit_address_space(plan.get("memory_bytes"))
    sys.path.insert(0, submission_dir)
    sys.dont_write_bytecode = True
    entry = plan["entry"]
    started = time.perf_counter()
    try:
        with budget():
            namespace = _import_submission(os.path.join(submission_dir, entry))
    except BaseException as exc:
        failure = _failure("import", exc, student_files)
        events.emit({"event": "import", "seconds": time.perf_counter() - started, **failure})
        hard_exit(0)
    events.emit({
        "event": "import", "status": "ok", "seconds": time.perf_counter() - started,
        "forbidden": trap.take(),
    })

    probes_started = time.perf_counter()
    for call in plan["calls"]:
        current["id"] = call["id"]
        events.emit({"event": "call-start", "id": call["id"]})
        try:
            record, tensors = execute_call(
                namespace, call, inputs, student_files=student_files, guard=budget
            )
        except CallTimeout:
            record, tensors = {"id": call["id"], "status": "timeout", "stages": []}, {}
        record["event"] = "call"
        record["forbidden"] = trap.take()
        events.emit(record, tensors)
    events.emit({"event": "done", "probes_seconds": time.perf_counter() - probes_started})
    sys.stdout.flush()
    sys.stderr.flush()
    hard_exit(0)  # skip interpreter teardown: atexit hooks and finalizers are the student's


def _limit_address_space(limit: Any) -> None:
    """Cap this process's address space (soft and hard) before student code runs.

    An allocation past the limit then fails at once with MemoryError, reported as
    memory-limit, where a container's cgroup limit alone lets a memory bomb thrash until the
    deadline. Without privileges the student cannot raise it again.
    """
    if isinstance(limit, int) and limit > 0:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _import_submission(path: str) -> dict[str, Any]:
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {os.path.basename(path)}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return vars(module)


if __name__ == "__main__":
    main(sys.argv[1:])
