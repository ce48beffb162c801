"""Every acting rule of the marks table, and reading methods around them."""

from __future__ import annotations

import pytest

from agentenv.log.marks import ACTING_RULES, acts, method_acts, tool_acts


def _example(rule: str) -> str:
    return rule[:-1] + "Anything" if rule.endswith("*") else rule


@pytest.mark.parametrize("rule", ACTING_RULES)
def test_every_rule_acts(rule: str) -> None:
    assert acts(_example(rule)) == "acting"


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
    ],
)
def test_spec_acting_methods(method: str) -> None:
    assert method_acts(method)


@pytest.mark.parametrize(
    "method",
    [
        "Page.captureScreenshot",
        "Page.getFrameTree",
        "Page.enable",
        "Runtime.getProperties",
        "Runtime.enable",
        "DOM.getDocument",
        "DOM.querySelector",
        "DOM.describeNode",
        "Network.getCookies",
        "Storage.getCookies",
        "Target.getTargets",
        "Target.setDiscoverTargets",
        "Target.attachToTarget",
        "Target.setAutoAttach",
        "Browser.getVersion",
        "DOMStorage.getDOMStorageItems",
        "Emulation.canEmulate",
        "Accessibility.getFullAXTree",
        "Inputs.unknown",
    ],
)
def test_reading_methods(method: str) -> None:
    assert acts(method) == "reading"


def test_tools() -> None:
    assert tool_acts(None) == "acting"
    assert tool_acts(False) == "acting"
    assert tool_acts(True) == "reading"
