"""The call executor: runs one call of a probe plan and records its raw outcome.

The runner runs it on the submission inside the sandbox; the grader runs it on the reference
and the known-mistake variants on the same plan, so all three are exercised identically.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from .shared import TRAINING
from .witness import InputArena

MAX_MESSAGE_CHARS = 2000
MAX_RETURNED_DEPTH = 2  # (output, cache) with the cache's own items
MAX_TRACEBACK_FRAMES = 12


_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class CallTimeout(BaseException):
    """Raised by SIGPROF or SIGALRM inside a call that overran its budget (CPU or wall clock).

    A BaseException so that a student's ``except Exception`` does not swallow it.
    """


def execute_call(
    namespace: Mapping[str, Any],
    call: Mapping[str, Any],
    inputs: Mapping[str, torch.Tensor],
    *,
    student_files: tuple[str, ...] = (),
    guard: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    arena: InputArena | None = None,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Run one call of a probe plan against ``namespace`` (the submission's globals).

    Returns the JSON-able record of what happened and the tensors to hand back, keyed by
    name. ``guard`` wraps each stage that runs foreign code (the per-call time budget).
    ``arena``: the runner's shared input slots, on which the code under test gets its input
    tensors (the supervisor reads them back); None (the grader) hands private copies.
    """
    recorder = _CallRecorder(call["id"], inputs, student_files, guard or contextlib.nullcontext,
                             arena)
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
        arena: InputArena | None = None,
    ) -> None:
        self.record: dict[str, Any] = {"id": call_id, "status": "ok", "stages": []}
        self.tensors: dict[str, torch.Tensor] = {}
        self.inputs = inputs
        self.guard = guard
        self.arena = arena
        self.held = HeldParameters(inputs)
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
        self.record["stages"].append({**stage_failure(stage, exc, self._student_files), **extra})
        status = _status_of(exc)
        self.record["status"] = _worst(self.record["status"], status)
        return status


def _training_probe(namespace: Mapping[str, Any], call: Mapping[str, Any],
                    inputs: Mapping[str, torch.Tensor]) -> Callable[[], Any]:
    return lambda: TRAINING.train(namespace, call, inputs)


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
            module = cls(*_values(init.get("args", []), inputs, held=recorder.held),
                         **_kwvalues(init, inputs, held=recorder.held))
    except BaseException as exc:
        recorder.failed("init", exc)
        return
    recorder.passed({"stage": "init", "status": "ok"})
    if call.get("object"):
        _execute_object_steps(module, call, recorder)
        return
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


def _execute_object_steps(obj: Any, call: Mapping[str, Any], recorder: _CallRecorder) -> None:
    """The forwards of an object call: each calls the method it names on the object the call
    built (an optimiser's ``step``), after setting the gradients it gives."""
    returned: list[Any] = []
    for index, forward in enumerate(call.get("forward", [])):
        method_name = str(forward.get("method", ""))
        try:
            # the object's own code may run here (a property, __getattr__), and setting a
            # gradient raises when the code under test changed its parameter's dtype or shape
            with recorder.guard():
                method = getattr(obj, method_name, None) if method_name else obj
                recorder.held.set_grads(forward.get("grads", {}))
        except BaseException as exc:
            returned.append(None)
            if recorder.failed(f"f{index}.forward", exc, seconds=0.0) == "timeout":
                return
            continue
        if not callable(method):
            recorder.interface(f"{call['target']} has no method {method_name}()" if method_name
                               else f"a {call['target']} object cannot be called")
            return
        status = _execute_forward(method, forward, f"f{index}.", recorder, parameters={},
                                  earlier=returned)
        if status == "timeout":
            return


