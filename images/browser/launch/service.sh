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
# The relay's memory is bounded below the container's (issue 22): past it an
# allocation fails (MemoryError, the connection that asked is closed) instead
# of the kernel killing the relay and every agent's connection with it.
# RLIMIT_DATA counts the heap and private mappings, not shared libraries.
if [ "${AGENTENV_LIMIT_OF:-}" = relay ]; then
    mb="${AGENTENV_RELAY_MEMORY_MB:-640}"
    case "$mb" in
    '' | *[!0-9]*)
        echo "service.sh: AGENTENV_RELAY_MEMORY_MB is MiB, a whole number (0: no limit), not '$mb'" >&2
        exit 2
        ;;
    esac
    if [ "$mb" != 0 ]; then ulimit -d $((mb * 1024)); fi
fi
# Past the container's memory limit the kernel kills the process with the
# highest score: each program's share of the memory plus its oom_score_adj
# (in thousandths of the container's). Tabs first (1000, launch/renderers.sh),
# then the programs, by AGENTENV_OOM_SCORE_ADJ (conf.d; each restarts), and
# Chromium's browser process last (0). A score is only ever raised here: no
# program may lower its own below what it was started with.
adj="${AGENTENV_OOM_SCORE_ADJ:-}"
if [ -n "$adj" ]; then
    if [[ ! "$adj" =~ ^[0-9]{1,4}$ ]] || [ "$adj" -gt 1000 ]; then
        echo "service.sh: AGENTENV_OOM_SCORE_ADJ is a whole number from 0 to 1000, not '$adj'" >&2
        exit 2
    fi
    read -r now </proc/self/oom_score_adj
    if [ "$adj" -gt "$now" ]; then
        echo "$adj" >/proc/self/oom_score_adj ||
            echo "service.sh: could not raise this program's oom_score_adj to $adj" >&2
    fi
fi
if [ "$(id -u)" = 0 ] && [ -n "$user" ] && [ "$user" != root ]; then
    home="$(getent passwd "$user" | cut -d: -f6)"
    exec setpriv --reuid="$user" --regid="$user" --init-groups env HOME="$home" "$@"
fi
exec "$@"
