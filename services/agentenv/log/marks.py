"""Which CDP methods act and which read (SPEC.md section 1, "Acting or reading").

A method acts when it can change what a user would see or what the page
holds. The rules are one table of patterns; ``Domain.verb*`` matches every
method of the domain starting with ``verb``, ``Domain.*`` the whole domain.
Everything not matched reads. MCP tools act unless they carry
``readOnlyHint`` (:func:`tool_acts`).
"""

from __future__ import annotations

import functools
from typing import Literal

__all__ = ["ACTING", "ACTING_RULES", "READING", "Acts", "acts", "method_acts", "tool_acts"]

Acts = Literal["acting", "reading"]
ACTING: Acts = "acting"
READING: Acts = "reading"

#: Patterns of acting methods. Keep each with a test (tests/unit/test_marks.py).
ACTING_RULES: tuple[str, ...] = (
    "Input.*",
    "Page.navigate",
    "Page.reload",
    "Page.navigateToHistoryEntry",
    "Page.resetNavigationHistory",
    "Page.close",
    "Page.bringToFront",
    "Page.setDocumentContent",
    "Page.handleJavaScriptDialog",
    "Page.stopLoading",
    "Page.crash",
    "Page.addScriptToEvaluateOnNewDocument",
    "Page.setBypassCSP",
    "Page.setDownloadBehavior",
    "Page.setWebLifecycleState",
    "Target.createTarget",
    "Target.closeTarget",
    "Target.activateTarget",
    "Target.createBrowserContext",
    "Target.disposeBrowserContext",
    "Runtime.evaluate",
    "Runtime.callFunctionOn",
    "Runtime.runScript",
    "DOM.set*",
    "DOM.remove*",
    "DOM.focus",
    "DOM.moveTo",
    "DOM.copyTo",
    "DOM.undo",
    "DOM.redo",
    "CSS.set*",
    "CSS.addRule",
    "Network.setCookie",
    "Network.setCookies",
    "Network.clearBrowserCookies",
    "Network.clearBrowserCache",
    "Network.deleteCookies",
    "Network.setExtraHTTPHeaders",
    "Network.setUserAgentOverride",
    "Network.emulateNetworkConditions",
    "Network.setBlockedURLs",
    "Storage.setCookies",
    "Storage.clearCookies",
    "Storage.clearDataForOrigin",
    "Storage.clearDataForStorageKey",
    "DOMStorage.set*",
    "DOMStorage.remove*",
    "DOMStorage.clear",
    "IndexedDB.clear*",
    "IndexedDB.delete*",
    "CacheStorage.delete*",
    "Emulation.set*",
    "Browser.setDownloadBehavior",
    "Browser.grantPermissions",
    "Browser.setPermission",
    "Browser.resetPermissions",
    "Browser.setWindowBounds",
    "Browser.close",
    "Browser.crash*",
    "Fetch.fulfillRequest",
    "Fetch.continueRequest",
    "Fetch.continueResponse",
    "Fetch.failRequest",
    "Fetch.continueWithAuth",
    "Debugger.setScriptSource",
    "Debugger.setVariableValue",
    "Debugger.setReturnValue",
    # Setup that changes what the agent's pages load or accept: on the
    # record as acting, with its parameters (redacted).
    "Fetch.enable",
    "Security.setIgnoreCertificateErrors",
    "Security.setOverrideCertificateErrors",
    "Security.handleCertificateError",
    "Network.overrideNetworkState",
    "Network.emulateNetworkConditionsByRule",
    "Network.replayXHR",
    "Autofill.trigger",
    "WebAuthn.addCredential",
    "ServiceWorker.deliverPushMessage",
    "ServiceWorker.dispatch*",
    "ServiceWorker.unregister",
    "ServiceWorker.skipWaiting",
)


def _compile() -> tuple[frozenset[str], tuple[str, ...]]:
    exact = frozenset(r for r in ACTING_RULES if not r.endswith("*"))
    prefixes = tuple(r[:-1] for r in ACTING_RULES if r.endswith("*"))
    return exact, prefixes


_EXACT, _PREFIXES = _compile()


@functools.lru_cache(maxsize=4096)
def method_acts(method: str) -> bool:
    """Whether the CDP ``method`` acts."""
    return method in _EXACT or method.startswith(_PREFIXES)


def acts(method: str) -> Acts:
    """``acting`` or ``reading`` for a CDP method."""
    return ACTING if method_acts(method) else READING


def tool_acts(read_only_hint: bool | None) -> Acts:
    """An MCP tool acts unless it says it only reads."""
    return READING if read_only_hint else ACTING
