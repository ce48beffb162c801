"""One Playwright MCP serving one MCP session of ``/mcp``
(:mod:`agentenv.app.mcp`): started on first use over stdio in a private
folder, with a token the relay granted for its caller in its environment
(never on its command line), its tools listed less :data:`REMOVED`, and
stopped with its token revoked and its folder removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import mcp_types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

from agentenv.app.caller import Caller
from agentenv.protocol.control import Done, Revoke, Token, TokenGrant
from agentenv.relay_link import BrowserError, BrowserLink
from agentenv.settings import Settings

__all__ = ["REMOVED", "PlaywrightSession"]

log = logging.getLogger("agentenv.app.mcp")

#: Tools that would break the computer: not listed, refused if called.
#: browser_run_code_unsafe runs code in Playwright MCP's own (node) process,
#: outside the browser: it could read the computer's files, off the record.
REMOVED = frozenset({"browser_install", "browser_close", "browser_run_code_unsafe"})


@dataclass
class PlaywrightSession:
    """One Playwright MCP, serving one MCP session (one caller)."""

    settings: Settings
    link: BrowserLink
    caller: Caller
    #: The caller's scope's downloads folder: Playwright MCP's workspace.
    downloads: Path | None = None
    #: The scope its calls act in, fixed when it was made (None: the home
    #: scope, or a computer of one scope).
    scope: str | None = None
    #: The scope opened on demand whose agent made it (None: a fixed user's
    #: or the control token's): its calls are refused once that one closes.
    opened: str | None = None
    tag: str = field(default_factory=lambda: f"mcp-{uuid.uuid4().hex[:12]}")
    token: str | None = None
    generation: int = -1
    folder: Path | None = None
    client: Client | None = None
    used: float = field(default_factory=time.monotonic)
    _task: asyncio.Task[None] | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _error: BaseException | None = None
    _tools: list[types.Tool] | None = None

    def _server(self, token: str) -> StdioServerParameters:
        """How Playwright MCP is started. The granted token goes in its
        environment (``PLAYWRIGHT_MCP_CDP_HEADERS``, one header), never on its
        command line: ``/proc/<pid>/cmdline`` is readable by every user of the
        computer, Chromium's included, while ``/proc/<pid>/environ`` is its
        own user's. The token names its connection tag, so no other header
        is needed.

        Playwright MCP reads and writes files in two folders only: its output
        folder (this session's private one) and its workspace, its working
        folder. The workspace is the caller's scope's downloads folder, so
        ``browser_file_upload`` can hand a page a file the agent downloaded
        (Chromium reads it). What it writes, a file the agent names (a
        screenshot's ``filename``) too, goes to the private folder:
        :meth:`McpProxy._call_tool` roots every such name there, since the
        downloads folder is Chromium's user's to write in."""
        args = [
            "-m",
            "playwright",
            "mcp",
            "--cdp-endpoint",
            self.settings.relay_http,
            "--caps",
            "vision",
            "--output-dir",
            str(self.folder),
        ]
        env = {
            **get_default_environment(),
            "PLAYWRIGHT_MCP_CDP_HEADERS": f"Authorization: Bearer {token}",
        }
        workspace = self.workspace()
        return StdioServerParameters(command=sys.executable, args=args, cwd=workspace, env=env)

    def workspace(self) -> Path:
        """Playwright MCP's working folder: the scope's downloads folder, or
        the private one where there is none (a folder not made)."""
        if self.downloads is not None and self.downloads.is_dir():
            return self.downloads
        return self.prepare()

    async def _run(self, token: str) -> None:
        # anyio contexts must be entered and left in one task: this one.
        try:
            async with Client(self._server(token), read_timeout_seconds=120) as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            if not isinstance(exc, asyncio.CancelledError):
                log.warning("Playwright MCP %s ended: %r", self.tag, exc)
        finally:
            self.client = None

    async def start(self) -> Client:
        if self._task is not None and self.generation != await self.link.current():
            # The relay restarted: the granted token died with the app's link.
            await self.stop()
        if self._task is not None and self._task.done():  # it died: start a new one
            self._task, self._ready, self._stop = None, asyncio.Event(), asyncio.Event()
            self._tools, self._error = None, None
        if self._task is None:
            granted = await self.link.control(TokenGrant(who=self.caller.who, tag=self.tag), Token)
            self.token, self.generation = granted.token, self.link.generation
            self.prepare()
            self._task = asyncio.create_task(
                self._run(self.token), name=f"playwright-mcp-{self.tag}"
            )
        try:
            await asyncio.wait_for(self._ready.wait(), 120)
        except TimeoutError:
            raise BrowserError(
                "Playwright MCP did not start within 120 s; retry the call"
            ) from None
        if self.client is None:
            raise BrowserError(
                f"Playwright MCP could not start ({type(self._error).__name__}); retry the call, "
                "or end the MCP session"
            )
        self.used = time.monotonic()
        return self.client

    def prepare(self) -> Path:
        """The session's private folder (its working folder and output folder)."""
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="agentenv-mcp-"))
        return self.folder

    async def tools(self) -> list[types.Tool]:
        if self._tools is None:
            client = await self.start()
            listed = await client.list_tools()
            self._tools = [t for t in listed.tools if t.name not in REMOVED]
        return self._tools

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 15)
        if self.token is not None and self.generation == self.link.generation:
            with contextlib.suppress(BrowserError):
                await self.link.control(Revoke(token=self.token), Done)
        self._task, self.token = None, None
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self._tools, self._error = None, None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
