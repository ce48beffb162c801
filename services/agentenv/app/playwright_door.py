"""``/playwright``: Playwright's own remote protocol, one server per
connection (docs/spec.md section 3, "Playwright's own protocol").

``pw.chromium.connect("ws://HOST:8080/playwright", headers={"Authorization":
"Bearer <token>"})`` gets what a Playwright server gives a remote client and
``connect_over_cdp`` cannot: ``download.save_as`` streamed back,
``record_video_dir``, tracing with screenshots, ``set_input_files`` of the
client's own files.

For each connection the app server starts Playwright's server (the node and
playwright-core bundled in the playwright wheel, :file:`playwright_server.cjs`)
with a "browser" that is :mod:`agentenv.app.playwright_bridge`: every CDP
command the server sends goes through the relay with the caller's token, on
the record, in the caller's scope, under every wall. Between the client and
that server stands :class:`~agentenv.app.playwright_rules.PlaywrightRules`:
a call of Playwright's protocol reaches the server only when classified
there (the default is refused).

Files: the server's folder (artifacts, uploads, traces) is a fresh one in the
caller's scope's downloads folder, ``.playwright-<hex>``, where Chromium can
read an upload the relay lets ``DOM.setFileInputFiles`` name. Downloads go to
the scope's folder itself, as for any client. The folder is removed when the
connection ends, and with the scope's downloads when the scope closes.

Budgets: ``AGENTENV_PLAYWRIGHT_SERVERS`` servers on the computer (503 past
it), a caller's share of them (429), and the relay's own for the bridge's
connection (its CDP connection counts as one of the caller's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
from aiohttp import web

from agentenv.access import AccessDenied, bearer_token
from agentenv.app.app_errors import OpError
from agentenv.app.app_requests import acting_caller, caller, scopes_key, settings_key
from agentenv.app.playwright_rules import PlaywrightRules, RefuseCall, SendOn
from agentenv.downloads import SERVER_FOLDER, folder_bytes, scope_share
from agentenv.settings import Settings

__all__ = ["PlaywrightServers", "playwright_door", "playwright_share", "servers_key"]

log = logging.getLogger("agentenv.app.playwright")

#: How long Playwright's server may take to start and launch the bridge.
START_S = 60.0
#: How long connecting to the started server may take.
CONNECT_S = 10.0
#: How often the scope's downloads folder is measured against its share.
WATCH_S = 2.0
#: How long a server is given to end before it is killed.
STOP_S = 5.0
#: A client's message: a file of up to 50 MB goes in one ``setInputFiles``,
#: base64, in JSON.
CLIENT_MESSAGE_BYTES = 96 * 1024 * 1024
_SERVER_SCRIPT = Path(__file__).with_name("playwright_server.cjs")


@dataclass
class PlaywrightServers:
    """The ``/playwright`` servers running, by caller."""

    running: Counter[str] = field(default_factory=Counter)

    def no_room(self, settings: Settings, who: str) -> OpError | None:
        share = playwright_share(settings)
        if self.running[who] >= share:
            return OpError(
                429,
                f"{who[:64]} has {self.running[who]} /playwright connections, as many as one "
                f"caller may have ({share}: its share of AGENTENV_PLAYWRIGHT_SERVERS="
                f"{settings.playwright_servers}): close one (browser.close()) and connect again",
            )
        total = sum(self.running.values())
        if total >= settings.playwright_servers:
            return OpError(
                503,
                f"this computer runs {total} /playwright servers, as many as it is set to "
                f"(AGENTENV_PLAYWRIGHT_SERVERS={settings.playwright_servers}, about 120 MiB "
                "each): retry when one ends, or use connect_over_cdp on port 9222, which "
                "needs none",
            )
        return None


def playwright_share(settings: Settings) -> int:
    """``/playwright`` connections one caller may have at once: with users
    configured (or scopes opened on demand) their share of
    ``AGENTENV_PLAYWRIGHT_SERVERS``, at least one, as ``mcp_share`` reckons."""
    callers = len(settings.users) + settings.max_scopes
    if callers:
        return max(1, settings.playwright_servers // callers)
    return settings.playwright_servers


servers_key = web.AppKey("playwright_servers", PlaywrightServers)


def _driver() -> tuple[str, Path]:
    """The node bundled in the playwright wheel, and its playwright-core."""
    from playwright._impl._driver import compute_driver_executable

    node, cli = compute_driver_executable()
    return str(node), Path(cli).parent


def _version(package: Path) -> str:
    try:
        return str(json.loads((package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "unknown"


def _relay_url(settings: Settings, user: str | None) -> str:
    url = settings.relay_http.replace("http://", "ws://", 1) + "/devtools/browser"
    return f"{url}?user={quote(user, safe='')}" if user else url


def _beside(program: str) -> str:
    """One of our programs, beside this Python's (the venv's bin folder)."""
    return str(Path(sys.executable).with_name(program))


def _ffmpeg(package: Path, browsers: Path) -> None:
    """Where Playwright's server looks for its ffmpeg (``browsers``, its
    ``PLAYWRIGHT_BROWSERS_PATH``): ours, made of PyAV
    (:mod:`agentenv.app.playwright_ffmpeg`)."""
    try:
        listed = json.loads((package / "browsers.json").read_text())["browsers"]
        revision = next(b["revision"] for b in listed if b["name"] == "ffmpeg")
    except (OSError, ValueError, KeyError, StopIteration):
        return  # record_video_dir then fails with Playwright's own words
    folder = browsers / f"ffmpeg-{revision}"
    folder.mkdir(parents=True, mode=0o750)
    (folder / "ffmpeg-linux").symlink_to(_beside("agentenv-playwright-ffmpeg"))


@dataclass
class _Server:
    process: asyncio.subprocess.Process
    endpoint: str
    #: Its temporary folder, in the scope's downloads folder (uploads, videos).
    folder: Path
    #: Its own: home, working folder, traces, ffmpeg (the computer's user's alone).
    private: Path

    async def stop(self) -> None:
        process = self.process
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), STOP_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), STOP_S)
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.private, ignore_errors=True)


async def _start(
    settings: Settings, downloads: Path, token: str | None, user: str | None
) -> _Server:
    """Playwright's server for one connection; raises :class:`OpError` if it
    cannot start.

    Two folders: its temporary folder (``TMPDIR``: its artifacts, which hold
    uploads and videos) is a fresh one in the scope's downloads folder,
    where Chromium reads an upload and the relay lets
    ``DOM.setFileInputFiles`` name it; everything else it keeps (its home,
    working folder, traces, and the ffmpeg it runs) is in a folder of the
    computer's user's alone, which Chromium's user can neither read nor
    swap for a link."""
    node, package = _driver()
    folder = downloads / f"{SERVER_FOLDER}{secrets.token_hex(8)}"
    private = Path(tempfile.mkdtemp(prefix="agentenv-playwright-"))
    try:
        folder.mkdir(mode=0o750)
        (private / "traces").mkdir(mode=0o700)
        _ffmpeg(package, private / "browsers")
    except OSError as exc:
        shutil.rmtree(private, ignore_errors=True)
        raise OpError(
            503,
            f"the scope's downloads folder takes no Playwright server now ({exc.strerror}): "
            "retry, or use connect_over_cdp",
        ) from None
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(private),
        "TMPDIR": str(folder),
        "PLAYWRIGHT_BROWSERS_PATH": str(private / "browsers"),
        "AGENTENV_PLAYWRIGHT_PACKAGE": str(package),
        "AGENTENV_PLAYWRIGHT_BRIDGE": _beside("agentenv-playwright-bridge"),
        "AGENTENV_PLAYWRIGHT_DOWNLOADS": str(downloads),
        "AGENTENV_PLAYWRIGHT_TRACES": str(private / "traces"),
        "AGENTENV_PLAYWRIGHT_RELAY": _relay_url(settings, user),
    }
    if token:
        env["AGENTENV_PLAYWRIGHT_TOKEN"] = token
    try:
        process = await asyncio.create_subprocess_exec(
            node,
            str(_SERVER_SCRIPT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=str(private),
            start_new_session=True,
        )
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
        raise OpError(503, f"Playwright's server could not start ({exc.strerror})") from None
    server = _Server(process, "", folder, private)
    said: dict[str, Any] = {}
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), START_S)
        said = orjson.loads(line) if line.strip() else {}
    except (TimeoutError, orjson.JSONDecodeError):
        said = {}
    if not isinstance(said, dict) or not isinstance(said.get("ws"), str):
        await server.stop()
        why = said.get("error") if isinstance(said, dict) else None
        raise OpError(
            502,
            "Playwright's server did not start"
            + (f": {str(why)[:600]}" if why else f" within {START_S:.0f} s")
            + ". The relay may have refused its connection (a share of the caller's used "
            "up, a closed scope): see the log, then retry",
        )
    server.endpoint = said["ws"]
    return server


async def _pump_client(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    rules: PlaywrightRules,
) -> None:
    async for message in client:
        if message.type != aiohttp.WSMsgType.TEXT:
            if message.type == aiohttp.WSMsgType.BINARY:
                await client.close(code=1003, message=b"Playwright's protocol is text")
            return
        try:
            parsed = orjson.loads(message.data)
        except orjson.JSONDecodeError:
            await client.close(code=1007, message=b"a message is one JSON object")
            return
        if not isinstance(parsed, dict):
            await client.close(code=1007, message=b"a message is one JSON object")
            return
        result = rules.check(parsed)
        if isinstance(result, SendOn):
            text = message.data if result.message is parsed else orjson.dumps(result.message)
            await upstream.send_str(text if isinstance(text, str) else text.decode())
        elif isinstance(result, RefuseCall):
            log.info("/playwright refused %s", result.method)
            await client.send_str(orjson.dumps(result.answer()).decode())


def _lifecycle(data: str) -> bool:
    """Whether a message of the server's may make, adopt or dispose of an
    object: an event, whose method (``__create__``, ``__adopt__``,
    ``__dispose__``) follows its guid. Answers and a stream's chunks are
    never read, only carried. One the server wrote otherwise is not learnt,
    and its object is then refused, never let through."""
    return data.startswith('{"guid":') and '"method":"__' in data[:512]


async def _pump_server(
    upstream: aiohttp.ClientWebSocketResponse,
    client: web.WebSocketResponse,
    rules: PlaywrightRules,
) -> None:
    async for message in upstream:
        if message.type != aiohttp.WSMsgType.TEXT:
            return
        if _lifecycle(message.data):
            with contextlib.suppress(orjson.JSONDecodeError):
                parsed = orjson.loads(message.data)
                if isinstance(parsed, dict):
                    rules.learn(parsed)
        await client.send_str(message.data)


async def _watch_share(client: web.WebSocketResponse, downloads: Path, share: int) -> None:
    """End the connection once the scope's downloads folder holds more than
    its share, its servers' uploads, videos and traces with its downloads
    (measured every :data:`WATCH_S`): what one scope writes never fills the
    folder every scope shares."""
    if not share:
        await asyncio.Event().wait()  # nothing to hold it to: ends with the others
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(WATCH_S)
        held = await loop.run_in_executor(None, folder_bytes, downloads)
        if held > share:
            log.warning("/playwright ended: the scope's downloads hold %d of %d bytes", held, share)
            await client.close(
                code=1008, message=b"the scope's downloads share is used up: close files, retry"
            )
            return


async def playwright_door(request: web.Request) -> web.StreamResponse:
    """``GET /playwright``, a WebSocket: Playwright's protocol, as the caller."""
    settings = request.app[settings_key]
    identity = caller(request)
    scopes = request.app[scopes_key]
    if scopes.closed(identity):
        raise AccessDenied("this token's scope is closed: open a scope again (scopes/open)")
    who = acting_caller(request, identity)
    client = web.WebSocketResponse(max_msg_size=CLIENT_MESSAGE_BYTES, autoping=True)
    if not client.can_prepare(request).ok:
        raise OpError(
            400,
            "/playwright is a WebSocket for Playwright's own protocol: connect with "
            "pw.chromium.connect('ws://HOST:8080/playwright', headers={'Authorization': "
            "'Bearer <token>'})",
        )
    servers = request.app[servers_key]
    full = servers.no_room(settings, who.who)
    if full is not None:
        raise full
    scope = scopes.name_for(identity)
    downloads = settings.downloads_for(scope)
    # The caller's own token goes on to the relay: its CDP is the caller's.
    token = bearer_token(request.headers.get("Authorization")) or request.query.get("token")
    user = None if settings.tokens_required else request.query.get("user")
    servers.running[who.who] += 1
    server: _Server | None = None
    try:
        server = await _start(settings, downloads, token or None, user)
        headers = {"User-Agent": request.headers.get("User-Agent", "")}
        session = aiohttp.ClientSession()
        try:
            try:
                upstream = await asyncio.wait_for(
                    session.ws_connect(server.endpoint, headers=headers, max_msg_size=0),
                    CONNECT_S,
                )
            except aiohttp.WSServerHandshakeError as exc:
                _, package = _driver()
                raise OpError(
                    428 if exc.status == 428 else 502,
                    f"Playwright's server refused the client ({exc.status}): this computer "
                    f"serves Playwright {_version(package)}; connect with a client of the "
                    "same minor version",
                ) from None
            except (aiohttp.ClientError, TimeoutError):
                raise OpError(
                    502, "Playwright's server did not take the connection; retry"
                ) from None
            await client.prepare(request)
            share = scope_share(settings)
            rules = PlaywrightRules()
            if share:
                rules.upload_bytes = min(rules.upload_bytes, share)
            async with upstream:
                tasks = [
                    asyncio.create_task(_pump_client(client, upstream, rules)),
                    asyncio.create_task(_pump_server(upstream, client, rules)),
                    asyncio.create_task(_watch_share(client, downloads, share)),
                ]
                try:
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for task in tasks:
                        task.cancel()
                    for task in tasks:
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await task
            await client.close()
        finally:
            await session.close()
    finally:
        servers.running[who.who] -= 1
        if servers.running[who.who] <= 0:
            del servers.running[who.who]
        if server is not None:
            await server.stop()
    return client
