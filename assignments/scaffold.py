"""``autograde assignments new SLUG``: a small working assignment package to start from.

The package is a trivial function assignment, ``scores(q, k)`` = q kᵀ / sqrt(D), with every
part an author edits: spec, statement, starter (and its notebook, made from it as the shipped
labs' are), public tests, the reference with two known mistakes, and the probe plan. It passes
``autograde assignments check SLUG`` as written, so an author changes one part at a time and
re-checks. Torch-free: templates are text.
"""

from __future__ import annotations

import re
from pathlib import Path

from assignments.spec import (
    ASSIGNMENTS_DIR_VARIABLE,
    AssignmentError,
    assignment_roots,
    load_spec,
)
from assignments.starter_notebook import write_starter_notebook

SLUG_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


def default_target() -> Path:
    """Where ``new`` writes: the first folder of ``AUTOGRADE_ASSIGNMENTS_DIR``."""
    roots = assignment_roots()
    if len(roots) < 2:
        raise AssignmentError(
            f"set {ASSIGNMENTS_DIR_VARIABLE} to the folder of your course's assignments "
            "(or pass --dir): new packages are not written among the shipped ones")
    return roots[1]


def scaffold(slug: str, target: Path, *, title: str | None = None) -> Path:
    """Write the package ``target/slug``; AssignmentError if the slug is bad or taken."""
    if not SLUG_PATTERN.match(slug):
        raise AssignmentError(f"bad slug {slug!r}: lower-case words and digits joined by '-'")
    from assignments.spec import list_assignments

    if slug in list_assignments() or slug in list_assignments(target):
        raise AssignmentError(f"an assignment {slug!r} exists already")
    package = target / slug
    if package.exists():
        raise AssignmentError(f"{package} exists already")
    module = slug.replace("-", "_")
    values = {"slug": slug, "module": module,
              "title": title or "Scaled attention scores"}
    for relative, template in TEMPLATES.items():
        path = package / _fill(relative, values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_fill(template, values), encoding="utf-8")
    write_starter_notebook(load_spec(slug, root=target))
    return package


def _fill(template: str, values: dict[str, str]) -> str:
    """Replace ``<<name>>`` placeholders (braces stay free for the Python inside)."""
    for name, value in values.items():
        template = template.replace(f"<<{name}>>", value)
    return template


SPEC = '''\
# <<slug>>, from `autograde assignments new`. Edit, then `autograde assignments check <<slug>>`.
title = "<<title>>"
entry = "<<module>>.py"             # the one file students submit
required_names = ["scores"]         # names the file must define
forbidden_apis = []                 # e.g. "torch.nn.functional.scaled_dot_product_attention"

[limits]                            # sandbox limits (defaults: docs/authors/authoring.md,
                                    # section 3); e.g. call_seconds = 10

[[checks]]
number = "1.1"
name = "scores match the reference (float32)"
kind = "matches-reference"
calls = ["plain", "heads"]
points = 2

[[checks]]
number = "1.2"
name = "float64 inputs give matching float64 scores"
kind = "matches-reference"
calls = ["grad"]
points = 1

[[checks]]
number = "1.3"
name = "output dtype equals input dtype"
kind = "dtype-preserved"
calls = ["plain", "grad"]
points = 0.5

[[checks]]
number = "1.4"
name = "gradients reach q and k"
kind = "gradients-flow"
calls = ["grad"]
points = 0.5

[[checks]]
number = "1.5"
name = "gradients match the reference (float64)"
kind = "gradients-match"
calls = ["grad"]
points = 0.5
visibility = "after_due_date"

[[checks]]
number = "1.6"
name = "inputs are not modified"
kind = "inputs-unchanged"
calls = ["plain", "heads", "grad"]
points = 0.5

# This lab's feedback codes, named by the known mistakes of hidden/reference.py. The grader's
# lab-neutral codes (runtime-error, wrong-output, input-mutated, dtype-changed, ...) need no
# table; a table with only a hint tells one of them in this lab's words. Message slots:
# {input} (the probe input), {detail} (what was observed), {variant} (the mistake's
# description). Format: docs/authors/contract.md, "Feedback codes".
[codes.missing-scale]
title = "scores not scaled"
message = "On {input}, your scores match q @ kᵀ without the division by sqrt(D)."
hint = "Revisit why dot products are scaled: their variance grows with the dimension D."

[codes.wrong-scale]
title = "scores scaled by the wrong factor"
message = "On {input}, your scores match {variant}."
hint = "The scale is one over the square root of the size D of each vector."

[codes.wrong-output]
hint = "Work the scores of a 1 x 2 query and a 2 x 2 key out by hand and compare."
'''

STATEMENT = '''\
# <<title>>

Write `scores(q, k)` in `<<module>>.py`:

- `q` has shape `(..., T, D)`, `k` has shape `(..., S, D)` (same leading dimensions);
- return the tensor `q @ kᵀ / sqrt(D)` of shape `(..., T, S)`, in the dtype of the inputs;
- do not modify `q` or `k`; gradients must flow to both.

Run the public tests with `SUBMISSION=<<module>>.py pytest public_tests/`.
'''

STARTER = '''\
"""<<title>>: fill in `scores`."""

import torch


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q (..., T, D), k (..., S, D) -> q kᵀ / sqrt(D), shape (..., T, S)."""
    raise NotImplementedError
'''

