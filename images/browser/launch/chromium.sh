#!/usr/bin/env bash
# Starts Chromium for the browser computer: headless, CDP on 127.0.0.1 only,
# as AGENTENV_CHROMIUM_USER when started as root. Output goes to stdout (for
# supervisord and `docker logs`) and to $AGENTENV_LOG_DIR/chromium.log.
# The back-forward cache is off: a page restored from it fires no load event,
# and Playwright clients (connect_over_cdp) wait for one after go_back.
set -euo pipefail

: "${AGENTENV_LOG_DIR:?}" "${AGENTENV_PROFILE_DIR:?}"
port="${AGENTENV_CHROMIUM_PORT:-9223}"
binary="${AGENTENV_CHROMIUM:-chromium}"
user="${AGENTENV_CHROMIUM_USER:-}"
downloads="${AGENTENV_DOWNLOADS_DIR:-$AGENTENV_PROFILE_DIR/../downloads}"
# Extra flags, split on spaces: e.g. --single-process for an arm64 image run
# under qemu emulation, where Chromium's GPU process keeps dying.
read -r -a extra <<<"${AGENTENV_CHROMIUM_FLAGS:-}"

mkdir -p "$AGENTENV_PROFILE_DIR" "$downloads"
# A Chromium killed with -9 leaves its singleton lock behind; this container
# (or native stack) runs one Chromium per profile, so the lock is stale.
rm -f "$AGENTENV_PROFILE_DIR"/Singleton{Lock,Socket,Cookie}

run_as=()
if [ "$(id -u)" = 0 ] && [ -n "$user" ] && [ "$user" != root ]; then
    chown -R "$user:" "$AGENTENV_PROFILE_DIR" "$downloads"
    run_as=(setpriv --reuid="$user" --regid="$user" --init-groups --reset-env)
fi

exec > >(tee -a "$AGENTENV_LOG_DIR/chromium.log") 2>&1
exec "${run_as[@]}" env HOME="$AGENTENV_PROFILE_DIR" "$binary" \
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
    --disable-features=Translate,MediaRouter,BackForwardCache \
    --window-size=1280,800 \
    --remote-debugging-address=127.0.0.1 \
    --remote-debugging-port="$port" \
    --user-data-dir="$AGENTENV_PROFILE_DIR" \
    "${extra[@]}" \
    about:blank
