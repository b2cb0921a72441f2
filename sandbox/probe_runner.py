"""Probe runner: the only code of ours that runs next to student code, inside the sandbox.

It executes the calls of a probe plan on the inputs the grader chose and streams each call's
raw outcome as it finishes: returned tensors and gradients in safetensors files, everything
else as JSON lines. It never sees expected values, the reference or the known-mistake
variants, and it computes no verdict: the grader, outside, decides everything from what comes
back.

Two processes: a supervisor, which holds the stream to the host, and a child forked from it
that imports the submission and runs the calls. The student's code shares the child's process,
so what the child reports is only the student's own outputs; the supervisor, which the
student's code cannot reach, decides the order, the uniqueness and the timing of what the host
receives (see "The sandboxed run" below).

The call executor (``execute_call``) is also used by the grader to run the reference and the
known-mistake variants on the same plan, so all three are exercised identically.

Usage (inside the sandbox, with ``python -I``)::

    probe_runner.py JOB_DIR OUT_DIR [--wait-for FILE [--wait-poll SECONDS]] [--sole-user] [--warm]

JOB_DIR holds ``plan.json``, ``inputs.safetensors`` and ``submission/``. The events go to
standard output as JSON lines (the student's printed output among them as ``stdout`` and
``stderr`` frames), the tensors to ``OUT_DIR/tensors/NNNN.safetensors``.
With ``--wait-for`` the runner imports torch, warms it up, writes ``OUT_DIR/ready`` and then
waits until FILE exists before it reads the job (the warm-pool mode of the Docker backend),
looking for it every SECONDS (2 ms by default) and whenever inotify tells of it.
``--sole-user`` says that every other process of this user belongs to the run (a container
of its own), so the supervisor can tell the survivors of a run. ``--warm`` says the process
is already warm (the fork server's job: forked from a server that warmed up once).

Only the standard library, torch and safetensors may be imported here (and ``wire.py`` and
``training.py``, loaded from the files next to this one).
"""

from __future__ import annotations

import time

_STARTED_AT = time.perf_counter()  # before the heavy imports, to time them

import base64
import contextlib
import ctypes
import hashlib
import importlib.util
import io
import json
import os
import resource
import select
import signal
import stat
import sys
import tarfile
import threading
import traceback
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from safetensors.torch import load_file, save_file

_IMPORTED_AT = time.perf_counter()



def _load_sibling(filename: str, name: str) -> types.ModuleType:
    """A file of ours next to this one (``wire.py``, ``training.py``): the runner runs as a
    script under ``python -I``, so its folder is not on ``sys.path`` (nor should it be, where
    the submission's folder is)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_WIRE = _load_sibling("wire.py", "autograde_wire")
PLAN_FILE: str = _WIRE.PLAN_FILE
INPUTS_FILE: str = _WIRE.INPUTS_FILE
SUBMISSION_DIR: str = _WIRE.SUBMISSION_DIR
EVENTS_FILE: str = _WIRE.EVENTS_FILE
TENSORS_DIR: str = _WIRE.TENSORS_DIR
WALL_SLACK: float = _WIRE.WALL_SLACK

MAX_MESSAGE_CHARS = 2000
MAX_RETURNED_DEPTH = 2  # (output, cache) with the cache's own items
MAX_TRACEBACK_FRAMES = 12
# Grace after a call's budget before the supervisor ends the child: the soft limit (the
# child's own timers) lets the runner carry on with the next call, the hard one does not need
# the student's cooperation.
WATCHDOG_GRACE_SECONDS = 1.0
# How often the supervisor reads the child's CPU clock while it waits for a report.
_CPU_POLL_SECONDS = 0.05

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class CallTimeout(BaseException):
    """Raised by SIGPROF or SIGALRM inside a call that overran its budget (CPU or wall clock).

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
    recorder = _CallRecorder(call["id"], inputs, student_files, guard or contextlib.nullcontext)
    if "init" in call:
        _execute_module_call(namespace, call, recorder)
    else:
        target = namespace.get(call["target"])
        if callable(target) and "learn" in call:  # the training probe: one stage, no arguments
            # seeded like any forward: its dropout masks are the seed's, whoever runs beside it
            _execute_forward(_training_probe(namespace, call, recorder.inputs),
                             {"seed": call["learn"]["seed"]}, "", recorder, parameters={})
        elif callable(target):
            _execute_forward(target, call, "", recorder, parameters={})
        else:
            recorder.missing(call["target"])
    return recorder.record, recorder.tensors


class _CallRecorder:
    """One call as it runs: the record of its stages and status, and the tensors it hands back.

    It also holds what every stage needs: the plan's inputs, the guard around foreign code,
    and the student's files (a traceback is reported by their frames only).
    """

    def __init__(
        self,
        call_id: str,
        inputs: Mapping[str, torch.Tensor],
        student_files: tuple[str, ...],
        guard: Callable[[], contextlib.AbstractContextManager[None]],
    ) -> None:
        self.record: dict[str, Any] = {"id": call_id, "status": "ok", "stages": []}
        self.tensors: dict[str, torch.Tensor] = {}
        self.inputs = inputs
        self.guard = guard
        self._student_files = student_files

    def missing(self, target: str) -> None:
        """The submission does not define the call's target."""
        self.record["status"] = "missing"
        self.record["missing"] = target

    def interface(self, problem: str, *, unregistered: bool = False) -> None:
        """The target exists but cannot be driven as the contract says; ``unregistered``: a
        module whose registered parameters are fewer than the contract's weights (layers kept
        in a plain list or dict, or made in ``forward``)."""
        self.record["status"] = "interface"
        self.record["interface"] = problem
        if unregistered:
            self.record["unregistered"] = True

    def passed(self, stage: dict[str, Any]) -> None:
        self.record["stages"].append(stage)

    def failed(self, stage: str, exc: BaseException, **extra: Any) -> str:
        """Record a stage that raised or ran out of time; return its status."""
        self.record["stages"].append({**_failure(stage, exc, self._student_files), **extra})
        status = _status_of(exc)
        self.record["status"] = _worst(self.record["status"], status)
        return status


def _training_probe(namespace: Mapping[str, Any], call: Mapping[str, Any],
                    inputs: Mapping[str, torch.Tensor]) -> Callable[[], Any]:
    return lambda: _TRAINING.train(namespace, call, inputs)


_TRAINING = _load_sibling("training.py", "autograde_training_probe")


# The global generator is the process's, and the grader runs the reference and the variants from
# several threads at once: a forward that asks for a seed (the training probe too) holds this
# from the seeding to its return, and a module's constructor while it runs, so no other
# thread's draws land between them (the same seed gives the same dropout).
_GLOBAL_RNG = threading.RLock()


