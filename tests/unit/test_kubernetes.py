"""The Kubernetes manifests (deploy/kubernetes), rendered as kustomize does and
validated offline against the API schemas (``kubernetes-validate``): no
cluster is reached here. And they say what compose.yaml and the harness say:
the same capabilities, probes on /healthz and /readyz, only the harness let in.

The harness's Kubernetes backend (``agentenv.harness.kubernetes``), offline
too: its objects against the same schemas and against the manifests (so the
two cannot drift), where a pod is from its status, its errors, the CLI's
refusals, and the port-forward's listener against local sockets. No API
server, real or fake, answers any of these tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from agentenv.harness.hardening import CAPABILITIES, TMPFS
from tests.support.manifests import FOLDER, KUBERNETES, render

VERSION = KUBERNETES


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    # kustomize's way, without kubectl (test_k8s_fleet holds the two equal).
    return render(FOLDER)


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
    rule, scraper = policy["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"agentenv.io/harness": "true"}}}]
    assert sorted(p["port"] for p in rule["ports"]) == [8080, 9222]
    # The metrics scraper reaches the app server's port (/metrics, the control
    # token's), never the relay's.
    assert scraper["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"agentenv.io/metrics": "true"}},
        }
    ]
    assert [p["port"] for p in scraper["ports"]] == [8080]
    service = _one(rendered, "Service")["spec"]
    assert service["selector"].items() <= pod["metadata"]["labels"].items()


# -- the harness's backend (agentenv.harness.kubernetes): its objects, offline ------------

NAME, NAMESPACE, IMAGE = "agentenv-0123456789ab", "agents", "registry.example/agentenv/browser:7"
CONTROL, USERS = "control-Zq8v1-not-anywhere-else", "alice:alice-Kp2-not-anywhere-else"


def _backend() -> dict[str, dict[str, Any]]:
    from agentenv.harness import k8s_objects as k

    return {
        "Secret": k.secret(NAME, CONTROL, USERS),
        "Pod": k.pod(NAME, NAMESPACE, IMAGE),
        "Service": k.service(NAME),
    }


def test_the_backends_objects_fit_the_api_schemas() -> None:
    for doc in _backend().values():
        kubernetes_validate.validate(doc, VERSION, strict=True)


def _comparable(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod with what may differ between the manifest and the backend taken
    out: names, labels, images, the environment, the restart policy."""
    spec: dict[str, Any] = yaml.safe_load(yaml.safe_dump(pod["spec"]))
    spec.pop("restartPolicy", None)
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        container.pop("image")
        container.pop("env", None)
    return spec


def test_the_backends_pod_is_the_manifests_pod(rendered: list[dict[str, Any]]) -> None:
    """Everything but names, labels, images and the environment is the same:
    security contexts, capabilities, probes, resources, mounts, volumes,
    /dev/shm, the init container and its command, the scrape annotations."""
    manifest, backend = _one(rendered, "Pod"), _backend()["Pod"]
    assert _comparable(backend) == _comparable(manifest)
    assert backend["metadata"]["annotations"] == manifest["metadata"]["annotations"]
    assert backend["spec"]["restartPolicy"] == "Never"
    (computer,) = backend["spec"]["containers"]
    assert computer["securityContext"]["capabilities"]["add"] == list(CAPABILITIES)
    assert computer["image"] == IMAGE
    assert all(c["image"] == IMAGE for c in backend["spec"]["initContainers"])
    # The same variables from a Secret, by the same keys (the backend's own Secret).
    ours = {e["name"]: e for e in computer["env"]}
    (theirs,) = manifest["spec"]["containers"]
    for variable in theirs["env"]:
        if "valueFrom" in variable:
            key = variable["valueFrom"]["secretKeyRef"]["key"]
            assert ours[variable["name"]]["valueFrom"]["secretKeyRef"] == {"name": NAME, "key": key}
    labels = backend["metadata"]["labels"]
    assert (
        labels["app.kubernetes.io/name"] == manifest["metadata"]["labels"]["app.kubernetes.io/name"]
    )
    assert labels["app.kubernetes.io/part-of"] == "agentenv"
    assert labels["io.agentenv.harness"] == "1"


