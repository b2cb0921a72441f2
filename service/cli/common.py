"""What every command module shares: the help formatter, registering a command in its
audience's group, and the one-line failure."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any

from service.cli.terminal import terminal_safe

USAGE_ERRORS = 2
"""Exit status of a command that could not do what it was asked (``argparse``'s own too)."""

GROUPS = (
    ("student", "On a grading service (log in first)"),
    ("local", "On this machine, without a service"),
    ("admin", "Running and administering a service"),
)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default after its help, when it has one worth saying."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "(default" in text or default is None or default is False or default in (
                "", [], argparse.SUPPRESS):
            return text
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text
        if action.option_strings and action.nargs == 0:
            return text  # a flag's default is the behaviour without it, which its help says
        return f"{text} (default: %(default)s)"


def add_parser(actions: Any, name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand with the shared formatter and its help as its description too."""
    kwargs.setdefault("description", help[:1].upper() + help[1:] + ".")
    parser: argparse.ArgumentParser = actions.add_parser(name, help=help,
                                                         formatter_class=HelpFormatter,
                                                         **kwargs)
    return parser


@dataclass
class Commands:
    """The top level's commands, each in one audience's group of the overview."""

    actions: Any
    listed: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    assignment_actions: Any = None
    """``autograde assignments ACTION``: the authoring actions on this machine's assignments."""

    def add(self, group: str, name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.listed.setdefault(group, []).append((name, help))
        return add_parser(self.actions, name, help, **kwargs)

    def overview(self) -> str:
        width = max(len(name) for entries in self.listed.values() for name, _ in entries) + 2
        blocks = []
        for group, title in GROUPS:
            lines = [f"  {name:<{width}}{text}" for name, text in self.listed.get(group, [])]
            blocks.append(f"{title}:\n" + "\n".join(lines))
        return ("\n\n".join(blocks) + "\n\n`autograde COMMAND --help` tells more about each. "
                "Exit status: 0 done, 1 a submission could not be graded (or a check found the "
                "assignment unsound), 2 refused, 3 no sandbox could run.")


def fail(message: str) -> int:
    """Say why a command did nothing, on standard error, as one safe line."""
    print(terminal_safe(f"autograde: {message}"), file=sys.stderr)
    return USAGE_ERRORS


def add_no_plots(parser: argparse.ArgumentParser) -> None:
    """The ``--no-plots`` flag of the commands that print a report."""
    parser.add_argument("--no-plots", dest="plots", action="store_false",
                        help="leave out the text pictures a diagnosis cites (an attention "
                        "map); by default the report shows them")
