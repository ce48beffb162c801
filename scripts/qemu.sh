#!/usr/bin/env bash
# Lets this amd64 machine run arm64 programs (debootstrap --arch=arm64, arm64
# containers and image builds) through qemu user emulation.
#
#   scripts/qemu.sh            # set it up (root on Debian), or check it is there
#   . scripts/qemu.sh; qemu_arm64_setup   # the same from another script
#
# On an arm64 host nothing is needed. Elsewhere it installs qemu-user-static
# and binfmt-support if missing, mounts binfmt_misc if needed and enables the
# qemu-aarch64 handler. The handler must have the F (fix binary) flag so the
# interpreter works inside containers; Debian's qemu-user-static sets it.
# Docker Desktop ships its own emulation: there this finds it already works.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

_qemu_binfmt=/proc/sys/fs/binfmt_misc
_qemu_handler="$_qemu_binfmt/qemu-aarch64"

_qemu_enabled() {
    [ -r "$_qemu_handler" ] && head -n1 "$_qemu_handler" | grep -qx enabled
}

qemu_arm64_setup() {
    [ "$(host_arch)" = arm64 ] && return 0
    if _qemu_enabled; then
        grep -q '^flags:.*F' "$_qemu_handler" ||
            warn "qemu-aarch64 is registered without the F flag: arm64 containers may fail to start (re-register with update-binfmts or 'docker run --privileged --rm tonistiigi/binfmt --install arm64')"
        return 0
    fi
    if ! is_root || ! is_debian; then
        die "arm64 emulation (binfmt qemu-aarch64) is not set up" \
            "as root on Debian: scripts/qemu.sh; with Docker Desktop it is built in; elsewhere install qemu-user-static and binfmt-support"
    fi
    if ! command -v qemu-aarch64-static >/dev/null 2>&1 || ! command -v update-binfmts >/dev/null 2>&1; then
        apt_install qemu-user-static binfmt-support
    fi
    if [ ! -e "$_qemu_binfmt/register" ]; then
        log "mounting binfmt_misc on $_qemu_binfmt"
        mount -t binfmt_misc binfmt_misc "$_qemu_binfmt" ||
            die "cannot mount binfmt_misc" \
                "this container/VM must allow it (run privileged, or set up binfmt on its host)"
    fi
    log "enabling the qemu-aarch64 binfmt handler"
    update-binfmts --enable qemu-aarch64 >&2 ||
        die "update-binfmts --enable qemu-aarch64 failed" \
            "run 'update-binfmts --display qemu-aarch64' to see why; reinstalling qemu-user-static re-imports it"
    _qemu_enabled || die "qemu-aarch64 is still not enabled in $_qemu_handler" \
        "run 'update-binfmts --display qemu-aarch64' and check that binfmt_misc is mounted"
    grep -q '^flags:.*F' "$_qemu_handler" ||
        warn "qemu-aarch64 has no F flag: arm64 containers may fail to find the interpreter"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    qemu_arm64_setup
    log "arm64 emulation ready ($(grep '^interpreter' "$_qemu_handler" 2>/dev/null || echo native arm64))"
fi
