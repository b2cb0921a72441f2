"""Reading bytes from the sandbox: bounded JSON, fields checked by type and range, capped headers.

Everything here is total: any input gives a value or ``Refused``, never another exception, and
the work done is bounded by the caps before anything is parsed (a line's length, a safetensors
header's size and entry count), not by what the bytes claim. Numbers are finite and within the
ranges the caller names, integers have a bounded number of digits, nesting has a bounded depth.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

MAX_LINE_BYTES = 256 << 10
"""One event line; the runner's largest (a call with its stages) is a few KiB."""
MAX_DEPTH = 12
"""Nesting of an event; the runner's deepest (a returned tuple inside a stage) is 6."""
MAX_INT_DIGITS = 18
"""Integers up to 10**18; anything longer is refused while it is parsed."""
MAX_HEADER_BYTES = 64 << 10
"""A safetensors header: 256 tensors of a call take about 30 KiB."""
MAX_HEADER_ENTRIES = 257
"""Tensors of one call plus the ``__metadata__`` entry."""
MAX_SHAPE_RANK = 8

SAFETENSORS_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "BOOL": 1, "I64": 8, "I32": 4}
"""The dtypes a tensor file may hold, with their sizes in bytes."""


class Refused(ValueError):
    """Bytes from the sandbox that are not what the protocol allows."""


def _refuse_constant(name: str) -> Any:
    raise Refused(f"{name} is not a number the protocol allows")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise Refused(f"an integer of {len(text)} digits")
    return int(text)


def _finite_float(text: str) -> float:
    if len(text) > 64:
        raise Refused("a number of more than 64 characters")
    value = float(text)
    if not math.isfinite(value):
        raise Refused(f"{text[:20]} is not finite")
    return value


_DECODER = json.JSONDecoder(
    parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_refuse_constant,
    strict=True,
)


def loads(data: bytes | str, *, max_bytes: int = MAX_LINE_BYTES,
          max_depth: int = MAX_DEPTH) -> Any:
    """Decode one JSON value within the caps, or raise ``Refused``.

    The length is checked before anything is parsed; deeper nesting than the decoder's own
    recursion allows is refused as it is met, and the depth of what was decoded is checked
    once more without recursion.
    """
    if len(data) > max_bytes:
        raise Refused(f"{len(data)} bytes is over the {max_bytes}-byte limit")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Refused("not UTF-8") from exc
    try:
        value = _DECODER.decode(data)
    except Refused:
        raise
    except (ValueError, RecursionError, MemoryError) as exc:
        raise Refused(f"not JSON ({type(exc).__name__})") from exc
    if _depth_over(value, max_depth):
        raise Refused(f"nested deeper than {max_depth}")
    return value


def _depth_over(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


# --------------------------------------------------------------------------------------------
# Fields, by type and range.
# --------------------------------------------------------------------------------------------


def text(value: Any, limit: int) -> str:
    """A string field cut to ``limit`` characters ('' for anything that is not a string)."""
    return value[:limit] if isinstance(value, str) else ""


def name(value: Any, limit: int) -> str | None:
    """A string field used as a key: None unless it is a string within ``limit``."""
    return value if isinstance(value, str) and len(value) <= limit else None


def integer(value: Any, low: int, high: int) -> int | None:
    """An integer field within [low, high] (booleans are not integers); else None."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    return None


def number(value: Any, low: float, high: float) -> float | None:
    """A finite number within [low, high] as a float; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not -(1 << 63) <= value <= 1 << 63:
        return None
    result = float(value)
    return result if math.isfinite(result) and low <= result <= high else None


def seconds(value: Any) -> float | None:
    """A duration the runner reported: finite, not negative, under a day."""
    return number(value, 0.0, 86_400.0)


def strings(value: Any, *, items: int, limit: int) -> tuple[str, ...]:
    """A list of strings: the first ``items`` strings, each cut to ``limit``; others dropped."""
    if not isinstance(value, list):
        return ()
    return tuple(item[:limit] for item in value[:items] if isinstance(item, str))


# --------------------------------------------------------------------------------------------
# Safetensors headers, checked before the library sees the file.
# --------------------------------------------------------------------------------------------


def check_safetensors(data: bytes, *, max_tensors: int, max_elements: int) -> None:
    """Refuse a tensor file whose header is oversized, malformed or describes what we refuse.

    The header's declared size is checked against ``MAX_HEADER_BYTES`` and the file before it
    is read, its JSON within the line caps, its entry count before any entry is looked at;
    each entry's dtype, rank, element count and byte range is checked against the file. Only
    a file that passes is handed to the safetensors library.
    """
    if len(data) < 8:
        raise Refused("shorter than a safetensors header")
    (size,) = struct.unpack("<Q", data[:8])
    if size > MAX_HEADER_BYTES:
        raise Refused(f"a header of {size} bytes is over the {MAX_HEADER_BYTES}-byte limit")
    if size > len(data) - 8:
        raise Refused("the header runs past the end of the file")
    header = loads(data[8:8 + size], max_bytes=MAX_HEADER_BYTES, max_depth=3)
    if not isinstance(header, dict):
        raise Refused("the header is not an object")
    entries = len(header) - ("__metadata__" in header)
    if entries > min(max_tensors, MAX_HEADER_ENTRIES - 1):
        raise Refused(f"{entries} tensors in one file")
    payload = len(data) - 8 - size
    for key, entry in header.items():
        if key == "__metadata__":
            _check_metadata(entry)
        else:
            _check_entry(key, entry, payload, max_elements)


def _check_metadata(entry: Any) -> None:
    if not isinstance(entry, dict) or len(entry) > 16 or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) + len(v) <= 512
            for k, v in entry.items()):
        raise Refused("malformed __metadata__")


def _check_entry(key: str, entry: Any, payload: int, max_elements: int) -> None:
    if len(key) > 200 or not isinstance(entry, dict):
        raise Refused("malformed tensor entry")
    dtype = entry.get("dtype")
    width = SAFETENSORS_DTYPES.get(dtype) if isinstance(dtype, str) else None
    if width is None:
        raise Refused(f"{key[:80]}: dtype {str(dtype)[:20]!r} is not allowed")
    shape = entry.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_SHAPE_RANK:
        raise Refused(f"{key[:80]}: malformed shape")
    elements = 1
    for extent in shape:
        checked = integer(extent, 0, max_elements)
        if checked is None:
            raise Refused(f"{key[:80]}: malformed shape")
        elements *= checked
        if elements > max_elements:
            raise Refused(f"{key[:80]}: over {max_elements} elements")
    offsets = entry.get("data_offsets")
    if not isinstance(offsets, list) or len(offsets) != 2:
        raise Refused(f"{key[:80]}: malformed data_offsets")
    start, end = (integer(offset, 0, payload) for offset in offsets)
    if start is None or end is None or end - start != elements * width:
        raise Refused(f"{key[:80]}: data_offsets do not match the shape and the file")
