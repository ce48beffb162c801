#!/usr/bin/env bash
# Runs one of the computer's programs (relay, app, recorder): started as root
# (the image), as AGENTENV_SERVICE_USER, an unprivileged user that owns the
# action log; natively, as the caller. Usage: service.sh PROGRAM [ARGS...]
set -euo pipefail
user="${AGENTENV_SERVICE_USER:-}"
# The log and recordings are not for other users of the machine.
umask 0027
if [ "$(id -u)" = 0 ] && [ -n "$user" ] && [ "$user" != root ]; then
    home="$(getent passwd "$user" | cut -d: -f6)"
    exec setpriv --reuid="$user" --regid="$user" --init-groups env HOME="$home" "$@"
fi
exec "$@"
