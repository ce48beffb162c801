"""Computers as Kubernetes pods (``agentenv run --backend kubernetes``), on the
official Python client (the ``kubernetes`` package).

One computer is three objects with one name (``agentenv-<hex>``) in one
namespace: a Secret holding its control token and ``AGENTENV_USERS``, a Pod,
and a ClusterIP Service in front of it. The pod is ``deploy/kubernetes/
computer.yaml``'s (a unit test holds the two together): the init container
preparing the ``emptyDir`` folders, the hardened security context (SETUID,
SETGID and KILL only, no privilege escalation, read-only root,
``RuntimeDefault`` seccomp), probes on ``/healthz`` and ``/readyz``, the same
resources and volumes, a 1 GiB ``/dev/shm``, the scrape annotations. Tokens
reach it only through the Secret: the Pod and Service hold none.

Decisions:

- ``restartPolicy: Never``: a restarted computer mid-task is a new browser,
  so a computer that dies stays dead and the task fails as infrastructure.
- Configuration: in a pod (``KUBERNETES_SERVICE_HOST`` set, no
  ``--kube-context``) the pod's service account; else the kubeconfig
  (``$KUBECONFIG`` or ``~/.kube/config``), its current context or
  ``--kube-context``. The namespace is ``--namespace``, else the context's,
  else the pod's own, else ``default``.
- Addresses: in a pod, the Service's DNS name
  (``http://<name>.<namespace>.svc:8080`` and ``:9222``), which the pod's
  ``AGENTENV_ALLOWED_HOSTS`` lists so the relay's Host check lets it in; out
  of the cluster, a port-forward through the API server
  (``kubernetes.stream.portforward``) behind a listener on 127.0.0.1 per port
  (:class:`Forward`), one forwarded stream per connection, closed at stop.
- Every wait has a deadline (:data:`START_S` for the pod to be ready, then
  the computer's ``/readyz`` through its address); a pod that cannot pull its
  image or start fails at once, naming the reason and what to do. On any
  failure after the first object is created, every created object is
  deleted. :meth:`PodHandle.remove` (what :meth:`Computer.stop` calls)
  closes the forwards and deletes the Service, the Pod and the Secret.
- Errors name what went wrong without a token: the API server's own
  message, never the client's dump of headers and bodies.

What is and is not proven: no cluster could be reached where this was
written. The objects are validated offline against the Kubernetes API
schemas and compared with the manifests, the classification of pod statuses
and the error messages are unit-tested as plain functions, and the
port-forward listener is tested against local sockets. The calls to the API
server (create, watch, delete, port-forward) follow the client's documented
API but have not run against a live cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv.harness.computer import DEFAULT_IMAGE, Computer, ComputerError, users_setting
from agentenv.harness.k8s_objects import (
    API_PORT,
    CDP_PORT,
    STORE_IMAGE,
    pod,
    secret,
    service,
    store_pod,
    store_service,
)
from agentenv.harness.k8s_status import progress, refusal, short
from agentenv.harness.port_forward import Forward, pod_stream

__all__ = [
    "NAMESPACE_FILE",
    "Cluster",
    "ClusterStore",
    "PodHandle",
    "connect",
    "deploy_pod",
    "deploy_store",
]

#: How long a new pod may take to be scheduled, pull its image and be ready.
START_S = 300.0
#: How long the computer may then take to answer ``/readyz`` at its address.
READY_S = 120.0
#: Each API call's (connect, read) timeout.
REQUEST_TIMEOUT = (10.0, 60.0)
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


# -- the cluster ------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    """A cluster as the harness reaches it."""

    configuration: Any = field(repr=False)  # kubernetes.client.Configuration
    namespace: str
    #: The harness runs in a pod of the cluster: it reaches computers by DNS.
    in_cluster: bool
    where: str  # "context NAME" or "this pod's service account", for messages


def _require_client() -> None:
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        raise ComputerError(
            "the kubernetes backend needs the kubernetes package: pip install "
            "'agentenv[harness]'; nothing was deployed"
        ) from None


_LOADING = threading.Lock()  # the client's config loaders keep module state


def connect(context: str | None = None, namespace: str | None = None) -> Cluster:
    """The cluster from this pod's service account or the kubeconfig
    (:class:`ComputerError` saying what is missing, nothing deployed)."""
    _require_client()
    from kubernetes import client, config

    env = os.environ
    configuration = client.Configuration()
    with _LOADING:
        if context is None and env.get("KUBERNETES_SERVICE_HOST"):
            try:
                config.load_incluster_config(client_configuration=configuration)
            except config.ConfigException as exc:
                raise ComputerError(
                    f"KUBERNETES_SERVICE_HOST is set but this pod has no service account "
                    f"to use ({short(str(exc).splitlines()[0])}): mount one, or give "
                    "--kube-context; nothing was deployed"
                ) from None
            own = NAMESPACE_FILE.read_text().strip() if NAMESPACE_FILE.is_file() else ""
            return Cluster(
                configuration, namespace or own or "default", True, "this pod's service account"
            )
        path = env.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        try:
            contexts, current = config.list_kube_config_contexts(config_file=path)
            chosen = current if context is None else None
            for each in contexts or []:
                if context is not None and each.get("name") == context:
                    chosen = each
            if chosen is None:
                names = ", ".join(sorted(str(c.get("name")) for c in contexts or [])) or "none"
                raise ComputerError(
                    f"no context {context!r} in the kubeconfig ({path}); its contexts: "
                    f"{names}; nothing was deployed"
                )
            config.load_kube_config(
                config_file=path,
                context=chosen["name"],
                client_configuration=configuration,
                persist_config=False,
            )
        except config.ConfigException as exc:
            # The first line only: an exec plugin's failure goes on with its output.
            raise ComputerError(
                f"no Kubernetes cluster to use: the kubeconfig ({path}) gives none "
                f"({short(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}); "
                "set KUBECONFIG or --kube-context, or run the harness in a pod; "
                "nothing was deployed"
            ) from None
        except OSError as exc:
            raise ComputerError(
                f"cannot read the kubeconfig {path}: {exc.strerror}; nothing was deployed"
            ) from None
    in_context = (chosen.get("context") or {}).get("namespace")
    return Cluster(
        configuration, namespace or in_context or "default", False, f"context {chosen['name']}"
    )


# -- the computer ------------------------------------------------------------------------


@dataclass
class PodHandle:
    """A computer's objects, as :meth:`Computer.stop` removes them."""

    core: Any = field(repr=False)  # kubernetes.client.CoreV1Api
    namespace: str
    name: str
    #: What this harness created, in order ("secret", "pod", "service"): what
    #: a failed start says it left (remove deletes every kind regardless).
    created: list[str] = field(default_factory=list)
    forwards: list[Forward] = field(default_factory=list)

    def remove(self, force: bool = True, v: bool = True) -> None:
        """Close the forwards, delete the Service, the Pod and the Secret
        (gone already is fine); :class:`ComputerError` naming any left.
        (``force`` and ``v`` are a container's: a pod's volumes go with it.)"""
        for forward in self.forwards:
            forward.close()
        self.forwards = []
        from kubernetes import client

        left = []
        # Every kind, whatever ``created`` says: a create that timed out may
        # still have been carried out (a 404 is fine).
        for kind, delete in (
            ("service", self.core.delete_namespaced_service),
            ("pod", self.core.delete_namespaced_pod),
            ("secret", self.core.delete_namespaced_secret),
        ):
            try:
                delete(self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT)
            except client.ApiException as exc:
                if exc.status != 404:
                    left.append(f"{kind} ({refusal(exc, 'the delete')})")
            except Exception as exc:  # urllib3's: the API server is not answering
                left.append(f"{kind} ({type(exc).__name__})")
        if left:
            raise ComputerError(
                f"could not delete {self.name} in namespace {self.namespace}: "
                f"{'; '.join(left)}; delete it with kubectl delete pod,svc,secret "
                f"-n {self.namespace} {self.name}"
            )


