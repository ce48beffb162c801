#!/usr/bin/env bash
# Write services/agentenv/relay/pinned.json (relay/pinned.py reads it): every
# command of the protocol of the Chromium in the built image (its /json/protocol), for the relay's
# protocol table (relay/commands.py). Run it after a Chromium update has
# made tests/integration/test_image.py fail, then classify what is new.
#
#   scripts/protocol-commands.sh [image]      (default agentenv/browser:latest)
set -euo pipefail
cd "$(dirname "$0")/.."
image="${1:-agentenv/browser:latest}"
out=services/agentenv/relay/pinned.json
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Chromium in the image, on a port only the container sees; its protocol
# and version read from inside (curl is in the image).
docker run --rm --entrypoint sh "$image" -c '
  chromium --headless=new --no-sandbox --remote-debugging-port=9333 \
    --user-data-dir=/tmp/protocol about:blank >/dev/null 2>&1 &
  for _ in $(seq 100); do
    if curl -sf localhost:9333/json/protocol >/tmp/protocol.json; then break; fi
    sleep 0.2
  done
  test -s /tmp/protocol.json
  chromium --version >&2
  cat /tmp/protocol.json' >"$work/protocol.json" 2>"$work/version"
version="$(grep -oE '[0-9]+(\.[0-9]+){3}' "$work/version" | head -1)"
python3 - "$work/protocol.json" "$version" "$out" <<'PY'
import json
import sys

protocol, version, out = sys.argv[1], sys.argv[2], sys.argv[3]
domains = json.load(open(protocol))["domains"]
commands = sorted(f"{d['domain']}.{c['name']}" for d in domains for c in d.get("commands", []))
params = {
    f"{d['domain']}.{c['name']}": sorted(p["name"] for p in c.get("parameters", []))
    for d in domains
    for c in d.get("commands", [])
}
# Where each command takes an id V8 reads (relay/ids.py): a parameter of an
# id type at any depth, through object and array types.
types = {f"{d['domain']}.{t['id']}": t for d in domains for t in d.get("types", [])}
kinds = {
    "Runtime.ExecutionContextId": "context",
    "Runtime.RemoteObjectId": "remote-object",
    "Debugger.CallFrameId": "call-frame",
    "Runtime.ScriptId": "script",
    "HeapProfiler.HeapSnapshotObjectId": "heap-object",
}


def places(domain, spec, path, held, depth):
    ref = spec.get("$ref")
    if ref:
        full = ref if "." in ref else f"{domain}.{ref}"
        if full in kinds:
            held.append([path, kinds[full]])
            return
        found = types.get(full)
        if found is None or depth > 3:
            return
        owner = full.split(".")[0]
        if found.get("type") == "object":
            for prop in found.get("properties", []):
                places(owner, prop, [*path, prop["name"]], held, depth + 1)
        elif found.get("type") == "array" and "items" in found:
            places(owner, found["items"], [*path, "[]"], held, depth + 1)
    elif spec.get("type") == "array" and "items" in spec:
        places(domain, spec["items"], [*path, "[]"], held, depth + 1)
    elif spec.get("name") == "uniqueContextId":  # a plain string in the protocol
        held.append([path, "unique-context"])


ids = {}
for d in domains:
    for c in d.get("commands", []):
        held = []
        for p in c.get("parameters", []):
            places(d["domain"], p, [p["name"]], held, 0)
        if held:
            ids[f"{d['domain']}.{c['name']}"] = held
data = {"chromium": version, "params": {c: params[c] for c in commands}, "ids": ids}
open(out, "w").write(json.dumps(data, indent=1, sort_keys=True) + "\n")
print(f"protocol-commands.sh: {len(commands)} commands of Chromium {version} in {out}")
PY
