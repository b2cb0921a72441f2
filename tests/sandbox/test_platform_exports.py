"""The exported graders run as each platform runs them: a stand-in harness builds an image from
the export offline (the sandbox image as its base, no network), lays out a job exactly where
Gradescope or PrairieLearn puts it, runs the platform's entry point with networking off and
reads the results file. The corpus of every lab gets the scores and codes its manifest gives
through both exports, every results file is valid against the platform's schema, and the
student's code cannot read the hidden parts or the platform's private files."""

from __future__ import annotations

import io
import json
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import docker
import jsonschema
import pytest

from assignments.spec import load_spec
from devkit.corpora import SLUGS, corpus
from devkit.paths import CORPUS
from grader.exports import export_gradescope, export_prairielearn
from sandbox.docker_backend import DockerSettings

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = REPO_ROOT / "tests" / "schemas"
SLUG = "attention"
CORPUS_FILES = ["correct_matmul.py", "softmax_dim_minus2.py", "mask_inverted_masked_fill.py"]
PRIVATE = {
    "gradescope": ["/autograder/source/lab/attention/hidden/reference.py",
                   "/autograder/source/lab/attention/assignment.toml",
                   "/autograder/submission_metadata.json"],
    "prairielearn": ["/opt/autograde/lab/attention/hidden/reference.py",
                     "/opt/autograde/lab/attention/assignment.toml",
                     "/grade/data/data.json", "/grade/tests/expected.txt",
                     "/grade/serverFilesCourse/solutions.py"],
}
SPY = '''
for path in {paths!r}:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        print("READ", path)
    except PermissionError:
        print("DENIED", path)
    except OSError as exc:
        print("OTHER", path, type(exc).__name__)
import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    print("NETWORK OPEN")
except OSError:
    print("NETWORK REFUSED")
'''
HARNESS_GRADESCOPE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
USER root
COPY source/ /autograder/source/
RUN mkdir -p /autograder/submission /autograder/results \\
    && cp /autograder/source/run_autograder /autograder/run_autograder \\
    && cd /autograder/source && bash ./setup.sh \
    && chmod 700 /autograder
WORKDIR /autograder
"""
# /autograder closed to others, the strictest layout a platform may leave: the grader opens
# only the way to its code to the student's user.


def _build(client: docker.DockerClient, context: Path, tag: str) -> str:
    client.images.build(path=str(context), tag=tag, network_mode="none", rm=True,
                        buildargs={"BASE_IMAGE": DockerSettings().image})
    return tag


def _unzip_as_gradescope(archive: Path, into: Path) -> None:
    """Extract the zip keeping its modes, as Gradescope's unzip does."""
    with zipfile.ZipFile(archive) as zipped:
        for info in zipped.infolist():
            target = into / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zipped.read(info))
            target.chmod((info.external_attr >> 16) & 0o777)


class Images:
    """The exports built into images as their platforms build them, once per module."""

    def __init__(self, client: docker.DockerClient, root: Path) -> None:
        self.client, self.root = client, root
        self.built: dict[tuple[str, str], str] = {}

    def get(self, platform: str, slug: str) -> str:
        if (platform, slug) not in self.built:
            self.built[platform, slug] = self._build(platform, slug)
        return self.built[platform, slug]

    def _build(self, platform: str, slug: str) -> str:
        tag = f"autograde-export-test-{platform}-{slug}"
        if platform == "prairielearn":
            return _build(self.client, export_prairielearn(slug, self.root / tag), tag)
        archive = export_gradescope(slug, self.root / f"{tag}.zip")
        context = self.root / tag
        _unzip_as_gradescope(archive, context / "source")
        (context / "Dockerfile").write_text(HARNESS_GRADESCOPE)
        return _build(self.client, context, tag)