def test_the_backends_service_reaches_its_own_pod_only(rendered: list[dict[str, Any]]) -> None:
    objects = _backend()
    service, pod = objects["Service"]["spec"], objects["Pod"]
    assert service["selector"] == {"app.kubernetes.io/instance": NAME}
    assert service["selector"].items() <= pod["metadata"]["labels"].items()
    manifest = _one(rendered, "Service")["spec"]
    assert service["ports"] == manifest["ports"] and service["type"] == "ClusterIP"
    # The manifests' NetworkPolicy, applied in the namespace, covers these pods too.
    policy = _one(rendered, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]
    assert policy.items() <= pod["metadata"]["labels"].items()


def test_no_token_outside_the_secret() -> None:
    import json

    objects = _backend()
    for kind in ("Pod", "Service"):
        text = json.dumps(objects[kind])
        assert CONTROL not in text and "alice-Kp2" not in text, kind
    assert objects["Secret"]["stringData"] == {"control-token": CONTROL, "users": USERS}


def test_the_relay_accepts_the_services_names_as_hosts() -> None:
    from agentenv.access import AccessDenied, check_host
    from agentenv.harness import k8s_objects as k
    from agentenv.settings import load

    (computer,) = k.pod(NAME, NAMESPACE, IMAGE)["spec"]["containers"]
    env = {e["name"]: e["value"] for e in computer["env"] if "value" in e}
    settings = load({"AGENTENV_ALLOWED_HOSTS": env["AGENTENV_ALLOWED_HOSTS"]})
    for host in (NAME, f"{NAME}.{NAMESPACE}", f"{NAME}.{NAMESPACE}.svc"):
        assert check_host(settings, f"{host}:8080") == f"{host}:8080"
    assert check_host(settings, f"{NAME}.{NAMESPACE}.svc.cluster.local:9222")
    with pytest.raises(AccessDenied):
        check_host(settings, "agentenv-ffffffffffff.agents.svc:8080")


# -- where a starting pod is, from its status (no I/O) -----------------------------------


