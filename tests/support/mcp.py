"""MCP client helpers for tests: results as text, element refs, /mcp clients."""

from __future__ import annotations

from typing import Any

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

__all__ = ["client", "initialize", "raw_headers", "ref", "ref_argument", "text"]


def text(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def ref(snapshot: str, label: str) -> str:
    """The element ref (``[ref=e12]``) on the snapshot line naming ``label``."""
    for line in snapshot.splitlines():
        if label in line and "[ref=" in line:
            return line.split("[ref=", 1)[1].split("]", 1)[0]
    raise AssertionError(f"no ref for {label!r} in the snapshot:\n{snapshot}")


def ref_argument(tool: Any) -> str:
    """The element-ref argument's name: ``target`` (1.65) or ``ref`` (older)."""
    props = tool.input_schema.get("properties", {})
    return "target" if "target" in props else "ref"


def client(app_http: str, role: str, timeout_s: float = 120) -> Client:
    """An mcp SDK client of the app server's /mcp, calling as ``role``."""
    import httpx2

    http = httpx2.AsyncClient(headers={"AgentEnv-Role": role}, timeout=timeout_s)
    return Client(
        streamable_http_client(app_http + "/mcp", http_client=http), read_timeout_seconds=timeout_s
    )


def raw_headers(token: str) -> dict[str, str]:
    """The headers of a plain JSON-RPC client of /mcp (no SDK)."""
    return {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
        "Authorization": f"Bearer {token}",
    }


def initialize(name: str) -> dict[str, Any]:
    """A plain client's ``initialize`` request."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": name, "version": "1"},
        },
    }