def _execute_module_call(
    namespace: Mapping[str, Any], call: Mapping[str, Any], recorder: _CallRecorder
) -> None:
    cls = namespace.get(call["target"])
    if not isinstance(cls, type):
        recorder.missing(call["target"])
        return
    init, inputs = call["init"], recorder.inputs
    try:
        # a constructor may draw from the global generator (a layer's initial weights): not in
        # the middle of another thread's seeded forward
        with _GLOBAL_RNG, recorder.guard():
            module = cls(*_values(init.get("args", []), inputs), **_kwvalues(init, inputs))
    except BaseException as exc:
        recorder.failed("init", exc)
        return
    recorder.passed({"stage": "init", "status": "ok"})
    if not isinstance(module, torch.nn.Module):
        recorder.interface(f"{call['target']}(...) did not build a torch.nn.Module")
        return
    parameters: dict[str, torch.Tensor] = {}
    try:
        with recorder.guard():
            dtype = _DTYPES.get(call.get("dtype") or "")
            if dtype is not None:
                module.to(dtype)
            parameters = _load_parameters(module, call.get("parameters", {}), inputs)
            module.train(bool(call.get("train", False)))
    except _InterfaceError as exc:
        recorder.interface(str(exc), unregistered=exc.unregistered)
        return
    except BaseException as exc:
        recorder.failed("setup", exc)
        return
    returned: list[Any] = []  # each forward's return value, for later forwards that refer to it
    for index, forward in enumerate(call.get("forward", [])):
        status = _execute_forward(module, forward, f"f{index}.", recorder, parameters=parameters,
                                  earlier=returned)
        if status == "timeout":
            return


class _InterfaceError(Exception):
    def __init__(self, problem: str, *, unregistered: bool = False) -> None:
        super().__init__(problem)
        self.unregistered = unregistered


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
            raise _missing_parameter(module, name, wanted, inputs)
        value = inputs[tensor_key]
        if tuple(parameter.shape) != tuple(value.shape):
            raise _InterfaceError(
                f"{name} has shape {tuple(parameter.shape)}, expected {tuple(value.shape)}"
            )
        with torch.no_grad():
            parameter.copy_(value.to(parameter.dtype))
        loaded[name] = parameter
    return loaded


MAX_PLAIN_HOLDERS = 3
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))  # _modules, _parameters, hooks...


def _missing_parameter(module: torch.nn.Module, name: str, wanted: Mapping[str, str],
                       inputs: Mapping[str, torch.Tensor]) -> _InterfaceError:
    """The error for a parameter the module lacks. When the module registers fewer numbers
    than the contract's weights hold, its layers are not registered at all (a plain list or
    dict, or made in ``forward``): said so, with the plain containers that hold modules."""
    try:
        registered = sum(int(p.numel()) for p in module.parameters())
    except Exception:  # a student's parameters() that raises: plainly an interface problem
        return _InterfaceError(f"the module has no parameter {name!r}")
    needed = sum(int(inputs[key].numel()) for key in wanted.values())
    if registered >= needed:  # registered under other names: the contract's names are wrong
        return _InterfaceError(f"the module has no parameter {name!r}")
    holders = _plain_holders(module)
    if holders:
        where = ("; ".join(holders) + ", and modules in a plain list or dict are not "
                 "registered (parameters() and state_dict() leave them out)")
    elif registered == 0:
        where = "it registers no parameter at all (are its layers made inside forward?)"
    else:
        where = (f"its registered parameters hold {registered} numbers where the contract's "
                 f"weights hold {needed} (are some layers made inside forward?)")
    return _InterfaceError(f"the module has no parameter {name!r}: {where}", unregistered=True)


def _plain_holders(module: torch.nn.Module) -> list[str]:
    """``self.NAME is a plain list of N modules`` for each plain list, tuple or dict attribute
    of the module that holds torch modules (at most MAX_PLAIN_HOLDERS)."""
    found: list[str] = []
    try:
        attributes = list(vars(module).items())
    except TypeError:
        return found
    for attribute, value in attributes:
        if (not isinstance(attribute, str) or attribute in _MODULE_INTERNALS
                or type(value) not in (list, tuple, dict)):
            continue
        items = list(value.values()) if isinstance(value, dict) else list(value)
        count = sum(1 for item in items if isinstance(item, torch.nn.Module))
        if count:
            kind = type(value).__name__
            found.append(f"`self.{attribute[:40]}` is a plain {kind} of {count} "
                         f"module{'s' if count > 1 else ''}")
        if len(found) >= MAX_PLAIN_HOLDERS:
            break
    return found


def _execute_forward(
    target: Callable[..., Any],
    spec: Mapping[str, Any],
    prefix: str,
    recorder: _CallRecorder,
    *,
    parameters: Mapping[str, torch.Tensor],
    earlier: list[Any] | None = None,
) -> str:
    """Run one forward (and optional backward); record its outcome under ``prefix``.

    ``earlier`` holds what the call's previous forwards returned (None for one that raised);
    this forward's return value is appended to it.
    """
    earlier = [] if earlier is None else earlier
    try:
        args = _values(spec.get("args", []), recorder.inputs, fresh=True, earlier=earlier)
        kwargs = _kwvalues(spec, recorder.inputs, fresh=True, earlier=earlier)
    except EarlierOutputMissing as exc:
        _LEAVES.of.clear()
        earlier.append(None)
        return recorder.failed(prefix + "forward", exc, seconds=0.0)
    leaves = _grad_leaves(spec, args, kwargs)
    for parameter in parameters.values():
        parameter.grad = None
    started = time.perf_counter()
    try:
        with _seeded(spec.get("seed")), recorder.guard():
            returned = target(*args, **kwargs)
    except BaseException as exc:
        earlier.append(None)
        return recorder.failed(prefix + "forward", exc, seconds=time.perf_counter() - started)
    earlier.append(returned)
    recorder.passed({
        "stage": prefix + "forward",
        "seconds": time.perf_counter() - started,
        "status": "ok",
        "returned": _describe_returned(returned, prefix + "out", recorder.tensors),
    })
    _keep_inputs_after(spec, args, kwargs, prefix, recorder.tensors)

    backward = spec.get("backward")
    if backward is None:
        return "ok"
    return _execute_backward(returned, backward, prefix, recorder,
                             parameters=parameters, leaves=leaves)


@contextlib.contextmanager
def _seeded(seed: Any) -> Iterator[None]:
    """Run the block on the global generator seeded with ``seed`` (no seed: as it is).

    Only the CPU's default generator is seeded: ``torch.manual_seed`` also queues a lazy seed
    for each accelerator backend, with a formatted stack trace, which cost about as much as a
    probe call (under a deep stack, 1 ms a call, hundreds of calls in a mistake search)."""
    if seed is None:
        yield
        return
    with _GLOBAL_RNG:
        torch.default_generator.manual_seed(int(seed))
        yield


