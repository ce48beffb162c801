"""The Kubernetes objects of a computer and of the run's store (no I/O): the
manifests' pod, as ``deploy/kubernetes/`` writes it, with the harness's
names, labels and Secret. :mod:`.kubernetes` creates them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentenv.harness.hardening import CAPABILITIES

__all__ = [
    "API_PORT",
    "CDP_PORT",
    "CLAIM_API",
    "NAME",
    "STORE_IMAGE",
    "STORE_NAME",
    "STORE_UID",
    "allowed_hosts",
    "claim",
    "labels",
    "pod",
    "secret",
    "service",
    "store_labels",
    "store_pod",
    "store_service",
]

#: The computer's ports: the app server's and the relay's.
API_PORT, CDP_PORT = 8080, 9222
#: The manifests' name of the computer (its app label).
NAME = "agentenv-computer"


def labels(name: str) -> dict[str, str]:
    """Every object's labels: the manifests' name and part-of, the harness's
    mark (``kubectl delete pod,svc,secret -l io.agentenv.harness`` cleans up
    after a harness that was killed), and the instance the Service selects."""
    return {
        "app.kubernetes.io/name": NAME,
        "app.kubernetes.io/part-of": "agentenv",
        "app.kubernetes.io/instance": name,
        "io.agentenv.harness": "1",
    }


#: agent-sandbox's claims (deploy/kubernetes/pool/; schemas/ holds its CRD's schema).
CLAIM_API = "extensions.agents.x-k8s.io/v1beta1"


def claim(name: str, pool: str, ends: datetime) -> dict[str, Any]:
    """A SandboxClaim taking one computer from the warm pool ``pool``
    (``deploy/kubernetes/pool/``): no environment and no volumes, which would
    make the controller start one cold. At ``ends`` (the run's deadline) the
    controller deletes the computer, should the harness not have."""
    if ends.tzinfo is None:
        raise ValueError("a claim's end is a moment: give it a time zone")
    return {
        "apiVersion": CLAIM_API,
        "kind": "SandboxClaim",
        "metadata": {"name": name, "labels": {"io.agentenv.harness": "1"}},
        "spec": {
            "warmPoolRef": {"name": pool},
            "lifecycle": {
                "shutdownPolicy": "Delete",
                "shutdownTime": ends.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        },
    }


def allowed_hosts(name: str, namespace: str) -> str:
    """``AGENTENV_ALLOWED_HOSTS`` (a comma list) for the Service ``name``: the
    forms in-cluster callers reach it by."""
    return ",".join(
        [
            name,
            f"{name}.{namespace}",
            f"{name}.{namespace}.svc",
            f"{name}.{namespace}.svc.cluster.local",
        ]
    )


def secret(name: str, control: str, users: str) -> dict[str, Any]:
    """The Secret the pod reads its tokens from (the only object holding them)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": labels(name)},
        "type": "Opaque",
        "stringData": {"control-token": control, "users": users},
    }