def _pod_status(
    phase: str,
    *,
    waiting: str | None = None,
    terminated: tuple[str, int] | None = None,
    init_terminated: tuple[str, int] | None = None,
    conditions: Sequence[tuple[str, str, str | None, str | None]] = (),
    reason: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """A pod as the client's models build it, serialized as the API serves it."""
    from kubernetes import client as c

    def status(name: str, image: str, state: Any) -> Any:
        return c.V1ContainerStatus(
            name=name, image=image, image_id="", ready=False, restart_count=0, state=state
        )

    containers = []
    if waiting is not None:
        containers.append(
            status(
                "computer",
                IMAGE,
                c.V1ContainerState(
                    waiting=c.V1ContainerStateWaiting(reason=waiting, message=f"{waiting} here")
                ),
            )
        )

    def ended(name: str, how: tuple[str, int]) -> Any:
        state = c.V1ContainerStateTerminated(reason=how[0], exit_code=how[1])
        return status(name, IMAGE, c.V1ContainerState(terminated=state))

    if terminated is not None:
        containers.append(ended("computer", terminated))
    inits = []
    if init_terminated is not None:
        inits.append(ended("folders", init_terminated))
    built = c.V1Pod(
        metadata=c.V1ObjectMeta(name=NAME, namespace=NAMESPACE),
        status=c.V1PodStatus(
            phase=phase,
            reason=reason,
            message=message,
            container_statuses=containers or None,
            init_container_statuses=inits or None,
            conditions=[
                c.V1PodCondition(type=t, status=s, reason=r, message=m) for t, s, r, m in conditions
            ]
            or None,
        ),
    )
    serialized: dict[str, Any] = c.ApiClient().sanitize_for_serialization(built)
    return serialized


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff", "InvalidImageName"])
def test_an_image_the_cluster_cannot_pull_fails_at_once(reason: str) -> None:
    from agentenv.harness.k8s_status import progress

    state, why = progress(_pod_status("Pending", waiting=reason))
    assert state == "failed"
    assert f"cannot pull the image {IMAGE} ({reason}: {reason} here)" in why
    assert "registry" in why and "--image" in why


@pytest.mark.parametrize("reason", ["CrashLoopBackOff", "CreateContainerConfigError"])
def test_a_container_that_cannot_start_fails_at_once(reason: str) -> None:
    from agentenv.harness.k8s_status import progress

    state, why = progress(_pod_status("Pending", waiting=reason))
    assert state == "failed" and f"cannot start ({reason}" in why
    assert f"kubectl describe pod {NAME} -n {NAMESPACE}" in why


def test_a_pod_that_stopped_fails_naming_how() -> None:
    from agentenv.harness.k8s_status import progress

    state, why = progress(_pod_status("Failed", init_terminated=("Error", 1)))
    assert state == "failed" and "folders Error (exit 1)" in why and "not restarted" in why
    state, why = progress(_pod_status("Failed", terminated=("OOMKilled", 137)))
    assert state == "failed" and "computer OOMKilled (exit 137)" in why
    state, why = progress(
        _pod_status("Failed", reason="Evicted", message="The node was low on resource: memory.")
    )
    assert state == "failed" and "Evicted: The node was low on resource: memory." in why
    assert progress(_pod_status("Succeeded", terminated=("Completed", 0))).state == "failed"


def test_a_starting_pod_is_waited_for_and_says_for_what() -> None:
    from agentenv.harness.k8s_status import progress

    unscheduled = _pod_status(
        "Pending",
        conditions=[("PodScheduled", "False", "Unschedulable", "0/3 nodes: Insufficient memory.")],
    )
    assert progress(unscheduled) == (
        "waiting",
        "not scheduled (Unschedulable: 0/3 nodes: Insufficient memory.)",
    )
    assert progress(_pod_status("Pending", waiting="ContainerCreating")) == (
        "waiting",
        "computer: ContainerCreating",
    )
    running = _pod_status("Running", conditions=[("Ready", "False", None, None)])
    assert progress(running).state == "waiting" and "/readyz" in progress(running).why
    assert progress(_pod_status("Pending")) == ("waiting", "pending")
    ready = _pod_status("Running", conditions=[("Ready", "True", None, None)])
    assert progress(ready) == ("ready", "ready")
    # The watch's raw objects are plain dicts in the same shape.
    assert (
        progress(
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
        ).state
        == "ready"
    )
    assert progress({}).state == "waiting"


# -- refusals and missing pieces: clear errors, no token, nothing deployed ---------------


def test_a_refusal_says_what_the_api_server_said_and_no_more() -> None:
    import json

    from kubernetes.client import ApiException

    from agentenv.harness.computer import ComputerError
    from agentenv.harness.k8s_status import refusal

    forbidden = ApiException(status=403, reason="Forbidden")
    forbidden.headers = {"Audit-Id": "1", "X-Echo": "Bearer secret-header-value"}
    forbidden.body = json.dumps(
        {
            "kind": "Status",
            "message": 'pods is forbidden: User "ci" cannot create resource "pods" '
            'in API group "" in the namespace "agents"',
            "code": 403,
        }
    )
    error = refusal(forbidden, "creating the pod")
    assert isinstance(error, ComputerError)
    text = str(error)
    assert 'cannot create resource "pods"' in text and "pods/portforward" in text
    assert "secret-header-value" not in text and "Audit-Id" not in text
    # A refusal is the infrastructure's, whatever its code (not the task's 4xx).
    assert error.status is None
    unreachable = ApiException(status=0, reason="[Errno 111] Connection refused\nmore")
    text = str(refusal(unreachable, "a port-forward"))
    assert "Connection refused" in text and "more" not in text and "reachable" in text


@pytest.fixture
def no_cluster_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any call that would reach a cluster fails the test."""
    from kubernetes import client

    def tripped(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a Kubernetes API client was made")

    monkeypatch.setattr(client, "ApiClient", tripped)
    monkeypatch.setattr(client, "CoreV1Api", tripped)


def test_no_kubeconfig_is_a_clear_error_and_deploys_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_cluster_calls: None
) -> None:
    import threading

    from agentenv.harness.backends import start
    from agentenv.harness.computer import ComputerError

    empty = tmp_path / "kubeconfig"
    empty.write_text("")
    monkeypatch.setenv("KUBECONFIG", str(empty))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    threads = threading.active_count()
    with pytest.raises(ComputerError) as caught:
        start("kubernetes", IMAGE, {"agent": "agent-token-value"})
    text = str(caught.value)
    assert "no Kubernetes cluster to use" in text and str(empty) in text
    assert "nothing was deployed" in text and "agent-token-value" not in text
    assert threading.active_count() == threads


def test_an_unknown_context_lists_the_known_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_cluster_calls: None
) -> None:
    from agentenv.harness.computer import ComputerError
    from agentenv.harness.kubernetes import connect, deploy_pod

    config = _kubeconfig(tmp_path, "https://127.0.0.1:6443")
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ComputerError, match=r"no context 'elsewhere'.*its contexts: here"):
        deploy_pod(IMAGE, context="elsewhere")
    found = connect()
    assert (found.namespace, found.in_cluster, found.where) == ("agents", False, "context here")
    assert connect(namespace="other").namespace == "other"
    assert "kubeconfig-token-value" not in repr(found)


def _kubeconfig(folder: Path, server: str) -> Path:
    path = folder / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "kubeconfig-token-value"}}],
                "contexts": [
                    {
                        "name": "here",
                        "context": {"cluster": "c", "user": "u", "namespace": "agents"},
                    }
                ],
                "current-context": "here",
            }
        )
    )
    return path


def test_an_api_server_not_answering_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kubeconfig naming a port where nothing listens (no server, fake or
    real): the first create fails, saying so, and nothing is left."""
    import socket

    from agentenv.harness.computer import ComputerError
    from agentenv.harness.kubernetes import deploy_pod

    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path, f"https://127.0.0.1:{port}")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ComputerError) as caught:
        deploy_pod(IMAGE, agents={"agent": "agent-token-value"})
    text = str(caught.value)
    assert f"cannot reach the Kubernetes API at https://127.0.0.1:{port} (context here)" in text
    assert "nothing was deployed" in text
    assert "kubeconfig-token-value" not in text and "agent-token-value" not in text


