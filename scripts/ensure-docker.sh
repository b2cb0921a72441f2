#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine: install and start one when none does.
#
# These machines ship only the Docker client. Installing Debian's docker.io and starting dockerd
# in the background gives an engine (overlay2 storage on cgroup v1 here). Idempotent: an engine
# that already answers is left alone, installed packages are not installed again. debootstrap is
# installed alongside because the offline image build (sandbox/image/build.sh) needs it.
#
# gVisor (Debian's runsc) is installed and registered as the engine's `runsc` runtime, with
# --network=none in its own arguments (the sandbox has no network; the KVM platform hangs on
# these machines, so the default platform is kept). An engine that already runs is told with
# SIGHUP, which reloads its runtimes without a restart. AUTOGRADE_GVISOR=0 skips all of it.
set -euo pipefail

LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
WAIT_SECONDS=${DOCKERD_WAIT_SECONDS:-60}
DAEMON_JSON=${DOCKERD_CONFIG:-/etc/docker/daemon.json}
GVISOR=${AUTOGRADE_GVISOR:-1}

engine_answers() {
    docker info >/dev/null 2>&1
}

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [[ $GVISOR == 1 ]]; then
    command -v runsc >/dev/null 2>&1 || missing+=(runsc)
fi
if ((${#missing[@]})); then
    echo "ensure-docker: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# Registers runsc in the engine's configuration; prints "changed" when it had to.
register_gvisor() {
    mkdir -p "$(dirname "$DAEMON_JSON")"
    python3 - "$DAEMON_JSON" "$(command -v runsc)" <<'PY'
import json, os, sys
path, runsc = sys.argv[1], sys.argv[2]
config = {}
if os.path.exists(path) and os.path.getsize(path):
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
wanted = {"path": runsc, "runtimeArgs": ["--network=none"]}
if config.get("runtimes", {}).get("runsc") != wanted:
    config.setdefault("runtimes", {})["runsc"] = wanted
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
        handle.write("\n")
    os.replace(path + ".tmp", path)
    print("changed")
PY
}

engine_has_gvisor() {
    docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}

if [[ $GVISOR == 1 ]]; then
    changed=$(register_gvisor)
    if engine_answers && { [[ -n $changed ]] || ! engine_has_gvisor; }; then
        echo "ensure-docker: registering the runsc runtime (SIGHUP to dockerd)"
        kill -HUP "$(cat "${DOCKERD_PIDFILE:-/var/run/docker.pid}")" || true
        for _ in $(seq 10); do engine_has_gvisor && break; sleep 1; done
        engine_has_gvisor || echo "ensure-docker: the engine did not pick up runsc" >&2
    fi
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
