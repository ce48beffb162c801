from __future__ import annotations

from agentenv.relay.discovery import ClientAddress, rewrite

UP = "127.0.0.1:9223"
PAGE = {
    "id": "ABC",
    "type": "page",
    "url": "http://example.com/",
    "webSocketDebuggerUrl": f"ws://{UP}/devtools/page/ABC",
    "devtoolsFrontendUrl": f"https://frontend.example/inspector.html?ws={UP}/devtools/page/ABC",
}


def test_list_rewritten_to_the_client_address() -> None:
    out = rewrite([PAGE], UP, ClientAddress("localhost:9222"))
    assert out[0]["webSocketDebuggerUrl"] == "ws://localhost:9222/devtools/page/ABC"
    assert out[0]["devtoolsFrontendUrl"].endswith("?ws=localhost:9222/devtools/page/ABC")
    assert out[0]["url"] == "http://example.com/"
    assert PAGE["webSocketDebuggerUrl"].startswith(f"ws://{UP}")  # input untouched


def test_version_rewritten_secure_and_with_token() -> None:
    version = {"Browser": "Chrome/1", "webSocketDebuggerUrl": f"ws://{UP}/devtools/browser/X"}
    out = rewrite(version, UP, ClientAddress("computer.example", secure=True, token="t&1"))
    assert out["webSocketDebuggerUrl"] == "wss://computer.example/devtools/browser/X?token=t%261"
    assert out["Browser"] == "Chrome/1"


def test_other_shapes_pass_through() -> None:
    assert rewrite({"domains": []}, UP, ClientAddress("h:1")) == {"domains": []}
    assert rewrite("text", UP, ClientAddress("h:1")) == "text"
    assert rewrite([1, PAGE][:1], UP, ClientAddress("h:1")) == [1]
