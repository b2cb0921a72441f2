"""Text whose characters could hide or reorder what it says, made to show them.

Student code and names reach pages, CSV files and terminals. Bidirectional controls can make a
condition that is false read as true, zero-width characters hide text, and other control
characters are invisible or worse; wherever such text is shown, each of these characters is
replaced by a visible mark: ``\\u202e`` (or ``\\x07`` below U+0100), as Python would write it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

INVISIBLE_CHARS = ("\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b\u200c\u200e"
                   "\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff")
"""The characters made visible, as the body of a regular-expression class: control characters
but tab, newline and carriage return, the bidirectional marks, embeddings, overrides and
isolates, and the zero-width and invisible formatting characters (the zero-width joiner of
emoji sequences is left alone)."""

_INVISIBLE = re.compile(f"[{INVISIBLE_CHARS}]")


def mark(match: re.Match[str]) -> str:
    """The visible mark of a matched character."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def show_invisible(text: str) -> str:
    """``text`` with every invisible character replaced by its mark; a ``str`` subclass (such
    as Markup, whose marks need no escaping) keeps its class."""
    if not _INVISIBLE.search(text):
        return text
    return type(text)(_INVISIBLE.sub(mark, str(text)))


_FORMULA = re.compile(r"[=@\t\r]|[+-](?![\d. ])")


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet shows as the text it is: invisible characters marked, and
    text that would start a formula (``=``, ``@``, or ``+``/``-`` not before a number or a
    space) prefixed with ``'``."""
    if not isinstance(value, str):
        return value
    if _FORMULA.match(value):
        value = "'" + value
    return show_invisible(value)


class CSVWriter:
    """``csv.writer`` whose every cell goes through ``csv_cell``."""

    def __init__(self, out: Any) -> None:
        self._writer = csv.writer(out)

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([csv_cell(cell) for cell in row])
