"""The image in tests: built once per run (scripts/build.sh, which reuses the
engine's layer cache), started hardened as users deploy it, and looked into.

testcontainers is imported inside functions (it calls the engine at import).
Without an engine these tests skip with the reason, unless
AGENTENV_REQUIRE_DOCKER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from agentenv.harness.hardening import docker_kwargs
from agentenv.protocol.log import LogPage
from tests.support.stack import ROOT
from tests.support.timing import deadline, wait_for

__all__ = [
    "CONTROL",
    "IMAGE",
    "PLAIN_S3",
    "USERS",
    "Computer",
    "build",
    "computer",
    "engine_objects",
    "require_engine",
    "start_computer",
]

IMAGE = os.environ.get("AGENTENV_TEST_IMAGE", "agentenv/browser:latest")
IMAGE_ARM64 = os.environ.get("AGENTENV_TEST_IMAGE_ARM64", f"{IMAGE}-arm64")
#: The users and control token a secured computer is started with.
USERS = {"alice": "alice-token-5f1c", "bob": "bob-token-9a2e"}
CONTROL = "control-token-7d3b"
SUPERVISORCTL = ["supervisorctl", "-c", "/opt/agentenv/image/supervisord.conf"]
#: The test site, served inside the computer on its own loopback.
SITE = "http://127.0.0.1:8000"
#: The same site over HTTPS, with a self-signed certificate (serve_tls_site).
TLS_SITE = "https://127.0.0.1:8443"
#: ``containers.run`` arguments that make the store's image plain moto on port
#: 5000 (any credentials; the store "from the AWS environment" of a test).
PLAIN_S3: dict[str, Any] = {
    "entrypoint": ["/opt/moto/bin/moto_server", "-H", "0.0.0.0", "-p", "5000"]
}


def engine_objects() -> set[str]:
    """What the engine holds that a run could leave behind: every volume, and
    the containers, networks and swarm services the harness labels. A test
    takes this before a run and checks nothing was added after it."""
    import docker

    client = docker.from_env()
    label = {"label": "io.agentenv.harness"}  # computers (=1) and stores (=store)
    found = {f"volume {v.name}" for v in client.volumes.list()}
    # sparse: the listing alone (no inspect of each, which fails for a container
    # another test on this shared engine removed in between).
    listed = client.containers.list(all=True, filters=label, sparse=True)
    found |= {f"container {c.attrs['Names'][0].lstrip('/')}" for c in listed}
    found |= {f"network {n.name}" for n in client.networks.list(filters=label)}
    if client.info().get("Swarm", {}).get("LocalNodeState") == "active":
        found |= {f"service {s.name}" for s in client.services.list(filters=label)}
    return found


def require_engine() -> None:
    try:
        ok = subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if ok:
        return
    reason = "no Docker engine answers: run scripts/engine.sh (make test does)"
    if os.environ.get("AGENTENV_REQUIRE_DOCKER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def build(arch: str) -> None:
    """Build ``arch``'s image under the tag the tests run (``AGENTENV_TEST_IMAGE``
    names it): built as build.sh's default tag, a test run on another tag would
    rebuild and clobber ``agentenv/browser:latest`` from this tree."""
    done = subprocess.run(
        [str(ROOT / "scripts/build.sh"), arch],
        cwd=ROOT,
        env={**os.environ, "IMAGE": IMAGE, "IMAGE_ARM64": IMAGE_ARM64},
        timeout=deadline(3600),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(
            f"scripts/build.sh {arch} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


def start_computer(
    image: str,
    env: dict[str, str] | None = None,
    shared: Path | None = None,
    *,
    hardened: bool = True,
    network: Any = None,  # a docker SDK Network (testcontainers reads its name)
) -> Any:
    """A computer container, ready (``/readyz``), hardened as compose runs it."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import HttpWaitStrategy

    kwargs: dict[str, Any] = docker_kwargs() if hardened else {"shm_size": "1g"}
    tmpfs = kwargs.pop("tmpfs", {})
    container = DockerContainer(image)
    container.tmpfs.update(tmpfs)  # testcontainers passes its own tmpfs argument
    container = (
        container.with_exposed_ports(9222, 8080)
        .with_kwargs(**kwargs)
        .waiting_for(
            HttpWaitStrategy(8080, "/readyz")
            .for_status_code(200)
            .with_startup_timeout(int(deadline(120)))
        )
    )
    for key, value in (env or {}).items():
        container = container.with_env(key, value)
    if shared is not None:  # a host folder at the same path inside (file:// grants)
        container = container.with_volume_mapping(str(shared), str(shared), "rw")
    if network is not None:
        container = container.with_network(network)
    return container.start()


