#!/usr/bin/env bash
# Installs the real CDP clients that tests/clients/*.{js,py} drive (scripted,
# no LLM): Puppeteer, chrome-devtools-mcp, Stagehand, browser-use,
# Selenium and BrowserGym, each pinned; and the readers an export is scored
# by (WebArena-Verified's evaluator).
#
#   scripts/test-clients.sh [node|node22|browser-use|selenium|browsergym|webarena-verified|all]
#   (default: all)
#
# Result, in build/clients/:
#   node/          puppeteer-core and chrome-devtools-mcp from tests/clients/package.json and its
#                  package-lock.json (`npm ci`; puppeteer-core downloads no
#                  browser). Needs Node 18 or newer: Debian's nodejs is
#                  installed when node is missing and we are root.
#   node22/        Node 22 itself (npm's node package), Puppeteer 25 and
#                  Playwright for Node, from tests/clients/node22/ (`npm ci`;
#                  only the node package's own install step runs).
#   browser-use/   a Python venv with tests/clients/browser-use.txt (its pins
#                  clash with ours, so it never shares .venv).
#   selenium/      a Python venv with tests/clients/selenium.txt; Debian's
#                  chromium-driver is installed when chromedriver is missing
#                  (it matches Debian's chromium, the image's).
#   browsergym/    a Python venv with tests/clients/browsergym.txt: agentenv
#                  with its browsergym extra (editable, from this tree; its
#                  Playwright 1.44 never meets .venv's 1.65), browsergym-miniwob
#                  and the miniwob package's pages.
#   webarena-verified/  a Python venv with tests/clients/webarena-verified.txt
#                  (it pins pydantic 2.12.0 exactly, so it never shares .venv).
#
# Each part keeps a stamp holding the hash of its inputs: a second run with
# nothing changed does nothing. Python: $PYTHON, else python3 (3.11 or newer).
# Run them (the browser-use script turns its telemetry off itself):
#   node tests/clients/puppeteer_session.js WS-ENDPOINT SITE-URL
#   build/clients/browser-use/bin/python tests/clients/browser_use_session.py CDP-URL SITE-URL
#   build/clients/selenium/bin/python tests/clients/selenium_session.py HOST:PORT SITE-URL
#   build/clients/node22/node_modules/.bin/node tests/clients/playwright_session.mjs WS SITE
#   build/clients/browsergym/bin/python tests/clients/browsergym_session.py   (reads its env)
#   build/clients/webarena-verified/bin/webarena-verified eval-tasks --output-dir DIR --task-ids N
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

want=all
for arg in "$@"; do
    case "$arg" in
        node | node22 | browser-use | selenium | browsergym | webarena-verified | all) want="$arg" ;;
        -h | --help) sed -n '2,39p' "$0"; exit 0 ;;
        *) die "unknown argument '$arg'" \
            "usage: scripts/test-clients.sh [node|node22|browser-use|selenium|browsergym|webarena-verified|all]" ;;
    esac
done

cd "$AGENTENV_ROOT"
src=tests/clients
out=build/clients

# inputs_hash FILE...: one hash of the named files and this script.
inputs_hash() {
    local f
    for f in "$@"; do [ -f "$f" ] || die "$f is missing" "restore it from git"; done
    cat "$@" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1
}

install_node() {
    local dir="$out/node" hash
    hash="$(inputs_hash "$src/package.json" "$src/package-lock.json")"
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$hash" ] &&
        [ -d "$dir/node_modules/puppeteer-core" ] && [ -d "$dir/node_modules/chrome-devtools-mcp" ] &&
        [ -d "$dir/node_modules/@browserbasehq/stagehand" ]; then
        return 0
    fi
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        apt_install nodejs npm
    fi
    local major
    major="$(node -p 'process.versions.node.split(".")[0]')"
    [ "$major" -ge 18 ] || die "node $(node --version) is too old for puppeteer-core" \
        "install Node 18 or newer"
    log "installing puppeteer-core into $dir"
    mkdir -p "$dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    # puppeteer-core has no install script that fetches a browser; keep it so.
    PUPPETEER_SKIP_DOWNLOAD=1 npm ci --prefix "$dir" --ignore-scripts --no-audit --no-fund \
        --loglevel=error >&2 || die "npm ci in $dir failed" "read npm's error above"
    printf '%s\n' "$hash" >"$dir/.stamp"
}

