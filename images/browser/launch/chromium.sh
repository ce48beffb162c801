#!/usr/bin/env bash
# Starts Chromium for the browser computer: headless, CDP on 127.0.0.1 only,
# on port 6666: one of Chromium's unsafe ports, which no page's request may
# go to (a fresh tab's about:blank can otherwise fetch loopback; see
# agentenv/settings.py). The relay, outside Chromium, reaches it.
# Started as root (the image), it runs Chromium as AGENTENV_CHROMIUM_USER, a
# user of its own that can read neither the action log nor the other
# programs' environment (the control token); natively it runs as the caller.
# Output goes to stdout (for supervisord and `docker logs`) and to
# $AGENTENV_LOG_DIR/chromium.log. The managed policies in
# /etc/chromium/policies/managed/ (the image) are Chromium's own wall.
# The back-forward cache is off: a page restored from it fires no load event,
# and Playwright clients (connect_over_cdp) wait for one after go_back. The
# omnibox popups (chrome:// WebUI pages a headless browser never shows) are
# off: two renderers less per computer, and less of the browser's own UI for
# anyone to reach (the relay refuses it anyway). AGENTENV_CHROMIUM_DISABLE_FEATURES
# replaces the list (the attack suite brings the popups back to attack them).
# Each renderer is held to a share of the computer's memory (issue 40,
# docs/fair-shares.md): its V8 heap to AGENTENV_RENDERER_HEAP_MB (--js-flags),
# and all its memory to AGENTENV_RENDERER_MEMORY_MB by renderers.sh, which
# also makes the renderers the kernel's first choice past the container's
# limit. The browser process itself keeps the lowest score.
# No page reaches the computer's own ports (the relay's, the app server's,
# Chromium's, the recorder's) on its loopback, in any spelling: the
# policies' URL blocklist matches an address only as written in full and
# reads navigations only, so Chromium's host resolver rules answer "not
# found" for each of those ports on 127.0.0.0/8, 0.0.0.0/8, [::1], [::],
# IPv4-mapped addresses and localhost, whatever form a URL gave (Chromium
# canonicalises the host before it matches: 2130706434, 0x7f000002 and 127.1
# are 127.0.0.2 and 127.0.0.1), for every connection it makes: navigations,
# frames, fetch, WebSockets, workers.
set -euo pipefail

: "${AGENTENV_LOG_DIR:?}" "${AGENTENV_PROFILE_DIR:?}"
port="${AGENTENV_CHROMIUM_PORT:-6666}"
binary="${AGENTENV_CHROMIUM:-chromium}"
user="${AGENTENV_CHROMIUM_USER:-}"
# The same default as agentenv/settings.py (the relay and app read it there).
downloads="${AGENTENV_DOWNLOADS_DIR:-/var/lib/agentenv/downloads}"

if [ "${1:-}" != --as-user ]; then
    # The log file is written by this (root's) shell; Chromium cannot reach it.
    exec > >(tee -a "$AGENTENV_LOG_DIR/chromium.log") 2>&1
    if [ "$(id -u)" = 0 ] && [ -n "$user" ] && [ "$user" != root ]; then
        # Its primary group is downloads (system.sh), so that a file it makes
        # has that group wherever it makes it: a Blob or data: download is
        # staged in /tmp and renamed into the downloads folder, and a rename
        # keeps the group it was made with (the folder's setgid bit acts only
        # on files made in it). Its own folders (profile, /tmp's) are 0700.
        group="$user"
        if getent group downloads >/dev/null; then group=downloads; fi
        exec setpriv --reuid="$user" --regid="$group" --init-groups --reset-env \
            env PATH=/usr/bin:/bin AGENTENV_LOG_DIR="$AGENTENV_LOG_DIR" \
            AGENTENV_PROFILE_DIR="$AGENTENV_PROFILE_DIR" AGENTENV_DOWNLOADS_DIR="$downloads" \
            AGENTENV_CHROMIUM_PORT="$port" AGENTENV_CHROMIUM="$binary" \
            AGENTENV_RELAY_PORT="${AGENTENV_RELAY_PORT:-}" AGENTENV_APP_PORT="${AGENTENV_APP_PORT:-}" \
            AGENTENV_RECORDER_PORT="${AGENTENV_RECORDER_PORT:-}" \
            AGENTENV_CHROMIUM_FLAGS="${AGENTENV_CHROMIUM_FLAGS:-}" \
            AGENTENV_CHROMIUM_DISABLE_FEATURES="${AGENTENV_CHROMIUM_DISABLE_FEATURES:-}" \
            AGENTENV_RENDERER_MEMORY_MB="${AGENTENV_RENDERER_MEMORY_MB:-}" \
            AGENTENV_RENDERER_HEAP_MB="${AGENTENV_RENDERER_HEAP_MB:-}" \
            "$0" --as-user
    fi
