#!/usr/bin/env bash
# Build the benchmark-only image of the peer pattern (the sandbox image plus pytest), offline.
#
# Idempotent: reused when an image with the expected tag exists. Its tag is the sandbox image's,
# so a new sandbox image gets a new peer image. Wheels are downloaded on the host (from the local
# wheel directory pip is configured with, or PyPI) into a cache, then copied into the build
# context. Prints the image reference on its last line.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${AUTOGRADE_BUILD_DIR:-$ROOT/build}
if [[ -z ${PIP:-} ]]; then
    if [[ -x $ROOT/.venv/bin/pip ]]; then PIP=$ROOT/.venv/bin/pip; else PIP="python3 -m pip"; fi
fi
export DOCKER_BUILDKIT=0  # the legacy builder uses the local sandbox image without a registry

SANDBOX_IMAGE=$(python3 "$ROOT/sandbox/docker_image.py" tag)
IMAGE=autograde-peer-bench:${SANDBOX_IMAGE##*:}
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE"
    exit 0
fi
docker image inspect "$SANDBOX_IMAGE" >/dev/null 2>&1 \
    || { echo "sandbox image $SANDBOX_IMAGE is not built: make sandbox-image" >&2; exit 1; }

wheels=$BUILD_DIR/peer-wheels
context=$BUILD_DIR/peer-image
mkdir -p "$wheels"
# The image's interpreter is Python 3.11: wheels for it, whatever the host runs.
$PIP download --quiet --only-binary=:all: --python-version 3.11 --dest "$wheels" pytest pip >&2
rm -rf "$context"
mkdir -p "$context/wheels"
cp "$ROOT/benchmarks/peer/Dockerfile" "$context/"
cp "$wheels"/*.whl "$context/wheels/"
# No network: the wheels are in the context (and the engine's bridge can be missing here).
docker build --quiet --network none --build-arg "SANDBOX_IMAGE=$SANDBOX_IMAGE" --tag "$IMAGE" \
    "$context" >/dev/null
rm -rf "$context"
echo "$IMAGE"
