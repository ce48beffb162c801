"""The guard: what an agent's command may do (docs/spec.md section 2). No I/O.

Two checks, both on every connection:

1. The method's class in the protocol table
   (:func:`agentenv.relay.commands.classify`): a refused command gets its
   rule (``not-allowed``, ``browser-wide``, ``unclassified``) and the
   table's reason; a confined one sent on the browser's own session where it
   would apply to every agent's pages (:data:`~agentenv.relay.commands.BROWSER_LEVEL`)
   gets ``browser-wide``.
2. Parameters that reach the machine are checked, whichever method carries
   them (:data:`PARAMS`): URLs to open (rule ``local-url``), file paths
   (``outside-downloads``), download folders (``download-folder``), the
   targets a session may attach to (``not-a-web-target``, ``unwrapped-only``),
   and what would reach the relay's own worlds (``relay-world``).

A :class:`Verdict` says what the relay does instead of forwarding as sent:

- ``blocked``: a CDP error answer with the command's own ``id`` (and
  ``sessionId``); the connection stays open.
- ``rewritten``: forwarded with :attr:`Verdict.params` in place of the
  client's. Used for ``Browser.setDownloadBehavior``/``Page.setDownloadBehavior``
  naming a folder outside the downloads folder: Playwright's
  ``connect_over_cdp`` sends one with a folder of the client's own machine and
  fails to connect if it is refused, so the relay sends it with the downloads
  folder instead, and downloads (and their events) still work.

URLs are read the way Chromium's URL parser reads them, then held to an
allowlist of schemes (:func:`agentenv.protocol.urls.web_url`), and never to
the computer's own ports on its loopback, in any spelling of it
(:func:`agentenv.protocol.urls.loopback_port`; :data:`DOORS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentenv import paths
from agentenv.protocol.urls import WEB_TARGET_TYPES, loopback_port, web_target, web_url
from agentenv.relay.commands import BROWSER_LEVEL, REFUSED, classify
from agentenv.settings import Settings

__all__ = [
    "DOORS",
    "GUARD_ERROR_CODE",
    "PARAMS",
    "WEB_TARGET_TYPES",
    "Targets",
    "Verdict",
    "check",
    "check_url",
    "close_doors",
    "inside",
    "not_allowed",
    "tab_target_verdict",
    "web_target",
    "web_target_verdict",
    "web_url",
]

GUARD_ERROR_CODE = -32000

Action = Literal["blocked", "rewritten"]


@dataclass(frozen=True)
class Verdict:
    rule: str
    message: str
    action: Action = "blocked"
    #: For ``rewritten``: the params sent instead of the client's.
    params: dict[str, Any] | None = None
    #: The CDP error code the client gets (an attempt on another scope is
    #: answered as Chromium answers an id it does not know).
    code: int = GUARD_ERROR_CODE
    #: What the client is told, when not :attr:`message` (which the log
    #: keeps): Chromium's own answer to an id it does not know.
    told: str | None = None

    def as_entry(self) -> dict[str, str]:
        return {"rule": self.rule, "action": self.action}


#: What the relay knows of a target: ``(type, url)`` by id, or None if unknown.
Targets = Callable[[str], "tuple[str, str] | None"]


def _unknown(target: str) -> tuple[str, str] | None:
    return None


#: The computer's own ports (:attr:`agentenv.settings.Settings.doors`): no URL
#: an agent opens goes to them on the loopback. The defaults, and those of
#: the relay's settings, closed at its start (:func:`close_doors`).
DOORS: frozenset[int] = Settings().doors


#: The machine's own addresses other than its loopback (the container's),
#: where its doors listen too (0.0.0.0): closed at the relay's start.
OWN_HOSTS: frozenset[str] = frozenset()


def close_doors(ports: frozenset[int], hosts: frozenset[str] = frozenset()) -> None:
    """Close the ports the relay's settings name too, on the machine's own
    addresses as well as its loopback (once, at start). Only ever more are
    closed: the defaults stay, whatever a process runs."""
    global DOORS, OWN_HOSTS
    DOORS = DOORS | ports
    OWN_HOSTS = OWN_HOSTS | hosts


def check_url(url: object) -> Verdict | None:
    """The ``local-url`` rule for a URL an agent asks to open."""
    if url is None:
        return None
    if not isinstance(url, str) or not web_url(url):
        return _local_url()
    if loopback_port(url, OWN_HOSTS) in DOORS:
        return Verdict(
            "local-url",
            "blocked by agentenv guard local-url: the computer's own ports (its relay, app "
            "server, Chromium and recorder) are not reachable from its browser, on any "
            "loopback address or its own; open a page on another port or host",
        )
    return None


def _local_url() -> Verdict:
    return Verdict(
        "local-url",
        "blocked by agentenv guard local-url: only http(s), data:, about:blank and blob: URLs "
        "can be opened (file:, chrome:, extension and other local pages are not reachable); "
        "give an absolute http(s) URL",
    )


def inside(path: object, downloads: str) -> bool:
    """Whether ``path`` is an absolute path inside the downloads folder, after
    resolving ``..`` and links."""
    return paths.inside(path, downloads)


def _outside(downloads: str) -> Verdict:
    return Verdict(
        "outside-downloads",
        f"blocked by agentenv guard outside-downloads: files can be handed to pages only "
        f"from the downloads folder {downloads}; give absolute paths inside it",
    )


def web_target_verdict() -> Verdict:
    return Verdict(
        "not-a-web-target",
        "blocked by agentenv guard not-a-web-target: sessions are only for pages, frames and "
        "workers of web pages, never the browser's own UI; list them with Target.getTargets",
    )


# -- rules by method ---------------------------------------------------------------

Rule = Callable[[Mapping[str, Any], str, Targets], Verdict | None]


def _navigate(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    return check_url(params.get("url"))


def _continue_request(
    params: Mapping[str, Any], downloads: str, targets: Targets
) -> Verdict | None:
    """A paused request goes on to the URL it was made for. A new one is
    never checked by Chromium's URL blocklist (which read the first) nor by
    its local network checks: it reached Chromium's own port (then 9223) and the
    computer's servers. Its method, headers and body may change."""
    if params.get("url") in (None, ""):
        return None
    return Verdict(
        "continue-url",
        "blocked by agentenv guard continue-url: a paused request goes on to the URL it was "
        "made for (a new URL would pass the computer's walls); change its method, headers or "
        "body, or answer it yourself with Fetch.fulfillRequest",
    )


