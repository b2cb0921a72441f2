"""`autograde assignments export`: both formats for every assignment, shipped or authored with the
kit, reproducible, hidden parts only where the grader reads them, and bad requests said in one
line. (Grading through the exports: tests/sandbox/test_platform_exports.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from assignments.scaffold import scaffold
from assignments.spec import list_assignments

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("AUTOGRADE_")}
    environment.update(PYTHONPATH=str(REPO), **(env or {}))
    done = subprocess.run([sys.executable, "-m", "service.cli", "assignments", "export", *args],
                          env=environment, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _check_bundle(names: list[str], slug: str, prefix: str = "") -> None:
    hidden = [name for name in names if "/hidden/" in name]
    assert hidden and all(name.startswith(f"{prefix}lab/{slug}/hidden/") for name in hidden)
    for required in ("setup.sh", "grade.py", "requirements.txt", "export.json",
                     f"lab/{slug}/assignment.toml", "code/grader/platform_grading.py",
                     "code/sandbox/runner/__main__.py"):
        assert prefix + required in names
    assert not any("__pycache__" in name or name.startswith(f"{prefix}code/assignments/{slug}")
                   for name in names)


@pytest.fixture(scope="module")
def authored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course folder holding one package written by `autograde assignments new`."""
    folder = tmp_path_factory.mktemp("course")
    scaffold("my-lab", folder)
    return folder


@pytest.mark.parametrize("slug", [*list_assignments(), "my-lab"])
def test_both_exports_build_for_every_assignment(tmp_path: Path, authored: Path,
                                                  slug: str) -> None:
    env = {"AUTOGRADE_ASSIGNMENTS_DIR": str(authored)}
    zipped = tmp_path / "autograder.zip"
    done = _cli(slug, "--format", "gradescope", "--out", str(zipped), env=env)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(zipped) as archive:
        infos = {info.filename: info for info in archive.infolist()}
        _check_bundle(list(infos), slug)
        assert "run_autograder" in infos
        for name in ("setup.sh", "run_autograder"):
            assert (infos[name].external_attr >> 16) & 0o111 == 0o111
        assert json.loads(archive.read("export.json"))["slug"] == slug

    folder = tmp_path / "prairielearn"
    done = _cli(slug, "--format", "prairielearn", "--out", str(folder), env=env)
    assert done.returncode == 0, done.stderr
    names = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
    _check_bundle(names, slug, prefix="bundle/")
    assert {"Dockerfile", "info.json", "bundle/run_prairielearn"} <= set(names)
    options = json.loads((folder / "info.json").read_text())["externalGradingOptions"]
    assert options["image"] == f"autograde-{slug}" and options["enabled"] is True
    assert options["entrypoint"] == "/opt/autograde/run_prairielearn"


def test_the_zip_is_the_same_bytes_each_time(tmp_path: Path) -> None:
    first, second = tmp_path / "a.zip", tmp_path / "b.zip"
    for out in (first, second):
        assert _cli("attention", "--format", "gradescope", "--out", str(out)).returncode == 0
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize(("args", "said"), [
    (("no-such-lab", "--format", "gradescope", "--out", "x.zip"), "unknown assignment"),
    (("attention", "--format", "prairielearn", "--out", "."), "is not empty"),
    (("attention", "--format", "gradescope", "--out", "x.zip", "--image", "i"),
     "--image is for --format prairielearn"),
    (("attention", "--format", "gradescope", "--out", "/nonexistent/x.zip"), "cannot write"),
])
def test_a_bad_request_is_said_in_one_line(args: tuple[str, ...], said: str) -> None:
    done = _cli(*args)
    assert done.returncode != 0 and said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _grade_in_stand_in(bundle: Path, root: Path, platform: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-I", str(bundle / "grade.py"), platform,
                           "--root", str(root)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = root / ("autograder/results" if platform == "gradescope" else "grade/results")
    loaded: dict[str, object] = json.loads((results / "results.json").read_text())
    return loaded


def test_a_failure_of_the_grader_itself_is_not_a_grade(tmp_path: Path) -> None:
    folder = tmp_path / "pl"
    assert _cli("attention", "--format", "prairielearn", "--out", str(folder)).returncode == 0
    bundle = folder / "bundle"
    (bundle / "lab" / "attention" / "hidden" / "reference.py").unlink()  # a broken image
    student = tmp_path / "root" / "grade" / "student"
    student.mkdir(parents=True)
    (student / "attention.py").write_text("def attention(q, k, v, allowed):\n    return q, q\n")
    results = _grade_in_stand_in(bundle, tmp_path / "root", "prairielearn")
    schema = json.loads((REPO / "tests/schemas/prairielearn-results.schema.json").read_text())
    jsonschema.validate(results, schema)
    assert results["gradable"] is False
    told = json.dumps(results)
    assert "FileNotFoundError" in told and "reference" not in told


def test_an_empty_submission_gets_a_clear_result(tmp_path: Path) -> None:
    zipped = tmp_path / "autograder.zip"
    assert _cli("attention", "--format", "gradescope", "--out", str(zipped)).returncode == 0
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(tmp_path / "source")
    (tmp_path / "root" / "autograder" / "submission").mkdir(parents=True)
    results = _grade_in_stand_in(tmp_path / "source", tmp_path / "root", "gradescope")
    schema = json.loads((REPO / "tests/schemas/gradescope-results.schema.json").read_text())
    jsonschema.validate(results, schema)
    assert results["score"] == 0 and "No file was submitted" in str(results["output"])
