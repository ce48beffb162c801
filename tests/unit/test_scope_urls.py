"""The addresses ``scopes/open`` answers (app/scope_ops.py ``urls``), without
a computer: the host the op was asked at as the Host check passed it, the
relay's published port, and nothing else of the request."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from agentenv.access import AccessDenied
from agentenv.app.app_requests import settings_key
from agentenv.app.scope_ops import urls
from agentenv.settings import SettingsError, load


def _asked(host: str, env: dict[str, str] | None = None, **headers: str) -> tuple[str, str]:
    app = web.Application()
    app[settings_key] = load(env or {})
    request = make_mocked_request(
        "POST", "/v1/browser/scopes/open", headers={"Host": host, **headers}, app=app
    )
    return urls(request)


def test_the_relay_is_named_at_the_host_asked_and_its_published_port() -> None:
    assert _asked("127.0.0.1:32768") == (
        "ws://127.0.0.1:9222/devtools/browser",
        "http://127.0.0.1:32768/mcp",
    )
    published = {"AGENTENV_PUBLISHED_RELAY_PORT": "19222"}
    assert _asked("LOCALHOST:18080", published) == (
        "ws://localhost:19222/devtools/browser",
        "http://localhost:18080/mcp",
    )
    assert _asked("[::1]:18080", published)[0] == "ws://[::1]:19222/devtools/browser"
    assert _asked("10.0.0.5", published, **{"X-Forwarded-Proto": "https"}) == (
        "wss://10.0.0.5:19222/devtools/browser",
        "https://10.0.0.5/mcp",
    )
    # Forwarded host headers are no address of the computer's: never used.
    forwarded = {"X-Forwarded-Host": "evil.example", "Forwarded": "host=evil.example"}
    assert "evil" not in str(_asked("127.0.0.1:8080", published, **forwarded))


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:9222",  # a name not allowed (AGENTENV_ALLOWED_HOSTS)
        "127.0.0.1:8080/steal?x=",
        "user@127.0.0.1:8080",
        "127.0.0.1:8080#",
        "127.0.0.1 evil.example",
        "127.0.0.1:99999",
    ],
)
def test_a_host_that_is_not_host_and_port_goes_into_no_url(host: str) -> None:
    with pytest.raises(AccessDenied):
        _asked(host)


def test_the_published_port_is_a_port() -> None:
    for bad in ("65536", "-1", "port"):
        with pytest.raises(SettingsError) as refused:
            load({"AGENTENV_PUBLISHED_RELAY_PORT": bad})
        assert "AGENTENV_PUBLISHED_RELAY_PORT" in str(refused.value)
