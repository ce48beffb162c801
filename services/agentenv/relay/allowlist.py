"""The CDP methods an agent's connection may send, each with why (SPEC.md section 2).

Everything not here is refused by the guard (rule ``not-allowed``). The table
is kept to what real clients send: each entry names the clients whose
recorded traffic (``tests/unit/traffic/``: Playwright ``connect_over_cdp``,
Playwright MCP, Puppeteer, browser-use) holds it, or the computer's own
programs (the app server and the recorder), and a test holds the table to
those recordings both ways. An entry no recording holds says in its note
which client API sends it.

Left out on purpose (not exhaustive): ``Extensions.*`` (an extension acts in
the browser without passing the relay), ``Target.exposeDevToolsProtocol`` and
``Target.sendMessageToTarget`` (a CDP channel around the relay),
``Target.setRemoteLocations`` (connections to other hosts), ``Tethering.*``
(port forwarding), ``Browser.close``/``crash*``, ``Page.crash``,
``Network.loadNetworkResource`` (loads any URL, ``file:`` included, outside a
page), ``Tracing.*`` and ``Memory.*`` (the whole browser's data),
``SystemInfo.*``, ``Browser.getBrowserCommandLine``,
``Browser.executeBrowserCommand``, ``PWA.*``.

Methods whose parameters reach the machine (URLs, file paths, targets) are
also checked by :mod:`agentenv.relay.guard`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ALLOWED",
    "BROWSER_USE",
    "CLIENTS",
    "COMPUTER",
    "PLAYWRIGHT",
    "PLAYWRIGHT_MCP",
    "PUPPETEER",
    "Allowed",
]

PLAYWRIGHT = "playwright"
PLAYWRIGHT_MCP = "playwright-mcp"
PUPPETEER = "puppeteer"
BROWSER_USE = "browser-use"
#: The computer's own programs (app server ops, recorder captures).
COMPUTER = "computer"
#: The recorded clients (each has ``tests/unit/traffic/<name>.jsonl``).
CLIENTS = (PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER, BROWSER_USE)


@dataclass(frozen=True)
class Allowed:
    #: Who sends it: recorded clients, or the computer's own programs.
    sent_by: tuple[str, ...]
    #: Why else, or what about it (required when no recording holds it).
    note: str = ""


#: method -> who sends it and why it may pass.
ALLOWED: dict[str, Allowed] = {
    # Browser: versions, windows, downloads (guarded), permissions.
    "Browser.getVersion": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Browser.getWindowForTarget": Allowed((PLAYWRIGHT,)),
    "Browser.getWindowBounds": Allowed(
        (), "reads a window's size (Playwright viewport: null pages)"
    ),
    "Browser.setWindowBounds": Allowed((PLAYWRIGHT,), "Playwright pages with viewport: null"),
    "Browser.setDownloadBehavior": Allowed(
        (BROWSER_USE, PLAYWRIGHT), "its folder is kept to the downloads folder"
    ),
    "Browser.grantPermissions": Allowed(
        (BROWSER_USE,), "Playwright context.grant_permissions, Puppeteer overridePermissions"
    ),
    "Browser.resetPermissions": Allowed(
        (COMPUTER,), "data/reset; Playwright context.clear_permissions"
    ),
    "Browser.setPermission": Allowed((), "Puppeteer page.setPermission"),
    "Browser.cancelDownload": Allowed((), "Playwright download.cancel"),
    # Target: tabs, contexts, sessions (attach guarded to web targets).
    "Target.setAutoAttach": Allowed(
        (BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER), "never to the browser's own UI"
    ),
    "Target.setDiscoverTargets": Allowed((BROWSER_USE, PUPPETEER)),
    "Target.getTargets": Allowed((BROWSER_USE, COMPUTER)),
    "Target.getTargetInfo": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "Target.attachToTarget": Allowed(
        (BROWSER_USE, COMPUTER), "flattened sessions on web targets only"
    ),
    "Target.detachFromTarget": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "Target.createTarget": Allowed(
        (COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER), "web URLs only"
    ),
    "Target.closeTarget": Allowed((COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Target.activateTarget": Allowed((COMPUTER,)),
    "Target.createBrowserContext": Allowed(
        (PLAYWRIGHT,), "Playwright new_context, Puppeteer createBrowserContext"
    ),
    "Target.disposeBrowserContext": Allowed((PLAYWRIGHT,)),
    "Target.getBrowserContexts": Allowed((PUPPETEER,)),
    # Page.
    "Page.enable": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Page.navigate": Allowed(
        (BROWSER_USE, COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER), "web URLs only"
    ),
    "Page.reload": Allowed((PLAYWRIGHT,)),
    "Page.stopLoading": Allowed((), "Puppeteer and browser-use stop a slow load"),
    "Page.getNavigationHistory": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Page.navigateToHistoryEntry": Allowed(
        (BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER), "back and forward"
    ),
    "Page.getFrameTree": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Page.getResourceContent": Allowed(
        (), "reads a loaded resource of the page (DevTools-style clients)"
    ),
    "Page.getLayoutMetrics": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "Page.captureScreenshot": Allowed(
        (BROWSER_USE, COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER), ""
    ),
    "Page.printToPDF": Allowed((PLAYWRIGHT_MCP,), "browser_pdf_save; Puppeteer page.pdf"),
    "Page.bringToFront": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "Page.close": Allowed((), "Puppeteer page.close({runBeforeUnload: true})"),
    "Page.addScriptToEvaluateOnNewDocument": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Page.createIsolatedWorld": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Page.setLifecycleEventsEnabled": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Page.setFontFamilies": Allowed((PLAYWRIGHT,)),
    "Page.handleJavaScriptDialog": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "Page.setInterceptFileChooserDialog": Allowed((PLAYWRIGHT_MCP,)),
    "Page.setBypassCSP": Allowed((), "Playwright bypass_csp, Puppeteer setBypassCSP"),
    "Page.setWebLifecycleState": Allowed((), "Playwright and Puppeteer page freezing"),
    # Runtime.
    "Runtime.enable": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Runtime.evaluate": Allowed((BROWSER_USE, COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Runtime.callFunctionOn": Allowed(
        (BROWSER_USE, COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)
    ),
    "Runtime.getProperties": Allowed((BROWSER_USE,)),
    "Runtime.releaseObject": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Runtime.runIfWaitingForDebugger": Allowed(
        (BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER), ""
    ),
    "Runtime.addBinding": Allowed(
        (PUPPETEER,), "Playwright expose_binding, Puppeteer exposeFunction and its own bindings"
    ),
    "Runtime.removeBinding": Allowed((), "Puppeteer removeExposedFunction"),
    "Runtime.awaitPromise": Allowed((), "Puppeteer, raw CDP clients waiting on a promise"),
    "Runtime.getHeapUsage": Allowed((), "Puppeteer page.metrics"),
    # DOM, CSS, layout, accessibility: reads, plus setters (guarded: file inputs).
    "DOM.getDocument": Allowed((BROWSER_USE,)),
    "DOM.describeNode": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "DOM.resolveNode": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "DOM.getContentQuads": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "DOM.scrollIntoViewIfNeeded": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "DOM.focus": Allowed((BROWSER_USE,)),
    "DOM.setFileInputFiles": Allowed(
        (), "Puppeteer elementHandle.uploadFile; files from the downloads folder only"
    ),
    "DOM.setAttributeValue": Allowed(
        (), "raw CDP clients edit the page; a password input's value is withheld"
    ),
    "DOM.getFileInfo": Allowed((), "Playwright and Puppeteer read a File object's name"),
    "DOMSnapshot.captureSnapshot": Allowed((BROWSER_USE,)),
    "Accessibility.getFullAXTree": Allowed((BROWSER_USE,)),
    "Performance.enable": Allowed((PUPPETEER,), "Puppeteer page.metrics"),
    "Performance.getMetrics": Allowed((), "Puppeteer page.metrics"),
    # Input (dispatchDragEvent guarded: files, password drops).
    "Input.dispatchMouseEvent": Allowed(
        (BROWSER_USE, COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER), ""
    ),
    "Input.dispatchKeyEvent": Allowed(
        (BROWSER_USE, COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER), ""
    ),
    "Input.insertText": Allowed((COMPUTER, PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "Input.imeSetComposition": Allowed(
        (), "Playwright and Puppeteer type text through an input method"
    ),
    "Input.dispatchTouchEvent": Allowed((), "Playwright and Puppeteer touchscreen"),
    "Input.dispatchDragEvent": Allowed(
        (), "Playwright and Puppeteer drag and drop; files from the downloads folder only"
    ),
    "Input.setInterceptDrags": Allowed((PLAYWRIGHT_MCP,)),
    # Emulation.
    "Emulation.setDeviceMetricsOverride": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "Emulation.setEmulatedMedia": Allowed((PLAYWRIGHT,), "Playwright MCP browser_emulate_media"),
    "Emulation.setFocusEmulationEnabled": Allowed((PLAYWRIGHT,)),
    "Emulation.setTouchEmulationEnabled": Allowed((), "Playwright has_touch"),
    "Emulation.setUserAgentOverride": Allowed((), "Playwright user_agent, Puppeteer setUserAgent"),
    "Emulation.setGeolocationOverride": Allowed(
        (), "Playwright geolocation, Puppeteer setGeolocation"
    ),
    "Emulation.setTimezoneOverride": Allowed(
        (), "Playwright timezone_id, Puppeteer emulateTimezone"
    ),
    "Emulation.setLocaleOverride": Allowed((), "Playwright locale"),
    "Emulation.setDefaultBackgroundColorOverride": Allowed(
        (), "Puppeteer omitBackground screenshots"
    ),
    "Emulation.setScriptExecutionDisabled": Allowed(
        (), "Playwright java_script_enabled, Puppeteer setJavaScriptEnabled"
    ),
    # Network, Fetch (request interception), cookies.
    "Network.enable": Allowed((BROWSER_USE, PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Network.setCacheDisabled": Allowed((PLAYWRIGHT,)),
    "Network.clearBrowserCache": Allowed((COMPUTER,), "data/reset"),
    "Network.setBypassServiceWorker": Allowed((), "Playwright service_workers: block, Puppeteer"),
    "Network.setExtraHTTPHeaders": Allowed(
        (), "Playwright extra_http_headers, Puppeteer setExtraHTTPHeaders"
    ),
    "Network.emulateNetworkConditions": Allowed(
        (), "Playwright set_offline, Puppeteer emulateNetworkConditions"
    ),
    "Network.getResponseBody": Allowed((), "Playwright response.body, Puppeteer response.buffer"),
    "Network.getRequestPostData": Allowed((), "Playwright request.post_data"),
    "Network.getCookies": Allowed((PUPPETEER,)),
    "Network.setCookies": Allowed((PUPPETEER,), "page.setCookie"),
    "Network.deleteCookies": Allowed((COMPUTER, PUPPETEER)),
    "Fetch.enable": Allowed((COMPUTER, PLAYWRIGHT), "routes and HTTP authentication"),
    "Fetch.disable": Allowed((PLAYWRIGHT,)),
    "Fetch.continueRequest": Allowed((PLAYWRIGHT,), "a changed URL must be a web URL"),
    "Fetch.fulfillRequest": Allowed((COMPUTER, PLAYWRIGHT)),
    "Fetch.failRequest": Allowed((), "Playwright route.abort, Puppeteer request.abort"),
    "Fetch.continueWithAuth": Allowed(
        (), "Playwright http_credentials, Puppeteer page.authenticate"
    ),
    "Fetch.continueResponse": Allowed((), "Playwright route.fetch"),
    "Fetch.getResponseBody": Allowed((), "Playwright route.fetch, Puppeteer interception"),
    "Storage.getCookies": Allowed((COMPUTER, PLAYWRIGHT)),
    "Storage.setCookies": Allowed((COMPUTER, PLAYWRIGHT)),
    "Storage.clearCookies": Allowed((COMPUTER, PLAYWRIGHT)),
    "Storage.clearDataForOrigin": Allowed((COMPUTER,)),
    "Security.setIgnoreCertificateErrors": Allowed(
        (), "Playwright ignore_https_errors, Puppeteer acceptInsecureCerts"
    ),
    # Logs, console, debugging, coverage: reads of the page.
    "Log.enable": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP, PUPPETEER)),
    "Inspector.enable": Allowed((PLAYWRIGHT, PLAYWRIGHT_MCP)),
    "Audits.enable": Allowed((PUPPETEER,), "issue readers"),
    # Streams (PDFs and other results returned as streams).
    "IO.read": Allowed((PLAYWRIGHT_MCP,), "browser_pdf_save reads the PDF as a stream"),
    "IO.close": Allowed((PLAYWRIGHT_MCP,)),
    "WebMCP.enable": Allowed((PUPPETEER,), "Puppeteer 24 enables it on every page"),
}
