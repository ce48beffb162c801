#!/usr/bin/env bash
# Holds Chromium's renderers (its tabs) to a share of the computer's memory,
# and makes them the kernel's first choice when the computer runs out of it
# (issue 40; docs/fair-shares.md). Started by chromium.sh as Chromium's own
# user just before it becomes Chromium; ends when that process does.
#
#   renderers.sh BROWSER_PID
#
# - Each renderer gets a soft RLIMIT_DATA of AGENTENV_RENDERER_MEMORY_MB
#   (0: none): past it the page's allocation fails (an ArrayBuffer throws
#   RangeError, a V8 heap out of room ends that renderer), as the relay's own
#   limit does for the relay. The renderers' zygote gets it too, so a
#   renderer forked later has it from birth; any other child of that zygote
#   (a utility process) gets its limit back.
# - Each renderer's oom_score_adj is raised to 1000 (Chromium sets 300): past
#   the container's limit the kernel kills a tab, the largest, before any
#   program of the computer, and never the browser process (0). The browser
#   holds every page's Blobs (up to 2 GiB a scope, Chromium's constant), and
#   a renderer's death frees the Blobs it held.
#
# Raising a score and lowering a limit need no privilege (this container has
# no CAP_SYS_RESOURCE); Chromium sets its renderers' scores after they start,
# so each renderer's is checked again every round.
set -uo pipefail

browser="${1:?usage: renderers.sh BROWSER_PID}"
mb="${AGENTENV_RENDERER_MEMORY_MB:-2048}"
case "$mb" in
'' | *[!0-9]*)
    echo "renderers.sh: AGENTENV_RENDERER_MEMORY_MB is MiB, a whole number (0: no limit), not '$mb'" >&2
    exit 2
    ;;
esac
limit=$((mb * 1024 * 1024))
#: How often new processes are looked for: a renderer is unbounded at most
#: this long after it starts (the zygote's limit covers the ones forked after).
every=0.2

declare -A kind=()  # pid -> renderer | zygote | other
zygote=""
exec {nap}<> <(:)   # `read -t` on it waits without starting a process

bound() { [ "$limit" = 0 ] || prlimit --pid "$1" --data="$limit:" 2>/dev/null || true; }

parent() {
    local stat
    IFS= read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    stat="${stat##*) }"  # the name, in parentheses, may hold spaces
    read -r _ ppid _ <<<"$stat"
    echo "$ppid"
}

while [ -e "/proc/$browser" ]; do
    for dir in /proc/[0-9]*; do
        pid="${dir#/proc/}"
        if [ -z "${kind[$pid]:-}" ]; then
            args=()
            mapfile -d '' -t args 2>/dev/null <"$dir/cmdline" || continue
            line="${args[*]}"
            case "$line" in
            *--type=renderer*) kind[$pid]=renderer ;;
            *--type=zygote*--no-zygote-sandbox* | *--no-zygote-sandbox*--type=zygote*) kind[$pid]=other ;;
            *--type=zygote*) kind[$pid]=zygote ;;
            *) kind[$pid]=other ;;
            esac
            case "${kind[$pid]}" in
            renderer) bound "$pid" ;;
            zygote) zygote="$pid" && bound "$pid" ;;
            other)
                if [ -n "$zygote" ] && [ "$limit" != 0 ] && [ "$(parent "$pid")" = "$zygote" ]; then
                    prlimit --pid "$pid" --data=unlimited: 2>/dev/null || true
                fi
                ;;
            esac
        fi
        if [ "${kind[$pid]}" = renderer ] && IFS= read -r adj 2>/dev/null <"$dir/oom_score_adj" &&
            [ "$adj" -lt 1000 ]; then
            echo 1000 2>/dev/null >"$dir/oom_score_adj" || true
        fi
    done
    for pid in "${!kind[@]}"; do
        [ -e "/proc/$pid" ] || unset "kind[$pid]"
    done
    read -r -t "$every" -u "$nap" || true
done
