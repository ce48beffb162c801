#!/usr/bin/env bash
# Creates .venv with the locked runtime packages, the dev tools and agentenv
# itself (editable). Re-run when requirements/ or pyproject.toml change
# (the Makefile does that through a stamp file).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$AGENTENV_ROOT"

python="${PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 || die "$python not found" "install Python 3.11 or newer"
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv 2>/dev/null || {
        apt_install python3-venv
        "$python" -m venv .venv
    } || die "cannot create .venv" "install python3-venv and retry"
fi
log "installing Python packages into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check \
    -r requirements/runtime.lock -r requirements/dev.txt
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
touch .venv/.stamp
