"""A browser computer as the harness sees it: its API, deployed or attached.

:func:`deploy` starts a computer from the image with the docker SDK (ports
published on 127.0.0.1, a fresh control token) or attaches to one by URL.
:class:`Computer` calls its ops, checking the card first: a computer that
does not serve an op fails with ``serves no browser/v1 <op>: rebuild the
image on a newer agentenv``.

Every body is the op's protocol model (:mod:`agentenv.protocol.browser`,
:mod:`~agentenv.protocol.recording`), made by :func:`body` from the fields
a caller names and sent as :func:`~agentenv.protocol.request_dump` writes
it. A field given as None is left out before the model reads it, as the
computer reads an absent one (its default); the dump sends only the fields
the caller set (no defaults), so a newer harness's request means the same to
an older computer, whose models refuse fields they do not know. The model is made after the card's
checks, where the computer would read the body: a body it would refuse is the
400 it would answer, in its words (``<path>: <field>: <what is wrong>``),
without the round trip. Answers read field by field are read with the
protocol's model where it has one (``tabs/list``: :class:`Tab`); one that does
not fit is the computer's failure, not a KeyError.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from agentenv.harness.engine import HARNESS_LABEL, engine_problem
from agentenv.harness.hardening import docker_kwargs, writable_by_the_computer
from agentenv.harness.harness_errors import HarnessError
from agentenv.protocol import problems, request_dump
from agentenv.protocol.answers import ANSWERS, BINARY, RECORDING_ANSWERS
from agentenv.protocol.browser import ScopeOnly, Tab
from agentenv.protocol.card import BROWSER_RECORDING_V1, BROWSER_V1, Card

__all__ = ["Computer", "ComputerError", "agent_tokens", "body", "deploy", "users_setting"]

M = TypeVar("M", bound=BaseModel)

DEFAULT_IMAGE = "agentenv/browser:latest"
#: The most of a /metrics answer read (a computer's is a few KB).
METRICS_LIMIT = 1024 * 1024


class ComputerError(HarnessError):
    """The computer refused, failed or could not be reached (infrastructure)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def body(path: str, model: type[M], fields: dict[str, Any]) -> M:
    """The body of a request to ``path``: ``model`` of ``fields``, those None
    left out; one the computer would refuse is the 400 it would answer."""
    try:
        return model.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise ComputerError(f"{path}: {'; '.join(problems(exc))}", 400) from None


def read_answer(path: str, adapter: TypeAdapter[Any] | None, data: bytes) -> Any:
    """What ``path`` answered, read by its model
    (:mod:`agentenv.protocol.answers`); an answer the model does not read, or
    an op with none, is a :class:`ComputerError` naming the likely cause."""
    if adapter is None:
        raise ComputerError(f"{path}: this harness does not know what the op answers")
    try:
        return adapter.validate_json(data)
    except ValidationError as exc:
        raise ComputerError(
            f"{path}: the computer's answer is not what this harness reads "
            f"({'; '.join(problems(exc))}): run a computer image and a harness "
            "of the same version"
        ) from None


@dataclass
class Computer:
    api: str  # http://127.0.0.1:<port>
    cdp: str  # http://127.0.0.1:<port>
    token: str | None = field(default=None, repr=False)
    container: Any = None  # the docker SDK container, when deployed here
    #: The agents' tokens on a computer the harness started (name -> token).
    agents: dict[str, str] = field(default_factory=dict, repr=False)
    _card: Card | None = None
    #: This computer and no other, whatever its address (a port-forward's
    #: local port may later be another computer's): a fleet's key.
    key: str = field(default_factory=lambda: secrets.token_hex(8))

    def _request(
        self, path: str, body: Any = None, raw: bytes | None = None, wait_s: float = 180
    ) -> tuple[bytes, str]:
        data = raw if raw is not None else json.dumps(body or {}).encode()
        request = urllib.request.Request(self.api + path, data=data, method="POST")
        request.add_header(
            "Content-Type", "application/json" if raw is None else "application/gzip"
        )
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=wait_s) as answer:
                return answer.read(), answer.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            with contextlib.suppress(ValueError, KeyError, TypeError):
                detail = json.loads(detail)["error"]["message"]
            raise ComputerError(f"{path}: {detail}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ComputerError(
                f"{path}: the computer at {self.api} is not answering ({exc})"
            ) from None

    def card(self) -> Card:
        if self._card is None:
            try:
                with urllib.request.urlopen(self.api + "/card", timeout=30) as answer:
                    self._card = Card.model_validate_json(answer.read())
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise ComputerError(f"cannot read the card at {self.api}/card: {exc}") from None
        return self._card

    def public_key(self) -> str | None:
        """The computer's key its recordings are signed with (the card's
        ``attestation.key``); None for a computer that signs none."""
        found = self.card().attestation
        return found.key if found is not None else None

    def op(
        self, op: str, model: type[BaseModel], /, *, http_wait_s: float = 180, **fields: Any
    ) -> Any:
        """A browser/v1 op, its body ``model`` of ``fields`` (:func:`body`);
        its answer awaited at most ``http_wait_s`` (an op that waits, as
        ``request_human`` does, asks for longer)."""
        self.card().require(BROWSER_V1, op)
        if fields.get("scope") is not None:
            self.card().require_param(BROWSER_V1, "scope")
        path = f"/v1/browser/{op}"
        data, kind = self._request(
            path, request_dump(body(path, model, fields)), wait_s=http_wait_s
        )
        if op in BINARY and not kind.startswith("application/json"):
            return data
        return read_answer(path, ANSWERS.get(op), data)

    def tabs(self, scope: str | None = None) -> list[Tab]:
        """tabs/list in ``scope``: its tabs, as :class:`Tab` reads them."""
        found: list[Tab] = self.op("tabs/list", ScopeOnly, scope=scope)
        return found

    def data_get(self, scope: str | None = None) -> bytes:
        """data/get's archive; an empty ``scope`` is left out, as None is."""
        self.card().require(BROWSER_V1, "data/get")
        if scope is not None:
            self.card().require_param(BROWSER_V1, "scope")
        path = "/v1/browser/data/get"
        return self._request(path, request_dump(body(path, ScopeOnly, {"scope": scope or None})))[0]

    def recording(self, op: str, model: type[BaseModel], /, **fields: Any) -> Any:
        """A browser-recording/v1 op, its body ``model`` of ``fields`` (:func:`body`)."""
        self.card().require(BROWSER_RECORDING_V1, op)
        for param in ("scope", "video", "har", "downloads"):  # an older computer says so
            if fields.get(param) is not None:
                self.card().require_param(BROWSER_RECORDING_V1, param)
        path = f"/v1/browser-recording/{op}"
        data = self._request(path, request_dump(body(path, model, fields)))[0]
        return read_answer(path, RECORDING_ANSWERS.get(op), data)

    def metrics(self, timeout_s: float = 2.0) -> str | None:
        """``GET /metrics`` (Prometheus' text), or None when it does not answer."""
        request = urllib.request.Request(self.api + "/metrics")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                return bytes(answer.read(METRICS_LIMIT)).decode()
        except Exception:  # a computer going away mid-answer, in any way: no counts
            return None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.api + "/readyz", timeout=5) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout_s: float = 120) -> None:
        end = time.monotonic() + timeout_s
        while not self.ready():
            if time.monotonic() > end:
                raise ComputerError(
                    f"the computer at {self.api} was not ready after {timeout_s:.0f} s"
                )
            time.sleep(0.25)

    def stop(self) -> None:
        if self.container is not None:
            # v: with its anonymous /var/log/agentenv volume (its action log).
            self.container.remove(force=True, v=True)
            self.container = None


