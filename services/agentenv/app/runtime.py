"""Whether Playwright MCP's runtime starts here: the node bundled in the
playwright wheel (the image once lacked a library it needs, and /mcp was
dead while /readyz said ready). Checked once at boot, and by the image's
build. Light on purpose: it imports no MCP code."""

from __future__ import annotations

import asyncio

__all__ = ["runtime_problem"]


async def runtime_problem() -> str | None:
    """Why Playwright MCP's runtime (the node bundled in the playwright wheel)
    cannot start here, or None when it can."""
    from playwright._impl._driver import compute_driver_executable

    node, _cli = compute_driver_executable()
    try:
        process = await asyncio.create_subprocess_exec(
            node,
            "--version",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 30)
    except (OSError, TimeoutError) as exc:
        return f"{node} does not run ({exc})"
    if process.returncode != 0 or not out.startswith(b"v"):
        first = (err or out).decode(errors="replace").strip().splitlines()[:1]
        return f"{node} --version failed: {first[0] if first else process.returncode}"
    return None