def _execute_backward(
    returned: Any,
    backward: Mapping[str, Any],
    prefix: str,
    recorder: _CallRecorder,
    *,
    parameters: Mapping[str, torch.Tensor],
    leaves: Mapping[str, torch.Tensor],
) -> str:
    stage = prefix + "backward"
    output = _pick_output(returned, int(backward.get("output", 0)))
    upstream = recorder.inputs[backward["grad"]]
    if type(output) is not torch.Tensor or tuple(output.shape) != tuple(upstream.shape):
        recorder.passed({"stage": stage, "status": "skipped"})
        return "ok"
    if output.grad_fn is None:
        # Nothing connects the output to the inputs: every gradient is missing.
        recorder.passed({"stage": stage, "status": "no-graph"})
        return "ok"
    try:
        with recorder.guard():
            _backward_with(output, upstream.to(output.dtype))
    except BaseException as exc:
        return recorder.failed(stage, exc)
    recorder.passed({"stage": stage, "status": "ok"})
    for position, leaf in leaves.items():
        if leaf.grad is not None:
            recorder.tensors[f"{prefix}grad.{position}"] = leaf.grad.detach()
    for name, parameter in parameters.items():
        if parameter.grad is not None:
            recorder.tensors[f"{prefix}grad.param.{name}"] = parameter.grad.detach()
    return "ok"


def _backward_with(output: torch.Tensor, upstream: torch.Tensor) -> None:
    """Back-propagate ``upstream`` from ``output``: the gradients of ``output.backward(upstream)``.

    Written as the backward of ``sum(output * upstream)``, whose gradient at ``output`` is
    ``1 * upstream``, the same bits: ``backward`` given an explicit gradient imports sympy
    through torch's shape checks, 0.6-0.9 CPU-seconds in every fresh interpreter.
    """
    (output * upstream).sum().backward()  # type: ignore[no-untyped-call]


def _pick_output(returned: Any, index: int) -> Any:
    if isinstance(returned, tuple | list):
        return returned[index] if index < len(returned) else None
    return returned if index == 0 else None


def _values(
    specs: list[Any], inputs: Mapping[str, torch.Tensor], *, fresh: bool = False,
    earlier: list[Any] | None = None,
) -> list[Any]:
    return [_value(spec, inputs, fresh, earlier or []) for spec in specs]


def _kwvalues(
    spec: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, fresh: bool = False,
    earlier: list[Any] | None = None,
) -> dict[str, Any]:
    return {name: _value(value, inputs, fresh, earlier or [])
            for name, value in spec.get("kwargs", {}).items()}


class EarlierOutputMissing(LookupError):
    """A forward refers to an item that an earlier forward of the call did not return."""


def _value(spec: Any, inputs: Mapping[str, torch.Tensor], fresh: bool,
           earlier: list[Any]) -> Any:
    """A plan value: JSON scalars as they are, ``{"tensor": key}`` as a fresh copy, and
    ``{"output_of": N, "item": [i, ...]}`` as what forward N of the same call returned (item i
    of it, and so on), handed over as it is: state such as a cache travels from one forward
    to the next as the code under test returned it.

    An input whose gradient is wanted is handed over as a clone of a leaf: the student gets a
    tensor that tracks gradients and may even be changed in place (which the mutation check
    reports) without autograd refusing the in-place edit of a leaf.
    """
    if isinstance(spec, dict) and "output_of" in spec:
        return _earlier_output(earlier, int(spec["output_of"]), list(spec.get("item", [])))
    if isinstance(spec, dict) and "tensor" in spec:
        tensor = inputs[spec["tensor"]]
        if fresh:
            tensor = tensor.detach().clone()
            if spec.get("grad"):
                leaf = tensor.requires_grad_(True)
                tensor = leaf.clone()
                _LEAVES.of[id(tensor)] = leaf
        return tensor
    return spec


def _earlier_output(earlier: list[Any], forward: int, path: list[int]) -> Any:
    if not 0 <= forward < len(earlier) or earlier[forward] is None:
        raise EarlierOutputMissing(f"step {forward + 1} of this call returned nothing to "
                                   "pass on (it raised)")
    value = earlier[forward]
    for depth, index in enumerate(path):
        if not isinstance(value, tuple | list) or not 0 <= int(index) < len(value):
            where = "".join(f"[{i}]" for i in path[:depth + 1])
            raise EarlierOutputMissing(f"step {forward + 1} of this call returned no item "
                                       f"{where} to pass on to the next step")
        value = value[int(index)]
    return value


class _Leaves(threading.local):
    """Leaves behind the arguments of the forward being prepared, by the argument's id(): per
    thread, since the grader runs calls in several threads at once (a shared map let one
    thread's forward clear another's leaves, which then recorded no gradient)."""

    def __init__(self) -> None:
        self.of: dict[int, torch.Tensor] = {}


_LEAVES = _Leaves()


def _grad_leaves(
    spec: Mapping[str, Any], args: list[Any], kwargs: dict[str, Any]
) -> dict[str, torch.Tensor]:
    leaves = {
        position: _LEAVES.of[id(value)]
        for position, value in _tensor_arguments(spec, args, kwargs)
        if id(value) in _LEAVES.of
    }
    _LEAVES.of.clear()
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


