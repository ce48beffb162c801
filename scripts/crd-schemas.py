#!/usr/bin/env python3
"""Vendor CustomResourceDefinitions' schemas for the manifests' offline test.

    scripts/crd-schemas.py OUT_DIR VERSION CRD.yaml [CRD.yaml ...]

writes each CRD's ``openAPIV3Schema`` of ``VERSION``, as it is, to
``OUT_DIR/<group>/<kind>_<version>.json`` (lower-case kind) and prints each
file's name with the sha256 of the YAML it came from, for
deploy/kubernetes/schemas/SOURCES.md. Nothing is changed in a schema:
strictness (unknown fields refused, as ``kubectl apply``'s server-side field
validation refuses them) is the test's, at load time.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import yaml


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, version, *files = argv
    for name in files:
        raw = Path(name).read_bytes()
        crd = yaml.safe_load(raw)
        if crd.get("kind") != "CustomResourceDefinition":
            print(f"{name}: not a CustomResourceDefinition", file=sys.stderr)
            return 1
        spec = crd["spec"]
        found = [v for v in spec["versions"] if v["name"] == version]
        if not found:
            served = ", ".join(v["name"] for v in spec["versions"])
            print(f"{name}: no version {version} (it has {served})", file=sys.stderr)
            return 1
        target = Path(out) / spec["group"] / f"{spec['names']['kind'].lower()}_{version}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        schema = found[0]["schema"]["openAPIV3Schema"]
        target.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        print(f"{target.relative_to(out)}  sha256 {hashlib.sha256(raw).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
