#!/usr/bin/env bash
# Starts one browser computer with compose, waits (bounded) until it is ready
# and prints its addresses. The image must exist (make image).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cdp_port="${AGENTENV_CDP_PORT:-9222}"
api_port="${AGENTENV_API_PORT:-8080}"
timeout_s="${AGENTENV_UP_TIMEOUT_S:-90}"

"$AGENTENV_ROOT/scripts/compose.sh" up -d >&2
start=$SECONDS
until curl -fsS "http://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; do
    if [ $((SECONDS - start)) -ge "$timeout_s" ]; then
        "$AGENTENV_ROOT/scripts/compose.sh" logs --tail=50 >&2 || true
        die "the computer was not ready after ${timeout_s}s" \
            "read the logs above (make logs); is port $api_port or $cdp_port taken?"
    fi
    sleep 0.5
done
cat <<EOT
browser computer ready in $(elapsed "$start")
  CDP  http://127.0.0.1:$cdp_port   (Playwright: chromium.connect_over_cdp("http://127.0.0.1:$cdp_port"))
  API  http://127.0.0.1:$api_port   (card: /card, health: /healthz, /readyz)
  MCP  http://127.0.0.1:$api_port/mcp
stop it with: make down
EOT
