#!/usr/bin/env bash
# Starts the browser computer's supervisord (the container's command under
# tini, and `make dev` natively). Creates the folders the programs share.
set -euo pipefail
: "${AGENTENV_LOG_DIR:?}" "${AGENTENV_RUN_DIR:?}" "${AGENTENV_IMAGE_DIR:?}" "${AGENTENV_VENV:?}"
: "${AGENTENV_PROFILE_DIR:?}"
mkdir -p "$AGENTENV_LOG_DIR" "$AGENTENV_RUN_DIR"
exec supervisord -n -c "$AGENTENV_IMAGE_DIR/supervisord.conf"
