"""What a client of ``/playwright`` may ask of Playwright's server
(docs/spec.md section 3, "Playwright's own protocol"). No I/O.

Playwright's protocol names each object by a guid, and the server says each
object's type when it makes one (``__create__``). A client's call names a
guid and a method. It reaches the server only when the pair (type, method)
is classified here as allowed and its params pass the checks below; any
other call is refused with an error answer of its own ``id``, and the
server never sees it. The default is refused: a method a newer Playwright
adds waits here until someone classifies it.

The server runs as the computer's own user, not Chromium's, so what it could
do besides driving the browser through the relay is what is refused:

- launching or connecting to another browser (``BrowserType``,
  ``Electron``, ``Android``), or starting a server (``Browser.startServer``);
- reading or writing a file the client names on the computer
  (``Artifact.saveAs``, ``setInputFiles``' ``localPaths`` and
  ``localDirectory``, ``LocalUtils``, a trace name holding a folder);
- a network request made by the server rather than the browser
  (``APIRequestContext.fetch``, ``Playwright.newRequest``), which would reach
  the computer's own ports and never be on the record;
- Playwright's own tools (``DebugController``, the recorder, the inspector),
  and ``SocksSupport`` and ``JsonPipe``, which carry raw traffic.

Every CDP command the server sends goes through the relay with the caller's
token, so a call allowed here still meets every wall the relay keeps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ALLOWED",
    "REFUSED",
    "UPLOAD_BYTES",
    "VIDEO_FPS",
    "VIDEO_PIXELS",
    "Drop",
    "PlaywrightRules",
    "RefuseCall",
    "SendOn",
]

_JS_HANDLE = frozenset(
    {
        "dispose",
        "evaluateExpression",
        "evaluateExpressionHandle",
        "getProperty",
        "getPropertyList",
        "jsonValue",
    }
)
#: Every type's methods a client may call. Types absent here are refused
#: whole (BrowserType, LocalUtils, Electron, Android, DebugController,
#: SocksSupport, JsonPipe, Playwright's ``newRequest``).
ALLOWED: Mapping[str, frozenset[str]] = {
    "Root": frozenset({"initialize"}),
    "Browser": frozenset(
        {"close", "newContext", "newBrowserCDPSession", "startTracing", "stopTracing"}
    ),
    "BrowserContext": frozenset(
        {
            "addCookies",
            "addInitScript",
            "clearCookies",
            "clearPermissions",
            "close",
            "cookies",
            "createTempFiles",
            "credentialsCreate",
            "credentialsDelete",
            "credentialsGet",
            "credentialsInstall",
            "exposeBinding",
            "exposeConsoleApi",
            "grantPermissions",
            "newCDPSession",
            "newPage",
            "registerSelectorEngine",
            "setExtraHTTPHeaders",
            "setGeolocation",
            "setHTTPCredentials",
            "setNetworkInterceptionPatterns",
            "setOffline",
            "setStorageState",
            "setTestIdAttributeName",
            "setWebSocketInterceptionPatterns",
            "storageState",
            "updateSubscription",
            "clockFastForward",
            "clockInstall",
            "clockPauseAt",
            "clockResume",
            "clockRunFor",
            "clockSetFixedTime",
            "clockSetSystemTime",
        }
    ),
    "Page": frozenset(
        {
            "addInitScript",
            "bringToFront",
            "cancelPickLocator",
            "clearConsoleMessages",
            "clearPageErrors",
            "close",
            "consoleMessages",
            "emulateMedia",
            "expectScreenshot",
            "exposeBinding",
            "goBack",
            "goForward",
            "hideHighlight",
            "keyboardDown",
            "keyboardInsertText",
            "keyboardPress",
            "keyboardType",
            "keyboardUp",
            "mouseClick",
            "mouseDown",
            "mouseMove",
            "mouseUp",
            "mouseWheel",
            "pageErrors",
            "pdf",
            "pickLocator",
            "registerLocatorHandler",
            "reload",
            "requestGC",
            "requests",
            "resolveLocatorHandlerNoReply",
            "runBeforeUnload",
            "screencastChapter",
            "screencastFrameAck",
            "screencastHideActions",
            "screencastRemoveOverlay",
            "screencastSetOverlayVisible",
            "screencastShowActions",
            "screencastShowOverlay",
            "screencastStart",
            "screencastStop",
            "screenshot",
            "setExtraHTTPHeaders",
            "setNetworkInterceptionPatterns",
            "setViewportSize",
            "setWebSocketInterceptionPatterns",
            "startCSSCoverage",
            "startJSCoverage",
            "stopCSSCoverage",
            "stopJSCoverage",
            "touchscreenTap",
            "unregisterLocatorHandler",
            "updateSubscription",
            "webStorageClear",
            "webStorageGetItem",
            "webStorageItems",
            "webStorageRemoveItem",
            "webStorageSetItem",
        }
    ),
    "Frame": frozenset(
        {
            "addScriptTag",
            "addStyleTag",
            "ariaSnapshot",
            "ariaSnapshotJSON",
            "blur",
            "check",
            "click",
            "content",
            "dblclick",
            "dispatchEvent",
            "dragAndDrop",
            "drop",
            "evalOnSelector",
            "evalOnSelectorAll",
            "evaluateExpression",
            "evaluateExpressionHandle",
            "expect",
            "fill",
            "focus",
            "frameElement",
            "getAttribute",
            "goto",
            "hideHighlight",
            "highlight",
            "hover",
            "innerHTML",
            "innerText",
            "inputValue",
            "isChecked",
            "isDisabled",
            "isEditable",
            "isEnabled",
            "isHidden",
            "isVisible",
            "press",
            "queryCount",
            "querySelector",
            "querySelectorAll",
            "resolveSelector",
            "selectOption",
            "setContent",
            "setInputFiles",
            "tap",
            "textContent",
            "title",
            "type",
            "uncheck",
            "waitForFunction",
            "waitForSelector",
            "waitForTimeout",
            "webmcpCallTool",
            "webmcpTools",
        }
    ),
    "JSHandle": _JS_HANDLE,
    # An element handle is a JS handle too (the protocol's EXTENDS).
    "ElementHandle": _JS_HANDLE
    | frozenset(
        {
            "boundingBox",
            "check",
            "click",
            "contentFrame",
            "dblclick",
            "dispatchEvent",
            "evalOnSelector",
            "evalOnSelectorAll",
            "fill",
            "focus",
            "getAttribute",
            "hover",
            "innerHTML",
            "innerText",
            "inputValue",
            "isChecked",
            "isDisabled",
            "isEditable",
            "isEnabled",
            "isHidden",
            "isVisible",
            "ownerFrame",
            "press",
            "querySelector",
            "querySelectorAll",
            "screenshot",
            "scrollIntoViewIfNeeded",
            "selectOption",
            "selectText",
            "setInputFiles",
            "tap",
            "textContent",
            "type",
            "uncheck",
            "waitForElementState",
            "waitForSelector",
        }
    ),
    "Worker": frozenset(
        {"disconnect", "evaluateExpression", "evaluateExpressionHandle", "updateSubscription"}
    ),
    "Request": frozenset({"rawRequestHeaders", "response"}),
    "Response": frozenset(
        {"body", "httpVersion", "rawResponseHeaders", "securityDetails", "serverAddr", "sizes"}
    ),
    "Route": frozenset({"abort", "continue", "fulfill", "redirectNavigationRequest"}),
    "WebSocketRoute": frozenset(
        {
            "closePage",
            "closeServer",
            "connect",
            "ensureOpened",
            "sendToPage",
            "sendToServer",
        }
    ),
    # A context's request object: its cookies are the browser context's.
    # ``fetch`` is not here: the server, not the browser, would make it.
    "APIRequestContext": frozenset(
        {
            "addCookies",
            "clearCookies",
            "cookies",
            "dispose",
            "disposeAPIResponse",
            "fetchLog",
            "fetchResponseBody",
            "storageState",
        }
    ),
    "Artifact": frozenset({"cancel", "delete", "failure", "saveAsStream", "stream"}),
    "Stream": frozenset({"close", "read"}),
    "WritableStream": frozenset({"close", "write"}),
    "CDPSession": frozenset({"detach", "send"}),
    "BindingCall": frozenset({"reject", "resolve"}),
    "Dialog": frozenset({"accept", "dismiss"}),
    "Disposable": frozenset({"dispose"}),
    "Debugger": frozenset({"enable", "next", "requestPause", "resume", "runTo"}),
    "Tracing": frozenset(
        {
            "harExport",
            "harStart",
            "tracingGroup",
            "tracingGroupEnd",
            "tracingStart",
            "tracingStartChunk",
            "tracingStop",
            "tracingStopChunk",
        }
    ),
}

#: Why a whole type, or one method, is refused: said in the error.
REFUSED: Mapping[str, str] = {
    "BrowserType": "it would launch or connect to another browser on the computer",
    "Electron": "it would launch a program on the computer",
    "Android": "it would reach devices from the computer",
    "AndroidDevice": "it would reach devices from the computer",
    "AndroidSocket": "it would reach devices from the computer",
    "ElectronApplication": "it would drive a program on the computer",
    "LocalUtils": "it reads and writes the computer's files",
    "DebugController": "it drives Playwright's own tools",
    "SocksSupport": "it carries raw network traffic through the computer",
    "JsonPipe": "it carries raw protocol traffic through the computer",
    "Playwright.newRequest": (
        "the computer, not the browser, would make its requests, off the record: "
        "use page.evaluate('fetch(...)'), or make the request from your own machine"
    ),
    "APIRequestContext.fetch": (
        "the computer, not the browser, would make the request, off the record: "
        "use page.evaluate('fetch(...)') or page.goto, or make it from your own machine"
    ),
    "Artifact.saveAs": (
        "it writes a file on the computer: a remote client saves through saveAsStream "
        "(download.save_as does)"
    ),
    "Artifact.pathAfterFinished": "it names a file on the computer: use save_as",
    "Browser.startServer": "it would open a port on the computer",
    "Browser.newContextForReuse": "it is for Playwright's own test runner",
    "Browser.disconnectFromReusedContext": "it is for Playwright's own test runner",
    "Browser.killForTests": "it is for Playwright's own tests",
    "Browser.defaultUserAgentForTest": "it is for Playwright's own tests",
    "Browser.stopServer": "no server is started here (Browser.startServer is refused)",
    "BrowserContext.stopRecording": "it drives Playwright's recorder on the computer",
    "Page.setDockTile": "it sets a desktop's dock icon, not the browser's",
    "BrowserContext.pause": "it opens Playwright's inspector on the computer",
    "BrowserContext.showRecorder": "it opens Playwright's recorder on the computer",
    "BrowserContext.startRecording": "it opens Playwright's recorder on the computer",
}

#: Methods of every object, Playwright's own bookkeeping of a client's
#: calls: a wait's log lines (``__waitInfo__``) and aborting a call of this
#: connection's (``__abort__``).
_ANY_OBJECT = frozenset({"__waitInfo__", "__abort__"})
#: What Playwright's server says of a call on an object that is gone.
_CLOSED = "Target page, context or browser has been closed"
#: Names the server makes files of (a trace's): a plain name, no folder.
_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")
#: Bytes one connection may upload through ``WritableStream.write``: files
#: given to ``set_input_files`` by path, written in the scope's downloads
#: folder for Chromium to read. Past it a write is refused.
UPLOAD_BYTES = 256 * 1024 * 1024
#: The largest video or screencast a client may ask for: each frame is
#: decoded and encoded on the computer.
VIDEO_PIXELS = (1920, 1080)
VIDEO_FPS = 30
#: Files one ``createTempFiles`` may name.
_TEMP_FILES = 1000


@dataclass(frozen=True)
class SendOn:
    """The call goes to the server as ``message`` (its params possibly
    trimmed of what the server would ignore)."""

    message: Mapping[str, Any]


@dataclass(frozen=True)
class RefuseCall:
    """The call is answered here with an error, and never reaches the server."""

    id: Any
    why: str
    #: Type.method as the rule named it (for the app's own log; no params).
    method: str
    #: The object is gone: answered as the server answers that.
    closed: bool = False

    def answer(self) -> dict[str, Any]:
        """The error answer Playwright's clients read (``{id, error: {error}}``)."""
        if self.closed:
            error = {"message": self.why, "name": "TargetClosedError"}
        else:
            message = f"agentenv /playwright refused {self.method}: {self.why}"
            error = {"message": message, "name": "Error"}
        return {"id": self.id, "error": {"error": error}}