class HeldParameters:
    """The parameters of one call: ``{"parameter": key}`` in the plan is a
    ``torch.nn.Parameter`` holding a copy of input ``key``, made the first time the call names
    it and the same object wherever the call names it again (in the constructor's arguments
    and in every forward), so that state kept across the call's forwards (an optimiser's) acts
    on them. A forward's ``grads`` sets their ``.grad``; its ``outputs`` hands back their
    values, or whether each still holds the memory it was made with."""

    def __init__(self, inputs: Mapping[str, torch.Tensor]) -> None:
        self._inputs = inputs
        self.made: dict[str, torch.nn.Parameter] = {}
        self._memory: dict[str, int] = {}

    def get(self, key: str) -> torch.nn.Parameter:
        if key not in self.made:
            parameter = torch.nn.Parameter(self._inputs[key].detach().clone())
            self.made[key] = parameter
            self._memory[key] = parameter.untyped_storage().data_ptr()
        return self.made[key]

    def set_grads(self, grads: Mapping[str, Any]) -> None:
        """Give each named parameter a fresh copy of an input as ``.grad`` (None: no grad)."""
        for key, grad in grads.items():
            parameter = self.get(key)
            parameter.grad = None if grad is None else self._inputs[grad].detach().clone()

    def observed(self, what: str) -> Any:
        """What a forward with ``"outputs": what`` hands back instead of its return value:
        ``parameters``, the values of the call's parameters (a tuple, in the order the call
        first named them); ``memory``, one bool per parameter, True where it still holds the
        memory it was made with (updated in place, not given new memory through ``.data``)."""
        if what == "parameters":
            return tuple(parameter.detach() for parameter in self.made.values())
        if what == "memory":
            return torch.tensor([parameter.untyped_storage().data_ptr() == self._memory[key]
                                 for key, parameter in self.made.items()], dtype=torch.bool)
        raise ValueError(f"not a forward's outputs: {what!r}")


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
        args = _values(spec.get("args", []), recorder.inputs, fresh=True, earlier=earlier,
                       held=recorder.held)
        kwargs = _kwvalues(spec, recorder.inputs, fresh=True, earlier=earlier,
                           held=recorder.held)
    except EarlierOutputMissing as exc:
        _LEAVES.of.clear()
        earlier.append(None)
        return recorder.failed(prefix + "forward", exc, seconds=0.0)
    _on_arena(recorder, prefix, args, kwargs)
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
    seconds = time.perf_counter() - started
    observed = returned if "outputs" not in spec else recorder.held.observed(spec["outputs"])
    recorder.passed({
        "stage": prefix + "forward",
        "seconds": seconds,
        "status": "ok",
        "returned": _describe_returned(observed, prefix + "out", recorder.tensors),
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
    for each accelerator backend, with a formatted stack trace, which costs about as much as a
    probe call under a deep stack, and a mistake search seeds many calls."""
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
            backward_with(output, upstream.to(output.dtype))
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


def backward_with(output: torch.Tensor, upstream: torch.Tensor) -> None:
    """Back-propagate ``upstream`` from ``output``: the gradients of ``output.backward(upstream)``.

    Written as the backward of ``sum(output * upstream)``, whose gradient at ``output`` is
    ``1 * upstream``, the same bits: ``backward`` given an explicit gradient imports sympy
    through torch's shape checks, a costly import in every fresh interpreter.
    """
    (output * upstream).sum().backward()  # type: ignore[no-untyped-call]


def _pick_output(returned: Any, index: int) -> Any:
    items = _sequence_items(returned)
    if items is not None:
        return items[index] if index < len(items) else None
    return returned if index == 0 else None


def _sequence_items(value: Any) -> tuple[Any, ...] | None:
    """The items of a real tuple or list (a subclass of one included), read with the built-in
    type's own methods; None for anything else.

    The class is ``type(value)``, which student code cannot rewrite: ``isinstance`` also
    believes a ``__class__`` property, so an object could claim to be a tuple, pass the check
    and then fail the built-in's methods, or run its own ``__getitem__`` outside any time budget.
    """
    kind = type(value)
    if issubclass(kind, tuple):
        return tuple.__getitem__(value, slice(None))
    if issubclass(kind, list):
        return tuple(list.__getitem__(value, slice(None)))
    return None


def _values(
    specs: list[Any], inputs: Mapping[str, torch.Tensor], *, fresh: bool = False,
    earlier: list[Any] | None = None, held: HeldParameters | None = None,
) -> list[Any]:
    return [_value(spec, inputs, fresh, earlier or [], held) for spec in specs]


def _kwvalues(
    spec: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, fresh: bool = False,
    earlier: list[Any] | None = None, held: HeldParameters | None = None,
) -> dict[str, Any]:
    return {name: _value(value, inputs, fresh, earlier or [], held)
            for name, value in spec.get("kwargs", {}).items()}


class EarlierOutputMissing(LookupError):
    """A forward refers to an item that an earlier forward of the call did not return."""


_SPECIAL_FLOATS = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def _value(spec: Any, inputs: Mapping[str, torch.Tensor], fresh: bool,
           earlier: list[Any], held: HeldParameters | None = None) -> Any:
    """A plan value, decoded to the Python value the probe wrote (the encoding is
    ``assignments.probing.encode_value``): JSON scalars as they are, a list item by item,
    ``{"tuple": [...]}`` as a tuple, ``{"dict": {...}}`` as a dict, ``{"float": "inf"}`` (or
    ``"-inf"``, ``"nan"``) as that float, ``{"tensor": key}`` as a fresh copy of the input,
    and ``{"output_of": N, "item": [i, ...]}`` as what forward N of the same call returned
    (item i of it, and so on), handed over as it is: state such as a cache travels from one
    forward to the next as the code under test returned it. Containers are built anew for
    every call, so code that changes a list it was given changes no later call's.

    An input whose gradient is wanted is handed over as a clone of a leaf: the student gets a
    tensor that tracks gradients and may even be changed in place (which the mutation check
    reports) without autograd refusing the in-place edit of a leaf.
    """
    if isinstance(spec, list):
        return [_value(item, inputs, fresh, earlier, held) for item in spec]
    if not isinstance(spec, dict):
        return spec
    if "tuple" in spec:
        return tuple(_value(item, inputs, fresh, earlier, held) for item in spec["tuple"])
    if "dict" in spec:
        return {key: _value(item, inputs, fresh, earlier, held)
                for key, item in spec["dict"].items()}
    if "float" in spec:
        return _SPECIAL_FLOATS[spec["float"]]
    if "parameter" in spec:
        if held is None:
            raise ValueError("a parameter outside a call")
        return held.get(spec["parameter"])
    if "output_of" in spec:
        return _earlier_output(earlier, int(spec["output_of"]), list(spec.get("item", [])))
    if "tensor" in spec:
        tensor = inputs[spec["tensor"]]
        if fresh:
            tensor = tensor.detach().clone()
            if spec.get("grad"):
                leaf = tensor.requires_grad_(True)
                tensor = leaf.clone()
                _LEAVES.of[id(tensor)] = leaf
        return tensor
    raise ValueError(f"not a plan value: an object with keys {sorted(spec)[:5]}")


def _earlier_output(earlier: list[Any], forward: int, path: list[int]) -> Any:
    if not 0 <= forward < len(earlier) or earlier[forward] is None:
        raise EarlierOutputMissing(f"step {forward + 1} of this call returned nothing to "
                                   "pass on (it raised)")
    value = earlier[forward]
    for depth, index in enumerate(path):
        items = _sequence_items(value)
        if items is None or not 0 <= int(index) < len(items):
            where = "".join(f"[{i}]" for i in path[:depth + 1])
            raise EarlierOutputMissing(f"step {forward + 1} of this call returned no item "
                                       f"{where} to pass on to the next step")
        value = items[int(index)]
    return value


class _Leaves(threading.local):
    """Leaves behind the arguments of the forward being prepared, by the argument's id(): per
    thread, since the grader runs calls in several threads at once (a shared map would let one
    thread's forward clear another's leaves, which would then record no gradient)."""

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


def _on_arena(recorder: _CallRecorder, prefix: str, args: list[Any],
              kwargs: dict[str, Any]) -> None:
    """Hand the forward its input tensors on the arena's slots (where it has one) instead of
    private copies: the same values (on the same graph, for an input whose gradient is wanted),
    in memory the supervisor reads back after the call."""
    arena = recorder.arena
    if arena is None:
        return
    holders: list[tuple[Any, Any, str]] = [(args, index, f"arg{index}")
                                           for index in range(len(args))]
    holders += [(kwargs, name, f"kw.{name}") for name in kwargs]
    for holder, slot, position in holders:
        value = holder[slot]
        shared = arena.tensor(recorder.record["id"], prefix + position)
        if (type(value) is not torch.Tensor or shared is None or shared.shape != value.shape
                or shared.dtype != value.dtype):
            continue
        leaf = _LEAVES.of.pop(id(value), None)
        if leaf is not None:
            shared.copy_(leaf)  # the values it holds already, now taken from the leaf
            _LEAVES.of[id(shared)] = leaf
        holder[slot] = shared


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
        return {"kind": "tensor-subclass", "type": type_name(value)}
    # The returned value itself must be a plain tuple or list (a subclass of one is "other", of
    # the wrong form); inside it, a named tuple (the cache of ``(output, cache)``) is a tuple.
    kind = ("list" if type(value) is list else "tuple" if type(value) is tuple or (
        depth > 0 and issubclass(type(value), tuple)) else None)
    if kind is not None and depth < MAX_RETURNED_DEPTH:
        # tuple's own methods, not a subclass's: a named tuple is read as the tuple it is.
        items = _sequence_items(value) or ()
        return {
            "kind": kind,
            "items": [
                _describe_returned(item, f"{key}.{index}", tensors, depth + 1)
                for index, item in enumerate(items[:8])
            ],
            "length": len(items),
        }
    return {"kind": "other", "type": type_name(value)}


def unreadable_return(exc: BaseException) -> str:
    """The interface problem of a call whose returned value could not be read as data."""
    return (f"what it returned could not be read as data ({type_name(exc)} while reading it): "
            "return plain tensors, and tuples or lists of them, as the statement says")


def type_name(value: Any) -> str:
    """The name of ``value``'s class as plain text: a class may carry a ``str`` subclass as its
    name, whose methods are the student's."""
    return str.__str__(type(value).__name__)[:80]


def _status_of(exc: BaseException) -> str:
    return "timeout" if isinstance(exc, CallTimeout) else "raised"


def _worst(current: str, new: str) -> str:
    order = ["ok", "raised", "timeout"]
    return max(current, new, key=lambda status: order.index(status) if status in order else 0)


def stage_failure(stage: str, exc: BaseException,
                  student_files: tuple[str, ...]) -> dict[str, Any]:
    """The record of a stage that raised or ran out of time."""
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
        "type": type_name(exc),
        "value_error": isinstance(exc, ValueError),
        "message": message[:MAX_MESSAGE_CHARS],
        "frames": frames[-MAX_TRACEBACK_FRAMES:],
    }