def _describe_returned(value: Any, key: str, tensors: dict[str, torch.Tensor],
                       depth: int = 0) -> dict[str, Any]:
    """What a forward returned: tensors by key, tuples and lists item by item (nested ones,
    such as a named tuple inside the returned pair, to a small depth)."""
    if type(value) is torch.Tensor:
        # A copy now: a later forward of the call may update a returned tensor in place.
        tensors[key] = value.detach().clone()
        return {"kind": "tensor", "key": key}
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor-subclass", "type": type(value).__name__[:80]}
    # The returned value itself must be a plain tuple or list (a subclass of one is "other", of
    # the wrong form); inside it, a named tuple (the cache of ``(output, cache)``) is a tuple.
    kind = ("list" if type(value) is list else "tuple" if type(value) is tuple or (
        depth > 0 and isinstance(value, tuple)) else None)
    if kind is not None and depth < MAX_RETURNED_DEPTH:
        # tuple's own methods, not a subclass's: a named tuple is read as the tuple it is.
        items = list.__getitem__(value, slice(0, 8)) if kind == "list" else \
            tuple.__getitem__(value, slice(0, 8))
        return {
            "kind": kind,
            "items": [
                _describe_returned(item, f"{key}.{index}", tensors, depth + 1)
                for index, item in enumerate(items)
            ],
            "length": list.__len__(value) if kind == "list" else tuple.__len__(value),
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
# The sandboxed run: a supervisor process, and a child process for the student's code.
#
# The supervisor reads the job and forks the child, which imports the submission and runs the
# calls. The child reports each call over a pipe; the supervisor checks each report against
# the plan (the next call's id, once), pins its tensor file by SHA-256 and streams it to the
# host on its standard output, which the child does not hold. The supervisor is not dumpable,
# so no process of the student's (same user, no capabilities) can ptrace it or open its
# /proc/PID/mem or /proc/PID/fd: what the host reads on that stream is the first and only copy
# of each report, and nothing the child does afterwards rewrites it. The supervisor also keeps
# the per-call budget by its own clock and ends the child past it, whatever the child did to
# its own signals and timers.
# --------------------------------------------------------------------------------------------

STDOUT_FRAME_PREFIX: bytes = _WIRE.STDOUT_FRAME_PREFIX
STDERR_FRAME_PREFIX: bytes = _WIRE.STDERR_FRAME_PREFIX
OUTPUTS_FRAME_PREFIX: bytes = _WIRE.OUTPUTS_FRAME_PREFIX
OUTPUTS_END_PREFIX: bytes = _WIRE.OUTPUTS_END_PREFIX
READ_UNTRUSTED = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""How a file the student's code could have planted is opened: no link followed (the last
name's), nothing blocked on (a FIFO), nothing inherited."""
REPORT_LINE_LIMIT = 1 << 20
TENSOR_FILE_LIMIT = 256 << 20
MAX_INTEGRITY_FLAGS = 32
_PR_SET_DUMPABLE = 4
_SUPERVISOR_IGNORES = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                       signal.SIGUSR2, signal.SIGALRM, signal.SIGPROF, signal.SIGPIPE)


class _Channel:
    """The supervisor's stream to the host: whole JSON lines on one file descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()

    def send(self, event: Mapping[str, Any]) -> None:
        self._write(json.dumps(event, allow_nan=False).encode() + b"\n")

    def send_output(self, prefix: bytes, data: bytes) -> None:
        self._write(prefix + base64.b64encode(data) + b'"}\n')

    def _write(self, line: bytes) -> None:
        with self._lock:
            view = memoryview(line)
            while view:
                view = view[os.write(self.fd, view):]


class _Reports:
    """Reads the child's report lines, each within a deadline and a size cap."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self.closed = False

    def next_line(self, deadline: float) -> bytes | None:
        """The next line; None at the deadline or once the child closed its end."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                return line
            if self.closed or len(self._buffer) > REPORT_LINE_LIMIT:
                self.closed = True
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if ready:
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    self.closed = True
                self._buffer += chunk


class _Flags:
    """Integrity flags: what only tampering does, with its evidence, for the instructor."""

    def __init__(self) -> None:
        self.flags: list[dict[str, str]] = []

    def add(self, flag: str, evidence: str) -> None:
        entry = {"flag": flag[:40], "evidence": evidence[:300]}
        if entry not in self.flags and len(self.flags) < MAX_INTEGRITY_FLAGS:
            self.flags.append(entry)

    def take_from(self, record: Mapping[str, Any]) -> None:
        """Flags the child reported about itself (informative: the child is the student's)."""
        reported = record.get("integrity")
        if isinstance(reported, list):
            for item in reported[:MAX_INTEGRITY_FLAGS]:
                if isinstance(item, dict) and isinstance(item.get("flag"), str):
                    self.add(item["flag"], str(item.get("evidence", "")))


class _Child:
    """The forked process that runs the student's code; it reports on ``reports``."""

    def __init__(self, run: Callable[[int], None], *, channel_fd: int) -> None:
        report_read, report_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        stderr_read, stderr_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                # A fork copies every descriptor: the channel's must not stay in this process.
                for fd in (channel_fd, report_read, stdout_read, stderr_read):
                    os.close(fd)
                os.dup2(stdout_write, 1)
                os.dup2(stderr_write, 2)
                os.close(stdout_write)
                os.close(stderr_write)
                os.setpgid(0, 0)
                _prctl(_PR_SET_DUMPABLE, 1)
                for number in _SUPERVISOR_IGNORES:
                    signal.signal(number, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGPIPE, signal.SIG_IGN)
                run(report_write)
            finally:
                os._exit(70)
        os.close(report_write)
        os.close(stdout_write)
        os.close(stderr_write)
        self.pid = pid
        self.reports = _Reports(report_read)
        self.outputs = {STDOUT_FRAME_PREFIX: stdout_read, STDERR_FRAME_PREFIX: stderr_read}
        self.status: int | None = None

    def wait(self, seconds: float) -> int | None:
        """Reap the child within ``seconds``; its wait status, or None if it still runs."""
        until = time.monotonic() + seconds
        while self.status is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.status = status
                    break
            if time.monotonic() > until:
                return None
            time.sleep(0.005)
        return self.status

    def kill(self) -> None:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                kill(self.pid, signal.SIGKILL)
        self.wait(5.0)


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _relay(fd: int, prefix: bytes, channel: _Channel) -> None:
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 65536):
            channel.send_output(prefix, chunk)


