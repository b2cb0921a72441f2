"""Exported graders: an assignment as a Gradescope autograder zip or a PrairieLearn external
grader (an image build context and its ``info.json`` fragment). No torch.

Both hold one bundle: the grading code (``grader``, ``sandbox``, the ``assignments`` modules),
the lab package with its hidden parts under ``lab/`` (with the shared catalogues it names),
``grade.py`` (``grader.platform_grading``), ``setup.sh`` and pinned ``requirements.txt``. The
same inputs give the same bytes: files in sorted order, fixed times and modes.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

from assignments.spec import SPEC_FILE, AssignmentError, load_spec

REPOSITORY = Path(__file__).resolve().parent.parent
CODE_PACKAGES = ("grader", "sandbox", "assignments")
_LEFT_OUT = ("__pycache__", "image")
"""Never bundled: byte code, and the sandbox image's build files (the export runs no Docker)."""

REQUIREMENTS = """\
# What the exported grader needs; setup.sh installs what the image lacks.
torch==2.13.0
safetensors==0.8.0
numpy==2.4.6
nbformat==5.11.1
"""

SETUP = """\
#!/bin/sh
# Installs what the exported autograde grader needs; run once when the image is built.
# Network is needed here only for what the image lacks (none at grading time); a wheels/
# folder beside this script is used instead of the network when present.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=$(command -v python3 || true)
if [ -z "$PYTHON" ] && command -v apt-get >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3 python3-pip python3-venv
    PYTHON=$(command -v python3)
fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "autograde needs Python 3.11 or later: choose a base image that has it" >&2; exit 1; }
if ! "$PYTHON" -I "$HERE/grade.py" --check-environment; then
    "$PYTHON" -m venv --system-site-packages --without-pip "$HERE/venv"
    PYTHON="$HERE/venv/bin/python"
    if [ -d "$HERE/wheels" ]; then
        "$PYTHON" "$(ls -d "$HERE"/wheels/pip-*.whl)/pip" install --no-index \\
            --find-links "$HERE/wheels" -r "$HERE/requirements.txt"
    else
        "$PYTHON" -m pip install --extra-index-url https://download.pytorch.org/whl/cpu \\
            -r "$HERE/requirements.txt"
    fi
    "$PYTHON" -I "$HERE/grade.py" --check-environment
fi
echo "$PYTHON" > "$HERE/python"
chmod -R go-rwx "$HERE/lab"
chmod -R a+rX "$HERE/code"
if [ -d "$HERE/venv" ]; then chmod -R a+rX "$HERE/venv"; fi
"""

RUN_AUTOGRADER = """\
#!/bin/sh
# Gradescope's entry point: grade /autograder/submission into /autograder/results.
exec "$(cat /autograder/source/python)" -I /autograder/source/grade.py gradescope
"""

RUN_PRAIRIELEARN = """\
#!/bin/sh
# PrairieLearn's entry point: grade /grade/student into /grade/results.
exec "$(cat /opt/autograde/python)" -I /opt/autograde/grade.py prairielearn
"""

GRADE_PY = """\
\"\"\"Entry point of an exported autograde grader (grader.platform_grading).\"\"\"

import sys
from pathlib import Path

BUNDLE = Path(__file__).resolve().parent
sys.path.insert(0, str(BUNDLE / "code"))

from grader.platform_grading import main  # noqa: E402

sys.exit(main(sys.argv[1:], bundle=BUNDLE))
"""

DOCKERFILE = """\
# The PrairieLearn external grader of one autograde assignment. BASE_IMAGE: any image with
# Python 3.11 or later (torch, safetensors and numpy are installed when it lacks them).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
USER root
COPY bundle/ /opt/autograde/
RUN sh /opt/autograde/setup.sh
WORKDIR /grade
"""

EXECUTABLE = ("setup.sh", "run_autograder", "run_prairielearn")
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def bundle_files(slug: str) -> dict[str, bytes]:
    """Every file of the bundle for ``slug``, by its path in the bundle."""
    spec = load_spec(slug)
    files: dict[str, bytes] = {}
    for package in CODE_PACKAGES:
        top = REPOSITORY / package
        paths = top.glob("*.py") if package == "assignments" else _tree(top)
        for path in paths:
            files[f"code/{path.relative_to(REPOSITORY).as_posix()}"] = path.read_bytes()
    labs = spec.root.parent
    for path in _tree(spec.root):
        files[f"lab/{path.relative_to(labs).as_posix()}"] = path.read_bytes()
    for catalogue in _catalogues(spec.root):
        if not catalogue.is_relative_to(labs):
            raise AssignmentError(
                f"{spec.root / SPEC_FILE}: codes_from names {catalogue}, outside "
                f"{labs}: an export keeps the package's folder layout, so move it there")
        files[f"lab/{catalogue.relative_to(labs).as_posix()}"] = catalogue.read_bytes()
    files.update({
        "export.json": (json.dumps({"slug": slug, "assignment_version": spec.version},
                                   indent=1) + "\n").encode(),
        "grade.py": GRADE_PY.encode(),
        "requirements.txt": REQUIREMENTS.encode(),
        "setup.sh": SETUP.encode(),
    })
    return files


def _catalogues(package: Path) -> list[Path]:
    import tomllib

    raw = tomllib.loads((package / SPEC_FILE).read_text(encoding="utf-8"))
    return [(package / name).resolve() for name in raw.get("codes_from", [])]


def _tree(top: Path) -> Iterator[Path]:
    for path in sorted(top.rglob("*")):
        relative = path.relative_to(top).parts
        if path.is_file() and not any(part in _LEFT_OUT for part in relative) \
                and path.suffix != ".pyc":
            yield path


def export_gradescope(slug: str, out: Path) -> Path:
    """Write the Gradescope autograder zip for ``slug`` to ``out``."""
    files = {**bundle_files(slug), "run_autograder": RUN_AUTOGRADER.encode()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.external_attr = (0o755 if name in EXECUTABLE else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    out.write_bytes(buffer.getvalue())
    return out


def info_fragment(slug: str, *, image: str, timeout: int) -> dict[str, object]:
    """The ``info.json`` keys of a PrairieLearn question graded by this export's image."""
    return {
        "gradingMethod": "External",
        "externalGradingOptions": {
            "enabled": True,
            "image": image,
            "entrypoint": "/opt/autograde/run_prairielearn",
            "timeout": timeout,
        },
    }


def export_prairielearn(slug: str, out: Path, *, image: str | None = None) -> Path:
    """Write the PrairieLearn image build context for ``slug`` into the folder ``out``:
    ``Dockerfile``, ``bundle/`` and ``info.json`` (the fragment to merge into a question's)."""
    spec = load_spec(slug)
    files = {f"bundle/{name}": data for name, data in bundle_files(slug).items()}
    files["bundle/run_prairielearn"] = RUN_PRAIRIELEARN.encode()
    files["Dockerfile"] = DOCKERFILE.encode()
    timeout = int(spec.limits.deadline_seconds) + 120
    fragment = info_fragment(slug, image=image or f"autograde-{slug}", timeout=timeout)
    files["info.json"] = (json.dumps(fragment, indent=2) + "\n").encode()
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: give a new folder")
    for name in sorted(files):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(files[name])
        os.chmod(path, 0o755 if path.name in EXECUTABLE else 0o644)
    return out