#: Permissions an agent may grant (Playwright's and Puppeteer's names, as CDP
#: spells them). Not among them: the local and loopback network ones (a page
#: granted them reaches the computer's own ports from its script, where the
#: policies' URL blocklist does not look), direct sockets, and any name
#: Chromium adds later until it is looked at.
PERMISSIONS = frozenset(
    {
        "geolocation",
        "notifications",
        "midi",
        "midiSysex",
        "audioCapture",
        "videoCapture",
        "cameraPanTiltZoom",
        "clipboardReadWrite",
        "clipboardSanitizedWrite",
        "backgroundSync",
        "backgroundFetch",
        "periodicBackgroundSync",
        "paymentHandler",
        "sensors",
        "storageAccess",
        "topLevelStorageAccess",
        "durableStorage",
        "idleDetection",
        "localFonts",
        "windowManagement",
        "wakeLockScreen",
        "wakeLockSystem",
        "displayCapture",
        "protectedMediaIdentifier",
        "nfc",
        "speakerSelection",
        "keyboardLock",
        "pointerLock",
        "automaticFullscreen",
        "capturedSurfaceControl",
        "handTracking",
        "ar",
        "vr",
        "webAppInstallation",
        "webPrinting",
    }
)


def _permission(name: object) -> Verdict:
    return Verdict(
        "permission",
        f"blocked by agentenv guard permission: {str(name)[:100]} is not a permission agents "
        "grant (local and loopback network access would let pages reach the computer's own "
        "ports); grant one of the usual ones (geolocation, notifications, clipboard, ...)",
    )


def _grant_permissions(
    params: Mapping[str, Any], downloads: str, targets: Targets
) -> Verdict | None:
    names = params.get("permissions")
    if not isinstance(names, list):
        return None  # Chromium answers the missing parameter itself
    for name in names:
        if name not in PERMISSIONS:
            return _permission(name)
    return None


