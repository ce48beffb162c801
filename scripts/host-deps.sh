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
# The relay bench's forwarder in C (bench/relay.py: the physical floor).
command -v socat >/dev/null 2>&1 || missing+=(socat)
# kubectl renders the Kubernetes manifests (its built-in kustomize) for their
# offline test; not every apt source has it, so its absence stops nothing.
if ! command -v kubectl >/dev/null 2>&1; then
    (apt_install kubectl) 2>/dev/null || log "kubectl is not in this machine's apt sources: the manifests' test will be skipped"
fi
[ ${#missing[@]} -eq 0 ] && exit 0
apt_install "${missing[@]}"