def call_seconds(call: Mapping[str, Any], default: float) -> float:
    """A call's own budget where the plan gives one (the training probe), else the plan's."""
    seconds = call.get("seconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        return float(seconds)
    return default


def _stage_count(call: Mapping[str, Any]) -> int:
    """Budgeted stages of a call: init and setup, then each forward and its backward."""
    if "init" in call:
        return 2 + 2 * len(call.get("forward", []))
    return 2 if "backward" in call else 1


class _ChildClock:
    """The child's CPU time, read from outside it: what its budgets count.

    Waiting for a core on a busy machine does not advance it, so a loaded host never costs the
    student; nor does a virtual machine's steal time, where the kernel accounts for it
    (``CONFIG_PARAVIRT_TIME_ACCOUNTING``, as on these machines). Where the clock cannot be read
    (a kernel without per-process CPU clocks) the wall clock stands in, as budgets were.
    """

    def __init__(self, pid: int) -> None:
        self._clock = _process_cpu_clock(pid)
        self._last = 0.0

    def seconds(self) -> float:
        """CPU seconds the child has used (its last reading once it is gone)."""
        if self._clock is None:
            return time.monotonic()
        with contextlib.suppress(OSError):  # the child ended: its last reading stands
            self._last = time.clock_gettime(self._clock)
        return self._last


def _process_cpu_clock(pid: int) -> int | None:
    """The clock id of a process's CPU time (``clock_getcpuclockid``), if it can be read."""
    clock = ctypes.c_int()
    try:
        if ctypes.CDLL(None, use_errno=True).clock_getcpuclockid(pid, ctypes.byref(clock)):
            return None
        time.clock_gettime(clock.value)
    except (OSError, AttributeError):
        return None
    return clock.value


class _Allowance:
    """A budget from now: CPU seconds of the child, with ``WALL_SLACK`` times as much wall
    clock as the backstop for a child that sleeps or blocks."""

    def __init__(self, clock: _ChildClock, cpu_until: float, wall_until: float) -> None:
        self._clock = clock
        self.cpu_until = cpu_until
        self.wall_until = wall_until

    @classmethod
    def starting(cls, clock: _ChildClock, seconds: float) -> _Allowance:
        return cls(clock, clock.seconds() + seconds, time.monotonic() + seconds * WALL_SLACK)

    def sooner(self, other: _Allowance) -> _Allowance:
        """The allowance that ends at whichever of the two limits comes first, on each clock."""
        return _Allowance(self._clock, min(self.cpu_until, other.cpu_until),
                          min(self.wall_until, other.wall_until))

    def used_up(self) -> bool:
        return (time.monotonic() >= self.wall_until
                or self._clock.seconds() >= self.cpu_until)


class _Supervisor:
    """Checks the child's reports against the plan and streams them to the host."""

    def __init__(self, channel: _Channel, plan: Mapping[str, Any], out_dir: str,
                 *, sole_user: bool, send_outputs: int | None = None) -> None:
        self.channel = channel
        self.plan = plan
        self.out_dir = out_dir
        self.sole_user = sole_user
        self.send_outputs = send_outputs
        self.flags = _Flags()
        self.budget = float(plan["call_timeout"])
        self.run_budget = float(plan["run_seconds"])
        self.pinned: set[str] = set()

    def run(self, child: _Child) -> int:
        """Supervise the child to its end; the exit status the runner should end with."""
        started = time.perf_counter()
        relays = [threading.Thread(target=_relay, args=(fd, prefix, self.channel), daemon=True)
                  for prefix, fd in child.outputs.items()]
        for relay in relays:
            relay.start()
        overran, call_id = self._follow(child)
        if overran:
            self.channel.send({"event": "watchdog", "call": call_id})
            child.kill()
        # Survivors go before the child is reaped: one waiting for the child's end to rewrite
        # the outputs never sees it.
        self._end_survivors(child.pid)
        status = child.wait(2.0)
        if status is None:
            child.kill()
            status = child.status
        self._end_survivors(child.pid)
        self._check_outputs()
        for relay in relays:
            relay.join(timeout=0.5)
        if self.flags.flags:
            self.channel.send({"event": "integrity", "flags": self.flags.flags})
        code = 124 if overran else _exit_status(status)
        self.channel.send({"event": "done", "probes_seconds": time.perf_counter() - started})
        if self.send_outputs is not None:  # once no process of the run can change them
            send_outputs(self.channel, self.out_dir, self.send_outputs, code)
        return code

    def _follow(self, child: _Child) -> tuple[bool, str | None]:
        """Forward the reports in the plan's order until the child ends or overruns.

        Returns whether it overran a budget (its call's or the run's), and in which call (None:
        in the import).
        """
        clock = _ChildClock(child.pid)
        run = _Allowance.starting(clock, self.run_budget)
        event = self._expect(child, "import", None, run.sooner(
            _Allowance.starting(clock, self.budget + WATCHDOG_GRACE_SECONDS)))
        if event is None:
            return not child.reports.closed, None
        self.channel.send(event)
        if event.get("status") != "ok":
            return False, None
        for call in self.plan["calls"]:
            seconds = call_seconds(call, self.budget) * _stage_count(call) + (
                WATCHDOG_GRACE_SECONDS)
            record = self._expect(child, "call", call["id"],
                                  run.sooner(_Allowance.starting(clock, seconds)))
            if record is None:
                return not child.reports.closed, call["id"]
            self._pin_tensors(record)
            self.channel.send(record)
        return False, None

    def _expect(self, child: _Child, kind: str, call_id: str | None,
                allowance: _Allowance) -> dict[str, Any] | None:
        """The child's next report of ``kind`` (for ``call_id``) within ``allowance``.

        Anything else the child sends meanwhile is not what the runner sends: it is dropped
        and flagged, and the first report that fits is the one kept.
        """
        while True:
            line = child.reports.next_line(
                min(allowance.wall_until, time.monotonic() + _CPU_POLL_SECONDS))
            if line is None:
                if child.reports.closed or allowance.used_up():
                    return None
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                self.flags.add("forged-report", "a report that is not JSON")
                continue
            if not isinstance(event, dict):
                self.flags.add("forged-report", "a report that is not an object")
                continue
            self.flags.take_from(event)
            event.pop("integrity", None)
            if event.get("event") == kind and (call_id is None or event.get("id") == call_id):
                return event
            self.flags.add("forged-report", f"an unexpected {str(event.get('event'))[:20]!r} "
                           f"report while waiting for {kind} {call_id or ''}".strip())

    def _pin_tensors(self, record: dict[str, Any]) -> None:
        """Record the SHA-256 of the call's tensor file as it is now: a later rewrite shows."""
        name = record.get("tensors")
        if name is None:
            return
        digest = (_file_digest(os.path.join(self.out_dir, name))
                  if isinstance(name, str) and _is_tensor_name(name) and name not in self.pinned
                  else None)
        if digest is None:
            record.pop("tensors", None)
            record["tensors_error"] = "the tensor file could not be read back"
            return
        self.pinned.add(name)
        record["sha256"] = digest

    def _end_survivors(self, child_pid: int) -> None:
        """Kill (and flag) the run's processes other than the child, once its reports ended."""
        survivors = _survivors(self.sole_user, child_pid)
        if survivors:
            self.flags.add("process-survived",
                           "process(es) of the submission outlived its last report")
            for pid in survivors:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _check_outputs(self) -> None:
        """Flag files in the output folder that no report named."""
        strays = _stray_outputs(self.out_dir, self.pinned)
        if strays:
            self.flags.add("output-folder-written", "unexpected files in the output folder: "
                           + ", ".join(strays[:8]))


def _exit_status(status: int | None) -> int:
    if status is None:
        return 70
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70


def _is_tensor_name(name: str) -> bool:
    folder, _, file = name.partition("/")
    return folder == TENSORS_DIR and len(file) == 16 and file[:4].isdigit() \
        and file.endswith(".safetensors")


def _file_digest(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > TENSOR_FILE_LIMIT:
            return None
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def _survivors(sole_user: bool, child_pid: int) -> list[int]:
    """This user's processes other than the supervisor: in a container of its own
    (``sole_user``) all of them, elsewhere those of the supervisor's session.

    Pids are the supervisor's own: where ``/proc`` belongs to an outer pid namespace than the
    supervisor's (the fork-server mode, whose jobs cannot mount their own), each entry is
    translated by its ``NSpid`` line, and processes outside the supervisor's namespace are
    not the run's.
    """
    me, uid, session = os.getpid(), os.getuid(), os.getsid(0)
    depth = len(_namespace_pids("self"))
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            pids = _namespace_pids(entry)
            if len(pids) != depth or pids[-1] in (me, child_pid):
                continue
            if not sole_user and os.getsid(pids[-1]) != session:
                continue
        except OSError:
            continue
        found.append(pids[-1])
    return found


def _namespace_pids(entry: str) -> list[int]:
    """A process's pid in each pid namespace from that of ``/proc`` down to its own."""
    with open(f"/proc/{entry}/status", "rb") as status:
        for line in status:
            if line.startswith(b"NSpid:"):
                return [int(value) for value in line.split()[1:]]
    return [os.getpid() if entry == "self" else int(entry)]  # a kernel without NSpid


def _stray_outputs(out_dir: str, pinned: set[str]) -> list[str]:
    strays = [name for name in sorted(os.listdir(out_dir)) if name not in {"ready", TENSORS_DIR}]
    tensors_dir = os.path.join(out_dir, TENSORS_DIR)
    if os.path.isdir(tensors_dir) and not os.path.islink(tensors_dir):
        strays += [f"{TENSORS_DIR}/{name}" for name in sorted(os.listdir(tensors_dir))
                   if f"{TENSORS_DIR}/{name}" not in pinned]
    return strays


# --------------------------------------------------------------------------------------------
# The child: the student's code, and what the runner notices of tampering inside it.
# --------------------------------------------------------------------------------------------


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


_BUDGET_SIGNALS = (signal.SIGPROF, signal.SIGALRM)
"""The signals of a stage's budget in the child: CPU time, then the wall-clock backstop."""


class _CallBudget:
    """The soft per-stage limit inside the child: SIGPROF when the process has used the budget
    in CPU time, SIGALRM at ``WALL_SLACK`` times it on the wall clock (a stage that sleeps).

    A time-out never lands inside a library's import (torch imports ``torch._dynamo`` lazily,
    for one; the warm-up imports sympy ahead): one raised there would leave a half-made module in
    ``sys.modules`` that fails every later call. It waits for the import to finish, a retry
    every ``_IMPORT_RETRY_SECONDS``; the supervisor's hard limit still bounds the wait.

    The hard limit is the supervisor's. A timer cancelled or a timeout swallowed inside a
    call is noticed here and flagged.
    """

    _TIMERS = ((signal.ITIMER_PROF, 1.0), (signal.ITIMER_REAL, WALL_SLACK))
    _IMPORT_RETRY_SECONDS = 0.02

    def __init__(self, seconds: float, integrity: _Integrity, student_dir: str) -> None:
        self._seconds = seconds
        self._integrity = integrity
        self._student_dir = os.path.join(student_dir, "")
        for number in _BUDGET_SIGNALS:
            signal.signal(number, self._alarm)

    def _alarm(self, signum: int, frame: types.FrameType | None) -> None:
        if _inside_library_import(frame, self._student_dir):
            timer = signal.ITIMER_PROF if signum == signal.SIGPROF else signal.ITIMER_REAL
            signal.setitimer(timer, self._IMPORT_RETRY_SECONDS)
            return
        raise CallTimeout()

    def lasting(self, seconds: float) -> _CallBudget:
        """This budget with ``seconds`` per stage from now on."""
        self._seconds = seconds
        return self

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        for timer, scale in self._TIMERS:
            signal.setitimer(timer, self._seconds * scale)
        finished = False
        try:
            yield
            finished = True
        finally:
            left = [signal.setitimer(timer, 0)[0] for timer, _ in self._TIMERS]
            if finished and 0 in left:
                self._integrity.flag("timer-changed", "the call's timer was cancelled, or its "
                                     "time-out swallowed, inside the call")


def _inside_library_import(frame: types.FrameType | None, student_dir: str) -> bool:
    """Whether ``frame`` runs inside the import of a module that is not the student's, with
    none of the student's code in between.

    Walking outward from where the signal landed: a frame of the student's files first means
    the student's code is running (a loop at the top level of their module included); a
    module's top level run by ``importlib`` first means a library is being imported.
    """
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(student_dir):
            return False
        caller = frame.f_back
        if (code.co_name == "<module>" and caller is not None
                and caller.f_code.co_filename.startswith("<frozen importlib")):
            return True
        frame = caller
    return False


class _Integrity:
    """What only tampering does, noticed inside the child (the student's process).

    Informative only: a determined student can silence it, and no flag ever changes a score.
    The audit hook is installed before the student's code and cannot be removed.
    """

    _WATCHED_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "gc.get_objects",
                                 "gc.get_referrers", "gc.get_referents", "sys.setprofile",
                                 "sys.settrace"})
    _FILE_EVENTS = frozenset({"open", "os.rename", "os.remove", "os.rmdir", "os.symlink",
                              "os.link", "os.truncate", "os.chmod", "os.utime", "shutil.rmtree",
                              "os.mkdir"})
    _HELPERS = ("inspect.py", "traceback.py", "threading.py")

    def __init__(self, out_dir: str, student_files: tuple[str, ...],
                 forbidden: list[str]) -> None:
        self._out_dir = os.path.realpath(out_dir)
        self._student_files = frozenset(student_files)
        self._flags: list[dict[str, str]] = []
        self._inside = False
        self._where = "import"
        self._traps = {dotted: _resolve(dotted) for dotted in forbidden}
        self._runner = self._runner_parts()
        self._alarms = self._budget_handlers()

    @staticmethod
    def _budget_handlers() -> dict[signal.Signals, Any]:
        return {number: signal.getsignal(number) for number in _BUDGET_SIGNALS}

    def install(self) -> None:
        self._alarms = self._budget_handlers()
        sys.addaudithook(self._audit)

    def at(self, where: str) -> None:
        self._where = where

    def flag(self, name: str, evidence: str) -> None:
        entry = {"flag": name, "evidence": f"{evidence} (during {self._where})"[:300]}
        if entry not in self._flags and len(self._flags) < MAX_INTEGRITY_FLAGS:
            self._flags.append(entry)

    def take(self) -> list[dict[str, str]]:
        """Check what a call may have changed, and hand over the flags raised since last time."""
        for dotted, original in self._traps.items():
            if _resolve(dotted) is not original:
                self.flag("trap-patched", f"{dotted} was replaced")
        for label, (owner, attribute, original) in self._runner.items():
            if getattr(owner, attribute, None) is not original:
                self.flag("runner-patched", f"{label} was replaced")
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        for number, handler in self._alarms.items():
            if signal.getsignal(number) is not handler:
                self.flag("signals-changed", f"the {number.name} handler was replaced")
            if number in blocked:
                self.flag("signals-changed", f"{number.name} was blocked")
        if sys.getprofile() is not None or sys.gettrace() is not None:
            self.flag("profile-hook", "a profile or trace function was installed")
        flags, self._flags = self._flags, []
        return flags

    @staticmethod
    def _runner_parts() -> dict[str, tuple[Any, str, Any]]:
        module = sys.modules[__name__]
        parts: dict[str, tuple[Any, str, Any]] = {
            f"runner.{name}": (module, name, getattr(module, name))
            for name in ("execute_call", "describe_exception", "_Report", "_CallBudget",
                         "_Integrity", "_child_main")
        }
        parts.update({
            "json.dumps": (json, "dumps", json.dumps),
            "json.encoder.c_make_encoder": (json.encoder, "c_make_encoder",
                                            getattr(json.encoder, "c_make_encoder", None)),
            "json.JSONEncoder.encode": (json.JSONEncoder, "encode", json.JSONEncoder.encode),
            "os.write": (os, "write", os.write),
            "os._exit": (os, "_exit", os._exit),
            "signal.signal": (signal, "signal", signal.signal),
            "signal.setitimer": (signal, "setitimer", signal.setitimer),
            "time.perf_counter": (time, "perf_counter", time.perf_counter),
            "safetensors.save_file": (module, "save_file", save_file),
        })
        return parts

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self._inside or (event not in self._WATCHED_EVENTS and event not in self._FILE_EVENTS):
            return
        self._inside = True
        try:
            if event in self._FILE_EVENTS:
                self._file_event(event, args)
            elif self._from_student():
                self.flag("introspection" if event.startswith(("sys._", "gc.")) else
                          "profile-hook", f"{event} called from the submission")
        except Exception:  # an audit hook must never break the code it watches
            pass
        finally:
            self._inside = False

    def _file_event(self, event: str, args: tuple[Any, ...]) -> None:
        path = args[0] if args else None
        if event == "open" and len(args) > 2:
            mode, flags = args[1], args[2]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            if not writing:
                return
        if isinstance(path, int | bytes) or not path:
            return
        full = os.path.realpath(os.fspath(path))
        if full == self._out_dir or full.startswith(self._out_dir + os.sep):
            self.flag("output-folder-written", f"{event} on {os.path.relpath(full, self._out_dir)}")

    def _from_student(self) -> bool:
        frame: types.FrameType | None = sys._getframe(2)
        for _ in range(4):
            if frame is None:
                return False
            filename = frame.f_code.co_filename
            if filename in self._student_files or os.path.realpath(filename) in self._student_files:
                return True
            if not filename.endswith(self._HELPERS):
                return False
            frame = frame.f_back
        return False


