"""Every CDP command of the shipped Chromium, classified (docs/spec.md section 2).

The first version kept an allowlist of what four clients' recorded traffic
held, and every other client hit a wall that protected nothing: Stagehand's
``DOM.enable``, Playwright tracing's ``Page.startScreencast``,
chrome-devtools-mcp's ``Tracing.*`` and ``HeapProfiler.*``, Selenium's
``Network.setCookie``. A refusal must name a danger, not an absence. Now each
command of the pinned protocol (:data:`agentenv.relay.pinned.COMMANDS`) is
one of:

- ``allowed``: a client may do it on its pages as on its own Chromium;
- ``confined``: allowed, with its parameters checked or held to what the
  agent may reach (:data:`agentenv.relay.guard.PARAMS` has its check):
  URLs, file paths, browser contexts, targets, and settings that would
  apply to the whole browser when sent without a session;
- ``refused``, with the reason, from the threat model: it escapes the record
  (extensions, a CDP channel around the relay, DevTools windows), reaches
  the browser process or the machine (close, crash, command line, files,
  ports, the desktop), or changes the browser for every agent at once
  (rule ``browser-wide``).

A domain's default covers each of its commands in the pinned list, and
:data:`EXCEPTIONS` names the commands that differ. A command the pinned
list does not hold (a newer Chromium's, or a typo) is refused as
``unclassified``, and the test of the image fails until it is looked at.

The same table says what each command does to the record (docs/spec.md section
1, "Acting or reading"), by :mod:`agentenv.relay.reading`'s two lists: a
command named in neither acts. Each command also
carries the names of the parameters it takes (:data:`agentenv.relay.pinned.PARAMS`):
the log keeps only the size of others.

Wherever a command is allowed, the relay's other rules still hold: the
relay's own worlds are never reached (:mod:`agentenv.relay.worlds`),
typing is checked for password fields, and secrets in parameters never reach
the log (:mod:`agentenv.log.redact`).

What "its pages" means: with users configured, every agent is in the same
browser context until scopes land (issue 21); the table is written for a
scope, and the settings that have no per-context form are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from agentenv.protocol.log import ACTING, READING, Acts
from agentenv.relay.causes import TAB_METHODS
from agentenv.relay.pinned import CHROMIUM, COMMANDS, PARAMS
from agentenv.relay.reading import ACTING_COMMANDS, ACTING_WITH, READING_COMMANDS

__all__ = [
    "ACTING_COMMANDS",
    "ACTING_WITH",
    "ALLOWED",
    "BROWSER_LEVEL",
    "CONFINED",
    "DOMAINS",
    "EXCEPTIONS",
    "METHOD_FACTS",
    "READING_COMMANDS",
    "REFUSED",
    "UNUSED_KEPT",
    "Command",
    "MethodFacts",
    "Standing",
    "acts",
    "classify",
    "used_params",
]

Standing = Literal["allowed", "confined", "refused"]
ALLOWED: Standing = "allowed"
CONFINED: Standing = "confined"
REFUSED: Standing = "refused"


@dataclass(frozen=True)
class Command:
    kind: Standing
    #: Why it may pass, what is checked, or the danger it is refused for.
    why: str
    #: The guard's rule for a refusal.
    rule: str = "not-allowed"
    #: What its log line says it did (:data:`READING`; acting by default).
    acts: Acts = ACTING
    #: The names of the parameters it takes (None: not in the pinned
    #: protocol, so every one is kept).
    params: frozenset[str] | None = None


def _allowed(why: str) -> Command:
    return Command(ALLOWED, why)


def _confined(why: str) -> Command:
    return Command(CONFINED, why)


#: Storage calls with no context of their own: on the browser's own session
#: Chromium runs them on its default context (the home scope's).
_DEFAULT_CONTEXT_STORAGE = tuple(
    f"Storage.{name}"
    for name in (
        "clearDataForOrigin",
        "clearDataForStorageKey",
        "getUsageAndQuota",
        "trackCacheStorageForOrigin",
        "trackCacheStorageForStorageKey",
        "trackIndexedDBForOrigin",
        "trackIndexedDBForStorageKey",
        "untrackCacheStorageForOrigin",
        "untrackCacheStorageForStorageKey",
        "untrackIndexedDBForOrigin",
        "untrackIndexedDBForStorageKey",
        "getTrustTokens",
        "clearTrustTokens",
        "setStorageBucketTracking",
        "deleteStorageBucket",
    )
)


def _refused(why: str, rule: str = "not-allowed") -> Command:
    return Command(REFUSED, why, rule)


def _browser_wide(why: str) -> Command:
    return Command(REFUSED, why, "browser-wide")


_PAGE = "reads or changes the agent's own pages, as DevTools does"

#: domain -> what every command of the domain in the pinned list is.
DOMAINS: dict[str, Command] = {
    "Accessibility": _allowed("reads the page's accessibility tree (Puppeteer's aria/ selectors)"),
    "Ads": _allowed("reads the page's ad metrics"),
    "Animation": _allowed(_PAGE),
    "Audits": _allowed("reads the page's issues and its responses' encodings"),
    "Autofill": _allowed("fills the page's forms with data the agent gives (withheld in the log)"),
    "BackgroundService": _allowed("observes the page's background services"),
    "BluetoothEmulation": _browser_wide(
        "replaces the Bluetooth adapter of the whole browser with a simulated one"
    ),
    "Browser": _refused("the browser process itself"),
    "CSS": _allowed(_PAGE),
    "CacheStorage": _allowed("the page's origin's caches"),
    "Cast": _refused("sends a tab or the computer's desktop to another device on the network"),
    "Console": _allowed("the page's console"),
    "CrashReportContext": _allowed("reads the page's crash report context"),
    "DOM": _allowed(_PAGE + " (Stagehand's locators need DOM.enable)"),
    "DOMDebugger": _allowed("breakpoints in the agent's own pages"),
    "DOMSnapshot": _allowed("reads the page"),
    "DOMStorage": _allowed("the page's origin's storage (values withheld in the log)"),
    "Debugger": _allowed(
        "debugs the agent's own pages (the relay's world is never reached: worlds.py)"
    ),
    "DeviceAccess": _allowed("answers the page's device prompts"),
    "DeviceOrientation": _allowed("emulates the page's device orientation"),
    "DigitalCredentials": _allowed("a virtual wallet for the page's credential requests"),
    "Emulation": _allowed("emulation of the agent's own page"),
    "EventBreakpoints": _allowed("breakpoints in the agent's own pages"),
    "Extensions": _refused("an extension acts in the browser without passing the relay"),
    "FedCm": _allowed("answers the page's identity dialogs"),
    "Fetch": _allowed("the agent's own pages' requests (routes, authentication)"),
    "FileSystem": _allowed("reads the page's origin's file system buckets"),
    "FindInPage": _allowed("finds text in the page"),
    "HeadlessExperimental": _allowed("frame control of the agent's own page"),
    "HeapProfiler": _allowed("the heap of the agent's page (chrome-devtools-mcp's heap snapshot)"),
    "IO": _allowed("reads streams the agent was handed (traces, PDFs)"),
    "IndexedDB": _allowed("the page's origin's databases"),
    "Input": _allowed("input to the agent's page (coordinates kept within range)"),
    "Inspector": _allowed("the page's inspector events"),
    "LayerTree": _allowed("reads the page's compositing layers"),
    "Log": _allowed("the page's log"),
    "Media": _allowed("the page's media events"),
    "Memory": _allowed("the memory of the agent's page"),
    "Network": _allowed("the agent's own pages' network"),
    "Overlay": _allowed("draws on the agent's page, as DevTools does"),
    "PWA": _refused("installs and launches apps on the machine"),
    "Page": _allowed(_PAGE),
    "Performance": _allowed("reads the page's metrics"),
    "PerformanceTimeline": _allowed("reads the page's performance timeline"),
    "Preload": _allowed("the page's preloading events"),
    "Profiler": _allowed("profiles the agent's own page"),
    "Runtime": _allowed(
        "runs script in the agent's own pages (the relay's world is never reached: worlds.py)"
    ),
    "Schema": _allowed("lists the protocol's domains"),
    "Security": _allowed("the page's security state"),
    "ServiceWorker": _allowed("the service workers of the agent's pages"),
    "SmartCardEmulation": _browser_wide("replaces the smart card reader of the whole browser"),
    "Storage": _allowed("the storage and cookies of the agent's pages"),
    "SystemInfo": _allowed("reads the GPU and features of the machine Chromium sees"),
    "Target": _allowed("lists and attaches to the agent's targets"),
    "Tethering": _refused("forwards the computer's ports to the client"),
    "Tracing": _allowed("traces the agent's page (chrome-devtools-mcp's performance traces)"),
    "WebAudio": _allowed("reads the page's audio graph"),
    "WebAuthn": _allowed("virtual authenticators for the page (credentials withheld in the log)"),
    "WebMCP": _allowed("the page's own tools"),
}

#: Commands that differ from their domain's default.
EXCEPTIONS: dict[str, Command] = {
    # Browser: the process itself stays closed; windows, versions,
    # permissions and downloads are an agent's.
    "Browser.getVersion": _allowed("versions"),
    "Browser.getWindowForTarget": _allowed("the window of the agent's tab"),
    "Browser.getWindowBounds": _allowed("a window's size"),
    "Browser.setWindowBounds": _allowed("a window's size (Playwright viewport: null)"),
    "Browser.setContentsSize": _allowed("a tab's size (chrome-devtools-mcp resize_page)"),
    "Browser.setDownloadBehavior": _confined("downloads go to the downloads folder only"),
    "Browser.cancelDownload": _allowed("Playwright download.cancel"),
    "Browser.grantPermissions": _confined("the usual permissions; never the local network"),
    "Browser.setPermission": _confined("the usual permissions; never the local network"),
    "Browser.resetPermissions": _allowed("Playwright context.clear_permissions"),
    "Browser.getGlobalPrivacyControl": _allowed("reads the privacy control"),
    "Browser.setGlobalPrivacyControl": _browser_wide("the privacy control of the whole browser"),
    "Browser.addMockCamera": _browser_wide("a camera in the whole browser's device list"),
    "Browser.addPrivacySandboxEnrollmentOverride": _browser_wide(
        "privacy sandbox enrollment of the whole browser"
    ),
    "Browser.getHistograms": _browser_wide("the whole browser's metrics, every agent's pages"),
    "Browser.getHistogram": _browser_wide("the whole browser's metrics, every agent's pages"),
    "Browser.close": _refused("closes the browser under every agent"),
    "Browser.crash": _refused("crashes the browser under every agent"),
    "Browser.crashGpuProcess": _refused("crashes the GPU process under every agent"),
    "Browser.getBrowserCommandLine": _refused("the browser process's command line"),
    "Browser.executeBrowserCommand": _refused("runs the browser's own UI commands"),
    "Browser.setDockTile": _refused("the machine's dock"),
    # Target: the agent's targets; never a channel around the relay.
    "Target.attachToTarget": _confined("flattened sessions on web targets only"),
    "Target.autoAttachRelated": _confined("web targets only"),
    "Target.activateTarget": _confined("web targets only"),
    "Target.closeTarget": _confined("web targets only"),
    "Target.createTarget": _confined("a plain tab at a web URL"),
    "Target.createBrowserContext": _confined("no proxy, no universal network access"),
    "Target.setAutoAttach": _confined("never the browser's own UI"),
    # Playwright opens every CDP session through it (new_cdp_session,
    # new_browser_cdp_session). The session has the browser's own session's
    # powers, and the relay serves it exactly so: the same table, the same
    # scope (Target.* kept to it, its events filtered), the same record.
    "Target.attachToBrowserTarget": _confined(
        "from the browser's own session only; served as that session is (relay.core)"
    ),
    "Target.exposeDevToolsProtocol": _refused("a CDP channel for a page, around the relay"),
    "Target.sendMessageToTarget": _refused("unflattened sessions, around the relay and its log"),
    "Target.setRemoteLocations": _refused("connections to other hosts"),
    "Target.openDevTools": _refused("a DevTools window: CDP around the relay"),
    # Page.
    "Page.navigate": _confined("web URLs only"),
    "Page.setDownloadBehavior": _confined("downloads go to the downloads folder only"),
    "Page.crash": _refused("crashes the renderer, and every tab that shares its process"),
    "Page.setRPHRegistrationMode": _browser_wide(
        "registers protocol handlers for the whole browser"
    ),
    "Page.setSPCTransactionMode": _browser_wide("payment confirmation for the whole browser"),
    # Network, Fetch, Security: confined when they would reach past the page.
    # Lighthouse and DevTools fetch source maps and robots.txt this way: a
    # web URL in the frame's own network context, as the page could fetch it.
    "Network.loadNetworkResource": _confined("web URLs only: file: and local pages are not"),
    "Network.setCookieControls": _browser_wide("third-party cookie controls of the whole browser"),
    "Fetch.enable": _confined("a session's requests; without one, every agent's: browser-wide"),
    "Fetch.continueRequest": _confined("a changed URL is refused: the request's own only"),
    "Security.setIgnoreCertificateErrors": _confined(
        "on a page's session; without one, with two scopes or more, the relay keeps it "
        "to the sender's own pages and frames (relay.core)"
    ),
    "Security.setOverrideCertificateErrors": _confined(
        "on a page's session; without one, the whole browser's: browser-wide"
    ),
    "Tracing.start": _confined(
        "on a page's session, with Chromium's own backend; never a raw perfetto config"
    ),
    # Input and DOM: files from the downloads folder only.
    "DOM.setFileInputFiles": _confined("files from the downloads folder only"),
    "Input.dispatchDragEvent": _confined("files from the downloads folder only"),
    "Input.dispatchMouseEvent": _confined("coordinates within range"),
    "Input.dispatchTouchEvent": _confined("coordinates within range"),
    "Input.emulateTouchFromMouseEvent": _confined("coordinates within range"),
    "Input.synthesizeScrollGesture": _confined("coordinates within range"),
    "Input.synthesizePinchGesture": _confined("coordinates within range"),
    "Input.synthesizeTapGesture": _confined("coordinates within range"),
    # Debugger: a condition runs in every script its pattern matches.
    "Debugger.setBreakpointByUrl": _confined("a condition needs an exact url"),
    # Emulation: the headless screens are the whole browser's.
    "Emulation.addScreen": _browser_wide("the screens of the whole browser"),
    "Emulation.updateScreen": _browser_wide("the screens of the whole browser"),
    "Emulation.removeScreen": _browser_wide("the screens of the whole browser"),
    "Emulation.setPrimaryScreen": _browser_wide("the screens of the whole browser"),
    # Memory: the browser process's own, or every renderer's.
    "Memory.getAllTimeSamplingProfile": _refused("the browser process's heap"),
    "Memory.getBrowserSamplingProfile": _refused("the browser process's heap"),
    "Memory.setPressureNotificationsSuppressed": _browser_wide(
        "memory pressure of the whole browser"
    ),
    "Memory.simulatePressureNotification": _browser_wide("memory pressure of the whole browser"),
    # Storage: the profile's budget and its shared state.
    "Storage.overrideQuotaForOrigin": _refused(
        "lifts an origin's quota past the profile's share of the computer's disk"
    ),
    "Storage.runBounceTrackingMitigations": _browser_wide(
        "deletes state of sites across the whole profile"
    ),
    "SystemInfo.getProcessInfo": _refused("lists every process of the browser, every agent's"),
    # A page's storage on its session; on the browser's own session these
    # reach Chromium's default context (the home scope's), whoever sends them.
    **{
        name: _confined(
            "a page's storage on its session; on the browser's own session, the home scope's"
        )
        for name in _DEFAULT_CONTEXT_STORAGE
    },
    "Emulation.setAutomationOverride": _confined(
        "a page's on its session; on the browser's own session, every scope's pages"
    ),
}

#: Confined commands that are refused (``browser-wide``) when sent on the
#: browser's own session (no session on the browser endpoint) of a computer
#: with two scopes or more: there they apply to every scope's pages at once
#: (with one scope there is no other to reach). The relay's core answers
#: ``Security.setIgnoreCertificateErrors`` there itself, kept to the
#: sender's pages (Puppeteer's ``acceptInsecureCerts`` sends it at connect);
#: it stays listed so that it fails closed should it ever get this far.
BROWSER_LEVEL = frozenset(
    {
        "Fetch.enable",
        "Security.setIgnoreCertificateErrors",
        "Security.setOverrideCertificateErrors",
        "Tracing.start",
        "Emulation.setAutomationOverride",
        *_DEFAULT_CONTEXT_STORAGE,
    }
)


def acts(method: str, params: Mapping[str, Any] | None) -> Acts:
    """Whether this command, with these params, acts (:data:`ACTING_WITH`)."""
    mark = classify(method).acts
    if mark == READING and params and method in ACTING_WITH and params.get(ACTING_WITH[method]):
        return ACTING
    return mark


_UNCLASSIFIED = Command(
    REFUSED,
    f"not in the protocol of the Chromium this computer ships ({CHROMIUM}), so not "
    "classified; see docs/security.md",
    "unclassified",
)


def _entry(method: str) -> Command:
    found = EXCEPTIONS.get(method) or DOMAINS.get(method.partition(".")[0]) or _UNCLASSIFIED
    mark = READING if method in READING_COMMANDS else ACTING
    return replace(found, acts=mark, params=PARAMS.get(method))


#: Each command of the pinned protocol, whole: its standing, mark and params.
_TABLE: dict[str, Command] = {method: _entry(method) for method in COMMANDS}


def classify(method: str) -> Command:
    """What the relay does with ``method``, by the table: its standing,
    whether it acts, and the parameters it takes. One not in the pinned
    protocol is refused as ``unclassified`` (and would act)."""
    return _TABLE.get(method, _UNCLASSIFIED)


#: Parameters a command does not take are logged whole up to this many bytes
#: (an attempt with a stale or made-up name stays readable), by size past it.
UNUSED_KEPT = 1024


def used_params(method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
    """``params`` with only what ``method`` takes (the pinned protocol's
    names) when the rest is over :data:`UNUSED_KEPT` bytes: that is logged by
    its count and size, never whole (Chromium ignores it, and whole it filled
    the log: issue 22)."""
    known = classify(method).params or frozenset()
    unused = {k: v for k, v in params.items() if k not in known}
    try:
        size = len(orjson.dumps(unused))
    except (TypeError, ValueError):  # nested too deep, or not JSON
        size = -1
    if 0 <= size <= UNUSED_KEPT:
        return params
    kept = {k: v for k, v in params.items() if k in known}
    kept["unused"] = {"count": len(unused), "bytes": size}
    return kept


MethodFacts = tuple[Acts, bool, bool, frozenset[str] | None]


class _Learnt(dict[str, MethodFacts]):
    """What Logbook.begin needs to know of a method, learnt at its first
    use: its mark (acting or reading), whether it acts, whether it may open,
    close, move or focus a tab, and the parameter names it takes (None: not
    in the pinned protocol, so every one is kept)."""

    def __missing__(self, method: str) -> MethodFacts:
        if len(self) > 4096:  # a client inventing names: stay bounded
            self.clear()
        command = classify(method)  # the protocol table: a name it lacks acts
        mark = command.acts
        found = self[method] = (mark, mark == ACTING, method in TAB_METHODS, command.params)
        return found


#: Each method's facts, learnt at its first use (bounded).
METHOD_FACTS = _Learnt()
