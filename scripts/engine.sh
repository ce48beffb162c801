#!/usr/bin/env bash
# Makes a Docker engine and a compose command available.
#
#   scripts/engine.sh                  # engine up (started if need be), compose present
#   scripts/engine.sh --print-compose  # the same, then print the compose command
#                                      # ("docker compose" or "docker-compose")
#
# If `docker info` answers, the engine is used as is and nothing is printed.
# Otherwise, as root on Debian, Debian's engine (docker.io) is installed if
# missing and `dockerd` is started in the background, detached from this
# shell (log: $AGENTENV_DOCKERD_LOG, default /var/log/dockerd.log), and this
# waits up to $AGENTENV_ENGINE_TIMEOUT seconds (default 60) for it to answer.
# Elsewhere (a laptop without a running Docker Desktop, non-root) it says what
# to do and exits 1.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

print_compose=""
for arg in "$@"; do
    case "$arg" in
        --print-compose) print_compose=1 ;;
        -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
        *) die "unknown argument '$arg'" "usage: scripts/engine.sh [--print-compose]" ;;
    esac
done

timeout_s="${AGENTENV_ENGINE_TIMEOUT:-60}"
dockerd_log="${AGENTENV_DOCKERD_LOG:-/var/log/dockerd.log}"

engine_answers() { docker info >/dev/null 2>&1; }

ensure_client() {
    command -v docker >/dev/null 2>&1 && return 0
    if is_root && is_debian; then
        apt_install docker.io
    else
        die "the docker command is not installed" \
            "install Docker (Docker Desktop, or 'apt-get install docker.io' on Debian) and re-run"
    fi
}

start_dockerd() {
    if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix:///var/run/docker.sock" ]; then
        die "DOCKER_HOST=$DOCKER_HOST does not answer" \
            "start the engine it points to, or unset DOCKER_HOST to use a local engine"
    fi
    if ! is_root || ! is_debian; then
        local why
        why="$(docker info 2>&1 | grep -iE 'permission denied|cannot connect|error' | head -n1 || true)"
        if printf '%s' "$why" | grep -qi 'permission denied'; then
            die "the Docker engine runs but this user may not use it ($why)" \
                "add yourself to the docker group (sudo usermod -aG docker \$USER; log in again) or run as root"
        fi
        die "no Docker engine answers${why:+ ($why)}" \
            "start Docker Desktop or your engine (e.g. sudo systemctl start docker), then re-run" \
            "or run this script as root on Debian: it installs and starts docker.io"
    fi
    command -v dockerd >/dev/null 2>&1 || apt_install docker.io
    # docker.io brings containerd and runc; dockerd starts its own containerd.

    local pid=""
    if pid="$(pgrep -x dockerd | head -n1)" && [ -n "$pid" ]; then
        log "dockerd (pid $pid) is running but not answering yet; waiting for it"
    else
        mkdir -p "$(dirname "$dockerd_log")"
        log "starting dockerd in the background (log: $dockerd_log)"
        # setsid: its own session, so it outlives this shell and its job control.
        nohup setsid dockerd >>"$dockerd_log" 2>&1 </dev/null &
        pid=$!
    fi

    local deadline=$((SECONDS + timeout_s))
    until engine_answers; do
        if ! kill -0 "$pid" 2>/dev/null && ! pgrep -x dockerd >/dev/null; then
            tail -n 20 "$dockerd_log" >&2 || true
            die "dockerd exited while starting (log above, full log: $dockerd_log)" \
                "fix the error in $dockerd_log (a stale /var/run/docker.pid or a storage driver problem are common) and re-run"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 20 "$dockerd_log" >&2 || true
            die "dockerd did not answer within ${timeout_s}s (log: $dockerd_log)" \
                "read $dockerd_log; re-run with AGENTENV_ENGINE_TIMEOUT=120 if the machine is just slow"
        fi
        sleep 0.5
    done
    log "Docker engine is up ($(docker info -f '{{.ServerVersion}}, storage {{.Driver}}' 2>/dev/null || echo '?'))"
}

# compose_command: prints "docker compose" or "docker-compose", installing
# Debian's docker-compose (v1) as root on Debian when neither exists.
compose_command() {
    if docker compose version >/dev/null 2>&1; then
        echo "docker compose"
        return
    fi
    if ! command -v docker-compose >/dev/null 2>&1; then
        if is_root && is_debian; then
            apt_install docker-compose
        else
            die "neither 'docker compose' nor 'docker-compose' is installed" \
                "install the compose plugin (Docker Desktop has it) or 'apt-get install docker-compose'"
        fi
    fi
    docker-compose version >/dev/null 2>&1 ||
        die "docker-compose is installed but does not run" "run 'docker-compose version' to see why"
    echo "docker-compose"
}

ensure_client
engine_answers || start_dockerd
compose="$(compose_command)"
if [ -n "$print_compose" ]; then
    echo "$compose"
fi
