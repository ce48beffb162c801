"""The run's own store: moto's S3 server as a container (or a pod, or a
thread of this process for native tests and benches), reached by the
computers on the run's network and by the harness on this machine's loopback
(:mod:`.store` says why, and what it checks)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

from agentenv.harness.engine import HARNESS_LABEL, engine_problem
from agentenv.harness.harness_errors import HarnessError
from agentenv.harness.store import (
    LOCAL_BUCKET,
    NETWORK_GONE_S,
    STORE_IMAGE,
    STORE_READY_S,
    S3Store,
    StoreError,
)
from agentenv.harness.storeserver import ADMIN_KEYS
from agentenv.harness.storeserver import PORT as STORE_PORT

__all__ = ["LocalStore", "start_cluster", "start_container", "start_local"]

#: How many times a computer is asked whether it reaches the store when its
#: curl succeeds with no output (the answer lost on the way back).
ASKS = 3


class LocalStore(S3Store):
    """The run's own S3 server (see the module's text): a container, or a thread
    of this process for native tests."""

    server: Any = None  # the in-thread flavour's werkzeug server
    container: Any = None  # the container flavour's
    #: The Docker network made for it, which computers join (None in a thread).
    network: str | None = None
    networks: tuple[Any, ...] = ()
    #: On Kubernetes: its pod and Service (:class:`.kubernetes.PodHandle`).
    pod: Any = None

    def unreachable_from(self, container: Any) -> str | None:
        """Why a computer's container cannot reach this store, asked from inside
        it (None: it can, or it cannot be asked: a thread's store, a service)."""
        if self.container is None or not hasattr(container, "exec_run"):
            return None
        url = f"{self.computer_endpoint_url}/"
        command = [
            "/usr/bin/curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
            url,
        ]
        for asked in range(1, ASKS + 1):
            try:
                code, said = container.exec_run(command, user="agentenv")
            except Exception as exc:  # the docker SDK's: the computer went away
                return f"cannot ask the computer whether it reaches the run's store: {exc}"
            if code == 0 and said.strip() == b"403":  # the store refusing an unsigned request
                return None
            if code != 0 or said.strip() or asked == ASKS:
                break
            # curl succeeded yet nothing came back: the engine lost the exec's
            # output (seen under load in a fresh-clone CI run), not the network.
            time.sleep(0.5)
        answer = said.decode(errors="replace").strip()[-200:]
        return (
            f"the computer cannot reach the run's store at {url} (curl exit {code}, "
            f"answer {answer!r}): the computer and the store must share a Docker network; "
            "check that the engine keeps containers on a user-defined network able to "
            "resolve each other's names (docker network inspect "
            f"{self.network}), or give --store s3://bucket/prefix"
        )

    def _listing_prefix(self, start: str) -> str:
        # moto's signature check miscomputes a query holding "/" (a Prefix with
        # one): list what stands before the first "/" of the recording's place
        # (its task's run id: the local store has no prefix of its own, so a
        # batch's tasks do not list each other's objects) and keep its keys.
        return start.split("/", 1)[0]

    def close(self) -> None:
        super().close()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        problems = _remove(self.container, self.networks)
        self.container, self.networks = None, ()
        if self.pod is not None:
            try:
                self.pod.remove()
            except HarnessError as exc:
                problems.append(str(exc))
            self.pod = None
        if problems:
            raise StoreError("cannot remove the run's store: " + "; ".join(problems))


def _remove(container: Any, networks: tuple[Any, ...]) -> list[str]:
    """Remove the store's container (with its volumes) and the networks made for
    it: what could not be removed, in words."""
    import docker.errors

    problems: list[str] = []
    if container is not None:
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            problems.append(f"container {container.name}: {exc.explanation or exc}")
    for network in networks:
        ends = time.monotonic() + NETWORK_GONE_S
        while True:
            try:
                network.remove()
                break
            except docker.errors.NotFound:
                break
            except docker.errors.APIError as exc:  # endpoints still leaving (a computer stopping)
                if time.monotonic() > ends:
                    problems.append(
                        f"network {network.name}: {exc.explanation or exc} "
                        f"(docker network rm {network.name} once its containers are gone)"
                    )
                    break
                time.sleep(0.2)
    return problems


def start_local(say: Any = print, host: str = "127.0.0.1") -> LocalStore:
    """The guarded moto server in a thread of this process, on ``host``: for the
    native tests and benches, whose computers run on this machine's loopback.
    ``agentenv run`` starts :func:`start_container` instead."""
    from agentenv.harness import storeserver

    try:
        server, keys = storeserver.serve(host)
    except OSError as exc:
        raise StoreError(f"cannot start the local store on {host}: {exc.strerror}") from None
    endpoint = f"http://{host}:{server.server_port}"
    store = _opened(keys, endpoint, None, say)
    store.server = server
    return store


def _opened(
    keys: dict[str, str], endpoint: str, computer_endpoint: str | None, say: Any
) -> LocalStore:
    """A local store's client, with a bucket of its own (``agentenv-<random>``)."""
    import secrets

    import boto3

    session = boto3.session.Session(
        aws_access_key_id=keys["AccessKeyId"],
        aws_secret_access_key=keys["SecretAccessKey"],
        region_name="us-east-1",
    )
    store = LocalStore(
        f"{LOCAL_BUCKET}-{secrets.token_hex(4)}",
        "",
        session,
        endpoint_url=endpoint,
        computer_endpoint_url=computer_endpoint,
        say=say,
        role_per_grant=True,
    )
    try:
        store.client("s3").create_bucket(Bucket=store.bucket)
    except Exception as exc:
        store.close()
        raise store._fail("cannot make the run's bucket", exc) from None
    return store


def _admin_keys(container: Any) -> dict[str, str] | None:
    """The store container's administrator keys, once it has written them: read
    through the engine's exec call (``docker cp`` cannot see a tmpfs), so they
    reach no command line, environment variable or log."""
    import docker.errors

    try:
        code, said = container.exec_run(["cat", ADMIN_KEYS], user="moto")
    except docker.errors.APIError:  # not running (yet, or any more): the caller looks
        return None
    if code != 0:
        return None
    try:
        found = json.loads(said)
    except ValueError:
        return None
    return found if isinstance(found, dict) and "AccessKeyId" in found else None


def start_container(
    say: Any = print,
    *,
    image: str | None = None,
    swarm: bool = False,
    join: tuple[str, ...] = (),
    timeout_s: float = STORE_READY_S,
) -> LocalStore:
    """The run's store as a container of :data:`STORE_IMAGE` on a network of its
    own (a bridge; an attachable overlay for a swarm), which the run's
    computers join and reach it on by name; published on this machine's
    loopback for the harness. ``join`` names more networks it joins (a
    computer attached by URL, on a network of this engine)."""
    import secrets

    import docker
    import docker.errors

    problem = engine_problem()
    if problem is not None:
        raise StoreError(problem)
    image = image or os.environ.get("AGENTENV_STORE_IMAGE") or STORE_IMAGE
    tag = secrets.token_hex(6)
    name = f"agentenv-store-{tag}"
    client = docker.from_env()
    network: Any = None
    container: Any = None
    try:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            raise StoreError(
                f"the store's image {image} is not on this engine: make image builds it "
                "(scripts/store-image.sh), or give --store s3://bucket/prefix"
            ) from None
        try:
            network = client.networks.create(
                f"agentenv-run-{tag}",
                driver="overlay" if swarm else "bridge",
                attachable=True if swarm else None,
                labels={HARNESS_LABEL: "store"},
            )
        except docker.errors.APIError as exc:
            hint = " (docker swarm init makes this engine a swarm manager)" if swarm else ""
            raise StoreError(
                f"cannot make the run's network: {exc.explanation or exc}{hint}"
            ) from None
        # create, then start: a container made but not started is still ours to remove.
        container = client.containers.create(
            image,
            name=name,
            detach=True,
            init=True,
            network=network.name,
            ports={f"{STORE_PORT}/tcp": ("127.0.0.1", None)},
            labels={HARNESS_LABEL: "store"},
            read_only=True,
            tmpfs={"/run/store": "uid=10001,gid=10001,mode=0700,size=1m", "/tmp": "size=64m"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            mem_limit="1g",
            pids_limit=256,
        )
        container.start()
        for other in join:
            try:
                client.networks.get(other).connect(container)
            except docker.errors.NotFound:
                raise StoreError(
                    f"--network {other}: no such network on this engine (docker network ls "
                    "lists them)"
                ) from None
        keys = _wait_keys(container, name, timeout_s)
        container.reload()
        port = container.attrs["NetworkSettings"]["Ports"][f"{STORE_PORT}/tcp"][0]["HostPort"]
        store = _opened(keys, f"http://127.0.0.1:{port}", f"http://{name}:{STORE_PORT}", say)
    except BaseException as exc:
        for problem in _remove(container, (network,) if network is not None else ()):
            say(f"warning: cannot remove what the failed store start made: {problem}")
        if isinstance(exc, docker.errors.APIError):
            raise StoreError(f"cannot start the run's store: {exc.explanation or exc}") from None
        raise
    store.container, store.networks, store.network = container, (network,), network.name
    return store


def start_cluster(
    say: Any = print,
    *,
    image: str | None = None,
    namespace: str | None = None,
    context: str | None = None,
) -> LocalStore:
    """The run's store as a pod with a ClusterIP Service in the computers'
    namespace: their pods reach it at the Service's name; the harness through
    a port-forward (or the Service, from a pod of the cluster)."""
    from agentenv.harness.computer import ComputerError
    from agentenv.harness.kubernetes import deploy_store

    try:
        found = deploy_store(
            image or os.environ.get("AGENTENV_STORE_IMAGE"), namespace=namespace, context=context
        )
    except ComputerError as exc:
        raise StoreError(f"cannot start the run's store on the cluster: {exc}") from None
    try:
        store = _opened(found.keys, found.endpoint, found.computer_endpoint, say)
    except BaseException:
        with contextlib.suppress(Exception):
            found.handle.remove()
        raise
    store.pod = found.handle
    return store


def _wait_keys(container: Any, name: str, timeout_s: float) -> dict[str, str]:
    ends = time.monotonic() + timeout_s
    while True:
        keys = _admin_keys(container)
        if keys is not None:
            return keys
        container.reload()
        if container.status in ("exited", "dead"):
            said = container.logs(tail=20).decode(errors="replace").strip()
            raise StoreError(f"the run's store ({name}) exited at start: {said[-800:]}")
        if time.monotonic() > ends:
            raise StoreError(
                f"the run's store ({name}) did not start within {timeout_s:.0f} s: "
                f"docker logs {name} says why"
            )
        time.sleep(0.1)