def test_in_a_pod_without_a_service_account_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, no_cluster_calls: None
) -> None:
    from agentenv.harness.computer import ComputerError
    from agentenv.harness.kubernetes import NAMESPACE_FILE, connect

    if NAMESPACE_FILE.parent.exists():
        pytest.skip("this machine is a pod with a service account")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ComputerError, match=r"no service account.*nothing was deployed"):
        connect()


def test_without_the_client_package_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from agentenv.harness.computer import ComputerError
    from agentenv.harness.kubernetes import deploy_pod

    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(ComputerError, match=r"pip install 'agentenv\[harness\]'"):
        deploy_pod(IMAGE)


def test_the_cli_refuses_the_file_store_and_stray_options(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_cluster_calls: None,
) -> None:
    from agentenv.harness import kubernetes as k
    from agentenv.harness.cli import main

    def tripped(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a computer was started")

    monkeypatch.setattr(k, "deploy_pod", tripped)
    monkeypatch.setattr(k, "connect", tripped)
    monkeypatch.chdir(tmp_path)
    task = tmp_path / "task.yaml"
    task.write_text(
        yaml.safe_dump(
            {
                "envs": {"web": {"versions": {1: {"browsers": ["main"]}}}},
                "steps": [{"type": "deploy_env", "env_id": "web"}],
            }
        )
    )
    assert main(["run", str(task), "--backend", "kubernetes", "--store", "file"]) == 2
    err = capsys.readouterr().err
    assert "--backend kubernetes starts computers without the run folder" in err
    assert "nothing was deployed" in err
    assert main(["run", str(task), "--namespace", "agents"]) == 2
    assert "--namespace and --kube-context are for --backend kubernetes" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_recording_task_on_kubernetes_starts_its_store_on_the_cluster(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_cluster_calls: None,
) -> None:
    """The local store goes where the computers are: a pod and Service of the
    cluster's, started before the first computer. With no cluster to use, the
    task fails as infrastructure, naming the store and why, and no computer
    is started."""
    from agentenv.harness import kubernetes as k
    from agentenv.harness.cli import main

    def tripped(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a computer was started")

    monkeypatch.setattr(k, "deploy_pod", tripped)
    empty = tmp_path / "kubeconfig"
    empty.write_text("")
    monkeypatch.setenv("KUBECONFIG", str(empty))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    task = tmp_path / "task.yaml"
    steps = [
        {"type": "deploy_env", "env_id": "web"},
        {"type": "start_browser_recording", "env_id": "web", "name": "r"},
        {"type": "end_browser_recording", "env_id": "web", "name": "r"},
    ]
    task.write_text(
        yaml.safe_dump({"envs": {"web": {"versions": {1: {"browsers": ["main"]}}}}, "steps": steps})
    )
    out = tmp_path / "out"
    assert main(["run", str(task), "--backend", "kubernetes", "--out", str(out)]) == 3
    assert "0 done, 0 failed, 1 infrastructure" in capsys.readouterr().out
    said = (out / "task" / "run.log").read_text()
    assert "cannot start the run's store on the cluster" in said, said
    assert "no Kubernetes cluster to use" in said, said


def test_the_stores_objects_fit_the_api_schemas_and_are_hardened() -> None:
    from agentenv.harness import k8s_objects as k
    from agentenv.harness.storeserver import ADMIN_KEYS, PORT

    name = "agentenv-store-0123456789ab"
    pod, service = k.store_pod(name, "registry.example/agentenv/store:7"), k.store_service(name)
    for doc in (pod, service):
        kubernetes_validate.validate(doc, VERSION, strict=True)
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    (container,) = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["readinessProbe"]["exec"]["command"] == ["test", "-s", ADMIN_KEYS]
    assert "env" not in container and "args" not in container  # no secret handed in
    # The Service reaches the store's pod only, not a computer's (nor is it a computer's).
    assert service["spec"]["selector"] == {"app.kubernetes.io/instance": name}
    assert service["spec"]["ports"] == [{"name": "s3", "port": PORT, "targetPort": "s3"}]
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] != k.NAME
    assert pod["metadata"]["labels"]["io.agentenv.harness"] == "store"


def test_a_run_without_a_cluster_fails_as_infrastructure(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_cluster_calls: None,
) -> None:
    """The whole path through ``agentenv run``: the task's deploy failing for
    want of a cluster, reported as infrastructure (exit 3)."""
    from agentenv.harness.cli import main

    empty = tmp_path / "kubeconfig"
    empty.write_text("")
    monkeypatch.setenv("KUBECONFIG", str(empty))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    task = tmp_path / "task.yaml"
    task.write_text(
        yaml.safe_dump(
            {
                "envs": {"web": {"versions": {1: {"browsers": ["main"]}}}},
                "steps": [{"type": "deploy_env", "env_id": "web"}],
            }
        )
    )
    out = tmp_path / "out"
    assert main(["run", str(task), "--backend", "kubernetes", "--out", str(out)]) == 3
    captured = capsys.readouterr()
    assert "0 done, 0 failed, 1 infrastructure" in captured.out
    assert "no Kubernetes cluster to use" in (out / "task" / "run.log").read_text()


# -- the port-forward's listener, against local sockets (no API server) ------------------

WAIT_S = 10.0


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """A TCP server on 127.0.0.1 that sends back what it gets, one thread a connection."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stopping = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(WAIT_S)
            with contextlib.suppress(OSError):
                while data := conn.recv(65536):
                    conn.sendall(data)

    def accept() -> None:
        while not stopping.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()
    stopping.set()
    thread.join(WAIT_S)
    server.close()


def _dial(port: int) -> Any:
    import socket

    conn = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    return conn


def _read(conn: Any, size: int) -> bytes:
    got = bytearray()
    while len(got) < size:
        data = conn.recv(65536)
        if not data:
            break
        got += data
    return bytes(got)


def test_the_forward_carries_each_connection_to_a_stream_of_its_own(
    echo: tuple[str, int],
) -> None:
    import os
    import socket
    import threading

    from agentenv.harness.port_forward import Forward

    opened = []

    def open_stream() -> socket.socket:
        opened.append(1)
        return socket.create_connection(echo, timeout=WAIT_S)

    forward = Forward(open_stream)
    try:
        assert forward.address == f"http://127.0.0.1:{forward.port}"
        payload = os.urandom(3 * 1024 * 1024)  # more than any socket buffer, both ways
        with _dial(forward.port) as big, _dial(forward.port) as small:
            sender = threading.Thread(target=big.sendall, args=(payload,), daemon=True)
            sender.start()
            small.sendall(b"hello")
            assert _read(small, 5) == b"hello"
            assert _read(big, len(payload)) == payload
            sender.join(WAIT_S)
        assert len(opened) == 2
        assert forward.error is None
    finally:
        forward.close()


def test_the_forward_works_over_a_socketpair_as_the_clients_port_forward_gives() -> None:
    """The client's port-forward hands out one end of a socketpair (AF_UNIX)."""
    import socket
    import threading

    from agentenv.harness.port_forward import Forward

    def open_stream() -> socket.socket:
        ours, theirs = socket.socketpair()

        def answer() -> None:
            with theirs:
                assert theirs.recv(1024).startswith(b"GET /readyz HTTP/1.1")
                theirs.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

        threading.Thread(target=answer, daemon=True).start()
        return ours

    forward = Forward(open_stream)
    try:
        import urllib.request

        with urllib.request.urlopen(forward.address + "/readyz", timeout=WAIT_S) as answer:
            assert answer.status == 200 and answer.read() == b"ok"
    finally:
        forward.close()


def test_a_stream_that_cannot_be_opened_ends_the_connection_and_is_kept() -> None:
    from agentenv.harness.computer import ComputerError
    from agentenv.harness.port_forward import Forward

    def open_stream() -> Any:
        raise ComputerError("Kubernetes refused a port-forward (403): forbidden")

    forward = Forward(open_stream)
    try:
        with _dial(forward.port) as conn:
            assert conn.recv(1) == b""  # closed, not left hanging
        assert forward.error == "Kubernetes refused a port-forward (403): forbidden"
    finally:
        forward.close()


def test_closing_the_forward_ends_its_connections_and_its_listener(
    echo: tuple[str, int],
) -> None:
    import socket

    from agentenv.harness.port_forward import Forward

    forward = Forward(lambda: socket.create_connection(echo, timeout=WAIT_S))
    conn = _dial(forward.port)
    try:
        conn.sendall(b"ping")
        assert _read(conn, 4) == b"ping"
        forward.close()
        assert conn.recv(1) == b""
        with pytest.raises(OSError):
            _dial(forward.port).close()
    finally:
        conn.close()
        forward.close()  # twice is fine
