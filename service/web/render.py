"""Turning stored text into what pages show: the statement's Markdown, code with pointed lines."""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markupsafe import Markup

# CommonMark with raw HTML off: HTML in the source is shown as text, and markdown-it refuses
# javascript:, vbscript: and data: links by itself.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: str) -> Markup:
    return Markup(_MARKDOWN.render(text))


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