def _wait_started(core: Any, namespace: str, name: str, seconds: float) -> None:
    """Until the pod is ready (:class:`ComputerError` when it failed, was
    deleted, or is not ready after ``seconds``)."""
    from kubernetes import client, watch

    ends = time.monotonic() + seconds
    why = "not seen yet"
    broke = ""
    while (left := ends - time.monotonic()) > 0:
        watching = watch.Watch()
        try:
            # raw_object: the pod as the API server sent it, in every client
            # version (deserialize=False is recent, and its ERROR events lack it).
            for event in watching.stream(
                core.list_namespaced_pod,
                namespace,
                field_selector=f"metadata.name={name}",
                timeout_seconds=max(1, int(left)),
                _request_timeout=(REQUEST_TIMEOUT[0], left + 10),
            ):
                if event.get("type") == "DELETED":
                    raise ComputerError(f"{name} was deleted before it was ready")
                if event.get("type") == "ERROR":
                    continue  # a watch too old to resume: the loop watches again
                state, why = progress(event.get("raw_object") or {})
                if state == "ready":
                    return
                if state == "failed":
                    raise ComputerError(why)
                if time.monotonic() > ends:
                    break
        except client.ApiException as exc:
            if exc.status != 410:  # a watch too old to resume: watch again
                raise refusal(exc, f"watching {name}") from None
        except ComputerError:
            raise
        except Exception as exc:  # urllib3's: a read timed out or the stream broke
            broke = f" (the watch broke: {type(exc).__name__}: {short(exc, 120)})"
            time.sleep(min(1.0, max(0.0, ends - time.monotonic())))  # not a busy loop
        finally:
            watching.stop()
    raise ComputerError(
        f"{name} in namespace {namespace} was not ready after {seconds:.0f} s: {why}{broke}; "
        f"see kubectl describe pod -n {namespace} {name}"
    )


