#!/usr/bin/env bash
# Build the service image (web, worker, beat) offline if need be; see deploy/Dockerfile.
# Environment: BASE_IMAGE (default: the offline Debian base made by sandbox/image/build.sh),
# PIP (the pip that downloads wheels), IMAGE (default autograde-service:latest).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=${IMAGE:-autograde-service:latest}
PIP=${PIP:-$ROOT/.venv/bin/pip}
export DOCKER_BUILDKIT=0

if [[ -z ${BASE_IMAGE:-} ]]; then
    BASE_IMAGE=autograde-base:bookworm-python3
    docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || bash "$ROOT/sandbox/image/build.sh"
fi
wheels=$ROOT/build/service-wheels
mkdir -p "$wheels"
$PIP wheel --quiet --wheel-dir "$wheels" "$ROOT" pip
docker build --quiet --build-arg BASE_IMAGE="$BASE_IMAGE" -f "$ROOT/deploy/Dockerfile" \
    -t "$IMAGE" "$ROOT"
echo "built $IMAGE"
