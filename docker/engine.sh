#!/usr/bin/env bash
# A Docker engine for the images and the docker-test, on Debian 12 without systemd.
#   docker/engine.sh up     install docker.io, docker-compose (v1) and debootstrap if missing and
#                           start dockerd if none answers; exit 0 when the engine is ready,
#                           3 when it cannot be had here (the reason is printed), 1 on error
#   docker/engine.sh down   stop the dockerd that `up` started (by its PID), if any
# Debian 12 has no `docker compose` v2 plugin and no buildx: we use Debian's docker.io 20.10
# (`/usr/bin/docker`, whose built-in BuildKit needs no buildx) and docker-compose 1.29.
set -euo pipefail

DOCKER=${DOCKER:-/usr/bin/docker}
STATE=${IWARP_DOCKERD_STATE:-/tmp/iwarp-dockerd}
PKGS=(docker.io docker-compose debootstrap)

cannot() {
    echo "engine: $*" >&2
    exit 3
}

install_packages() {
    local missing=() p
    for p in "${PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    [[ $(id -u) -eq 0 ]] || cannot "missing packages ${missing[*]} and not root to install them"
    echo "engine: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null || cannot "apt-get update failed"
    apt-get -o DPkg::Lock::Timeout=600 install -y -q "${missing[@]}" >/dev/null ||
        cannot "apt-get install ${missing[*]} failed"
}

engine_answers() { "$DOCKER" info >/dev/null 2>&1; }

up() {
    install_packages
    [[ -x $DOCKER ]] || cannot "$DOCKER not found"
    if engine_answers; then
        echo "engine: a Docker engine is running"
        return 0
    fi
    [[ $(id -u) -eq 0 ]] || cannot "no Docker engine answers and not root to start dockerd"
    command -v dockerd >/dev/null || cannot "dockerd not found"
    mkdir -p "$STATE"
    # dockerd creates the docker0 bridge (and leaves it when stopped): `down` removes it when it
    # was not there before.
    if ip link show docker0 >/dev/null 2>&1; then rm -f "$STATE/docker0.ours"; else touch "$STATE/docker0.ours"; fi
    echo "engine: starting dockerd (log: $STATE/dockerd.log)"
    # setsid: dockerd outlives this script; `down` stops it by the PID recorded here.
    setsid dockerd >"$STATE/dockerd.log" 2>&1 < /dev/null &
    echo $! >"$STATE/dockerd.pid"
    local i
    for ((i = 0; i < 60; i++)); do
        engine_answers && { echo "engine: dockerd ready (pid $(cat "$STATE/dockerd.pid"))"; return 0; }
        kill -0 "$(cat "$STATE/dockerd.pid")" 2>/dev/null || break
        sleep 1
    done
    tail -5 "$STATE/dockerd.log" >&2 || true
    down
    cannot "dockerd did not come up (see $STATE/dockerd.log)"
}

down() {
    [[ -f $STATE/dockerd.pid ]] || return 0
    local pid i
    pid=$(cat "$STATE/dockerd.pid")
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]]; then
        echo "engine: stopping dockerd (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 30; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$STATE/dockerd.pid"
    if [[ -f $STATE/docker0.ours ]] && ip link show docker0 >/dev/null 2>&1; then
        echo "engine: removing the docker0 bridge dockerd left"
        ip link del docker0 2>/dev/null || true
    fi
    rm -f "$STATE/docker0.ours"
}

case ${1:-} in
up) up ;;
down) down ;;
*)
    echo "usage: $0 up|down" >&2
    exit 1
    ;;
esac
