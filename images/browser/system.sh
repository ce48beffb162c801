#!/usr/bin/env bash
# The computer's system layer on Debian bookworm: its packages, its two users
# and the folders they share. One script for both ways the stack is
# installed: the image's build (Dockerfile, with --image) and a machine of its
# own (scripts/install-native.sh). Run as root; running it again changes
# nothing that is already right.
#
#   system.sh [--image]     --image: also empty apt's caches (a smaller layer)
#
# Users, neither root: agentenv runs the relay, the app server and the
# recorder and owns the log; browser runs Chromium and owns its profile. The
# downloads folder is the one place both reach (group downloads). Chromium
# reads neither the log nor the others' environment (the control token).
# supervisord (root, with only SETUID, SETGID and KILL) starts each program as
# its user (launch/service.sh, launch/chromium.sh).
set -euo pipefail

image=""
for arg in "$@"; do
    case "$arg" in
        --image) image=1 ;;
        *) echo "system.sh: unknown option '$arg' (usage: system.sh [--image])" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "system.sh: run it as root" >&2; exit 1; }

# util-linux: setpriv (launch/*.sh); procps: ps, pgrep for debugging;
# libatomic1: the node bundled in the playwright wheel (Playwright MCP's
# runtime) does not start without it.
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    chromium supervisor python3 python3-venv fonts-liberation tini curl \
    ca-certificates procps util-linux libatomic1 >/dev/null
if [ -n "$image" ]; then
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
    # xdg-utils comes with chromium-common: a page navigating to mailto: made
    # Chromium run xdg-email and xdg-open, programs off the record. In the
    # image nobody but root may run them (a machine of its own keeps them).
    chmod 0700 /usr/bin/xdg-*
fi
chromium --version

# The ids the image (and deploy/kubernetes/) expects: 1000, 1001 and group
# 1002. On a machine where one is taken already (a person's account), the
# user gets a system id of its own instead: nothing outside the image names
# the numbers.
free_uid() { getent passwd "$1" >/dev/null && echo --system || echo "--uid $1"; }
free_gid() { getent group "$1" >/dev/null && echo --system || echo "--gid $1"; }
# shellcheck disable=SC2046 # one option and its value, or one option
getent group downloads >/dev/null || groupadd $(free_gid 1002) downloads
for pair in agentenv:1000 browser:1001; do
    name="${pair%%:*}"
    if ! id "$name" >/dev/null 2>&1; then
        # A group of the name already there (a user removed before): it is theirs.
        if getent group "$name" >/dev/null; then group=(--gid "$name"); else group=(--user-group); fi
        # shellcheck disable=SC2046
        useradd $(free_uid "${pair##*:}") "${group[@]}" --create-home --home-dir "/home/$name" \
            --shell /usr/sbin/nologin --groups downloads "$name"
    fi
    usermod -a -G downloads "$name" # a user there before this script: it shares downloads too
done
chmod 0700 /home/agentenv /home/browser
install -d -o browser -g browser -m 0700 /home/browser/profile
install -d -o browser -g downloads -m 2770 /var/lib/agentenv/downloads
install -d -o root -g agentenv -m 2770 /var/log/agentenv
install -d /run/agentenv /opt/agentenv