def _child_main(report_fd: int, job: Mapping[str, Any]) -> None:
    """Import the submission and run the plan's calls, reporting each on ``report_fd``."""
    hard_exit = os._exit  # kept before student code can replace it
    plan, inputs = job["plan"], job["inputs"]
    student_files = job["student_files"]
    report = _Report(report_fd, job["out_dir"])
    trap = _ForbiddenTrap(list(plan.get("forbidden", [])))
    trap.__enter__()  # type: ignore[no-untyped-call]  # for the life of the child: it ends by hard_exit
    # After the trap, so that the integrity snapshot holds the trap's wrappers.
    integrity = _Integrity(job["out_dir"], student_files, list(plan.get("forbidden", [])))
    budget = _CallBudget(float(plan["call_timeout"]), integrity, job["submission_dir"])
    integrity.install()

    _limit_address_space(plan.get("memory_bytes"))
    sys.path.insert(0, job["submission_dir"])
    sys.dont_write_bytecode = True
    started = time.perf_counter()
    try:
        with budget():
            namespace = _import_submission(os.path.join(job["submission_dir"], plan["entry"]))
    except BaseException as exc:
        failure = _failure("import", exc, student_files)
        report.emit({"event": "import", "seconds": time.perf_counter() - started, **failure,
                     "integrity": integrity.take()})
        hard_exit(0)
    report.emit({
        "event": "import", "status": "ok", "seconds": time.perf_counter() - started,
        "forbidden": trap.take(), "integrity": integrity.take(),
    })
    for call in plan["calls"]:
        integrity.at(f"call {call['id']}")
        try:
            record, tensors = execute_call(
                namespace, call, inputs, student_files=student_files,
                guard=budget.lasting(call_seconds(call, float(plan["call_timeout"]))),
            )
        except CallTimeout:
            record, tensors = {"id": call["id"], "status": "timeout", "stages": []}, {}
        record["event"] = "call"
        record["forbidden"] = trap.take()
        record["integrity"] = integrity.take()
        report.emit(record, tensors)
    sys.stdout.flush()
    sys.stderr.flush()
    hard_exit(0)  # skip interpreter teardown: atexit hooks and finalizers are the student's


