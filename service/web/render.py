"""Turning stored text into what pages show: the statement's Markdown, code with pointed lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

from grader.notebook import NotebookError, read_notebook, source_lines

# CommonMark with raw HTML off: HTML in the source is shown as text, and markdown-it refuses
# javascript:, vbscript: and data: links by itself.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
# A statement's table may be wider than a phone: it scrolls in a box the keyboard can reach,
# like the pages' own tables (the scroll() macro of _macros.html).
_SCROLL_OPEN = ('<div class="table-scroll" tabindex="0" role="region" '
                'aria-label="Table {n} of the statement">\n')


def _table_open(renderer: Any, tokens: Sequence[Token], idx: int, options: OptionsDict,
                env: EnvType) -> str:
    env["tables"] = env.get("tables", 0) + 1
    table = str(renderer.renderToken(tokens, idx, options, env))
    return _SCROLL_OPEN.format(n=env["tables"]) + table


def _table_close(renderer: Any, tokens: Sequence[Token], idx: int, options: OptionsDict,
                 env: EnvType) -> str:
    return str(renderer.renderToken(tokens, idx, options, env)) + "</div>\n"


_MARKDOWN.add_render_rule("table_open", _table_open)
_MARKDOWN.add_render_rule("table_close", _table_close)


def markdown(text: str) -> Markup:
    return Markup(_MARKDOWN.render(text, {}))


@dataclass(frozen=True)
class CodeLine:
    number: int
    text: str
    notes: list[str]


@dataclass(frozen=True)
class CodeFile:
    name: str
    lines: list[CodeLine]
    binary: bool

    @property
    def pointed(self) -> list[CodeLine]:
        return [line for line in self.lines if line.notes]


def code_file(name: str, content: bytes, notes: dict[int, list[str]]) -> CodeFile:
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        text = content.decode("utf-8", errors="replace")
    lines = text.splitlines() or [""]
    return CodeFile(name, [CodeLine(i, line, notes.get(i, []))
                           for i, line in enumerate(lines, start=1)], b"\0" in content)


def notebook_cells(name: str, content: bytes, notes: dict[int, dict[int, list[str]]]
                   ) -> list[CodeFile]:
    """A stored notebook as its code cells, each shown as a file named after its cell (the
    numbers the document's ``cell N, line M`` refer to); the raw text if it cannot be read."""
    try:
        cells = read_notebook(content)
    except NotebookError:
        return [code_file(name, content, {})]
    return [CodeFile(f"{name}, cell {cell.number}",
                     [CodeLine(i, line, notes.get(cell.number, {}).get(i, []))
                      for i, line in enumerate(source_lines(cell.source) or [""], start=1)],
                     "\0" in cell.source) for cell in cells]