install_node22() {
    local dir="$out/node22" hash
    hash="$(inputs_hash "$src/node22/package.json" "$src/node22/package-lock.json")"
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$hash" ] &&
        [ -x "$dir/node_modules/.bin/node" ]; then
        return 0
    fi
    if ! command -v npm >/dev/null 2>&1; then
        apt_install nodejs npm
    fi
    log "installing Node 22, Puppeteer 25 and Playwright for Node into $dir"
    mkdir -p "$dir"
    cp "$src/node22/package.json" "$src/node22/package-lock.json" "$dir/"
    PUPPETEER_SKIP_DOWNLOAD=1 npm ci --prefix "$dir" --ignore-scripts --no-audit --no-fund \
        --loglevel=error >&2 || die "npm ci in $dir failed" "read npm's error above"
    # The node package fetches its binary in its own install step: that one only.
    npm rebuild node --prefix "$dir" --no-audit --no-fund --loglevel=error >&2 ||
        die "npm rebuild node in $dir failed" "read npm's error above"
    "$dir/node_modules/.bin/node" --version >/dev/null ||
        die "Node 22 did not install in $dir" "read npm's error above"
    printf '%s\n' "$hash" >"$dir/.stamp"
}

# install_venv NAME REQUIREMENTS [INPUT...]: a Python venv of its own in
# $out/NAME with REQUIREMENTS installed (a stamp of their hash, and of the
# other INPUTs', skips a second run).
install_venv() {
    local name="$1" requirements="$2" dir="$out/$1" hash py="${PYTHON:-python3}"
    hash="$(inputs_hash "$requirements" "${@:3}")"
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$hash" ] &&
        [ -x "$dir/bin/python" ]; then
        return 0
    fi
    command -v "$py" >/dev/null 2>&1 || die "$py not found" "install Python 3.11 or newer"
    "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
        die "$name needs Python 3.11 or newer ($py is $("$py" --version 2>&1))" \
            "set PYTHON to a newer python3"
    if [ ! -x "$dir/bin/python" ]; then
        mkdir -p "$out"
        "$py" -m venv "$dir" 2>/dev/null || {
            rm -rf "$dir"
            apt_install python3-venv
            "$py" -m venv "$dir"
        } || die "cannot create the venv $dir" "install python3-venv and retry"
    fi
    log "installing $name into $dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" >&2 ||
        die "pip install -r $requirements failed" "read pip's error above"
    printf '%s\n' "$hash" >"$dir/.stamp"
}

install_browser_use() {
    install_venv browser-use "$src/browser-use.txt"
}

# Selenium's client in a venv of its own, and Debian's chromedriver: its
# version must be the image's Chromium's (both come from Debian's chromium).
install_selenium() {
    if ! command -v chromedriver >/dev/null 2>&1; then
        apt_install chromium-driver
    fi
    install_venv selenium "$src/selenium.txt"
}

# BrowserGym with agentenv's browsergym extra: agentenv is this tree's
# (editable), so pyproject.toml's extras are an input too.
install_browsergym() {
    install_venv browsergym "$src/browsergym.txt" pyproject.toml
}

install_webarena_verified() {
    install_venv webarena-verified "$src/webarena-verified.txt"
}

case "$want" in
    node) install_node ;;
    node22) install_node22 ;;
    browser-use) install_browser_use ;;
    selenium) install_selenium ;;
    browsergym) install_browsergym ;;
    webarena-verified) install_webarena_verified ;;
    all)
        install_node; install_node22; install_browser_use; install_selenium
        install_browsergym; install_webarena_verified
        ;;
esac
