#!/usr/bin/env bash
# Starts the browser computer's supervisord (the container's command under
# tini, and `make dev` natively). Creates the folders the programs share.
set -euo pipefail
: "${AGENTENV_LOG_DIR:?}" "${AGENTENV_RUN_DIR:?}" "${AGENTENV_IMAGE_DIR:?}" "${AGENTENV_VENV:?}"
: "${AGENTENV_PROFILE_DIR:?}"
mkdir -p "$AGENTENV_LOG_DIR" "$AGENTENV_RUN_DIR"
# The computer's signing key is made by the first program that needs it
# (agentenv/signing.py) in a folder the service user alone may enter, so
# Chromium's user (browser) cannot read it. In the image that is the service
# user's home, a 0700 tmpfs (AGENTENV_KEY_DIR): the programs make the folder
# there themselves (this root has no CAP_CHOWN). Elsewhere it is made here.
service_user="${AGENTENV_SERVICE_USER:-}"
if [ -z "${AGENTENV_KEY_DIR:-}" ]; then
    keydir="$AGENTENV_RUN_DIR/attest"
    if [ "$(id -u)" = 0 ] && [ -n "$service_user" ] && [ "$service_user" != root ]; then
        if ! install -d -o "$service_user" -g "$service_user" -m 0700 "$keydir" 2>/dev/null; then
            # A root without CAP_CHOWN (the systemd unit's bounding set, a
            # hardened container): the service user makes its own folder on
            # /dev/shm, a tmpfs (memory only, gone at reboot) anyone may add to.
            keydir="/dev/shm/agentenv-attest-$service_user"
            setpriv --reuid="$service_user" --regid="$service_user" --init-groups \
                mkdir -p -m 0700 "$keydir"
            found="$(stat -c '%U %a' "$keydir")"
            if [ "$found" != "$service_user 700" ]; then
                echo "supervisord.sh: $keydir is '$found', not the service user's own (700):" \
                    "another user made it; remove it and start again" >&2
                exit 2
            fi
        fi
        export AGENTENV_KEY_DIR="$keydir"
    else
        mkdir -p -m 0700 "$keydir"
    fi
fi
# The app server and the recorder report to the relay's log with the control
# token, so one always exists. When none is configured, a random one is made
# for this boot (never written anywhere) and the control ops stay open to
# callers, as on a developer's machine (AGENTENV_CONTROL_OPEN=1).
if [ -z "${AGENTENV_CONTROL_TOKEN:-}" ]; then
    AGENTENV_CONTROL_TOKEN="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    export AGENTENV_CONTROL_TOKEN AGENTENV_CONTROL_OPEN=1
fi
# supervisord starts its programs only once its first poll returns, which is
# after a whole second unless something wakes it: one knock on its socket as
# soon as it listens takes that second off every boot.
sock="$AGENTENV_RUN_DIR/supervisor.sock"
rm -f "$sock"
if command -v curl >/dev/null 2>&1; then
    (
        for _ in $(seq 1 200); do
            if [ -S "$sock" ]; then
                curl -s -m 1 --unix-socket "$sock" http://localhost/ >/dev/null 2>&1 || true
                exit 0
            fi
            sleep 0.01
        done
    ) &
fi
exec supervisord -n -c "$AGENTENV_IMAGE_DIR/supervisord.conf"