# --------------------------------------------------------------------------------------------
# The runner's entry point.
# --------------------------------------------------------------------------------------------


def _warm_up() -> None:
    """Pay torch's first-call costs before the submission is on the clock."""
    q = torch.randn(2, 3, 4, 8, requires_grad=True)
    weights = torch.softmax(q @ q.transpose(-2, -1) / 8**0.5, dim=-1)
    out = weights @ q
    _backward_with(out, torch.ones_like(out))
    torch.nn.functional.linear(q, torch.randn(8, 8), torch.randn(8)).sum()
    import_lazy_modules()


def import_lazy_modules() -> None:
    """What torch imports on first use on some paths (``torch.broadcast_shapes``, a backward
    given an explicit gradient): its symbolic shapes, and sympy with them, 0.3-0.6 CPU-s here.

    Imported before the job, off the student's clock, although only some submissions (12% of
    the corpus) take those paths: under gVisor the import costs several CPU-s as gVisor counts
    them on a loaded host, more than a short budget, and a submission that blinds the soft
    limit (``watchdog_blinded.py``) then lost every call to the supervisor's. A time-out never
    lands inside an import (``_CallBudget``), for the lazy imports this does not foresee."""
    importlib.import_module("torch.fx.experimental.symbolic_shapes")


_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_IN_CREATE, _IN_MOVED_TO = 0x100, 0x80
WAIT_POLL_SECONDS = 0.002
"""How often a warm runner looks for its job where nothing wakes it (the default)."""