def _create(
    cluster: Cluster,
    handle: PodHandle,
    steps: list[tuple[str, Callable[..., Any], dict[str, Any]]],
) -> None:
    """Create each object in turn, recording it in ``handle.created``; a
    refusal or an API server not answering is a :class:`ComputerError` that
    says "nothing was deployed" when nothing was."""
    from kubernetes import client

    name, ns = handle.name, handle.namespace
    for kind, create, body in steps:
        try:
            create(ns, body, _request_timeout=REQUEST_TIMEOUT)
        except client.ApiException as exc:
            error = refusal(exc, f"creating the {kind} {name} in namespace {ns}")
            if not handle.created:
                error = ComputerError(f"{error}; nothing was deployed")
            raise error from None
        except Exception as exc:  # urllib3's: the API server cannot be reached
            raise ComputerError(
                f"cannot reach the Kubernetes API at {cluster.configuration.host} "
                f"({cluster.where}): {type(exc).__name__}: {short(exc)}"
                + ("; nothing was deployed" if not handle.created else "")
            ) from None
        handle.created.append(kind)


def deploy_pod(
    image: str | None,
    agents: dict[str, str] | None = None,
    namespace: str | None = None,
    context: str | None = None,
    settings: dict[str, str] | None = None,
) -> Computer:
    """Start a computer as a pod with its Secret and Service (more ``settings``
    in its environment), and wait until it is ready."""
    cluster = connect(context, namespace)
    from kubernetes import client

    image = image or DEFAULT_IMAGE
    name = f"agentenv-{secrets.token_hex(6)}"
    ns = cluster.namespace
    core = client.CoreV1Api(client.ApiClient(cluster.configuration))
    handle = PodHandle(core, ns, name)
    control = secrets.token_urlsafe(24)
    steps: list[tuple[str, Callable[..., Any], dict[str, Any]]] = [
        ("secret", core.create_namespaced_secret, secret(name, control, users_setting(agents))),
        ("pod", core.create_namespaced_pod, pod(name, ns, image, settings)),
        ("service", core.create_namespaced_service, service(name)),
    ]
    try:
        _create(cluster, handle, steps)
        _wait_started(core, ns, name, START_S)
        if cluster.in_cluster:
            api = f"http://{name}.{ns}.svc:{API_PORT}"
            cdp = f"http://{name}.{ns}.svc:{CDP_PORT}"
        else:
            handle.forwards = [
                Forward(
                    pod_stream(cluster.configuration, name, ns, port),
                    f"port-forward {name}:{port}",
                )
                for port in (API_PORT, CDP_PORT)
            ]
            api, cdp = (forward.address for forward in handle.forwards)
        computer = Computer(api, cdp, control, handle, dict(agents or {}))
        try:
            computer.wait_ready(READY_S)
        except ComputerError as exc:
            told = next((f.error for f in handle.forwards if f.error), None)
            raise ComputerError(
                f"{exc}" + (f" (the port-forward: {told})" if told else "")
            ) from None
        return computer
    except BaseException:
        with contextlib.suppress(Exception):
            handle.remove()
        raise


