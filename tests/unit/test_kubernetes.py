"""The Kubernetes manifests (deploy/kubernetes), rendered by kustomize and
validated offline against the API schemas (``kubernetes-validate``): no
cluster is reached here. And they say what compose.yaml and the harness say:
the same capabilities, probes on /healthz and /readyz, only the harness let in.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from agentenv.harness.hardening import CAPABILITIES, TMPFS

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "deploy" / "kubernetes"
VERSION = "1.31"


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (its kustomize renders the manifests) is not installed here")
    done = subprocess.run(
        [kubectl, "kustomize", str(FOLDER)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, [d["kind"] for d in docs]
    return found[0]


def test_every_manifest_fits_the_api_schemas(rendered: list[dict[str, Any]]) -> None:
    assert sorted(d["kind"] for d in rendered) == ["NetworkPolicy", "Pod", "Service"]
    for doc in rendered:
        kubernetes_validate.validate(doc, VERSION, strict=True)


def test_a_mistake_is_caught(rendered: list[dict[str, Any]]) -> None:
    pod = _one(rendered, "Pod")
    broken = yaml.safe_load(yaml.safe_dump(pod))
    broken["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] = {"no": "port"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)
    misspelt = yaml.safe_load(yaml.safe_dump(pod))
    misspelt["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesytem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, VERSION, strict=True)


def test_the_pod_is_hardened_as_compose_runs_it(rendered: list[dict[str, Any]]) -> None:
    pod = _one(rendered, "Pod")
    spec = pod["spec"]
    (computer,) = spec["containers"]
    context = computer["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": list(CAPABILITIES)}
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    mounts = {m["mountPath"] for m in computer["volumeMounts"]}
    assert set(TMPFS) <= mounts and {"/var/log/agentenv", "/dev/shm"} <= mounts
    assert computer["resources"]["limits"]["memory"] == "3Gi"
    assert computer["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert computer["readinessProbe"]["httpGet"]["path"] == "/readyz"
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    env = {e["name"]: e for e in computer["env"]}
    assert env["AGENTENV_CONTROL_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "agentenv-tokens"
    for init in spec["initContainers"]:
        assert init["securityContext"]["allowPrivilegeEscalation"] is False
        assert init["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_only_the_harness_gets_in(rendered: list[dict[str, Any]]) -> None:
    policy = _one(rendered, "NetworkPolicy")["spec"]
    pod = _one(rendered, "Pod")
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (rule,) = policy["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"agentenv.io/harness": "true"}}}]
    assert sorted(p["port"] for p in rule["ports"]) == [8080, 9222]
    service = _one(rendered, "Service")["spec"]
    assert service["selector"].items() <= pod["metadata"]["labels"].items()
