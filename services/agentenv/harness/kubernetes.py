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
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

from agentenv.harness.computer import DEFAULT_IMAGE, Computer, ComputerError, users_setting
from agentenv.harness.hardening import CAPABILITIES

__all__ = [
    "Cluster",
    "Forward",
    "PodHandle",
    "Progress",
    "allowed_hosts",
    "connect",
    "deploy_pod",
    "pod",
    "progress",
    "refusal",
    "secret",
    "service",
]

#: How long a new pod may take to be scheduled, pull its image and be ready.
START_S = 300.0
#: How long the computer may then take to answer ``/readyz`` at its address.
READY_S = 120.0
#: Each API call's (connect, read) timeout.
REQUEST_TIMEOUT = (10.0, 60.0)
API_PORT, CDP_PORT = 8080, 9222
NAME = "agentenv-computer"
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
RBAC = (
    "pods, services and secrets: create, get, delete; pods: watch; "
    "pods/portforward: get, create; pods/exec: get, create (the run's store's keys)"
)

# A container waiting for one of these will not become ready by waiting longer.
_CANNOT_PULL = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
_CANNOT_START = {
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
}


# -- the objects (no I/O) ------------------------------------------------------------


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


def pod(name: str, namespace: str, image: str) -> dict[str, Any]:
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


# -- what a pod's status says (no I/O) -------------------------------------------------


class Progress(NamedTuple):
    """Where a starting pod is: ``ready``, ``waiting`` (``why``: for what) or
    ``failed`` (``why``: what happened and what to do)."""

    state: Literal["ready", "waiting", "failed"]
    why: str


def _short(text: Any, limit: int = 300) -> str:
    found = " ".join(str(text or "").split())
    return found if len(found) <= limit else found[: limit - 1] + "…"


