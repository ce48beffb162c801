#!/usr/bin/env bash
# Installs what the native stack (make dev, the native tests, the benchmarks)
# needs on the host: Debian's chromium and supervisor. Does nothing when they
# are there; elsewhere says what to install.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-liberation)
command -v supervisord >/dev/null 2>&1 || missing+=(supervisor)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
[ ${#missing[@]} -eq 0 ] && exit 0
apt_install "${missing[@]}"
