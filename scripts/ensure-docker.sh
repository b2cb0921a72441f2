#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine: install and start one when none does.
#
# These machines ship only the Docker client. Installing Debian's docker.io and starting dockerd
# in the background gives an engine (overlay2 storage on cgroup v1 here). Idempotent: an engine
# that already answers is left alone, installed packages are not installed again. debootstrap is
# installed alongside because the offline image build (sandbox/image/build.sh) needs it.
set -euo pipefail

LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
WAIT_SECONDS=${DOCKERD_WAIT_SECONDS:-60}

engine_answers() {
    docker info >/dev/null 2>&1
}

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if ((${#missing[@]})); then
    echo "ensure-docker: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if engine_answers; then
    echo "ensure-docker: engine already answers"
    exit 0
fi

echo "ensure-docker: starting dockerd (log: $LOG)"
# setsid: the engine must outlive the shell that started it (a CI step, a make recipe).
setsid dockerd --storage-driver=overlay2 >"$LOG" 2>&1 </dev/null &
for _ in $(seq "$WAIT_SECONDS"); do
    if engine_answers; then
        echo "ensure-docker: engine up ($(docker info --format '{{.ServerVersion}} {{.Driver}} cgroup {{.CgroupVersion}}'))"
        exit 0
    fi
    sleep 1
done
echo "ensure-docker: dockerd did not answer within ${WAIT_SECONDS}s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2
exit 1
