#!/usr/bin/env bash
# Runs one of the computer's programs (relay, app, recorder): started as root
# (the image), as AGENTENV_SERVICE_USER, an unprivileged user that owns the
# action log; natively, as the caller. Usage: service.sh PROGRAM [ARGS...]
set -euo pipefail
user="${AGENTENV_SERVICE_USER:-}"
# The log and recordings are not for other users of the machine.
umask 0027
# A program not needed for the first CDP answer (the app, the recorder) starts
# a little nicer, so the relay and Chromium get the cores first at boot.
nice_by="${AGENTENV_NICE:-0}"
if [ "$nice_by" != 0 ]; then set -- nice -n "$nice_by" "$@"; fi
if [ "$(id -u)" = 0 ] && [ -n "$user" ] && [ "$user" != root ]; then
    home="$(getent passwd "$user" | cut -d: -f6)"
    exec setpriv --reuid="$user" --regid="$user" --init-groups env HOME="$home" "$@"
fi
exec "$@"