@dataclass(frozen=True)
class Drop:
    """The call is one no one answers, about an object that is gone: it goes
    nowhere."""


@dataclass
class PlaywrightRules:
    """One ``/playwright`` connection's view of the objects the server made,
    and the rules a client's call meets."""

    #: guid -> type, as the server declared them. The root is ``""``.
    types: dict[str, str] = field(default_factory=lambda: {"": "Root"})
    children: dict[str, set[str]] = field(default_factory=dict)
    parents: dict[str, str] = field(default_factory=dict)
    uploaded: int = 0
    upload_bytes: int = UPLOAD_BYTES
    initialized: bool = False

    # -- the server's messages -------------------------------------------------

    def learn(self, message: Mapping[str, Any]) -> None:
        """Take one message of the server's: objects made, adopted, disposed."""
        method = message.get("method")
        params = message.get("params")
        if not isinstance(method, str) or not isinstance(params, Mapping):
            return
        parent = message.get("guid")
        if method == "__create__":
            guid, kind = params.get("guid"), params.get("type")
            if isinstance(guid, str) and isinstance(kind, str) and isinstance(parent, str):
                self.types[guid] = kind
                self._attach(guid, parent)
        elif method == "__adopt__":
            guid = params.get("guid")
            if isinstance(guid, str) and isinstance(parent, str) and guid in self.types:
                self._attach(guid, parent)
        elif method == "__dispose__" and isinstance(parent, str):
            self._forget(parent)

    def _attach(self, guid: str, parent: str) -> None:
        old = self.parents.get(guid)
        if old is not None:
            self.children.get(old, set()).discard(guid)
        self.parents[guid] = parent
        self.children.setdefault(parent, set()).add(guid)

    def _forget(self, guid: str) -> None:
        stack = [guid]
        while stack:
            one = stack.pop()
            stack.extend(self.children.pop(one, ()))
            self.types.pop(one, None)
            parent = self.parents.pop(one, None)
            if parent is not None:
                self.children.get(parent, set()).discard(one)
        self.types.setdefault("", "Root")

    # -- the client's calls ----------------------------------------------------

    def check(self, message: Mapping[str, Any]) -> SendOn | RefuseCall | Drop:
        """What becomes of one call of the client's."""
        # An id is the client's to choose (a number, or a string in some
        # clients): the answer carries it back as it came.
        call_id = message.get("id")
        guid, method = message.get("guid"), message.get("method")
        if not isinstance(guid, str) or not isinstance(method, str):
            return RefuseCall(call_id, "a call names a guid and a method", "?")
        kind = self.types.get(guid)
        params = message.get("params")
        if params is None:
            # Sent on as an empty object: the server reads a field of it.
            params = {}
            message = {**message, "params": params}
        if not isinstance(params, Mapping):
            return RefuseCall(call_id, "params must be an object", f"{kind or '?'}.{method[:64]}")
        if method in _ANY_OBJECT:
            # Playwright's own bookkeeping of a call (a wait's log, an abort),
            # answered by no one: it goes on for a live object, else nowhere.
            return SendOn(message) if kind is not None else Drop()
        if kind is None:
            # Disposed, or never made: what the server itself would answer.
            return RefuseCall(call_id, _CLOSED, f"?.{method[:64]}", closed=True)
        named = f"{kind}.{method[:64]}"
        why = REFUSED.get(named) or REFUSED.get(kind)
        if why is not None or method not in ALLOWED.get(kind, frozenset()):
            return RefuseCall(call_id, why or "it is not one this computer serves", named)
        if named == "Root.initialize":
            if self.initialized:
                return RefuseCall(call_id, "a connection is initialized once", named)
            self.initialized = True
        refused = self._params(named, params)
        if refused is not None:
            return RefuseCall(call_id, refused, named)
        trimmed = _TRIMMED.get(named)
        if trimmed is not None:
            return SendOn(_without(message, params, *trimmed))
        return SendOn(message)

    def _params(self, named: str, params: Mapping[str, Any]) -> str | None:
        """Why these params are refused, or None."""
        if named.endswith(".setInputFiles"):
            for key in ("localPaths", "localDirectory"):
                if params.get(key) is not None:
                    return (
                        f"{key} names files on the computer: a remote client sends the "
                        "files themselves (set_input_files with your own paths does)"
                    )
        if named in ("Tracing.tracingStart", "Tracing.tracingStartChunk"):
            name = params.get("name")
            if name is not None and (not isinstance(name, str) or not _NAME.match(name)):
                return (
                    "a trace's name is a plain name of letters, digits, '_', '-' and '.' "
                    "(at most 100), no folder"
                )
        if named in ("Tracing.tracingStopChunk", "Tracing.harExport") and (
            params.get("mode") == "entries"
        ):
            return (
                "mode 'entries' names files on the computer: a remote client asks for the archive"
            )
        if named == "Browser.newContext":
            for key in ("clientCertificates", "proxy"):
                if params.get(key):
                    return (
                        f"{key}: Playwright's server would carry the context's traffic "
                        "itself, past the browser's walls; a context of the browser's "
                        "own network is what this computer serves"
                    )
            video = params.get("recordVideo")
            if isinstance(video, Mapping):
                too_big = _too_big(video.get("size"), video.get("fps"))
                if too_big:
                    return f"recordVideo: {too_big}"
        if named == "Page.screencastStart":
            too_big = _too_big(params.get("size"), params.get("fps"))
            if too_big:
                return too_big
        if named == "BrowserContext.createTempFiles":
            items = params.get("items")
            if not isinstance(items, list) or len(items) > _TEMP_FILES:
                return f"createTempFiles names at most {_TEMP_FILES} files"
        if named == "WritableStream.write":
            data = params.get("binary")
            size = (len(data) * 3) // 4 if isinstance(data, str) else 0
            if self.uploaded + size > self.upload_bytes:
                return (
                    f"this connection has uploaded {self.uploaded} bytes, and files given "
                    f"to set_input_files by path may take {self.upload_bytes} in all: "
                    "upload fewer, or start another connection"
                )
            self.uploaded += size
        return None