@contextmanager
def site_computer(
    image: str, network: Any, control: str, pages: dict[str, str]
) -> Iterator[dict[str, str]]:
    """A computer the harness did not start, sharing no folder with it, on
    ``network`` (``--network``: the run's store joins it), with the control
    token ``control``, serving ``pages`` (path -> text) on its own loopback
    at :8000: its ``url`` (the app server) and ``cdp_url``."""
    container = start_computer(image, {"AGENTENV_CONTROL_TOKEN": control}, network=network)
    try:
        files = " && ".join(
            f"mkdir -p /tmp/site/$(dirname {name}) && printf '%s' {json.dumps(text)}"
            f" > /tmp/site/{name}"
            for name, text in pages.items()
        )
        serve = (
            f"{files} && cd /tmp/site && "
            "setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 < /dev/null &"
        )
        result = container.exec(["sh", "-c", serve])
        assert result.exit_code == 0, result.output
        host = container.get_container_host_ip()
        yield {
            "url": f"http://{host}:{container.get_exposed_port(8080)}",
            "cdp_url": f"http://{host}:{container.get_exposed_port(9222)}",
        }
    finally:
        container.stop()


@dataclass
class Computer:
    """A running computer container, as a test drives and inspects it."""

    container: Any
    users: dict[str, str]
    control: str | None

    @property
    def host(self) -> str:
        return str(self.container.get_container_host_ip())

    @property
    def relay(self) -> str:
        return f"http://{self.host}:{self.container.get_exposed_port(9222)}"

    @property
    def app(self) -> str:
        return f"http://{self.host}:{self.container.get_exposed_port(8080)}"

    @property
    def relay_address(self) -> str:
        return f"{self.host}:{self.container.get_exposed_port(9222)}"

    def token(self, user: str) -> str:
        return self.users[user]

    def headers(self, user: str | None = None) -> dict[str, str]:
        token = self.control if user is None else self.users[user]
        return {"Authorization": f"Bearer {token}"} if token else {}

    def op(
        self,
        op: str,
        body: dict[str, Any] | None = None,
        user: str | None = None,
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """A browser/v1 op as ``user`` (the control token when None)."""
        answer = requests.post(
            f"{self.app}/v1/browser/{op}",
            json=body or {},
            headers={**self.headers(user), **(headers or {})},
            timeout=deadline(60),
        )
        assert answer.status_code == status, (op, answer.status_code, answer.text[:500])
        kind = answer.headers.get("Content-Type", "")
        return answer.json() if kind.startswith("application/json") else answer.content

    def recording(self, op: str, body: dict[str, Any], status: int = 200) -> Any:
        """A browser-recording/v1 op (``start``, ``end``) with the control token."""
        answer = requests.post(
            f"{self.app}/v1/browser-recording/{op}",
            json=body,
            headers=self.headers(),
            timeout=deadline(120),
        )
        assert answer.status_code == status, (op, answer.status_code, answer.text[:2000])
        return answer.json()

    def log(self, after: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The action log through ``log`` with the control token, page by page."""
        lines: list[dict[str, Any]] = []
        last = after
        while True:
            page = self.op("log", {"after": last, "limit": 1000})
            LogPage.model_validate(page)  # every line is one of the wire's kinds
            lines += page["lines"]
            if page["last"] == last:
                return lines, last
            last = page["last"]

    def settled_log(self, after: int = 0, *, past: int = 0) -> list[dict[str, Any]]:
        """The log's lines after ``after``, once it reaches entry ``past``."""
        return wait_for(
            lambda: (lambda got: got[0] if got[1] >= past else None)(self.log(after)),
            f"the log to reach entry {past}",
            timeout_s=30,
        )

    def exec(self, *cmd: str, user: str | None = None) -> str:
        result = self.container.get_wrapped_container().exec_run(list(cmd), user=user or "")
        assert result.exit_code == 0, (cmd, result.output[-2000:])
        return str(result.output.decode(errors="replace"))

    def files(self, folder: str = "/var/log/agentenv") -> dict[str, bytes]:
        """Every file under ``folder`` in the container, by path."""
        stream, _ = self.container.get_wrapped_container().get_archive(folder)
        data = io.BytesIO(b"".join(stream))
        out: dict[str, bytes] = {}
        with tarfile.open(fileobj=data) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    extracted = tar.extractfile(member)
                    out[member.name] = extracted.read() if extracted is not None else b""
        return out

    def all_log_bytes(self) -> bytes:
        return b"".join(self.files().values())

    def serve_site(self) -> str:
        """The test site (tests/support/site.py) served inside the computer."""
        serve = "ThreadingHTTPServer(('127.0.0.1', 8000), m._Handler).serve_forever()\n"
        return self._serve("site", serve, SITE, "the test site inside the computer", 20)

    def serve_tls_site(self) -> str:
        """The test site over HTTPS on 127.0.0.1:8443, with a self-signed
        certificate made inside the computer: pages Chromium refuses unless
        told to ignore certificate errors."""
        serve = (
            "import ssl, subprocess\n"
            "subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes',"
            " '-days', '2', '-subj', '/CN=127.0.0.1', '-keyout', '/tmp/tls.key',"
            " '-out', '/tmp/tls.crt'], check=True, capture_output=True)\n"
            "s = ThreadingHTTPServer(('127.0.0.1', 8443), m._Handler)\n"
            "x = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
            "x.load_cert_chain('/tmp/tls.crt', '/tmp/tls.key')\n"
            "s.socket = x.wrap_socket(s.socket, server_side=True)\n"
            "s.serve_forever()\n"
        )
        what = "the test site over HTTPS inside the computer"
        return self._serve("tls_site", serve, TLS_SITE, what, 30)

    def serve_folder(self, port: int, folder: str, files: dict[str, str] | None = None) -> str:
        """``folder`` inside the computer served on 127.0.0.1:``port``, with
        ``files`` (name: text) written into it first; its origin once ``/``
        answers 200 (bounded)."""
        for name, text in (files or {}).items():
            data = base64.b64encode(text.encode()).decode()
            self.exec("sh", "-c", f"mkdir -p {folder} && echo {data} | base64 -d > {folder}/{name}")
        self.exec(
            "sh",
            "-c",
            f"setsid python3 -m http.server {port} --bind 127.0.0.1 -d {folder} "
            ">/dev/null 2>&1 </dev/null &",
        )
        origin = f"http://127.0.0.1:{port}"
        probe = f"curl -s -o /dev/null -w '%{{http_code}}' {origin}/ || true"
        what = f"{folder} served on port {port} inside the computer"
        wait_for(lambda: "200" in self.exec("sh", "-c", probe), what, timeout_s=20)
        return origin

    def _serve(self, name: str, serve: str, url: str, what: str, timeout_s: float) -> str:
        """tests/support/site.py's pages served inside the computer by ``serve``
        (Python run after the pages are loaded as ``m``), in the background;
        ``url`` once it answers 200 (bounded)."""
        source = (ROOT / "tests/support/site.py").read_text()
        code = base64.b64encode(source.encode()).decode()
        script = (
            "import base64, types\n"
            f"m = types.ModuleType('site_pages'); exec(base64.b64decode('{code}'), m.__dict__)\n"
            "from http.server import ThreadingHTTPServer\n" + serve
        )
        launch = base64.b64encode(script.encode()).decode()
        self.exec(
            "sh",
            "-c",
            f"echo {launch} | base64 -d > /tmp/{name}.py && "
            f"setsid python3 /tmp/{name}.py >/dev/null 2>&1 </dev/null &",
        )
        probe = f"curl -sk -o /dev/null -w '%{{http_code}}' {url}/ || true"
        wait_for(lambda: "200" in self.exec("sh", "-c", probe), what, timeout_s=timeout_s)
        return url

    def stop(self) -> None:
        self.container.stop()


@contextmanager
def computer(
    image: str,
    *,
    users: dict[str, str] | None = None,
    control: str | None = CONTROL,
    env: dict[str, str] | None = None,
    scopes: dict[str, str] | None = None,
    humans: frozenset[str] = frozenset(),
    **kwargs: Any,
) -> Iterator[Computer]:
    """A secured computer (users and a control token configured), stopped after.
    ``scopes`` groups users (user -> scope); each is a scope of their own else.
    ``humans``: the users who are people (``role=human``)."""
    users = USERS if users is None else users
    settings = dict(env or {})
    if users:
        settings["AGENTENV_USERS"] = ",".join(
            (f"{u}:{t}:{scopes[u]}" if scopes and u in scopes else f"{u}:{t}")
            + (":role=human" if u in humans else "")
            for u, t in users.items()
        )
    if control:
        settings["AGENTENV_CONTROL_TOKEN"] = control
    container = start_computer(image, settings, **kwargs)
    running = Computer(container, users, control)
    try:
        yield running
    finally:
        running.stop()
