"""Feedback codes declared by assignments: each code's title, message template and hint.

A known mistake names a code. The grader owns the lab-neutral codes (``grader.feedback``); every
other code is declared by the package in ``assignment.toml``, or by a catalogue file several
packages share (``codes_from``), as a table::

    [codes.mask-inverted]
    title = "mask read the wrong way round"
    message = "On {input}, your code lets queries attend to the keys marked False ..."
    hint = "In this course True means 'may attend'. ..."
    evidence = "blocked-keys-zero"   # optional: the check kind that best shows it

A table holding only ``hint`` under a lab-neutral code's name replaces that code's hint for
this package (the attention labs keep their own words for ``wrong-output``). The format is
documented in docs/authors/contract.md, "Feedback codes".
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SLOTS = frozenset({"input", "detail", "variant"})
"""The slots a message template may use: ``{input}``, the probe input the mistake was seen on
in a few words; ``{detail}``, what the grader observed there (the finding's own observation,
else that of a failed check of kind ``evidence``); ``{variant}``, the description of the known
mistake that reproduced the student's outputs."""

CODE_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
"""A code is lower-case words joined by hyphens: it is a stable identifier in results
documents, exports, LMS comments and webhooks."""


@dataclass(frozen=True)
class CodeText:
    """A feedback code in the student's words."""

    title: str
    """A few words naming the mistake, shown beside the code."""
    message: str
    """What was observed, with the named slots of ``SLOTS``."""
    hint: str
    """The idea to revisit, never the solution's code."""
    evidence: str = ""
    """The check kind whose observation best shows this mistake (fills ``{detail}``)."""


@dataclass(frozen=True)
class Declared:
    """One ``[codes.NAME]`` table: where it is, and what it says."""

    text: CodeText | None
    """The full declaration; None for a table that only replaces a lab-neutral code's hint."""
    hint: str
    where: str
    """``file:line`` of the table, for errors."""


class CatalogueError(ValueError):
    """A codes table that is malformed; the message starts with ``file:line``."""


def read_codes(path: Path, raw: Mapping[str, Any] | None = None) -> dict[str, Declared]:
    """The ``[codes.*]`` tables of one TOML file (an ``assignment.toml`` or a shared catalogue),
    validated for shape: known keys, non-empty title, message and hint, only known slots."""
    text = path.read_text(encoding="utf-8")
    if raw is None:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CatalogueError(f"{path}: {exc}") from exc
    tables = raw.get("codes", {})
    if not isinstance(tables, Mapping):
        raise CatalogueError(f"{path}:{_line_of(text, 'codes')}: `codes` must be a table of "
                             "tables, one per code: [codes.your-code]")
    declared = {}
    for code, table in tables.items():
        where = f"{path}:{_line_of(text, code)}"
        declared[code] = _declared(code, table, where)
    return declared


def _declared(code: str, table: Any, where: str) -> Declared:
    if not CODE_PATTERN.fullmatch(code):
        raise CatalogueError(f"{where}: code {code!r} must be lower-case words joined by "
                             "hyphens, e.g. wrong-axis")
    if not isinstance(table, Mapping):
        raise CatalogueError(f"{where}: [codes.{code}] must be a table with title, message "
                             "and hint")
    unknown = set(table) - {"title", "message", "hint", "evidence"}
    if unknown:
        raise CatalogueError(f"{where}: [codes.{code}] has unknown keys "
                             f"{', '.join(sorted(unknown))} (known: title, message, hint, "
                             "evidence)")
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip():
            raise CatalogueError(f"{where}: [codes.{code}] {key} must be a non-empty string")
    if "hint" not in table:
        raise CatalogueError(f"{where}: [codes.{code}] has no hint: every code tells the "
                             "student which idea to revisit")
    if set(table) == {"hint"}:
        return Declared(None, table["hint"], where)
    missing = [key for key in ("title", "message") if key not in table]
    if missing:
        raise CatalogueError(f"{where}: [codes.{code}] has no {' and no '.join(missing)} (a "
                             "table with only a hint may replace a lab-neutral code's hint)")
    for key in ("message", "hint", "title"):
        _check_slots(code, key, table[key], where, allowed=SLOTS if key == "message" else
                     frozenset())
    return Declared(CodeText(table["title"], table["message"], table["hint"],
                             table.get("evidence", "")), table["hint"], where)


def _check_slots(code: str, key: str, template: str, where: str,
                 allowed: frozenset[str]) -> None:
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template)
                  if name is not None]
    except ValueError as exc:
        raise CatalogueError(f"{where}: [codes.{code}] {key} is not a valid template ({exc}); "
                             "write a literal brace as {{ or }}") from exc
    for name in fields:
        if name not in allowed:
            known = ", ".join("{" + slot + "}" for slot in sorted(allowed)) or "none"
            raise CatalogueError(f"{where}: [codes.{code}] {key} uses the unknown slot "
                                 f"{{{name}}} (slots: {known})")


def _line_of(text: str, code: str) -> int:
    """The line of the table ``[codes.CODE]`` (or a ``CODE = {...}`` line under ``[codes]``);
    1 when it cannot be found."""
    header = re.compile(r"^[ \t]*\[[ \t]*codes[ \t]*\.[ \t]*[\"']?" + re.escape(code)
                        + r"[\"']?[ \t]*\]", re.MULTILINE)
    inline = re.compile(r"^[ \t]*[\"']?" + re.escape(code) + r"[\"']?[ \t]*=", re.MULTILINE)
    for pattern in (header, inline):
        found = pattern.search(text)
        if found:
            return text.count("\n", 0, found.start()) + 1
    return 1


def line_of_string(path: Path, value: str) -> int:
    """The first line of ``path`` quoting ``value`` (a code named in a hidden module); 1 when
    none does."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 1
    for number, line in enumerate(lines, 1):
        if f'"{value}"' in line or f"'{value}'" in line:
            return number
    return 1