@pytest.fixture(scope="module")
def images(docker_client: docker.DockerClient,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    built = Images(docker_client, tmp_path_factory.mktemp("exports"))
    yield built
    for tag in built.built.values():
        docker_client.images.remove(tag, force=True)


def _tar(files: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _job(platform: str, entry: str, code: bytes) -> tuple[list[str], dict[str, bytes], str]:
    """The entry point, the files the platform lays out, and where the results are."""
    if platform == "gradescope":
        metadata = {"id": 1, "created_at": "2026-12-01T10:00:00Z",
                    "assignment": {"due_date": "2026-12-08T23:00:00Z", "title": SLUG},
                    "users": [{"email": "student@example.com", "id": 7, "name": "Student"}],
                    "previous_submissions": []}
        return (["/autograder/run_autograder"],
                {f"autograder/submission/{entry}": code,
                 "autograder/submission_metadata.json": json.dumps(metadata).encode()},
                "/autograder/results/results.json")
    return (["/opt/autograde/run_prairielearn"],
            {f"grade/student/{entry}": code,
             "grade/data/data.json": json.dumps({"params": {}, "correct_answers": {},
                                                 "submitted_answers": {}}).encode(),
             "grade/tests/expected.txt": b"secret\n",
             "grade/serverFilesCourse/solutions.py": b"SOLUTION = 1\n",
             "grade/results/.keep": b""},
            "/grade/results/results.json")


def _run(client: docker.DockerClient, image: str, platform: str, code: bytes,
         entry: str = "attention.py") -> tuple[dict[str, Any], str]:
    command, files, results = _job(platform, entry, code)
    container = client.containers.create(image, command=command, network_disabled=True)
    try:
        container.put_archive("/", _tar(files))
        container.start()
        status = container.wait(timeout=600)
        logs = container.logs().decode(errors="replace")
        assert status["StatusCode"] == 0, logs
        stream, _ = container.get_archive(results)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.extractfile(archive.getmembers()[0])
            assert member is not None
            return json.loads(member.read()), logs
    finally:
        container.remove(force=True)


def _valid(platform: str, results: dict[str, Any]) -> None:
    schema = json.loads((SCHEMAS / f"{platform}-results.schema.json").read_text())
    jsonschema.validate(results, schema)
    if platform == "prairielearn":
        assert len(json.dumps(results).encode()) <= 1_000_000


def _corpus_files(slug: str) -> list[str]:
    """The lab's submissions graded here: every listed one for the attention lab, a wrong one
    for the others (their correct files are graded by the unit tests of the results)."""
    if slug == SLUG:
        return CORPUS_FILES
    files = tomllib.loads((CORPUS / slug / "manifest.toml").read_text())["files"]
    return [next(name for name, entry in files.items() if entry["codes"])]


@pytest.mark.parametrize("slug", SLUGS)
@pytest.mark.parametrize("platform", ["gradescope", "prairielearn"])
def test_the_corpus_gets_its_scores_and_codes_through_the_export(
        docker_client: docker.DockerClient, images: Images, platform: str, slug: str) -> None:
    manifest = tomllib.loads((CORPUS / slug / "manifest.toml").read_text())["files"]
    maximum = load_spec(slug).max_score
    for name in _corpus_files(slug):
        expected = manifest[name]
        entry, code = corpus(slug, name)
        results, logs = _run(docker_client, images.get(platform, slug), platform, code, entry)
        _valid(platform, results)
        log = json.loads(logs.strip().splitlines()[-1])
        assert log["autograde"]["isolation"].startswith("a child process as user 65534")
        assert sorted(log["codes"]) == sorted(expected["codes"]), name
        if platform == "gradescope":
            assert results["score"] == pytest.approx(expected["score"]), name
        else:
            assert results["gradable"] is True
            assert sum(t["points"] for t in results["tests"]) == pytest.approx(expected["score"])
            assert results["score"] == pytest.approx(expected["score"] / maximum)


@pytest.mark.parametrize("platform", ["gradescope", "prairielearn"])
def test_student_code_reads_neither_hidden_parts_nor_platform_files(
        docker_client: docker.DockerClient, images: Images, platform: str) -> None:
    code = (CORPUS / SLUG / "correct_matmul.py").read_bytes() + \
        SPY.format(paths=PRIVATE[platform]).encode()
    results, _ = _run(docker_client, images.get(platform, SLUG), platform, code)
    _valid(platform, results)
    shown = results["output"]
    assert "READ" not in shown
    for path in PRIVATE[platform]:
        assert f"DENIED {path}" in shown
    assert "NETWORK REFUSED" in shown  # the runner's seccomp filter, whatever the platform's
    assert (results["score"] == 11) if platform == "gradescope" else (results["score"] == 1.0)


@pytest.mark.parametrize("platform", ["gradescope", "prairielearn"])
def test_a_bad_submission_gets_a_clear_valid_result(
        docker_client: docker.DockerClient, images: Images, platform: str) -> None:
    broken = b"def attention(q, k, v\n"
    results, _ = _run(docker_client, images.get(platform, SLUG), platform, broken)
    _valid(platform, results)
    assert results["score"] == 0
    text = json.dumps(results)
    assert "syntax-error" in text and "line 1" in text
    if platform == "prairielearn":
        assert results["gradable"] is True


def test_a_notebook_on_an_image_without_nbformat_is_refused_not_scored(
        docker_client: docker.DockerClient, images: Images) -> None:
    notebook = (REPO_ROOT / "assignments" / SLUG / "starter" / "attention.ipynb").read_bytes()
    results, _ = _run(docker_client, images.get("prairielearn", SLUG), "prairielearn", notebook,
                      entry="attention.ipynb")
    _valid("prairielearn", results)
    assert results["gradable"] is False
    assert "submit the Python file instead" in results["format_errors"][0]