def pod(
    name: str, namespace: str, image: str, settings: dict[str, str] | None = None
) -> dict[str, Any]:
    """A computer's Pod: ``deploy/kubernetes/computer.yaml``'s, its tokens from
    the Secret ``name``, never restarted."""
    prepared = ["home-agentenv", "home-browser", "downloads", "log", "tmp", "run"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels(name),
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(API_PORT),
                "prometheus.io/path": "/metrics",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            # The recorder's 60 s to finish its files (supervisord's
            # stopwaitsecs), after the others' 10 s.
            "terminationGracePeriodSeconds": 90,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": [
                {
                    # An emptyDir starts root-owned: give each folder its owner.
                    "name": "folders",
                    "image": image,
                    "command": [
                        "sh",
                        "-c",
                        "install -d -o 1000 -g 1000 -m 0700 /w/home-agentenv && "
                        "install -d -o 1001 -g 1001 -m 0700 /w/home-browser && "
                        "install -d -o 1001 -g 1002 -m 2770 /w/downloads && "
                        "install -d -o 0 -g 1000 -m 2770 /w/log && "
                        "chmod 1777 /w/tmp && chmod 0755 /w/run",
                    ],
                    "securityContext": {
                        "runAsUser": 0,
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {
                            "drop": ["ALL"],
                            "add": ["CHOWN", "FOWNER", "DAC_OVERRIDE"],
                        },
                    },
                    "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                    "volumeMounts": [
                        {"name": volume, "mountPath": f"/w/{volume}"} for volume in prepared
                    ],
                }
            ],
            "containers": [
                {
                    "name": "computer",
                    "image": image,
                    "ports": [
                        {"name": "cdp", "containerPort": CDP_PORT},
                        {"name": "api", "containerPort": API_PORT},
                    ],
                    "env": [
                        {
                            "name": "AGENTENV_CONTROL_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": name, "key": "control-token"}},
                        },
                        {
                            "name": "AGENTENV_USERS",
                            "valueFrom": {"secretKeyRef": {"name": name, "key": "users"}},
                        },
                        {"name": "AGENTENV_ALLOWED_HOSTS", "value": allowed_hosts(name, namespace)},
                        *({"name": k, "value": v} for k, v in (settings or {}).items()),
                    ],
                    "securityContext": {
                        # supervisord starts as root only to start each program as
                        # its own user: SETUID and SETGID for that, KILL to stop them.
                        "runAsUser": 0,
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"], "add": list(CAPABILITIES)},
                    },
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi"},
                        "limits": {"cpu": "2", "memory": "3Gi"},
                    },
                    "livenessProbe": {
                        "httpGet": {"path": "/healthz", "port": "api"},
                        "periodSeconds": 10,
                        "failureThreshold": 6,
                    },
                    "readinessProbe": {
                        "httpGet": {"path": "/readyz", "port": "api"},
                        "periodSeconds": 2,
                        "failureThreshold": 3,
                    },
                    "startupProbe": {
                        "httpGet": {"path": "/healthz", "port": "api"},
                        "periodSeconds": 1,
                        "failureThreshold": 60,
                    },
                    "volumeMounts": [
                        {"name": "tmp", "mountPath": "/tmp"},
                        {"name": "run", "mountPath": "/run/agentenv"},
                        {"name": "home-agentenv", "mountPath": "/home/agentenv"},
                        {"name": "home-browser", "mountPath": "/home/browser"},
                        {"name": "downloads", "mountPath": "/var/lib/agentenv/downloads"},
                        {"name": "log", "mountPath": "/var/log/agentenv"},
                        {"name": "shm", "mountPath": "/dev/shm"},
                    ],
                }
            ],
            "volumes": [
                {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
                {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                {"name": "home-agentenv", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                {"name": "home-browser", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}},
                {"name": "downloads", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
                {"name": "log", "emptyDir": {"sizeLimit": "2Gi"}},
                # Chromium keeps its shared memory in /tmp (--disable-dev-shm-usage);
                # the sizes are a budget (harness/hardening.py).
                {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            ],
        },
    }


def service(name: str) -> dict[str, Any]:
    """The ClusterIP Service in front of the pod ``name`` (and only it)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels(name)},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/instance": name},
            "ports": [
                {"name": "cdp", "port": CDP_PORT, "targetPort": "cdp"},
                {"name": "api", "port": API_PORT, "targetPort": "api"},
            ],
        },
    }


# -- the run's store on the cluster -----------------------------------------------------

#: The run store's image, port and keys file (images/store/Dockerfile).
STORE_IMAGE = "agentenv/store:latest"
STORE_NAME = "agentenv-store"
STORE_UID = 10001


def store_labels(name: str) -> dict[str, str]:
    """The store's labels: its own name (no computer's NetworkPolicy or
    Service selects it), the harness's mark as ``store``."""
    return {
        "app.kubernetes.io/name": STORE_NAME,
        "app.kubernetes.io/part-of": "agentenv",
        "app.kubernetes.io/instance": name,
        "io.agentenv.harness": "store",
    }


def store_pod(name: str, image: str) -> dict[str, Any]:
    """The run's store as a pod: its image's own program (signatures and IAM
    checked, moto's management API refused), non-root, read-only, never
    restarted (a restarted store would have lost what it held), ready once it
    has written its administrator's keys."""
    from agentenv.harness.storeserver import ADMIN_KEYS, PORT

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": store_labels(name)},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {
                "runAsUser": STORE_UID,
                "runAsGroup": STORE_UID,
                "runAsNonRoot": True,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "store",
                    "image": image,
                    "ports": [{"name": "s3", "containerPort": PORT}],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "1Gi"},
                    },
                    "readinessProbe": {
                        "exec": {"command": ["test", "-s", ADMIN_KEYS]},
                        "periodSeconds": 1,
                        "failureThreshold": 60,
                    },
                    "volumeMounts": [
                        {"name": "keys", "mountPath": str(Path(ADMIN_KEYS).parent)},
                        {"name": "tmp", "mountPath": "/tmp"},
                    ],
                }
            ],
            "volumes": [
                {"name": "keys", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            ],
        },
    }


def store_service(name: str) -> dict[str, Any]:
    """The ClusterIP Service the computers' pods reach the store at."""
    from agentenv.harness.storeserver import PORT

    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": store_labels(name)},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/instance": name},
            "ports": [{"name": "s3", "port": PORT, "targetPort": "s3"}],
        },
    }
