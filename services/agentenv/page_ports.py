"""Warnings for the computer's inner ports that pages could reach (the relay
says them when it starts; :data:`agentenv.settings.PAGE_REFUSED_PORTS`)."""

from __future__ import annotations

from agentenv.settings import PAGE_REFUSED_PORTS, Settings

__all__ = ["open_to_pages"]


def open_to_pages(settings: Settings) -> list[str]:
    """Warnings for inner ports a page's script could send requests to."""
    inner = {"AGENTENV_CHROMIUM_PORT": settings.chromium_port}
    inner["AGENTENV_RECORDER_PORT"] = settings.recorder_port
    warnings = [
        f"{name}={port} is a port Chromium lets pages reach: a page's script "
        f"(a fresh tab's about:blank) can send requests to it. Use one Chromium "
        f"refuses, such as {Settings.chromium_port} or {Settings.recorder_port}"
        for name, port in inner.items()
        if port not in PAGE_REFUSED_PORTS
    ]
    if "--explicitly-allowed-ports" in settings.chromium_flags:
        warnings.append(
            "AGENTENV_CHROMIUM_FLAGS has --explicitly-allowed-ports: pages may reach the "
            "ports it names, the computer's inner ports among them if listed"
        )
    if "--host-resolver-rules" in settings.chromium_flags:
        warnings.append(
            "AGENTENV_CHROMIUM_FLAGS has --host-resolver-rules: it replaces the rules that keep "
            "pages off the computer's own ports on every loopback address (127.0.0.2, "
            "[::ffff:127.0.0.1], ...); the policies still block navigations to 127.0.0.1, "
            "localhost and [::1]"
        )
    return warnings