fi

# Extra flags, split on spaces: e.g. --single-process for an arm64 image run
# under qemu emulation, where Chromium's GPU process keeps dying.
read -r -a extra <<<"${AGENTENV_CHROMIUM_FLAGS:-}"
disabled="${AGENTENV_CHROMIUM_DISABLE_FEATURES:-Translate,MediaRouter,BackForwardCache,WebUIOmniboxPopup,WebUIOmniboxAimPopup}"
# The same defaults as agentenv/harness/hardening.py (a unit test holds them).
heap_mb="${AGENTENV_RENDERER_HEAP_MB:-512}"
memory_mb="${AGENTENV_RENDERER_MEMORY_MB:-2048}"
for mb in "$heap_mb" "$memory_mb"; do
    case "$mb" in
    '' | *[!0-9]*)
        echo "chromium.sh: AGENTENV_RENDERER_HEAP_MB and AGENTENV_RENDERER_MEMORY_MB are MiB," \
            "whole numbers (0: no limit), not '$mb'" >&2
        exit 2
        ;;
    esac
done
js_flags=()
if [ "$heap_mb" != 0 ]; then js_flags=(--js-flags="--max-old-space-size=$heap_mb"); fi
# The computer's own ports: the same defaults as agentenv/settings.py (Settings.doors).
rules=()
for door in "${AGENTENV_RELAY_PORT:-9222}" "${AGENTENV_APP_PORT:-8080}" "$port" \
    "${AGENTENV_RECORDER_PORT:-6667}"; do
    for host in '127.*' '0.*' '[::1]' '[::]' '[::ffff:*]' '*localhost' '*localhost.'; do
        rules+=("MAP $host:$door ^NOTFOUND")
    done
done
# And on the machine's own addresses (in a container, its address on the
# engine's network, where the relay and the app listen too): what its name
# resolves to, as the relay reads them (agentenv.relay.relay_server.own_addresses).
own="$(getent ahosts "$(cat /proc/sys/kernel/hostname)" 2>/dev/null | awk '{print $1}' | sort -u || true)"
for address in $own; do
    case "$address" in 127.* | ::1) continue ;; *:*) address="[$address]" ;; esac
    for door in "${AGENTENV_RELAY_PORT:-9222}" "${AGENTENV_APP_PORT:-8080}" "$port" \
        "${AGENTENV_RECORDER_PORT:-6667}"; do
        rules+=("MAP $address:$door ^NOTFOUND")
    done
done
resolver_rules="$(IFS=,; echo "${rules[*]}")"
# Downloads stay readable by the app's Playwright MCP (a group they share).
umask 0007
mkdir -p "$AGENTENV_PROFILE_DIR" "$downloads"
# A Chromium killed with -9 leaves its singleton lock behind; this container
# (or native stack) runs one Chromium per profile, so the lock is stale.
rm -f "$AGENTENV_PROFILE_DIR"/Singleton{Lock,Socket,Cookie}
# This shell's process becomes Chromium's browser process at the exec below.
AGENTENV_RENDERER_MEMORY_MB="$memory_mb" "$(dirname "$0")/renderers.sh" "$$" </dev/null &

exec env HOME="$AGENTENV_PROFILE_DIR" "$binary" \
    --headless=new \
    --no-sandbox \
    --disable-gpu \
    --disable-dev-shm-usage \
    --no-first-run \
    --no-default-browser-check \
    --disable-background-networking \
    --disable-component-update \
    --disable-sync \
    --disable-quic \
    --disable-features="$disabled" \
    --window-size=1280,800 \
    --remote-debugging-address=127.0.0.1 \
    --remote-debugging-port="$port" \
    --user-data-dir="$AGENTENV_PROFILE_DIR" \
    "${js_flags[@]}" \
    --host-resolver-rules="$resolver_rules" \
    "${extra[@]}" \
    about:blank