def agent_tokens(names: list[str]) -> dict[str, str]:
    """A fresh token for each agent name (``agent`` when there are none)."""
    return {name: secrets.token_urlsafe(24) for name in (names or ["agent"])}


def users_setting(agents: dict[str, str] | None) -> str:
    """``AGENTENV_USERS`` for ``agents``; a token no one holds when there are none,
    so a computer the harness starts never takes a connection without a token."""
    found = agents or {"nobody": secrets.token_urlsafe(24)}
    return ",".join(f"{name}:{token}" for name, token in found.items())


def deploy(
    image: str | None,
    url: str | None,
    token: str | None,
    cdp_url: str | None = None,
    artifacts: Path | None = None,
    agents: dict[str, str] | None = None,
    networks: list[str] | None = None,
    settings: dict[str, str] | None = None,
) -> Computer:
    """Start a computer from ``image`` (docker SDK) or attach to the one at ``url``.

    A computer started here gets ``artifacts`` (the run's folder) mounted at the
    same path, so recordings upload there under ``file://`` grants. An attached
    computer must see that path itself (or take S3 grants). It joins
    ``networks`` (the run store's, ``--network``) instead of the default bridge,
    with more ``settings`` in its environment (``AGENTENV_MAX_SCOPES``).
    """
    if url is not None:
        api = url.rstrip("/")
        computer = Computer(api, (cdp_url or api.rsplit(":", 1)[0] + ":9222").rstrip("/"), token)
        computer.card()
        computer.wait_ready(60)
        return computer
    import docker

    problem = engine_problem()
    if problem is not None:
        raise ComputerError(problem)
    control = secrets.token_urlsafe(24)
    if artifacts is not None:
        writable_by_the_computer(artifacts)
    joined = list(networks or [])
    container = None
    try:
        client = docker.from_env()
        # create, then start: a container made but not started is still ours to remove.
        container = client.containers.create(
            image or DEFAULT_IMAGE,
            detach=True,
            init=False,
            **docker_kwargs(),
            ports={"9222/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)},
            environment={
                **(settings or {}),
                "AGENTENV_CONTROL_TOKEN": control,
                # Agents prove their names with tokens: no token, no way in.
                "AGENTENV_USERS": users_setting(agents),
                # The run folder is mounted at the same path: recordings may go there.
                **({"AGENTENV_UPLOAD_ROOTS": str(artifacts)} if artifacts is not None else {}),
            },
            labels={HARNESS_LABEL: "1"},
            volumes=(
                {str(artifacts): {"bind": str(artifacts), "mode": "rw"}}
                if artifacts is not None
                else None
            ),
            **({"network": joined[0]} if joined else {}),
        )
        for other in joined[1:]:
            client.networks.get(other).connect(container)
        container.start()
    except Exception as exc:  # the docker SDK's errors: image missing, engine down
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)
        raise ComputerError(
            f"cannot start {image or DEFAULT_IMAGE}: {exc} (make image builds it)"
        ) from None
    container.reload()
    ports = container.attrs["NetworkSettings"]["Ports"]
    api = f"http://127.0.0.1:{ports['8080/tcp'][0]['HostPort']}"
    cdp = f"http://127.0.0.1:{ports['9222/tcp'][0]['HostPort']}"
    computer = Computer(api, cdp, control, container, dict(agents or {}))
    try:
        computer.wait_ready(120)
    except ComputerError:
        computer.stop()
        raise
    return computer
