"""Where a URL goes, read as Chromium reads it (agentenv.protocol.urls), and
the relay's rule that keeps agents' URLs off the computer's own ports on its
loopback (guard ``local-url``). tests/native/test_url_hosts.py holds the
same reading against Chromium's own parser."""

from __future__ import annotations

import json

import pytest

from agentenv.protocol.urls import canonical_address, host_of, loopback, loopback_port
from agentenv.relay import guard
from agentenv.relay.guard import check
from agentenv.settings import Settings
from tests.support.stack import ROOT

#: Every spelling of a loopback address a URL may use, as Chromium reads it.
LOOPBACK_FORMS = [
    ("http://127.0.0.2:9222/json/version", "127.0.0.2"),
    ("http://127.255.255.254:9222/", "127.255.255.254"),
    ("http://127.1:9222/", "127.0.0.1"),
    ("http://2130706434:9222/", "127.0.0.2"),
    ("http://0x7f000002:9222/", "127.0.0.2"),
    ("http://0x7F.0x0.0.2:9222/", "127.0.0.2"),
    ("http://0177.0.0.2:9222/", "127.0.0.2"),
    ("http://017700000002:9222/", "127.0.0.2"),
    ("http://127.0.0.2.:9222/", "127.0.0.2"),
    ("http://127%2E0.0.2:9222/", "127.0.0.2"),
    ("http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff12:9222/", "127.0.0.2"),
    ("http://127\u30020.0.2:9222/", "127.0.0.2"),
    ("http://0:9222/", "0.0.0.0"),
    ("http://0.0.0.0:9222/", "0.0.0.0"),
    ("http://[::1]:9222/", "[::1]"),
    ("http://[0:0:0:0:0:0:0:1]:9222/", "[::1]"),
    ("http://[::]:9222/", "[::]"),
    ("http://[::ffff:127.0.0.2]:9222/", "[::ffff:7f00:2]"),
    ("http://[::ffff:7f00:1]:9222/", "[::ffff:7f00:1]"),
    ("http://[::ffff:0:0]:9222/", "[::ffff:0:0]"),
    ("http://localhost:9222/", "localhost"),
    ("http://LOCALHOST.:9222/", "localhost."),
    ("http://a.localhost:9222/", "a.localhost"),
    ("HTTP://user:pw@127.0.0.2:9222/", "127.0.0.2"),
    ("http:\\\\127.0.0.2:9222/", "127.0.0.2"),
    ("http:127.0.0.2:9222/", "127.0.0.2"),
    ("ws://127.0.0.2:9222/devtools/browser", "127.0.0.2"),
    ("view-source:http://127.0.0.2:9222/", "127.0.0.2"),
    (" \thttp://127.0.0.2:9222/\n", "127.0.0.2"),
]


@pytest.mark.parametrize(("url", "host"), LOOPBACK_FORMS)
def test_every_spelling_of_the_loopback_is_the_loopback(url: str, host: str) -> None:
    assert host_of(url) == (host, 9222)
    assert loopback(host)
    assert loopback_port(url) == 9222


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("http://127.0.0.2/", ("127.0.0.2", 80)),
        ("https://127.0.0.2/", ("127.0.0.2", 443)),
        ("http://127.0.0.2:09222/", ("127.0.0.2", 9222)),
        ("http://127.0.0.2:/", ("127.0.0.2", 80)),
    ],
)
def test_the_port_is_the_schemes_when_none_is_given(url: str, where: tuple[str, int]) -> None:
    assert host_of(url) == where


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com:9222/",
        "http://128.0.0.1:9222/",
        "http://10.0.0.1:9222/",
        "http://[::2]:9222/",
        "http://[::ffff:10.0.0.1]:9222/",
        "http://notlocalhost:9222/",
        "http://localhost.example:9222/",
        "http://127.0.0.2.example:9222/",
    ],
)
def test_other_hosts_are_not_the_loopback(url: str) -> None:
    found = host_of(url)
    assert found is not None and not loopback(found[0])
    assert loopback_port(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "data:text/html,hi",
        "about:blank",
        "blob:http://127.0.0.2:9222/x",
        "http://256.0.0.1/",
        "http://1.2.3.4.5/",
        "http://09.0.0.1/",
        "http://[::1%25lo]:9222/",
        "http://127.0.0.2:65536/",
        "http://127.0.0.2:9x/",
        "http://[::1/",
    ],
)
def test_urls_that_reach_no_host_or_do_not_parse(url: str) -> None:
    assert host_of(url) is None
    assert loopback_port(url) is None


