# shellcheck shell=bash
# Helpers shared by scripts/*.sh (sourced, never run). Keep it small.

AGENTENV_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export AGENTENV_ROOT

# The script's name in messages, e.g. "build.sh".
_agentenv_me="$(basename "${0:-agentenv}")"

log() { printf '%s: %s\n' "$_agentenv_me" "$*" >&2; }
warn() { printf '%s: warning: %s\n' "$_agentenv_me" "$*" >&2; }
# die MESSAGE [NEXT-STEP...]: print the error and what to do next, exit 1.
die() {
    printf '%s: error: %s\n' "$_agentenv_me" "$1" >&2
    shift
    local line
    for line in "$@"; do printf '  next: %s\n' "$line" >&2; done
    exit 1
}

is_root() { [ "$(id -u)" = 0 ]; }
is_debian() { [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; }

# apt_install PKG...: install Debian packages (root on Debian only), running
# apt-get update once per script run.
_agentenv_apt_updated=""
apt_install() {
    if ! is_root || ! is_debian; then
        die "need to install: $*" \
            "install them with your package manager (or re-run this script as root on Debian)"
    fi
    if [ -z "$_agentenv_apt_updated" ]; then
        log "apt-get update"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
            die "apt-get update failed" "check the network and /etc/apt/sources.list*"
        _agentenv_apt_updated=1
    fi
    log "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 ||
        die "apt-get install $* failed" "run: apt-get install -y $* and read its error"
}

# normalize_arch ARCH: amd64|arm64 from the spellings people use.
normalize_arch() {
    case "$1" in
        amd64 | x86_64 | x64 | linux/amd64) echo amd64 ;;
        arm64 | aarch64 | linux/arm64 | linux/arm64/v8) echo arm64 ;;
        *) die "unknown architecture '$1'" "use amd64 or arm64 (or all where the script allows it)" ;;
    esac
}

host_arch() { normalize_arch "$(uname -m)"; }

# The base image each architecture builds from (see scripts/base-image.sh).
base_image_tag() {
    case "$1" in
        amd64) echo "${AGENTENV_BASE_AMD64:-debian:bookworm-slim}" ;;
        arm64) echo "${AGENTENV_BASE_ARM64:-agentenv/debian:bookworm-slim-arm64}" ;;
    esac
}

# image_arch IMAGE: the Architecture field of a local image, empty if absent.
image_arch() { docker image inspect -f '{{.Architecture}}' "$1" 2>/dev/null || true; }

# elapsed START: seconds since START (a $SECONDS value), e.g. "42s".
elapsed() { echo "$((SECONDS - $1))s"; }