def _too_big(size: object, fps: object) -> str | None:
    """Why a video's ``size`` or ``fps`` is refused, or None."""
    most_w, most_h = VIDEO_PIXELS
    if isinstance(size, Mapping):
        width, height = size.get("width"), size.get("height")
        if not all(
            isinstance(v, int) and 0 < v <= m for v, m in ((width, most_w), (height, most_h))
        ):
            return f"a video's size is at most {most_w}x{most_h} pixels"
    if fps is not None and not (isinstance(fps, int) and 0 < fps <= VIDEO_FPS):
        return f"a video's fps is a whole number from 1 to {VIDEO_FPS}"
    return None


#: Params that name a path on the computer, which Playwright's server
#: ignores for a remote client anyway (videos and HARs go to its artifacts
#: folder and stream back): dropped before the call goes on, so what the
#: server reads is what was checked.
_TRIMMED: Mapping[str, tuple[str, frozenset[str]]] = {
    "Browser.newContext": ("recordVideo", frozenset({"dir"})),
    "Tracing.harStart": ("options", frozenset({"harPath", "resourcesDir"})),
}


def _without(
    message: Mapping[str, Any], params: Mapping[str, Any], key: str, dropped: frozenset[str]
) -> dict[str, Any]:
    """``message`` with ``params[key]`` less the ``dropped`` names."""
    inner = params.get(key)
    if not isinstance(inner, Mapping) or not dropped & inner.keys():
        return dict(message)
    kept = {k: v for k, v in inner.items() if k not in dropped}
    return {**message, "params": {**params, key: kept}}