# -- the run's store on the cluster -----------------------------------------------------


@dataclass
class ClusterStore:
    """The run's store on the cluster, as :mod:`.store` uses it."""

    handle: PodHandle
    keys: dict[str, str] = field(repr=False)
    endpoint: str  # where the harness reaches it (a port-forward, or the Service)
    computer_endpoint: str  # where the computers' pods reach it (the Service)


def _read_keys(core: Any, namespace: str, name: str) -> dict[str, str]:
    """The store's administrator keys, through the API's exec (never a log)."""
    from kubernetes import client
    from kubernetes.stream import stream

    from agentenv.harness.storeserver import ADMIN_KEYS

    try:
        said = stream(
            core.connect_get_namespaced_pod_exec,
            name,
            namespace,
            command=["cat", ADMIN_KEYS],
            stderr=False,
            stdin=False,
            stdout=True,
            tty=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        found = json.loads(said)
    except client.ApiException as exc:
        raise refusal(exc, f"reading the store {name}'s keys (pods/exec)") from None
    except ValueError:
        found = None
    if not isinstance(found, dict) or "AccessKeyId" not in found:
        raise ComputerError(
            f"the store {name} gave no keys; see kubectl logs -n {namespace} {name}"
        )
    return {
        "AccessKeyId": str(found["AccessKeyId"]),
        "SecretAccessKey": str(found["SecretAccessKey"]),
    }


def deploy_store(
    image: str | None, namespace: str | None = None, context: str | None = None
) -> ClusterStore:
    """Start the run's store as a pod with its Service and wait until it serves."""
    cluster = connect(context, namespace)
    from kubernetes import client

    from agentenv.harness.storeserver import PORT

    name = f"agentenv-store-{secrets.token_hex(6)}"
    ns = cluster.namespace
    core = client.CoreV1Api(client.ApiClient(cluster.configuration))
    handle = PodHandle(core, ns, name)
    try:
        _create(
            cluster,
            handle,
            [
                ("pod", core.create_namespaced_pod, store_pod(name, image or STORE_IMAGE)),
                ("service", core.create_namespaced_service, store_service(name)),
            ],
        )
        _wait_started(core, ns, name, START_S)
        keys = _read_keys(core, ns, name)
        inside = f"http://{name}.{ns}.svc:{PORT}"
        if cluster.in_cluster:
            endpoint = inside
        else:
            handle.forwards = [
                Forward(pod_stream(cluster.configuration, name, ns, PORT), f"port-forward {name}")
            ]
            endpoint = handle.forwards[0].address
        return ClusterStore(handle, keys, endpoint, inside)
    except BaseException:
        with contextlib.suppress(Exception):
            handle.remove()
        raise
