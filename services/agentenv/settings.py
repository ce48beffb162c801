"""Settings shared by every program of the browser computer.

Read once from the environment (``AGENTENV_*``) by :func:`load` and passed
down; no program reads the environment elsewhere, so the image and the native
stack (``make dev``) share one configuration.

Users and tokens: ``AGENTENV_USERS`` holds ``name:token`` pairs separated by
commas or whitespace; ``AGENTENV_USERS_FILE`` names a file of such pairs, one a
line (``#`` comments allowed). A third field names the user's scope
(``name:token:scope``, docs/spec.md section 7): users of one scope share one
browser; each user is a scope of their own by default. With a third field,
the token is what lies between the first and the last colon. A last field
``role=human`` makes the user a person (``name:token:scope:role=human``): a
person's token drives the live view of its scope and nothing else
(:mod:`agentenv.access`; docs/spec.md section 6, "A person in the live view"). No scope holds an
``=``, so no entry that was good before reads differently now.
``AGENTENV_CONTROL_TOKEN`` is the harness's token: it is accepted
everywhere, as the user ``agentenv``. When none is configured,
``launch/supervisord.sh`` makes one for the boot and sets
``AGENTENV_CONTROL_OPEN=1``: the programs still report with it, and control
ops are open to callers.

Ports only the computer's own programs use (Chromium's DevTools port, the
recorder's) are by default ports Chromium itself refuses to fetch
(:data:`PAGE_REFUSED_PORTS`, its list of unsafe ports: ``ERR_UNSAFE_PORT``).
A page's script, whatever its origin or address space (a fresh tab's
``about:blank`` too, which Chromium's local network checks let through),
cannot send a request to them; the relay, outside Chromium, can. Any other
port set there is reachable by pages, and the relay says so when it starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv.log.auth import PER_SOURCE, WINDOW_S
from agentenv.user_entries import (
    AGENTENV_USER,
    SettingsError,
    parse_humans,
    parse_scopes,
    parse_users,
    scope_folder,
)

__all__ = [
    "AGENTENV_USER",
    "PAGE_REFUSED_PORTS",
    "WARM_SCOPES_MAX",
    "WARM_SCOPE_MB",
    "Settings",
    "SettingsError",
    "load",
    "parse_humans",
    "parse_scopes",
    "parse_users",
    "scope_folder",
]


#: Chromium's restricted ports above 1023 (net/base/port_util.cc): no request
#: from a page (fetch, XHR, WebSocket, a navigation, a subresource, a form)
#: may go to them, on any host. Of these, only 554, 989, 990, 6566 and 10080
#: can be allowed again by a policy (ExplicitlyAllowedNetworkPorts), which the
#: image does not set; the IRC ports below are not among them.
PAGE_REFUSED_PORTS = frozenset(
    {1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566}
    | {6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080}
)


#: What one warm scope holds of the container's memory: a scope's own cost
#: as measured (28-30 MiB an added agent, bench density, 2026-12-04; a blank
#: tab's context alone: bench ready).
WARM_SCOPE_MB = 30
#: The most warm scopes a computer keeps: 4 x 30 MiB = 120 MiB of the
#: 128 MiB the memory budget sets aside for them (harness/hardening.py).
WARM_SCOPES_MAX = 4


@dataclass(frozen=True)
class Settings:
    name: str = "browser"
    log_dir: Path = Path("/var/log/agentenv")
    profile_dir: Path = Path("/home/browser/profile")
    downloads_dir: Path = Path("/var/lib/agentenv/downloads")
    #: The programs' run folder (a tmpfs in the image).
    run_dir: Path = Path("/run/agentenv")
    #: The folder of the computer's signing key (:attr:`key_file`), the
    #: service user's alone: ``AGENTENV_KEY_DIR``, else ``<run_dir>/attest``.
    key_dir: Path = Path("/run/agentenv/attest")
    #: supervisord's configuration and launch scripts; the digest of the
    #: computer's own files is written beside it at build (:attr:`image_digest_file`).
    image_dir: Path = Path("/opt/agentenv/image")
    chromium_host: str = "127.0.0.1"
    chromium_port: int = 6666
    relay_host: str = "0.0.0.0"
    relay_port: int = 9222
    app_host: str = "0.0.0.0"
    app_port: int = 8080
    #: The relay's port as the computer's callers reach it, when a port
    #: mapping fixed at start publishes it on another (0: ``relay_port``):
    #: ``scopes/open``'s ``cdp_url`` names it.
    published_relay_port: int = 0
    recorder_port: int = 6667
    #: Extra Chromium flags (AGENTENV_CHROMIUM_FLAGS, read by launch/chromium.sh).
    chromium_flags: str = ""
    #: user name -> token; empty means no auth (users come from ``?user=``).
    users: Mapping[str, str] = field(default_factory=dict)
    #: user name -> the scope they act in (their own name unless grouped).
    scopes: Mapping[str, str] = field(default_factory=dict)
    #: The users who are people (``role=human``): they drive the live view only.
    humans: frozenset[str] = frozenset()
    #: Scopes the control token may open on demand (``scopes/open``) at once,
    #: beside the fixed ones of ``users`` (0: none may be opened). Any above 0
    #: makes the computer one of scopes from its start (:attr:`scoped`).
    max_scopes: int = 0
    #: Warm scopes: browser contexts made ahead, each with its blank tab and
    #: its renderer started, that ``scopes/open`` and ``scopes/reset`` hand
    #: over at once (relay/warm.py); at most ``max_scopes`` are kept, none
    #: where no scope may be opened. Each holds about :data:`WARM_SCOPE_MB`
    #: of the memory budget, so at most :data:`WARM_SCOPES_MAX`.
    warm_scopes: int = 2
    control_token: str | None = None
    #: A token that reads ``/metrics`` and nothing else (AGENTENV_METRICS_TOKEN):
    #: what a fleet's Prometheus holds instead of the control token.
    metrics_token: str | None = None
    #: The control token was made for this boot, not configured: control ops
    #: are open to callers (a developer's machine). Set by launch/supervisord.sh.
    control_open: bool = False
    #: Host names accepted in ``Host`` besides IP addresses and ``localhost``.
    allowed_hosts: frozenset[str] = frozenset()
    #: Browser origins accepted in ``Origin``; ``*`` accepts any.
    allowed_origins: frozenset[str] = frozenset()
    #: Folders a recording's file: grant may write in (none: S3 grants only).
    upload_roots: tuple[Path, ...] = ()
    #: A recording's budgets on this computer (the card shows them; a start
    #: may ask for less, not more).
    #: Agents' CDP connections the relay takes at once (0: no limit).
    max_connections: int = 0
    #: One user's agent connections at once (0: no limit): each may hold a
    #: message of up to ``agent_message_bytes`` in the relay's memory.
    max_connections_per_user: int = 16
    #: Past either limit, how many newcomers wait for a place (0: none
    #: wait), and how long each waits before a 429 with Retry-After.
    queue_length: int = 64
    queue_wait_s: float = 60.0
    #: Upper bound of one message from an agent (the control token's links
    #: keep ``max_message_bytes``): past it the connection is closed (1009).
    agent_message_bytes: int = 32 * 1024 * 1024
    #: Bytes of big agent messages being handled at once, per user and for
    #: the relay as a whole (0: no bound): past either, refused (rule memory).
    user_inflight_bytes: int = 64 * 1024 * 1024
    relay_inflight_bytes: int = 256 * 1024 * 1024
    recording_max_frames: int = 10_000
    recording_max_duration_s: int = 4 * 3600
    #: A recording that keeps its downloads uploads at most this many bytes of
    #: them (each file read whole by the recorder); the rest are listed only.
    recording_download_bytes: int = 64 * 1024 * 1024
    #: A recording's video: the most frames a second a start may ask, and the
    #: bytes a minute past which it stops (the recording goes on).
    recording_video_fps_max: int = 10
    recording_video_bytes_per_minute: int = 20 * 1024 * 1024
    #: Upper bound of one WebSocket message, each way.
    max_message_bytes: int = 256 * 1024 * 1024
    #: The action log's size past which agents' commands are refused (what
    #: is not written is not done): a flooding agent cannot fill the disk.
    log_max_bytes: int = 1024**3
    #: Each user's share of the log, in all and per minute (0: no budget):
    #: past it their commands and actions are refused (rule log-budget).
    log_user_max_bytes: int = 256 * 1024**2
    log_user_bytes_per_minute: int = 32 * 1024**2
    #: An origin's storage (IndexedDB, Cache Storage, OPFS) in any scope
    #: (0: Chromium's own quota): the watcher overrides each origin's quota
    #: as its pages and frames open (relay/watcher.py). A scope other than
    #: home keeps its storage in the browser process's memory, and Chromium
    #: sizes its quota from the host's memory, not the container's.
    origin_storage_bytes: int = 128 * 1024**2
    #: A scope's storage, summed over its origins and contexts (0: no bound
    #: but the origins'): relay/storage_shares.py shares it out.
    scope_storage_bytes: int = 256 * 1024**2
    #: A scope's downloads, on a computer of two scopes or more (0: the
    #: downloads folder's size over the number of scopes): past it the
    #: download that went past is cancelled (rule download-share).
    scope_download_bytes: int = 0
    #: The auth record's window (seconds): failed authentications written one
    #: by one in it, the rest counted in lines written once it ends
    #: (agentenv/log/auth.py).
    auth_window_s: float = WINDOW_S
    #: Failed authentications written one by one from one address in a
    #: window. Behind a proxy every client has the proxy's address: raise it
    #: there so one client's failures do not hide another's.
    auth_per_source: int = PER_SOURCE
    #: How long one agent may hold the browser's one trace (seconds), on a
    #: computer of two scopes or more: the relay ends it then.
    trace_max_s: float = 300.0
    #: The most bytes of one trace the relay collects to keep it to its
    #: agent's tab; past it the trace says dataLossOccurred.
    trace_max_bytes: int = 64 * 1024 * 1024
    #: How long discovery and readiness calls to Chromium may take.
    upstream_timeout_s: float = 5.0
    #: An MCP session's Playwright MCP ends after this long idle (seconds).
    mcp_idle_s: float = 1800.0
    #: Playwright MCPs one caller may have at once (each is a Node process of
    #: its own): past it a new session is refused until one ends or idles out.
    #: With users configured, a caller's share is also at most
    #: ``mcp_sessions`` over the number of users (at least one).
    mcp_sessions_per_caller: int = 8
    #: Playwright MCPs on the computer at once, every caller's together: what
    #: the memory budget holds (about 90 MiB each; harness/hardening.py). Past
    #: it a new session is refused (503) until one ends or idles out.
    mcp_sessions: int = 4
    #: ``/playwright`` servers at once (about 120 MiB each, harness/hardening.py):
    #: 503 past it, and 429 past a caller's share (app/playwright_door.py).
    playwright_servers: int = 2
    #: MCP transport sessions (``Mcp-Session-Id``) one caller may have open at
    #: once: past it a new one is refused (429), and other callers' go on.
    mcp_transports_per_caller: int = 16
    #: A transport session that sees no request after the one that opened it
    #: expires after this long (seconds), not after the idle limit.
    mcp_unused_s: float = 30.0
    #: The programs' own logging level (``AGENTENV_LOG_LEVEL``).
    log_level: str = "INFO"

    @property
    def mcp_share(self) -> int:
        """Playwright MCPs one caller may have: ``mcp_sessions_per_caller``,
        and with users configured (or scopes opened on demand) no more than
        their share of ``mcp_sessions``: each fixed user and each scope that
        may be opened counts as one caller."""
        share = self.mcp_sessions_per_caller
        callers = len(self.users) + self.max_scopes
        if callers:
            share = min(share, max(1, self.mcp_sessions // callers))
        return min(share, self.mcp_sessions)

    @property
    def warm_pool(self) -> int:
        """How many warm scopes the relay keeps ready: ``warm_scopes``, no more
        than may be open at once (``max_scopes``; 0 where none may be)."""
        return min(self.warm_scopes, self.max_scopes)

    @property
    def tokens_required(self) -> bool:
        """Whether every caller needs a token: users are configured, or scopes
        may be opened on demand (whose tokens the relay mints)."""
        return bool(self.users) or self.max_scopes > 0

    @property
    def scoped(self) -> bool:
        """Whether scopes are browser contexts of their own: two fixed scopes
        or more, or any scope may be opened on demand (then from the start, so
        no client ever sees a browser that later splits)."""
        return len(set(self.scopes.values())) >= 2 or self.max_scopes > 0

    @property
    def scope_capacity(self) -> int:
        """The most scopes the computer may hold at once: the fixed ones and
        those that may be opened (what a scope's share is counted from)."""
        return len(set(self.scopes.values())) + self.max_scopes

    @property
    def scopes_file(self) -> Path:
        """The scopes opened on demand and their tokens' digests
        (:mod:`agentenv.opened`), beside the key: the service user's alone."""
        return self.key_dir / "scopes.json"

    @property
    def warm_file(self) -> Path:
        """The warm contexts the relay made and handed to no scope yet: a
        relay started again disposes of its predecessor's (relay/warm.py)."""
        return self.key_dir / "warm.json"

    @property
    def chromium_http(self) -> str:
        return f"http://{self.chromium_host}:{self.chromium_port}"

    @property
    def relay_http(self) -> str:
        """The relay as the other programs in the computer reach it."""
        host = "127.0.0.1" if self.relay_host in ("0.0.0.0", "::", "") else self.relay_host
        return f"http://{host}:{self.relay_port}"

    @property
    def doors(self) -> frozenset[int]:
        """The ports the computer's programs listen on: no page reaches them
        on its loopback, in any spelling (the relay's rule ``local-url``,
        Chromium's host resolver rules in launch/chromium.sh)."""
        return frozenset({self.relay_port, self.app_port, self.chromium_port, self.recorder_port})

    @property
    def log_file(self) -> Path:
        return self.log_dir / f"browser-{self.name}.jsonl"

    @property
    def key_file(self) -> Path:
        """The computer's Ed25519 key (:mod:`agentenv.signing`), in a folder
        only the service user enters."""
        return self.key_dir / "key"

    @property
    def journal_dir(self) -> Path:
        """The recordings' journals (:mod:`agentenv.recorder.journal`), beside the key."""
        return self.key_dir / "journal"

    @property
    def image_digest_file(self) -> Path:
        """``sha256:…`` of the computer's own files, written at build or
        install (launch/digest.sh); absent on a developer's stack."""
        return self.image_dir.parent / "image.digest"

    @property
    def auth_enabled(self) -> bool:
        return self.tokens_required or self.control_token is not None

    @property
    def scope_folders(self) -> frozenset[str]:
        """The fixed scopes' downloads folders' names (none on a computer of
        one scope); a scope opened on demand gets its own as it opens."""
        names = set(self.scopes.values())
        return frozenset(scope_folder(n) for n in names) if self.scoped else frozenset()

    def downloads_for(self, scope: str | None) -> Path:
        """The downloads folder of ``scope``: a folder of its own inside the
        downloads folder on a computer of two scopes or more (no agent hands a
        page, or reads, what another scope downloaded); the downloads folder
        itself on a computer of one scope, and for None (the control token,
        which sees every scope)."""
        if scope is None or not self.scoped:
            return self.downloads_dir
        return self.downloads_dir / scope_folder(scope)


def _int(env: Mapping[str, str], key: str, default: int) -> int:
    value = env.get(key)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise SettingsError(f"{key} must be an integer, got {value!r}") from None


def _non_negative(env: Mapping[str, str], key: str, default: int) -> int:
    value = _int(env, key, default)
    if value < 0:
        raise SettingsError(f"{key} must be 0 (no limit) or more, got {value}")
    return value


def _positive(env: Mapping[str, str], key: str, default: int) -> int:
    value = _int(env, key, default)
    if value < 1:
        raise SettingsError(f"{key} must be 1 or more, got {value}")
    return value


def _seconds(env: Mapping[str, str], key: str, default: float) -> float:
    value = env.get(key)
    if value is None or value == "":
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise SettingsError(f"{key} must be a number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise SettingsError(f"{key} must be a number of seconds above 0, got {value!r}")
    return seconds


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _level(env: Mapping[str, str], key: str, default: str) -> str:
    value = (env.get(key) or default).strip().upper()
    if value not in _LEVELS:
        raise SettingsError(f"{key} must be one of {', '.join(_LEVELS)}, got {value[:20]!r}")
    return value


def _set(env: Mapping[str, str], key: str) -> frozenset[str]:
    return frozenset(v.strip().lower() for v in env.get(key, "").split(",") if v.strip())


#: Settings read from ``AGENTENV_<FIELD>`` by a parser that checks the value
#: and names the variable when it is wrong (the default is the field's own).
_PARSED: dict[str, Callable[[Mapping[str, str], str, Any], Any]] = {
    "chromium_port": _int,
    "relay_port": _int,
    "app_port": _int,
    "published_relay_port": _non_negative,
    "recorder_port": _int,
    "max_connections": _int,
    "max_connections_per_user": _non_negative,
    "queue_length": _non_negative,
    "queue_wait_s": _seconds,
    "agent_message_bytes": _positive,
    "user_inflight_bytes": _non_negative,
    "relay_inflight_bytes": _non_negative,
    "recording_max_frames": _positive,
    "recording_max_duration_s": _positive,
    "recording_download_bytes": _non_negative,
    "recording_video_fps_max": _positive,
    "recording_video_bytes_per_minute": _non_negative,
    "log_max_bytes": _positive,
    "origin_storage_bytes": _non_negative,
    "scope_storage_bytes": _non_negative,
    "scope_download_bytes": _non_negative,
    "max_scopes": _non_negative,
    "warm_scopes": _non_negative,
    "log_user_max_bytes": _non_negative,
    "log_user_bytes_per_minute": _non_negative,
    "mcp_idle_s": _seconds,
    "mcp_sessions_per_caller": _positive,
    "mcp_sessions": _positive,
    "mcp_transports_per_caller": _positive,
    "playwright_servers": _positive,
    "mcp_unused_s": _seconds,
    "trace_max_s": _seconds,
    "auth_window_s": _seconds,
    "auth_per_source": _positive,
    "trace_max_bytes": _positive,
    "log_level": _level,
}


def _read(env: Mapping[str, str], defaults: Settings) -> dict[str, Any]:
    return {
        field: parse(env, f"AGENTENV_{field.upper()}", getattr(defaults, field))
        for field, parse in _PARSED.items()
    }


def load(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``env`` (default: the process environment)."""
    env = os.environ if env is None else env
    users: dict[str, str] = {}
    scopes: dict[str, str] = {}
    humans: set[str] = set()
    if env.get("AGENTENV_USERS"):
        users.update(parse_users(env["AGENTENV_USERS"]))
        scopes.update(parse_scopes(env["AGENTENV_USERS"]))
        humans.update(parse_humans(env["AGENTENV_USERS"]))
    users_file = env.get("AGENTENV_USERS_FILE")
    if users_file:
        try:
            text = Path(users_file).read_text()
        except OSError as exc:
            raise SettingsError(
                f"AGENTENV_USERS_FILE: cannot read {users_file}: {exc.strerror}"
            ) from None
        for name, token in parse_users(text, "AGENTENV_USERS_FILE").items():
            if name in users:
                raise SettingsError(f"user {name!r} is in both AGENTENV_USERS and its file")
            users[name] = token
        scopes.update(parse_scopes(text, "AGENTENV_USERS_FILE"))
        humans.update(parse_humans(text, "AGENTENV_USERS_FILE"))
    defaults = Settings()
    settings = Settings(
        name=env.get("AGENTENV_NAME") or defaults.name,
        log_dir=Path(env.get("AGENTENV_LOG_DIR") or defaults.log_dir),
        profile_dir=Path(env.get("AGENTENV_PROFILE_DIR") or defaults.profile_dir),
        downloads_dir=Path(env.get("AGENTENV_DOWNLOADS_DIR") or defaults.downloads_dir),
        run_dir=(run_dir := Path(env.get("AGENTENV_RUN_DIR") or defaults.run_dir)),
        key_dir=Path(env.get("AGENTENV_KEY_DIR") or run_dir / "attest"),
        image_dir=Path(env.get("AGENTENV_IMAGE_DIR") or defaults.image_dir),
        chromium_host=env.get("AGENTENV_CHROMIUM_HOST") or defaults.chromium_host,
        relay_host=env.get("AGENTENV_RELAY_HOST") or defaults.relay_host,
        app_host=env.get("AGENTENV_APP_HOST") or defaults.app_host,
        chromium_flags=env.get("AGENTENV_CHROMIUM_FLAGS", ""),
        users=users,
        scopes=scopes,
        humans=frozenset(humans),
        control_token=env.get("AGENTENV_CONTROL_TOKEN") or None,
        metrics_token=env.get("AGENTENV_METRICS_TOKEN") or None,
        control_open=env.get("AGENTENV_CONTROL_OPEN") == "1",
        allowed_hosts=_set(env, "AGENTENV_ALLOWED_HOSTS"),
        allowed_origins=_set(env, "AGENTENV_ALLOWED_ORIGINS"),
        upload_roots=tuple(
            Path(p) for p in env.get("AGENTENV_UPLOAD_ROOTS", "").replace(",", ":").split(":") if p
        ),
        **_read(env, defaults),
    )
    if settings.warm_scopes > WARM_SCOPES_MAX:
        raise SettingsError(
            f"AGENTENV_WARM_SCOPES must be 0 to {WARM_SCOPES_MAX}: each warm scope holds about "
            f"{WARM_SCOPE_MB} MiB of the computer's memory budget (docs/fair-shares.md), "
            f"got {settings.warm_scopes}"
        )
    if settings.metrics_token is not None and (
        settings.metrics_token == settings.control_token
        or settings.metrics_token in settings.users.values()
    ):
        # The token would be the other's too: the scraper could do all it does.
        raise SettingsError(
            "AGENTENV_METRICS_TOKEN is the same as the control token or a user's token: "
            "give the metrics reader a token of its own (it reads /metrics and nothing else)"
        )
    if settings.published_relay_port > 65535:
        raise SettingsError(
            "AGENTENV_PUBLISHED_RELAY_PORT must be a port (1 to 65535), or 0 for the relay's own "
            f"(AGENTENV_RELAY_PORT), got {settings.published_relay_port}"
        )
    share = settings.max_connections_per_user
    if (
        settings.max_connections
        and (not share or share >= settings.max_connections)
        and (settings.max_scopes or len(settings.users) >= 2)
    ):
        # One agent could hold every place: the others would wait, then get
        # 429, for as long as it liked (docs/fair-shares.md).
        fix = (
            f"set AGENTENV_MAX_CONNECTIONS_PER_USER to {settings.max_connections - 1} or less, "
            "or AGENTENV_MAX_CONNECTIONS higher"
            if settings.max_connections >= 2
            else "set AGENTENV_MAX_CONNECTIONS to 2 or more (0: no limit)"
        )
        raise SettingsError(
            f"AGENTENV_MAX_CONNECTIONS={settings.max_connections} is not above one user's share "
            f"(AGENTENV_MAX_CONNECTIONS_PER_USER={share or '0, no limit'}): on a computer of "
            f"several users one agent could hold every place and starve the others; {fix}"
        )
    if settings.max_scopes and (settings.control_token is None or settings.control_open):
        raise SettingsError(
            "AGENTENV_MAX_SCOPES: scopes opened on demand need AGENTENV_CONTROL_TOKEN set "
            "(only the control token opens them); set it, or AGENTENV_MAX_SCOPES=0"
        )
    return settings