def wait_for(path: str, poll_seconds: float) -> None:
    """Until ``path`` (a file or a folder) exists: looked for every ``poll_seconds``, and at
    once when inotify tells of an entry created in or moved into its folder. Docker's runtime
    passes on the host's rename into the bind-mounted job folder, so the host can give a long
    interval there: an idle warm runner looking every 2 ms spent 1.5% of a core. gVisor does
    not pass on changes made outside it, and another runtime may not: there the host keeps the
    short interval."""
    watch = _watch_folder(os.path.dirname(path))
    try:
        while not os.path.exists(path):
            if watch is None:
                time.sleep(poll_seconds)
                continue
            readable, _, _ = select.select([watch], [], [], poll_seconds)
            if readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(watch, 65536)  # the events themselves: existence is what counts
    finally:
        if watch is not None:
            os.close(watch)  # before any student code runs


def _watch_folder(folder: str) -> int | None:
    """An inotify descriptor told of files created in or moved into ``folder``; None where
    there is none to be had."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        watch = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    except AttributeError:
        return None
    if watch < 0:
        return None
    if libc.inotify_add_watch(watch, folder.encode(), _IN_CREATE | _IN_MOVED_TO) < 0:
        os.close(watch)
        return None
    return watch


def main(argv: list[str]) -> None:
    job_dir, out_dir = argv[0], argv[1]
    torch.set_num_threads(1)
    # The host's stream: kept on a descriptor of its own, and stdout made /dev/null until the
    # child gets a pipe, so nothing printed by mistake in this process corrupts the stream.
    channel = _Channel(os.dup(1))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    _prctl(_PR_SET_DUMPABLE, 0)
    for number in _SUPERVISOR_IGNORES:
        signal.signal(number, signal.SIG_IGN)
    warm_up_started = time.perf_counter()
    if "--warm" not in argv:
        _warm_up()
    warm_up_seconds = time.perf_counter() - warm_up_started
    if "--wait-for" in argv:
        ready = open(os.path.join(out_dir, "ready"), "w")  # noqa: SIM115
        ready.close()
        poll = (float(argv[argv.index("--wait-poll") + 1]) if "--wait-poll" in argv
                else WAIT_POLL_SECONDS)
        wait_for(argv[argv.index("--wait-for") + 1], poll)
        warm_up_seconds = 0.0  # paid before the job arrived

    os.makedirs(os.path.join(out_dir, TENSORS_DIR), exist_ok=True)
    with open(os.path.join(job_dir, PLAN_FILE), encoding="utf-8") as plan_file:
        plan = json.load(plan_file)
    inputs = load_file(os.path.join(job_dir, INPUTS_FILE))
    submission_dir = os.path.realpath(os.path.join(job_dir, SUBMISSION_DIR))
    job = {
        "plan": plan,
        "inputs": inputs,
        "out_dir": out_dir,
        "submission_dir": submission_dir,
        "student_files": tuple(os.path.realpath(os.path.join(submission_dir, name))
                               for name in os.listdir(submission_dir)),
    }
    channel.send({"event": "start", "calls": len(plan["calls"]),
                  "imports_seconds": _IMPORTED_AT - _STARTED_AT,
                  "warm_up_seconds": warm_up_seconds})
    child = _Child(lambda report_fd: _child_main(report_fd, job), channel_fd=channel.fd)
    supervisor = _Supervisor(channel, plan, out_dir, sole_user="--sole-user" in argv,
                             send_outputs=(int(argv[argv.index("--send-outputs") + 1])
                                           if "--send-outputs" in argv else None))
    os._exit(supervisor.run(child))


def send_outputs(channel: _Channel, out_dir: str, budget: int, status: int) -> None:
    """End the stream with the output folder's files and the runner's exit status
    (``wire.OUTPUTS_FRAME_PREFIX``)."""
    frames = FramedFile(lambda data: channel.send_output(OUTPUTS_FRAME_PREFIX, data),
                        _WIRE.OUTPUTS_FRAME_BYTES)
    with frames:
        cut = write_outputs_tar(frames, out_dir, budget)
    channel.send_output(OUTPUTS_END_PREFIX, _WIRE.runner_end(status, cut))


def write_outputs_tar(target: io.RawIOBase, out_dir: str, budget: int) -> bool:
    """Write the output folder's files to ``target`` as a tar; whether any was left out for
    being over what remained of ``budget`` bytes (as the host skips such a file in an archive
    of the folder, ``sandbox.docker_sandbox.read_output_archive``).

    Only what the host reads goes in: ``events.jsonl`` and the regular files directly in
    ``tensors/``, archived under ``out/``. The student's code wrote them: every open refuses
    links (the folder's too) and blocks on nothing, and only what is a regular file once open
    is read. One file at a time is held.
    """
    cut = False
    with tarfile.open(fileobj=target, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        def add(folder: int, name: str, archived: str) -> None:
            nonlocal budget, cut
            with contextlib.suppress(OSError):
                fd = os.open(name, READ_UNTRUSTED, dir_fd=folder)
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        return
                    content = read_at_most(fd, budget + 1)
                finally:
                    os.close(fd)
                if len(content) > budget:
                    cut = True
                    return
                budget -= len(content)
                member = tarfile.TarInfo(archived)
                member.size = len(content)
                archive.addfile(member, io.BytesIO(content))

        with contextlib.suppress(OSError):
            top = os.open(out_dir, READ_UNTRUSTED | os.O_DIRECTORY)
            try:
                add(top, EVENTS_FILE, f"out/{EVENTS_FILE}")
                tensors = os.open(TENSORS_DIR, READ_UNTRUSTED | os.O_DIRECTORY, dir_fd=top)
                try:
                    for name in sorted(os.listdir(tensors)):
                        add(tensors, name, f"out/{TENSORS_DIR}/{name}")
                finally:
                    os.close(tensors)
            finally:
                os.close(top)
    return cut


class FramedFile(io.RawIOBase):
    """A write-only file that hands what is written to ``send`` in chunks of ``size`` bytes
    (the last one shorter, at close)."""

    def __init__(self, send: Callable[[bytes], None], size: int) -> None:
        super().__init__()
        self._send, self._size = send, size
        self._pending = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._pending += data
        while len(self._pending) >= self._size:
            self._send(bytes(self._pending[:self._size]))
            del self._pending[:self._size]
        return len(data)

    def close(self) -> None:
        if not self.closed and self._pending:
            self._send(bytes(self._pending))
            self._pending.clear()
        super().close()


def read_at_most(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from ``fd``, to its end."""
    chunks, left = [], size
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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
