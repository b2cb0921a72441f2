"""Interface errors in words: what the contract expects, what the file defines, the nearest name.

Read from the text of the submission (``ast.parse`` runs nothing) and from the signature of
the reference's public names, which the assignment's README states anyway.
"""

from __future__ import annotations

import ast
import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from grader.parsing import parse_python

_PRIVATE_PARAMETERS = frozenset({"mistakes"})


def missing_name_detail(name: str, files: Mapping[str, bytes], entry: str,
                        reference: Mapping[str, Any]) -> str:
    """Why the required ``name`` could not be used, for a student."""
    expected = expected_signature(name, reference)
    want = f"`{expected}`" if expected else f"`{name}`"
    defined = _top_level(files.get(entry, b""))
    kind = "class" if isinstance(reference.get(name), type) else "function"
    if name in defined:
        return (f"the assignment calls {want}, but `{name}` in `{entry}` is {defined[name]}, "
                f"not a {kind}")
    text = f"the assignment calls {want}, but `{entry}` defines no {kind} `{name}`"
    candidates = [n for n, what in defined.items() if what in {"a function", "a class"}]
    if not candidates:
        return text + f" (no {kind} at all at its top level)"
    nearest = difflib.get_close_matches(name, candidates, n=1, cutoff=0.5) or [
        n for n in candidates if name.lower() in n.lower() or n.lower() in name.lower()][:1]
    if len(candidates) == 1 and nearest:
        return text + f". It defines `{nearest[0]}`: if that is yours, rename it to `{name}`"
    listed = ", ".join(f"`{n}`" for n in candidates[:8])
    more = f" and {len(candidates) - 8} more" if len(candidates) > 8 else ""
    text += f". It defines {listed}{more}"
    if nearest:
        text += f"; the nearest is `{nearest[0]}`: rename it to `{name}` if that is yours"
    return text


def expected_signature(name: str, reference: Mapping[str, Any]) -> str:
    """``attention(q, k, v, allowed)`` or ``ManualMultiHeadAttention(d_model, num_heads, *,
    dropout=0.0, bias=True)`` with ``forward(...)``, from the reference; "" if unknown."""
    target = reference.get(name)
    if target is None:
        return ""
    if isinstance(target, type):
        init = _public_method(target, "__init__")
        forward = _public_method(target, "forward")
        text = f"{name}{_signature(init, drop_self=True)}" if init else name
        if forward is not None:
            text += f" with forward{_signature(forward, drop_self=True)}"
        return text
    return f"{name}{_signature(target)}" if callable(target) else ""


def _public_method(cls: type, method: str) -> Callable[..., Any] | None:
    """The first definition along the MRO with a real signature (not ``**kwargs`` glue)."""
    for klass in cls.__mro__:
        function = klass.__dict__.get(method)
        if function is None:
            continue
        parameters = inspect.signature(function).parameters.values()
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return function  # type: ignore[no-any-return]
    return None


def _signature(function: Callable[..., Any], *, drop_self: bool = False) -> str:
    signature = inspect.signature(function)
    parameters = [p.replace(annotation=inspect.Parameter.empty)
                  for p in signature.parameters.values() if p.name not in _PRIVATE_PARAMETERS]
    if drop_self and parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    return str(signature.replace(parameters=parameters,
                                 return_annotation=inspect.Signature.empty))


def _top_level(content: bytes) -> dict[str, str]:
    """Names bound at the top level of a module, with what they are."""
    try:
        tree = parse_python(content.decode("utf-8"))
    except (SyntaxError, ValueError):
        return {}
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names[node.name] = "a function"
        elif isinstance(node, ast.ClassDef):
            names[node.name] = "a class"
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.setdefault(target.id, "a variable")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.setdefault((alias.asname or alias.name).split(".")[0], "an import")
    return names
