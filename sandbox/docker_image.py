"""The sandbox image's identity: a tag computed from the files the image is built from.

The same computation names the image when ``sandbox/image/build.sh`` builds it and when a worker
checks the image it is about to run, so a worker whose runner or pins differ from the image's
refuses to grade instead of grading with stale code. Standard library only: build.sh runs this
file as a script (``python3 sandbox/docker_image.py tag``) before any virtual environment exists.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

REPOSITORY = "autograde-sandbox"
HASH_LABEL = "org.autograde.inputs-hash"
HOME_IN_IMAGE = "/opt/autograde"
"""Where the image holds our files: the runner's package, the fork server, wire.py, training.py."""
RUNNER_IN_IMAGE = f"{HOME_IN_IMAGE}/runner/__main__.py"

_SANDBOX_DIR = Path(__file__).resolve().parent
# Every file the image is built from, by its name in the build context.
IMAGE_INPUTS = {
    "Dockerfile": _SANDBOX_DIR / "image" / "Dockerfile",
    "requirements.txt": _SANDBOX_DIR / "image" / "requirements.txt",
    "fork_runner.py": _SANDBOX_DIR / "fork_runner.py",
    "training.py": _SANDBOX_DIR / "training.py",
    "wire.py": _SANDBOX_DIR / "wire.py",
    **{f"runner/{path.name}": path for path in sorted((_SANDBOX_DIR / "runner").glob("*.py"))},
}
_HASH_CHARS = 16


def inputs_hash() -> str:
    """A short hash of the image's inputs (names and contents)."""
    digest = hashlib.sha256()
    for name in sorted(IMAGE_INPUTS):
        content = IMAGE_INPUTS[name].read_bytes()
        digest.update(f"{name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()[:_HASH_CHARS]


def expected_image() -> str:
    """The image reference (``repository:hash``) that matches the code of this checkout."""
    return f"{REPOSITORY}:{inputs_hash()}"


def tag_of(image: str) -> str:
    """The tag part of an image reference (``""`` when it has none)."""
    name = image.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[1] if ":" in name else ""


def _main(argv: list[str]) -> int:
    commands = {"tag": expected_image, "hash": inputs_hash}
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: docker_image.py {{{'|'.join(commands)}}}", file=sys.stderr)
        return 2
    print(commands[argv[0]]())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
