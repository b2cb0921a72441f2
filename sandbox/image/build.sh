#!/usr/bin/env bash
# Build the sandbox image, offline if need be, and tag it by the hash of its inputs.
#
# Idempotent: when an image with the expected tag exists it is reused and nothing is built.
# Without BASE_IMAGE the base is made here with no container registry: a minimal Debian
# bookworm root file system (debootstrap, from Debian's package mirror; bookworm ships Python
# 3.11) turned into an image with `docker import`. The wheels (torch from the local wheel
# directory pip is configured with, the rest from PyPI) are downloaded on the host into a cache
# and copied into the build context, so the build itself needs no network.
#
# Environment: BASE_IMAGE (e.g. python:3.11-slim where a registry answers), PIP (the pip that
# downloads wheels), DEBIAN_MIRROR, AUTOGRADE_BUILD_DIR (work and cache directory).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${AUTOGRADE_BUILD_DIR:-$ROOT/build}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
OFFLINE_BASE=autograde-base:bookworm-python3
if [[ -z ${PIP:-} ]]; then
    if [[ -x $ROOT/.venv/bin/pip ]]; then PIP=$ROOT/.venv/bin/pip; else PIP="python3 -m pip"; fi
fi
# The legacy builder uses local images as bases without asking a registry; BuildKit would try
# to resolve the base remotely first.
export DOCKER_BUILDKIT=0

IMAGE=$(python3 "$ROOT/sandbox/docker_image.py" tag)
HASH=$(python3 "$ROOT/sandbox/docker_image.py" hash)
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "sandbox image $IMAGE already built"
    exit 0
fi
started=$SECONDS
mkdir -p "$BUILD_DIR"

if [[ -z ${BASE_IMAGE:-} ]]; then
    BASE_IMAGE=$OFFLINE_BASE
    if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
        echo "making the offline base $BASE_IMAGE with debootstrap"
        rootfs=$(mktemp -d)
        trap 'rm -rf "$rootfs"' EXIT
        debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$DEBIAN_MIRROR" \
            >"$BUILD_DIR/debootstrap.log" 2>&1 \
            || { tail -n 30 "$BUILD_DIR/debootstrap.log" >&2; exit 1; }
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
        rm -rf "$rootfs"
        trap - EXIT
    fi
fi

wheels=$BUILD_DIR/sandbox-wheels
context=$BUILD_DIR/sandbox-image
mkdir -p "$wheels"
echo "downloading wheels into $wheels"
$PIP download --quiet --only-binary=:all: --dest "$wheels" \
    -r "$ROOT/sandbox/image/requirements.txt" pip
rm -rf "$context"
mkdir -p "$context/wheels"
cp "$ROOT/sandbox/image/Dockerfile" "$ROOT/sandbox/image/requirements.txt" \
    "$ROOT/sandbox/fork_runner.py" "$ROOT/sandbox/training.py" "$ROOT/sandbox/wire.py" "$context/"
mkdir "$context/runner"
cp "$ROOT"/sandbox/runner/*.py "$context/runner/"
# Hard links when the cache is on the same file system: the torch wheel is large.
cp -l "$wheels"/*.whl "$context/wheels/" 2>/dev/null || cp "$wheels"/*.whl "$context/wheels/"

# No network: everything the build needs is in the context.
echo "building $IMAGE on $BASE_IMAGE"
docker build --quiet --network none --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "INPUTS_HASH=$HASH" \
    --tag "$IMAGE" "$context" >/dev/null
rm -rf "$context"
echo "built $IMAGE in $((SECONDS - started))s"
