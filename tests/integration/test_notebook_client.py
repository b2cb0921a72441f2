"""The notebook client: ``autograde.check()`` in a real Jupyter kernel (nbclient), the starter
notebooks, and an import that stays light."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assignments import list_assignments, load_spec
from assignments.spec import ASSIGNMENTS_ROOT
from assignments.starter_notebook import starter_notebook
from devkit.courses import PASSWORD, Factory
from devkit.notebooks import notebook
from devkit.paths import CORPUS, REPO
from devkit.stack import Stack
from grader.notebook import assemble, read_notebook


def _run_in_kernel(data: bytes) -> list[dict[str, Any]]:
    """Execute the notebook in a fresh python3 kernel; its code cells with their outputs."""
    import nbclient
    import nbformat

    executed = nbformat.reads(data.decode(), as_version=4)  # type: ignore[no-untyped-call]
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's `autograde`
    client = nbclient.NotebookClient(executed, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO)}})
    with client.setup_kernel(env=env):
        for index, cell in enumerate(executed.cells):
            client.execute_cell(cell, index)
    return [cell for cell in executed.cells if cell.cell_type == "code"]


def _printed(cell: dict[str, Any]) -> str:
    return "".join(output.get("text", "") for output in cell["outputs"]
                   if output["output_type"] == "stream")


def _check_cell(slug: str) -> str:
    return (f"import autograde\nreport = autograde.check({slug!r})\n"
            "print('RESULT', json.dumps({'ok': report.ok, 'passed': len(report.passed), "
            "'failed': sorted(report.failed)}))\nreport")


def _result(cell: dict[str, Any]) -> dict[str, Any]:
    line = next(line for line in _printed(cell).splitlines() if line.startswith("RESULT "))
    return dict(json.loads(line.removeprefix("RESULT ")))


@pytest.mark.slow
def test_check_runs_the_public_tests_on_what_the_kernel_defines() -> None:
    correct = (CORPUS / "attention" / "correct_matmul.py").read_text()
    unscaled = (CORPUS / "attention" / "no_scale_matmul.py").read_text()
    cells = _run_in_kernel(notebook(
        ("code", "import json"),
        ("code", correct),
        ("code", _check_cell("attention")),
        ("code", unscaled),  # redefines `attention` in the kernel: the check sees the new one
        ("code", _check_cell("attention")),
    ))
    good, bad = _result(cells[2]), _result(cells[4])
    assert good["ok"] and good["passed"] >= 5 and good["failed"] == []
    assert not bad["ok"] and "test_small_example_by_hand" in bad["failed"]
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in cells[4]["outputs"])
    assert "FAIL test_small_example_by_hand" in shown  # the report the student reads


@pytest.mark.slow
def test_check_says_what_to_define_first() -> None:
    cells = _run_in_kernel(notebook(
        ("code", "import autograde\ntry:\n    autograde.check('multi-head-attention')\n"
                 "except NameError as error:\n    print('SAID', error)")))
    assert "SAID define `ManualMultiHeadAttention` in a cell" in _printed(cells[0])


def test_importing_the_client_imports_neither_torch_nor_the_service() -> None:
    probe = ("import sys, autograde\n"
             "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
             "('torch', 'service', 'grader', 'pytest', 'requests'))\n"
             "print(heavy)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("slug", list_assignments(ASSIGNMENTS_ROOT))
def test_the_starter_notebook_is_generated_from_the_starter_and_served(slug: str) -> None:
    spec = load_spec(slug)
    name = spec.entry.removesuffix(".py") + ".ipynb"
    shipped = spec.root / "starter" / name
    assert shipped.read_text() == starter_notebook(spec), \
        "run `python -m assignments.starter_notebook` after changing a starter"
    assert spec.public_files[f"starter/{name}"] == shipped
    assembly = assemble(read_notebook(shipped.read_bytes()))
    starter = (spec.root / "starter" / spec.entry).read_text()
    # Graded, the starter notebook is the starter file (and comments): the check cell drops out.
    assert ast.dump(ast.parse(assembly.source)) == ast.dump(ast.parse(starter))
    assert assembly.left_out[0].reason.startswith("the autograde client")


@pytest.fixture
def server(make_stack: Callable[..., Stack], sqlite_url: str, factory: Factory) -> Stack:
    factory.user("ada", course=factory.course("ml101"))
    stack = make_stack(sqlite_url, broker_url="memory://", RATE_LIMIT_COUNT=100)
    stack.start_server()
    return stack


def test_a_notebook_is_submitted_from_the_notebook_and_from_the_command_line(
        server: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import autograde

    path = tmp_path / "lab.ipynb"
    path.write_bytes(notebook(("code", (CORPUS / "attention" / "correct_matmul.py").read_text()),
                              ("code", "import autograde\nautograde.check('attention')")))
    token = server.login("ada")["Authorization"].removeprefix("Bearer ")
    body = autograde.submit(path, assignment="attention", server=server.url, token=token,
                            wait=False)
    assert body["status"] == "queued" and [f["name"] for f in body["files"]] == ["lab.ipynb"]
    assert f"submitted as {body['id']} (queued)" in capsys.readouterr().out

    login = server.autograde("login", "--username", "ada", "--password-stdin",
                             stdin=PASSWORD + "\n")
    assert login.returncode == 0, login.stderr
    done = server.autograde("submit", str(path), "--assignment", "attention", "--no-wait",
                            "--json")
    assert done.returncode == 0, done.stderr
    assert [f["name"] for f in json.loads(done.stdout)["files"]] == ["lab.ipynb"]


def test_a_bad_notebook_is_refused_with_the_reason_on_the_command_line(
        server: Stack, tmp_path: Path) -> None:
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                                "worksheets": []}))
    server.autograde("login", "--username", "ada", "--password-stdin", stdin=PASSWORD + "\n")
    done = server.autograde("submit", str(path), "--assignment", "attention", "--no-wait")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "old.ipynb: The notebook is in nbformat 3" in done.stderr, done.stderr
