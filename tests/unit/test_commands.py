"""The protocol table's marks: every command of the pinned protocol is named
acting or reading, and a command it does not name acts."""

from __future__ import annotations

import pytest

from agentenv.relay.commands import ACTING_COMMANDS, READING_COMMANDS, acts, classify
from agentenv.relay.pinned import COMMANDS, PARAMS


def test_every_command_of_the_pinned_protocol_is_marked_once() -> None:
    assert not READING_COMMANDS & ACTING_COMMANDS, sorted(READING_COMMANDS & ACTING_COMMANDS)
    unmarked = COMMANDS - READING_COMMANDS - ACTING_COMMANDS
    assert not unmarked, f"mark these in relay/commands.py: {sorted(unmarked)}"
    stale = (READING_COMMANDS | ACTING_COMMANDS) - COMMANDS
    assert not stale, f"not in the pinned protocol: {sorted(stale)}"


def test_a_command_the_table_does_not_name_acts() -> None:
    for method in ("Inputs.unknown", "Page.navigateLater", "Runtime.evaluateQuietly"):
        command = classify(method)
        assert command.acts == "acting" and command.kind == "refused", command


def test_the_table_keeps_each_commands_params() -> None:
    for method in ("Runtime.evaluate", "Page.navigate", "Target.createTarget"):
        assert classify(method).params == PARAMS[method]


# What the fourth red team acted through with only "reading" lines, and
# the code an agent runs wherever it runs.
@pytest.mark.parametrize(
    "method",
    [
        "Debugger.setBreakpoint",
        "Debugger.setBreakpointByUrl",
        "Debugger.setBreakpointOnFunctionCall",
        "Debugger.evaluateOnCallFrame",
        "Debugger.pause",
        "Page.addScriptToEvaluateOnLoad",
        "Page.addScriptToEvaluateOnNewDocument",
        "Overlay.highlightRect",
        "Overlay.highlightNode",
        "DOM.highlightRect",
        "Network.loadNetworkResource",
        "Runtime.compileScript",
        "Runtime.runScript",
        "Runtime.addBinding",
        "FindInPage.findFirst",
        "DOM.scrollIntoViewIfNeeded",
        # The review of issue 40's change: each changed a page while "reading".
        "HeapProfiler.startTrackingHeapObjects",  # a collection runs finalizers
        "HeapProfiler.stopTrackingHeapObjects",
        "Network.disable",  # lifts the session's blocked URLs
        "Overlay.disable",
        "CSS.disable",
        "Target.detachFromTarget",  # the session's emulation goes: a resize
        "Target.setAutoAttach",  # waitForDebuggerOnStart holds new pages
    ],
)
def test_what_runs_code_or_draws_over_the_page_acts(method: str) -> None:
    assert classify(method).acts == "acting"


@pytest.mark.parametrize(
    "method",
    [
        "Input.dispatchKeyEvent",
        "Input.insertText",
        "Input.imeSetComposition",
        "Input.dispatchMouseEvent",
        "Page.navigate",
        "Page.reload",
        "Page.navigateToHistoryEntry",
        "Page.close",
        "Page.bringToFront",
        "Page.setDocumentContent",
        "Target.createTarget",
        "Target.closeTarget",
        "Target.activateTarget",
        "Runtime.evaluate",
        "Runtime.callFunctionOn",
        "DOM.setAttributeValue",
        "DOM.setFileInputFiles",
        "DOM.removeNode",
        "DOM.focus",
        "Network.setCookie",
        "Network.setCookies",
        "Network.clearBrowserCookies",
        "Network.deleteCookies",
        "Storage.setCookies",
        "Storage.clearCookies",
        "Storage.clearDataForOrigin",
        "DOMStorage.setDOMStorageItem",
        "DOMStorage.removeDOMStorageItem",
        "DOMStorage.clear",
        "Emulation.setDeviceMetricsOverride",
        "Browser.setDownloadBehavior",
        "Fetch.fulfillRequest",
        "Fetch.continueRequest",
        "Fetch.enable",
        "Security.setIgnoreCertificateErrors",
        "ServiceWorker.unregister",
    ],
)
def test_spec_acting_methods(method: str) -> None:
    assert classify(method).acts == "acting"


@pytest.mark.parametrize(
    "method",
    [
        "Page.captureScreenshot",
        "Page.getFrameTree",
        "Page.enable",
        "Page.createIsolatedWorld",
        "Page.setLifecycleEventsEnabled",
        "Runtime.getProperties",
        "Runtime.enable",
        "Runtime.runIfWaitingForDebugger",
        "DOM.getDocument",
        "DOM.querySelector",
        "DOM.describeNode",
        "Network.getCookies",
        "Network.enable",
        "Storage.getCookies",
        "Target.getTargets",
        "Target.setDiscoverTargets",
        "Target.attachToTarget",
        "Browser.getVersion",
        "DOMStorage.getDOMStorageItems",
        "Emulation.canEmulate",
        "Accessibility.getFullAXTree",
        "Tracing.start",
    ],
)
def test_reading_methods(method: str) -> None:
    assert classify(method).acts == "reading"


def test_a_screenshot_beyond_the_viewport_acts() -> None:
    """It resizes the page for the shot (its resize handlers run)."""
    assert acts("Page.captureScreenshot", {"format": "png"}) == "reading"
    assert acts("Page.captureScreenshot", {"captureBeyondViewport": True}) == "acting"
    assert acts("Page.captureScreenshot", None) == "reading"