def _set_permission(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    """Denying anything is fine; granting (or a prompt) only the usual ones."""
    permission = params.get("permission")
    name = permission.get("name") if isinstance(permission, Mapping) else None
    if params.get("setting") == "denied" or name in PERMISSIONS:
        return None
    return _permission(name)


def _download_folder(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    behavior = params.get("behavior")
    path = params.get("downloadPath")
    if behavior in ("deny", "default") and path is None:
        return None
    if path is not None and inside(path, downloads):
        return None
    sent = dict(params)
    sent["downloadPath"] = downloads
    if behavior not in ("allow", "allowAndName"):
        sent["behavior"] = "allow"
    return Verdict(
        "download-folder",
        f"rewritten by agentenv guard download-folder: downloads go to {downloads} only",
        action="rewritten",
        params=sent,
    )


def _file_input(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    files = params.get("files")
    if not isinstance(files, list) or not all(inside(f, downloads) for f in files):
        return _outside(downloads)
    return None


#: Input fields read as float32 by Chromium: past its range (or past any
#: screen) a value becomes infinity, Chromium rejects the input message and
#: the tab takes no input from anyone again.
_INPUT_NUMBERS = ("x", "y", "deltaX", "deltaY", "radiusX", "radiusY", "force", "tangentialPressure")
_INPUT_LIMIT = 1_000_000.0


def _input_range(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    points = params.get("touchPoints")
    spots = [params, *(points if isinstance(points, list) else [])]
    for spot in spots:
        if not isinstance(spot, Mapping):
            continue
        for key in _INPUT_NUMBERS:
            value = spot.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if not -_INPUT_LIMIT <= value <= _INPUT_LIMIT:  # NaN fails too
                return Verdict(
                    "input-range",
                    f"blocked by agentenv guard input-range: {key} must be a number "
                    f"within ±{_INPUT_LIMIT:,.0f} (larger ones end the tab's input "
                    "for everyone)",
                )
    return None


def _drag(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    found = _input_range(params, downloads, targets)
    if found is not None:
        return found
    data = params.get("data")
    files = data.get("files") if isinstance(data, Mapping) else None
    if files is None:
        return None
    if not isinstance(files, list) or not all(inside(f, downloads) for f in files):
        return _outside(downloads)
    return None


def _attach(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    if params.get("flatten") is not True:
        return Verdict(
            "unwrapped-only",
            "blocked by agentenv guard unwrapped-only: sessions must be flattened "
            "(Target.attachToTarget with flatten: true); messages wrapped in another "
            "would pass the record and the guard",
        )
    return _target_op(params, downloads, targets)


def _target_op(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    """A target the relay knows to be no web content is refused; one it does not
    know yet (just created) goes on, and its attach is checked when it lands
    (:func:`agentenv.relay.core.from_upstream`)."""
    target = params.get("targetId")
    if not isinstance(target, str):
        return None  # Chromium answers the missing parameter itself
    info = targets(target)
    if info is not None and not web_target(info):
        return web_target_verdict()
    return None


def _close_or_activate(
    params: Mapping[str, Any], downloads: str, targets: Targets
) -> Verdict | None:
    """As :func:`_target_op`; and never by a tab-type target's id: Chromium
    lists one for each tab (``Target.getTargets`` with a "tab" filter) under
    an id that is not its page's, so what it closed was tied to no page."""
    target = params.get("targetId")
    info = targets(target) if isinstance(target, str) else None
    if info is not None and info[0] == "tab":
        return Verdict(
            "not-a-web-target",
            "blocked by agentenv guard not-a-web-target: the relay could not find the page "
            "of that tab-type target; close or activate the page by its own targetId "
            "(Target.getTargets lists pages)",
        )
    return _target_op(params, downloads, targets)


def tab_target_verdict(params: Mapping[str, Any], page: str) -> Verdict:
    """A tab-type target's id, sent as its page's (``tab-target``, rewritten)."""
    return Verdict(
        "tab-target",
        f"rewritten by agentenv guard tab-target: sent for the tab's page {page}",
        action="rewritten",
        params={**params, "targetId": page},
    )


#: What an agent may give a browser context: only this (an allowlist, as
#: real clients send). Everything else Chromium takes there is network
#: routing: a proxy of the agent's choosing takes every page of the context
#: around the computer's network walls (a proxy on the computer's loopback
#: reached its app server and recorder, past the policies' URL blocklist,
#: which reads only the page's URL), and universal network access
#: (``originsWithUniversalNetworkAccess``; a blocklist of names missed it)
#: lifts the same-origin policy for an origin.
_CONTEXT_PARAMS = frozenset({"disposeOnDetach"})


def _context(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    for key, value in params.items():
        if key not in _CONTEXT_PARAMS and value not in (None, "", [], False):
            return Verdict(
                "context-network",
                f"blocked by agentenv guard context-network: {str(key)[:100]} is not given by "
                "agents (a proxy or universal network access would take pages around the "
                "computer's network walls); create the context with disposeOnDetach only",
            )
    return None


def _create_target(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    """A new tab's URL, as a navigation's; and a tab, not a hidden target (it
    browses with no tab events and no agent can attach to it or close it). A
    tab-type target (``forTab``, chromedriver's new windows) is a tab: the
    relay ties its page to the command (:meth:`Watcher.page_of_tab`)."""
    if params.get("hidden") not in (None, False):
        return Verdict(
            "hidden-target",
            "blocked by agentenv guard hidden-target: createTarget with hidden makes a "
            "target that is not a tab on the record; open a plain tab",
        )
    return check_url(params.get("url"))


def _breakpoint(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    """A condition runs in every script the breakpoint matches: by a pattern
    or a hash, that may be the relay's own check in its isolated world
    (whose scripts have no URL). A condition takes an exact ``url``."""
    if params.get("condition") in (None, ""):
        return None
    url = params.get("url")
    if isinstance(url, str) and url and params.get("urlRegex") is None:
        return None
    return Verdict(
        "relay-world",
        "blocked by agentenv guard relay-world: a breakpoint condition by a URL pattern or "
        "script hash would run in the computer's own world too; give the script's exact url "
        "(or set the breakpoint without a condition)",
    )


def _tracing(params: Mapping[str, Any], downloads: str, targets: Targets) -> Verdict | None:
    """Chromium's own tracing, as DevTools and Puppeteer start it: not a raw
    perfetto config (data sources of the whole machine) nor the system's
    tracing service."""
    backend = params.get("tracingBackend")
    if params.get("perfettoConfig") in (None, "") and backend in (None, "auto", "chrome"):
        return None
    return Verdict(
        "browser-wide",
        "blocked by agentenv guard browser-wide: a raw perfetto config or the system tracing "
        "backend records past the agent's page; start the trace with traceConfig "
        "(categories), as DevTools and Puppeteer do",
    )


#: method -> the check of its parameters that reach the machine.
PARAMS: dict[str, Rule] = {
    "Page.setDownloadBehavior": _download_folder,
    "Debugger.setBreakpointByUrl": _breakpoint,
    "Tracing.start": _tracing,
    "Target.createBrowserContext": _context,
    "Page.navigate": _navigate,
    "Network.loadNetworkResource": _navigate,
    "Target.createTarget": _create_target,
    "Fetch.continueRequest": _continue_request,
    "Browser.grantPermissions": _grant_permissions,
    "Browser.setPermission": _set_permission,
    "Browser.setDownloadBehavior": _download_folder,
    "DOM.setFileInputFiles": _file_input,
    "Input.dispatchDragEvent": _drag,
    "Input.dispatchMouseEvent": _input_range,
    "Input.dispatchTouchEvent": _input_range,
    "Input.emulateTouchFromMouseEvent": _input_range,
    "Input.synthesizeScrollGesture": _input_range,
    "Input.synthesizePinchGesture": _input_range,
    "Input.synthesizeTapGesture": _input_range,
    "Target.attachToTarget": _attach,
    "Target.autoAttachRelated": _target_op,
    "Target.activateTarget": _close_or_activate,
    "Target.closeTarget": _close_or_activate,
}


def not_allowed(method: str) -> Verdict:
    """The verdict on a command the protocol table refuses, with its reason."""
    command = classify(method)
    return Verdict(
        command.rule,
        f"blocked by agentenv guard {command.rule}: {method[:100]}: {command.why}; "
        "agents may do on their pages what they could on their own Chromium, but not this "
        "(see docs/security.md)",
    )


def _browser_level(method: str) -> Verdict:
    return Verdict(
        "browser-wide",
        f"blocked by agentenv guard browser-wide: {method[:100]} on the browser's own session "
        "applies to every agent's pages; send it on your page's session "
        "(Target.attachToTarget with flatten: true)",
    )


def check(
    method: str,
    params: Mapping[str, Any] | None,
    downloads: str,
    targets: Targets | None = None,
    browser_level: bool = False,
) -> Verdict | None:
    """The guard's verdict on a command, or None to forward it as sent.
    ``browser_level``: sent on the browser endpoint without a session."""
    if classify(method).kind == REFUSED:
        return not_allowed(method)
    if browser_level and method in BROWSER_LEVEL:
        return _browser_level(method)
    rule = PARAMS.get(method)
    if rule is None:
        return None
    return rule(params or {}, downloads, targets or _unknown)
