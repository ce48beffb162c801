#!/usr/bin/env bash
# Runs `docker compose` when the plugin exists, else Debian's docker-compose,
# on the repository's compose.yaml: scripts/compose.sh up -d, ... down, ...
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$AGENTENV_ROOT"
export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-agentenv}"
if docker compose version >/dev/null 2>&1; then
    exec docker compose -f compose.yaml "$@"
elif command -v docker-compose >/dev/null 2>&1; then
    exec docker-compose -f compose.yaml "$@"
fi
die "neither 'docker compose' nor 'docker-compose' is installed" \
    "run scripts/engine.sh (installs docker-compose on Debian) or install Docker's compose plugin"
