"""Fleets of computers on Kubernetes (deploy/kubernetes: pool/, computers/,
keda/, hpa/, prometheus/), offline: every layout rendered as kustomize
renders it (and by kubectl's kustomize where it is installed, the two held
equal), every object validated against the Kubernetes API's schemas or its
CRD's own (vendored in deploy/kubernetes/schemas), a broken one refused; the
fleets' pods held to the one computer's; the scaling queries held to one
formula and to the metrics docs/spec.md names. No cluster is reached.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.manifests import (
    FOLDER,
    SCHEMAS,
    ManifestError,
    kubectl_render,
    render,
    validate,
)

ROOT = FOLDER.parents[1]
LAYOUTS = {
    ".": ["NetworkPolicy", "Pod", "Service"],
    "computers": ["Deployment", "NetworkPolicy", "Service"],
    "keda": ["Deployment", "NetworkPolicy", "ScaledObject", "Service"],
    "hpa": ["Deployment", "HorizontalPodAutoscaler", "NetworkPolicy", "Service"],
    "pool": ["NetworkPolicy", "SandboxTemplate", "SandboxWarmPool", "ScaledObject"],
}
METRICS = (
    "agentenv_scopes_open",
    "agentenv_scopes_capacity",
    "agentenv_queue_length",
    "agentenv_queue_oldest_wait_seconds",
)


def _key(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, [d["kind"] for d in docs]
    return found[0]


@pytest.fixture(scope="module")
def layouts() -> dict[str, list[dict[str, Any]]]:
    return {name: render(FOLDER / name) for name in LAYOUTS}


# -- rendering and validating ------------------------------------------------------------


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_renders_and_fits_its_schemas(
    layouts: dict[str, list[dict[str, Any]]], layout: str
) -> None:
    docs = layouts[layout]
    assert sorted(d["kind"] for d in docs) == LAYOUTS[layout]
    for doc in docs:
        validate(doc)
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "agentenv", _key(doc)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_renderer_is_kustomize(layouts: dict[str, list[dict[str, Any]]], layout: str) -> None:
    """What CI validates where kubectl is missing is what kubectl applies."""
    theirs = kubectl_render(FOLDER / layout)
    if theirs is None:
        pytest.skip("kubectl (its kustomize) is not installed: the renderer is not compared")
    assert sorted(layouts[layout], key=_key) == sorted(theirs, key=_key)


def test_the_claim_fits_its_schema() -> None:
    (claim,) = yaml.safe_load_all((FOLDER / "pool" / "claim.example.yaml").read_text())
    validate(claim)
    assert claim["spec"]["warmPoolRef"]["name"] == "agentenv-computers"


def _broken(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = copy.deepcopy(_one(docs, kind))
    return found


def test_a_broken_manifest_is_refused(layouts: dict[str, list[dict[str, Any]]]) -> None:
    """Each check can fail: a misspelt, missing or mistyped field in every kind,
    built-in or custom, and in the pod a CRD carries."""
    pool, keda, hpa = layouts["pool"], layouts["keda"], layouts["hpa"]
    mistakes: list[tuple[dict[str, Any], str]] = []

    pool_ref = _broken(pool, "SandboxWarmPool")
    pool_ref["spec"]["sandboxTemplateRefs"] = pool_ref["spec"].pop("sandboxTemplateRef")
    mistakes.append((pool_ref, "sandboxTemplateRef"))

    replicas = _broken(pool, "SandboxWarmPool")
    replicas["spec"]["replicas"] = -1
    mistakes.append((replicas, "minimum"))

    template = _broken(pool, "SandboxTemplate")
    (computer,) = template["spec"]["podTemplate"]["spec"]["containers"]
    computer["securityContext"]["readOnlyRootFilesytem"] = True
    mistakes.append((template, "readOnlyRootFilesytem"))

    policy = _broken(pool, "SandboxTemplate")
    policy["spec"]["networkPolicyManagement"] = "Off"
    mistakes.append((policy, "Off"))

    trigger = _broken(keda, "ScaledObject")
    del trigger["spec"]["triggers"][0]["type"]
    mistakes.append((trigger, "spec/triggers/0: 'type' is a required property"))

    target = _broken(layouts["pool"], "ScaledObject")
    target["spec"]["scaleTargetRef"]["kinds"] = "SandboxWarmPool"
    mistakes.append((target, "kinds"))

    # The CRD leaves metadata open: the API server's ObjectMeta is what refuses.
    meta = _broken(keda, "ScaledObject")
    meta["metadata"]["nmae"] = meta["metadata"].pop("name")
    mistakes.append((meta, "metadata: Additional properties are not allowed ('nmae'"))

    deployment = _broken(keda, "Deployment")
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    probe["httpGet"]["port"] = {"no": "port"}
    mistakes.append((deployment, "port"))

    autoscaler = _broken(hpa, "HorizontalPodAutoscaler")
    autoscaler["spec"]["metrics"][0]["external"]["target"]["averageValues"] = "1"
    mistakes.append((autoscaler, "averageValues"))

    (claim,) = yaml.safe_load_all((FOLDER / "pool" / "claim.example.yaml").read_text())
    del claim["spec"]["warmPoolRef"]
    mistakes.append((claim, "spec: 'warmPoolRef' is a required property"))

    for doc, said in mistakes:
        with pytest.raises(ManifestError, match=re.escape(said)):
            validate(doc)

    unknown = _broken(pool, "SandboxWarmPool")
    unknown["apiVersion"] = "extensions.agents.x-k8s.io/v1alpha9"
    with pytest.raises(ManifestError, match="no schema for SandboxWarmPool"):
        validate(unknown)


def test_the_renderer_refuses_what_it_does_not_carry_out(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        "resources: []\npatches:\n  - path: x.yaml\nnamespace: agents\n"
    )
    with pytest.raises(ManifestError, match="does not carry out namespace, patches"):
        render(tmp_path)


def test_the_vendored_schemas_are_the_versions_used(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    """Every custom kind the layouts use has its schema and its source recorded."""
    sources = (SCHEMAS / "SOURCES.md").read_text()
    used = {
        (d["apiVersion"], d["kind"])
        for docs in layouts.values()
        for d in docs
        if "." in d["apiVersion"].split("/")[0]
        and not d["apiVersion"].startswith(("apps/", "networking.k8s.io/", "autoscaling/"))
    }
    assert used == {
        ("extensions.agents.x-k8s.io/v1beta1", "SandboxTemplate"),
        ("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool"),
        ("keda.sh/v1alpha1", "ScaledObject"),
    }
    for api_version, kind in [*used, ("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim")]:
        group, version = api_version.split("/")
        name = f"{group}/{kind.lower()}_{version}.json"
        assert (SCHEMAS / name).is_file() and f"`{name}`" in sources, name
    assert "211b7579cabed9460c1a692eb687084ff4c5879d" in sources  # agent-sandbox v0.5.6
    assert "68a5b5028f35b22d50597c69819ab32c4e92f21a" in sources  # KEDA v2.20.2


# -- the fleets' pods are the computer's -------------------------------------------------


def _comparable(spec: dict[str, Any]) -> dict[str, Any]:
    """A pod spec less what a layout may set its own way: the restart policy
    and each container's image and environment."""
    out: dict[str, Any] = copy.deepcopy(spec)
    out.pop("restartPolicy", None)
    for container in [*out.get("initContainers", []), *out["containers"]]:
        container.pop("image")
        container.pop("env", None)
    return out