PUBLIC_TEST = '''\
"""Public tests for <<slug>>: run `pytest public_tests/` (set SUBMISSION=path/to/<<module>>.py
to test your own file; by default the starter is tested)."""

import importlib.util
import math
import os
from pathlib import Path

import pytest
import torch

DEFAULT = Path(__file__).resolve().parent.parent / "starter" / "<<module>>.py"


@pytest.fixture(scope="module")
def scores(pytestconfig):
    kernel = getattr(pytestconfig, "autograde_namespace", None)
    if kernel is not None:  # run by autograde.check() in a notebook: the kernel's own
        return kernel["scores"]
    path = Path(os.environ.get("SUBMISSION", DEFAULT)).resolve()
    spec = importlib.util.spec_from_file_location("student_<<module>>", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.scores


def test_shape(scores):
    q, k = torch.randn(2, 5, 8), torch.randn(2, 7, 8)
    assert scores(q, k).shape == (2, 5, 7)


def test_one_pair_by_hand(scores):
    q = torch.tensor([[[1.0, 2.0, 0.0, 0.0]]])
    k = torch.tensor([[[3.0, 1.0, 0.0, 0.0]]])
    assert torch.allclose(scores(q, k), torch.tensor([[[5.0 / math.sqrt(4)]]]))
'''

REFERENCE = '''\
"""Hidden: the reference `scores` and its known-mistake variants, switched on by id.

Each variant reproduces one mistake the way a student writes it; a submission whose outputs
match a variant's on the probe inputs is diagnosed with the variant's code.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from assignments.model import KnownMistake

_SCALES = frozenset({"missing-scale", "wrong-scale-d"})

MISTAKES: list[KnownMistake] = [
    # KnownMistake(id, feedback code, what the variant does, excludes=ids it cannot co-occur with)
    KnownMistake("missing-scale", "missing-scale", "scores not divided by sqrt(D)",
                 excludes=_SCALES - {"missing-scale"}),
    KnownMistake("wrong-scale-d", "wrong-scale", "scores divided by D instead of sqrt(D)",
                 excludes=_SCALES - {"wrong-scale-d"}),
    # Mistakes that do not change forward values are recognised by their checks, not searched:
    KnownMistake("input-mutated", "input-mutated", "q scaled in place", searched=False,
                 excludes=_SCALES),
    KnownMistake("dtype-changed", "dtype-changed", "output cast to float32", searched=False),
]


def scores(q: torch.Tensor, k: torch.Tensor, *,
           mistakes: frozenset[str] = frozenset()) -> torch.Tensor:
    """q (..., T, D), k (..., S, D) -> q kᵀ / sqrt(D)."""
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    if "missing-scale" in mistakes:
        scale = 1.0
    elif "wrong-scale-d" in mistakes:
        scale = 1.0 / d
    if "input-mutated" in mistakes:
        q = q.mul_(scale)
        scale = 1.0
    result = (q @ k.transpose(-2, -1)) * scale
    if "dtype-changed" in mistakes:
        return result.float()
    return result


def namespace(mistakes: frozenset[str]) -> dict[str, Any]:
    """What a submission with exactly these mistakes would export."""
    return {"scores": functools.partial(scores, mistakes=mistakes)}
'''

PROBES = '''\
"""Hidden: the probe plan of <<slug>>: which calls the sandbox makes, on which inputs."""

from __future__ import annotations

import torch

from assignments.model import ProbeCall
from assignments.probing import InputBank, shape_of, tensor

B, H, T, S, D = 2, 3, 5, 7, 8
ARGUMENT_NAMES = {"arg0": "q", "arg1": "k"}


def build_calls(seed: int) -> tuple[list[ProbeCall], dict[str, torch.Tensor]]:
    """The calls (ids named by the checks in assignment.toml) and their input tensors."""
    bank = InputBank(seed)
    calls: list[ProbeCall] = []

    def add(name: str, group: str, lead: tuple[int, ...], *,
            dtype: torch.dtype = torch.float32, grad: bool = False) -> None:
        q = bank.randn(f"{name}.q", *lead, T, D, dtype=dtype)
        k = bank.randn(f"{name}.k", *lead, S, D, dtype=dtype)
        spec: dict[str, object] = {"target": "scores",
                                   "args": [tensor(q, grad=grad), tensor(k, grad=grad)]}
        if grad:  # backward from the output with this upstream gradient
            spec["backward"] = {"output": 0,
                                "grad": bank.randn(f"{name}.grad", *lead, T, S, dtype=dtype)}
        describe = f"q {shape_of(bank, q)}, k {shape_of(bank, k)} ({str(dtype)[6:]})"
        calls.append(ProbeCall(name, spec, group, describe,
                               meta={"argument_names": ARGUMENT_NAMES}))

    add("plain", "plain", (B,))
    add("heads", "plain", (B, H))
    add("grad", "float64", (B,), dtype=torch.float64, grad=True)
    return calls, bank.tensors
'''

TEMPLATES: dict[str, str] = {
    "assignment.toml": SPEC,
    "README.md": STATEMENT,
    "starter/<<module>>.py": STARTER,
    "public_tests/test_<<module>>.py": PUBLIC_TEST,
    "hidden/reference.py": REFERENCE,
    "hidden/probes.py": PROBES,
}
