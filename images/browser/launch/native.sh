#!/usr/bin/env bash
# agentenv-computer: starts the natively installed browser computer in the
# foreground (scripts/install-native.sh links it into /opt/agentenv/bin),
# under systemd (agentenv.service) or by hand (containers, Modal). Run it as
# root: supervisord starts each program as its own user.
#
# Settings: /etc/agentenv/agentenv.env, KEY=VALUE lines read literally (no
# shell expansion). A non-empty AGENTENV_* variable in the environment wins
# over the file (a Modal secret, a container's env); an empty one is ignored,
# so a missing secret cannot open the door. AGENTENV_USERS given so replaces
# the users file. Tokens: AGENTENV_CONTROL_TOKEN, else
# /etc/agentenv/control-token; users: AGENTENV_USERS, else
# /etc/agentenv/users. Without a control token and users it refuses to start.
set -euo pipefail

conf="${AGENTENV_CONF_DIR:-/etc/agentenv}"
die() { echo "agentenv-computer: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run it as root (supervisord starts each program as its own user)"
[ -r "$conf/agentenv.env" ] || die "$conf/agentenv.env is missing: run scripts/install-native.sh"

declare -A given=()
for name in "${!AGENTENV_@}"; do
    if [ -n "${!name}" ]; then given[$name]="${!name}"; fi
    unset "$name"
done
number=0
while IFS= read -r line || [ -n "$line" ]; do
    number=$((number + 1))
    case "$line" in '' | '#'*) continue ;; esac
    key="${line%%=*}"
    if [ "$key" = "$line" ] || ! [[ "$key" =~ ^[A-Z][A-Z0-9_]*$ ]]; then
        die "$conf/agentenv.env, line $number: not KEY=VALUE"
    fi
    export "$key=${line#*=}"
done <"$conf/agentenv.env"
for name in "${!given[@]}"; do export "$name=${given[$name]}"; done

if [ -n "${given[AGENTENV_USERS]:-}" ] && [ -z "${given[AGENTENV_USERS_FILE]:-}" ]; then
    unset AGENTENV_USERS_FILE
elif [ -z "${AGENTENV_USERS_FILE:-}" ] && [ -s "$conf/users" ]; then
    export AGENTENV_USERS_FILE="$conf/users"
fi
if [ -z "${AGENTENV_CONTROL_TOKEN:-}" ] && [ -s "$conf/control-token" ]; then
    AGENTENV_CONTROL_TOKEN="$(cat "$conf/control-token")"
    export AGENTENV_CONTROL_TOKEN
fi
[ -n "${AGENTENV_CONTROL_TOKEN:-}" ] ||
    die "no control token: give AGENTENV_CONTROL_TOKEN, or write $conf/control-token (install-native.sh does)"
[ -n "${AGENTENV_USERS:-}" ] || [ -s "${AGENTENV_USERS_FILE:-/nonexistent}" ] ||
    die "no users: give AGENTENV_USERS (name:token,...), or write $conf/users (install-native.sh does)"

# systemd hands the service a socket to journald as its output, and
# supervisord cannot open a socket as /dev/stdout (ENXIO): a pipe instead.
if [ -S /proc/self/fd/1 ]; then exec > >(exec cat) 2>&1; fi
cd /
export PATH="$AGENTENV_VENV/bin:/usr/sbin:/usr/bin:/sbin:/bin"
exec /usr/bin/tini -s -- "$AGENTENV_IMAGE_DIR/launch/supervisord.sh"