@pytest.mark.parametrize("method", ["Page.navigate", "Target.createTarget"])
@pytest.mark.parametrize("url", [u for u, _ in LOOPBACK_FORMS])
@pytest.mark.parametrize("port", sorted(Settings().doors))
def test_no_agent_opens_the_computers_own_ports_on_any_loopback(
    method: str, url: str, port: int
) -> None:
    verdict = check(method, {"url": url.replace(":9222", f":{port}")}, "/downloads")
    assert verdict is not None and verdict.rule == "local-url", (url, port)
    # (a ws: URL is no page to open at all, whatever its port)
    assert "computer's own ports" in verdict.message or url.startswith("ws:")


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000/", "http://127.0.0.2:8000/", "http://localhost:3000/", "https://a.b/"],
)
def test_other_ports_on_the_loopback_open(url: str) -> None:
    assert check("Page.navigate", {"url": url}, "/downloads") is None


def test_the_doors_are_the_relays_own_settings_and_the_defaults() -> None:
    assert check("Page.navigate", {"url": "http://127.0.0.2:9333/"}, "/d") is None
    guard.close_doors(frozenset({9333}))
    assert check("Page.navigate", {"url": "http://127.0.0.2:9333/"}, "/d") is not None
    assert check("Page.navigate", {"url": "http://127.0.0.2:9222/"}, "/d") is not None


def test_the_policies_block_each_door_on_each_name_of_the_loopback() -> None:
    """The policies' list names each door as written in full (its filters
    take no address range); the rest of the loopback is the resolver rules'."""
    policy = json.loads((ROOT / "images/browser/policies/agentenv.json").read_text())
    blocked = set(policy["URLBlocklist"])
    for port in Settings().doors:
        for name in ("127.0.0.1", "localhost", "[::1]"):
            assert f"{name}:{port}" in blocked
    assert {"0.0.0.0", "[::]", "[::ffff:7f00:1]", "[::ffff:0:0]"} <= blocked


def test_the_resolver_rules_cover_each_door() -> None:
    """launch/chromium.sh's defaults are the settings' (Settings.doors)."""
    script = (ROOT / "images/browser/launch/chromium.sh").read_text()
    defaults = Settings()
    for name, port in (
        ("AGENTENV_RELAY_PORT", defaults.relay_port),
        ("AGENTENV_APP_PORT", defaults.app_port),
        ("AGENTENV_RECORDER_PORT", defaults.recorder_port),
        ("AGENTENV_CHROMIUM_PORT", defaults.chromium_port),
    ):
        assert f"${{{name}:-{port}}}" in script, name


def test_the_machines_own_address_is_a_door_too() -> None:
    """A reviewer's page loaded ``http://<the container's address>:9222``:
    the doors listen on every address."""
    own = frozenset({"172.17.0.3", "[fd00::3]"})
    assert loopback_port("http://172.17.0.3:9222/json/version", own) == 9222
    assert loopback_port("http://2886795267:8080/card", own) == 8080  # the same, as a number
    assert loopback_port("http://[fd00:0::3]:8080/", own) == 8080
    assert loopback_port("http://172.17.0.4:9222/", own) is None
    assert canonical_address("fd00:0:0::3") == "[fd00::3]"
    assert canonical_address("172.17.0.3") == "172.17.0.3"
    assert canonical_address("no") is None
