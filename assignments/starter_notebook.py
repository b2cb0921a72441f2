"""The starter notebook of an assignment, generated from its starter code (torch-free).

``python -m assignments.starter_notebook [SLUG ...]`` writes ``starter/<entry stem>.ipynb``
beside the starter file of every shipped assignment, or of the packages named (``autograde
assignments new`` writes a new package's); a test keeps the committed notebooks equal to what
this writes. The notebook is served with the starter code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from assignments.spec import ASSIGNMENTS_ROOT, AssignmentSpec, list_assignments, load_spec


def starter_notebook(spec: AssignmentSpec) -> str:
    """The notebook's text: the statement's pointer, the starter code, a check and a submit."""
    starter = (spec.root / "starter" / spec.entry).read_text(encoding="utf-8")
    stem = spec.entry.removesuffix(".py")
    names = ", ".join(f"`{name}`" for name in spec.required_names)
    cells = [
        _markdown(f"# {spec.title}\n\n"
                  f"Write {names} in the code cell below (the statement is the assignment's "
                  "README). When you submit this notebook, its code cells are graded as "
                  f"`{spec.entry}`: imports, function and class definitions and constant "
                  "assignments are kept; magics, shell escapes and other top-level code "
                  "(calls, loops, training runs, displays) are left out and never run by the "
                  "grader, so try things out freely in cells of their own."),
        _code(starter.rstrip("\n")),
        _markdown("## Check your work\n\n"
                  "The public tests, run on what this notebook defines (run the cells above "
                  "first; `pip install autograde` gives the `autograde` module)."),
        _code(f'import autograde\n\nautograde.check("{spec.slug}")'),
        _markdown("## Submit\n\n"
                  "Save the notebook, then submit it with your token (or from a terminal: "
                  f"`autograde submit {stem}.ipynb --assignment {spec.slug}`)."),
        _code(f'# autograde.submit("{stem}.ipynb", assignment="{spec.slug}",\n'
              '#                  server="https://...", token="...")'),
    ]
    for number, cell in enumerate(cells, start=1):
        cell["id"] = f"{spec.slug}-{number}"  # fixed ids: the same starter gives the same file
    notebook = {
        "nbformat": 4, "nbformat_minor": 5, "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                    "language": "python"},
                     "language_info": {"name": "python"}},
    }
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def _markdown(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(keepends=True)}


def _code(text: str) -> dict[str, Any]:
    return {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
            "source": text.splitlines(keepends=True)}


def write_starter_notebook(spec: AssignmentSpec) -> Path:
    """Write ``starter/<entry stem>.ipynb`` beside the starter file; the path written."""
    target = spec.root / "starter" / (spec.entry.removesuffix(".py") + ".ipynb")
    target.write_text(starter_notebook(spec), encoding="utf-8")
    return target


def main(slugs: list[str]) -> None:
    """Rewrite the notebooks of ``slugs`` (found as the service finds them), or of every
    shipped assignment."""
    for slug in slugs or list_assignments(ASSIGNMENTS_ROOT):
        print(write_starter_notebook(load_spec(slug)))


if __name__ == "__main__":
    main(sys.argv[1:])