def progress(found: Mapping[str, Any]) -> Progress:
    """Where the pod ``found`` is (a Pod as the API serves it: a dict with
    camelCase keys, or a ``V1Pod`` through ``ApiClient.sanitize_for_serialization``)."""
    name = (found.get("metadata") or {}).get("name", "the pod")
    namespace = (found.get("metadata") or {}).get("namespace")
    describe = f"kubectl describe pod {name}" + (f" -n {namespace}" if namespace else "")
    status = found.get("status") or {}
    phase = status.get("phase") or "Pending"
    containers = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    for each in containers:
        waiting = (each.get("state") or {}).get("waiting") or {}
        reason, message = waiting.get("reason"), _short(waiting.get("message"))
        said = f"{reason}: {message}" if message else str(reason)
        if reason in _CANNOT_PULL:
            return Progress(
                "failed",
                f"the cluster cannot pull the image {each.get('image') or '?'} ({said}): push "
                "it to a registry the cluster's nodes can pull from (or load it onto them) "
                "and pass --image",
            )
        if reason in _CANNOT_START:
            return Progress(
                "failed",
                f"the {each.get('name', '?')} container of {name} cannot start ({said}); "
                f"see {describe}",
            )
    if phase in ("Failed", "Succeeded"):
        ended = []
        for each in containers:
            done = (each.get("state") or {}).get("terminated")
            if done and (done.get("exitCode") or phase == "Succeeded"):
                ended.append(
                    f"{each.get('name', '?')} {done.get('reason') or 'exited'} "
                    f"(exit {done.get('exitCode')})"
                    + (f": {_short(done.get('message'))}" if done.get("message") else "")
                )
        reason = status.get("reason") or ""
        told = "; ".join(
            p for p in (f"{reason}: {_short(status.get('message'))}" if reason else "", *ended) if p
        )
        return Progress(
            "failed",
            f"{name} stopped ({phase}{': ' + told if told else ''}); it is not restarted "
            f"(a restarted computer would be a new browser); see {describe}",
        )
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if phase == "Running" and (conditions.get("Ready") or {}).get("status") == "True":
        return Progress("ready", "ready")
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False":
        return Progress(
            "waiting",
            f"not scheduled ({scheduled.get('reason') or '?'}: {_short(scheduled.get('message'))})",
        )
    for each in containers:
        waiting = (each.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return Progress("waiting", f"{each.get('name', '?')}: {waiting['reason']}")
    if phase == "Running":
        return Progress("waiting", "running, not ready yet (the readiness probe on /readyz)")
    return Progress("waiting", phase.lower())


def refusal(exc: Any, doing: str) -> ComputerError:
    """A :class:`ComputerError` for the client's ``ApiException`` ``exc`` while
    ``doing`` something: the API server's own message and what to do, never
    the client's dump of the response's headers."""
    status = getattr(exc, "status", None)
    said = ""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        body = json.loads(exc.body)
        said = _short(body.get("message")) if isinstance(body, dict) else ""
    if not said:
        reason = str(getattr(exc, "reason", None) or "")
        said = _short(reason.splitlines()[0] if reason else "")
    if status == 401:
        hint = "the cluster does not accept these credentials: log in again (kubectl get pods)"
    elif status == 403:
        hint = f"the harness's user or service account needs RBAC for {RBAC}"
    elif status == 404:
        hint = "check that the namespace exists (--namespace)"
    elif status in (None, 0):
        hint = "is the API server reachable?"
    else:
        hint = ""
    text = f"Kubernetes refused {doing} ({status or 'no answer'}): {said or 'no message'}"
    # No status on the error: that is the computer's own, and a refusal here is
    # the infrastructure's, whatever its code.
    return ComputerError(text + (f"; {hint}" if hint else ""))


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
                    f"to use ({_short(str(exc).splitlines()[0])}): mount one, or give "
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
                f"({_short(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}); "
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


# -- the port-forward ---------------------------------------------------------------------


class Stream(Protocol):
    """What :class:`Forward` carries a connection to: a socket, or the
    client's port-forward socket."""

    def recv(self, size: int, /) -> bytes: ...
    def sendall(self, data: bytes, /) -> None: ...
    def shutdown(self, how: int, /) -> None: ...
    def close(self) -> None: ...


#: How often the accepting thread looks whether the forward was closed.
ACCEPT_POLL_S = 0.25


def _carry(source: Stream, sink: Stream, ends: tuple[Stream, Stream]) -> None:
    """Bytes from ``source`` to ``sink`` until either side ends; then both
    end (no half-close: HTTP and WebSocket clients do not use it)."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


class Forward:
    """A listener on 127.0.0.1 (a port of its own) whose every connection is
    carried to a new stream from ``open_stream()``: for a computer out of the
    cluster, a port-forward to its pod. :meth:`close` stops it and its
    connections. ``error`` keeps why the last stream could not be opened.

    Each connection has a thread of its own: a stream that never opens (the
    client's WebSocket connect takes no timeout) holds only that connection,
    which the caller's own timeout gives up on."""

    def __init__(self, open_stream: Callable[[], Stream], name: str = "forward") -> None:
        self._open_stream = open_stream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(ACCEPT_POLL_S)
        self.port: int = self._listener.getsockname()[1]
        self.error: str | None = None
        self._lock = threading.Lock()
        self._live: set[Stream] = set()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=name, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                local, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            local.setblocking(True)
            with self._lock:
                if self._closed.is_set():
                    local.close()
                    return
                self._live.add(local)
            threading.Thread(target=self._serve, args=(local,), daemon=True).start()

    def _serve(self, local: socket.socket) -> None:
        remote: Stream | None = None
        try:
            try:
                remote = self._open_stream()
            except Exception as exc:  # the client's: refused, unreachable, pod gone
                self.error = _short(exc)
                return
            with self._lock:
                if self._closed.is_set():
                    return
                self._live.add(remote)
            back = threading.Thread(
                target=_carry, args=(remote, local, (local, remote)), daemon=True
            )
            back.start()
            _carry(local, remote, (local, remote))
            back.join(5.0)  # _carry ended both: the other direction ends at once
        finally:
            for end in (local, remote):
                if end is not None:
                    with self._lock:
                        self._live.discard(end)
                    with contextlib.suppress(OSError):
                        end.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            live = list(self._live)
        for end in live:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
        self._thread.join(2 * ACCEPT_POLL_S + 1.0)


def _pod_stream(configuration: Any, name: str, namespace: str, port: int) -> Callable[[], Stream]:
    """A new port-forward to ``port`` of the pod, one per connection."""

    def open_stream() -> Stream:
        from kubernetes import client
        from kubernetes.stream import portforward

        # An ApiClient of its own: portforward() swaps the client's request
        # method while it connects, which would race with any other call.
        api = client.ApiClient(configuration)
        try:
            forwarded = portforward(
                client.CoreV1Api(api).connect_get_namespaced_pod_portforward,
                name,
                namespace,
                ports=str(port),
            )
        except client.ApiException as exc:
            raise refusal(exc, f"a port-forward to {name}:{port}") from None
        finally:
            api.close()
        stream: Stream = forwarded.socket(port)
        return stream

    return open_stream


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
            broke = f" (the watch broke: {type(exc).__name__}: {_short(exc, 120)})"
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
                f"({cluster.where}): {type(exc).__name__}: {_short(exc)}"
                + ("; nothing was deployed" if not handle.created else "")
            ) from None
        handle.created.append(kind)


def deploy_pod(
    image: str | None,
    agents: dict[str, str] | None = None,
    namespace: str | None = None,
    context: str | None = None,
) -> Computer:
    """Start a computer as a pod with its Secret and Service, and wait until it is ready."""
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
        ("pod", core.create_namespaced_pod, pod(name, ns, image)),
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
                    _pod_stream(cluster.configuration, name, ns, port),
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
                Forward(_pod_stream(cluster.configuration, name, ns, PORT), f"port-forward {name}")
            ]
            endpoint = handle.forwards[0].address
        return ClusterStore(handle, keys, endpoint, inside)
    except BaseException:
        with contextlib.suppress(Exception):
            handle.remove()
        raise