def _env(spec: dict[str, Any]) -> dict[str, Any]:
    (computer,) = spec["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in computer["env"]}


def test_the_fleets_pods_are_the_computers_pod(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    """Hardening, probes, resources, mounts and the scrape annotations are the
    one computer's (computer.yaml), in the Deployment and in the template."""
    pod = _one(layouts["."], "Pod")
    deployment = _one(layouts["computers"], "Deployment")["spec"]["template"]
    template = _one(layouts["pool"], "SandboxTemplate")["spec"]["podTemplate"]
    policy = _one(layouts["."], "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]
    for fleet in (deployment, template):
        assert _comparable(fleet["spec"]) == _comparable(pod["spec"])
        assert fleet["metadata"]["annotations"] == pod["metadata"]["annotations"]
        assert policy.items() <= fleet["metadata"]["labels"].items()
        env = _env(fleet["spec"])
        assert env["AGENTENV_CONTROL_TOKEN"] == _env(pod["spec"])["AGENTENV_CONTROL_TOKEN"]
        assert int(env["AGENTENV_MAX_SCOPES"]) >= 1
        # Reached at its pod's IP, which the Host check accepts: no name to allow.
        assert "AGENTENV_ALLOWED_HOSTS" not in env
    # The one computer's Service selects it alone, not a fleet's pods.
    service = _one(layouts["."], "Service")["spec"]["selector"]
    assert not service.items() <= deployment["metadata"]["labels"].items()
    assert not service.items() <= template["metadata"]["labels"].items()
    assert service.items() <= pod["metadata"]["labels"].items()
    fleet_service = _one(layouts["computers"], "Service")["spec"]
    assert fleet_service["clusterIP"] == "None"
    assert fleet_service["selector"].items() <= deployment["metadata"]["labels"].items()


def test_the_template_keeps_the_pod_as_written(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    spec = _one(layouts["pool"], "SandboxTemplate")["spec"]
    # Our NetworkPolicy, not the controller's (which lets in only its router).
    assert spec["networkPolicyManagement"] == "Unmanaged"
    assert spec["envVarsInjectionPolicy"] == "Disallowed"
    assert spec["service"] is False
    pool = _one(layouts["pool"], "SandboxWarmPool")["spec"]
    assert (
        pool["sandboxTemplateRef"]["name"]
        == _one(layouts["pool"], "SandboxTemplate")["metadata"]["name"]
    )


def test_only_the_harness_and_the_scraper_get_in(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    policy = _one(layouts["pool"], "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    harness, scraper = policy["ingress"]
    assert harness["from"] == [{"podSelector": {"matchLabels": {"agentenv.io/harness": "true"}}}]
    assert sorted(p["port"] for p in harness["ports"]) == [8080, 9222]
    assert scraper["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"agentenv.io/metrics": "true"}},
        }
    ]
    assert [p["port"] for p in scraper["ports"]] == [8080]  # never the relay's


# -- scaling: one formula, on the metrics the spec names ---------------------------------


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _rules() -> dict[str, str]:
    rules = yaml.safe_load((FOLDER / "prometheus" / "rules.yaml").read_text())
    return {r["record"]: r["expr"] for group in rules["groups"] for r in group["rules"]}


def _trigger(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (trigger,) = _one(docs, "ScaledObject")["spec"]["triggers"]
    found: dict[str, Any] = trigger
    return found


def test_keda_scales_the_deployment_on_the_formula(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    rules = _rules()
    wanted = rules["agentenv:computers_wanted"]
    scaled = _one(layouts["keda"], "ScaledObject")["spec"]
    deployment = _one(layouts["keda"], "Deployment")
    assert scaled["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    trigger = _trigger(layouts["keda"])
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    # AverageValue over a threshold of 1: replicas = ceil(the query's value).
    assert trigger["metadata"]["threshold"] == "1"
    assert _squash(trigger["metadata"]["query"]) == _squash(wanted)
    assert scaled["minReplicaCount"] >= 1  # one computer stays warm


def test_keda_sizes_the_warm_pool_to_the_spares_wanted(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    rules = _rules()
    scaled = _one(layouts["pool"], "ScaledObject")["spec"]
    pool = _one(layouts["pool"], "SandboxWarmPool")
    assert scaled["scaleTargetRef"] == {
        "apiVersion": pool["apiVersion"],
        "kind": "SandboxWarmPool",
        "name": pool["metadata"]["name"],
    }
    trigger = _trigger(layouts["pool"])
    assert trigger["metricType"] == "AverageValue" and trigger["metadata"]["threshold"] == "1"
    spares = (
        f"clamp_min(({rules['agentenv:computers_wanted']}) - "
        f"({rules['agentenv:computers_busy']}), 0)"
    )
    assert _squash(trigger["metadata"]["query"]) == _squash(spares)


def test_the_formula_counts_queued_and_running_over_the_capacity(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    """ceil((queued + running) / K) x margin: the queue and the scopes open
    both count (a busy fleet does not shrink under its work), K is what the
    computers report, and while none reports it is the pods' own setting."""
    wanted = _squash(_rules()["agentenv:computers_wanted"])
    job = 'job="agentenv-computers"'
    assert wanted.startswith("ceil(((sum(agentenv_queue_length{" + job + "})orvector(0))+")
    assert "+(sum(agentenv_scopes_open{" + job + "})orvector(0)))" in wanted
    k = re.search(
        r"/clamp_min\(avg\(agentenv_scopes_capacity\{[^}]*\}\)orvector\((\d+)\),1\)\)", wanted
    )
    assert k is not None, wanted
    for docs, path in (
        (layouts["computers"], ("Deployment", ["spec", "template", "spec"])),
        (layouts["pool"], ("SandboxTemplate", ["spec", "podTemplate", "spec"])),
    ):
        spec = _one(docs, path[0])
        for step in path[1]:
            spec = spec[step]
        assert _env(spec)["AGENTENV_MAX_SCOPES"] == k.group(1)
    margin = re.search(r"\)\*([0-9.]+)$", wanted)
    assert margin is not None and float(margin.group(1)) > 1


def test_the_queries_read_the_metrics_the_spec_names() -> None:
    spec = (ROOT / "docs" / "spec.md").read_text()
    texts = [
        (FOLDER / "prometheus" / "rules.yaml").read_text(),
        (FOLDER / "keda" / "scaledobject.yaml").read_text(),
        (FOLDER / "pool" / "scaledobject.yaml").read_text(),
    ]
    for name in METRICS:
        assert f"`{name}`" in spec, name
    used = {m for text in texts for m in re.findall(r"\bagentenv_[a-z_]+\b", text)}
    assert used <= set(METRICS), used - set(METRICS)
    assert {"agentenv_scopes_open", "agentenv_scopes_capacity", "agentenv_queue_length"} <= used


def test_the_scrape_job_and_the_adapter_fit_the_queries(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    scrape = yaml.safe_load((FOLDER / "prometheus" / "scrape.yaml").read_text())
    assert scrape["job_name"] == "agentenv-computers"
    pod = _one(layouts["."], "Pod")
    (keep, *_) = scrape["relabel_configs"]
    assert keep["action"] == "keep"
    assert keep["regex"] == pod["metadata"]["labels"]["app.kubernetes.io/name"]
    adapter = yaml.safe_load((FOLDER / "prometheus" / "adapter.yaml").read_text())
    (rule,) = adapter["externalRules"]
    assert (
        rule["seriesQuery"] == "agentenv:computers_wanted"
        and "agentenv:computers_wanted" in _rules()
    )
    assert rule["resources"] == {"namespaced": False}
    hpa = _one(layouts["hpa"], "HorizontalPodAutoscaler")["spec"]
    (metric,) = hpa["metrics"]
    assert metric["external"]["metric"]["name"] == rule["name"]["as"]
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "1"}
    assert hpa["scaleTargetRef"]["name"] == _one(layouts["hpa"], "Deployment")["metadata"]["name"]


# -- the harness's claim on the warm pool (agentenv.harness.k8s_objects/k8s_status) ------


def test_the_harness_claim_fits_the_crd_and_the_pool(
    layouts: dict[str, list[dict[str, Any]]],
) -> None:
    from datetime import datetime, timedelta, timezone

    from agentenv.harness import k8s_objects as k

    pool = _one(layouts["pool"], "SandboxWarmPool")
    ends = datetime(2027, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    claim = k.claim("agentenv-0123456789ab", pool["metadata"]["name"], ends)
    validate(claim)
    assert claim["apiVersion"] == pool["apiVersion"]
    assert claim["spec"]["lifecycle"]["shutdownTime"] == "2027-01-02T01:04:05Z"
    # Nothing that would make the controller start a computer cold.
    assert "env" not in claim["spec"] and "volumeClaimTemplates" not in claim["spec"]
    example = yaml.safe_load((FOLDER / "pool" / "claim.example.yaml").read_text())
    assert claim["spec"]["warmPoolRef"] == example["spec"]["warmPoolRef"]
    with pytest.raises(ValueError, match="time zone"):
        k.claim("x", "y", datetime(2027, 1, 1))


def _claim(
    status: str | None, reason: str = "", message: str = "", sandbox: str | None = None
) -> dict[str, Any]:
    found: dict[str, Any] = {"metadata": {"name": "agentenv-claim-1"}, "status": {}}
    if status is not None:
        found["status"]["conditions"] = [
            {"type": "Ready", "status": status, "reason": reason, "message": message}
        ]
    if sandbox is not None:
        found["status"]["sandbox"] = {"name": sandbox, "podIPs": ["10.0.0.7"]}
    return found


def test_where_a_claim_is_from_its_status() -> None:
    from agentenv.harness.k8s_status import claim_progress

    assert claim_progress({}).state == "waiting"
    assert claim_progress(_claim("True", "SandboxReady", sandbox="agentenv-computers-x7")) == (
        "ready",
        "ready",
    )
    assert claim_progress(_claim("True", "SandboxReady")).state == "waiting"  # no name yet
    for reason in ("SandboxNotReady", "AdoptionConflict", "SandboxCreatePending", "Whatever"):
        assert claim_progress(_claim("False", reason, "soon")) == ("waiting", f"{reason}: soon")
    state, why = claim_progress(
        _claim("False", "WarmPoolNotFound", 'SandboxWarmPool "agentenv-computers" not found')
    )
    assert state == "failed" and "kubectl apply -k deploy/kubernetes/pool" in why
    assert "agentenv-claim-1" in why and "WarmPoolNotFound" in why
    for reason in ("TemplateNotFound", "ClaimExpired", "SandboxExpired", "InvalidMetadata"):
        assert claim_progress(_claim("False", reason)).state == "failed"
